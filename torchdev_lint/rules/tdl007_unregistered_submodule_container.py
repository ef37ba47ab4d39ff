from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchdev_lint import fixes
from torchdev_lint.analysis import callees, classes, kinds, tree
from torchdev_lint.analysis.classes import self_attribute
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.kinds import Kind
from torchdev_lint.finding import Applicability, Fix
from torchdev_lint.rule import Invalid, Rule, Valid

_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# Containers that register what they are built from.
_REGISTERING = frozenset(f"torch.nn.{name}" for name in
                         ("Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"))
_EMPTY_LISTS = frozenset({"list"})
_EMPTY_DICTS = frozenset({"dict", "OrderedDict", "collections.OrderedDict"})
# `self.layers.append(...)` and friends fill a container.
_FILLS = frozenset({"append", "extend", "insert", "update", "setdefault"})
# list/dict methods ModuleList/ModuleDict do not have: using them, the fix would break.
_LIST_ONLY = frozenset("sort index remove reverse copy count clear".split())
_DICT_ONLY = frozenset("get setdefault copy popitem fromkeys".split())
# Names a ModuleDict key cannot take: they are attributes of the ModuleDict itself.
_MODULE_DICT_ATTRIBUTES = frozenset(
    """T_destination add_module apply bfloat16 buffers call_super_init children clear compile
    cpu cuda double dump_patches eval extra_repr float forward get_buffer get_extra_state
    get_parameter get_submodule half ipu items keys load_state_dict modules mtia
    named_buffers named_children named_modules named_parameters parameters pop
    register_backward_hook register_buffer register_forward_hook register_forward_pre_hook
    register_full_backward_hook register_full_backward_pre_hook
    register_load_state_dict_post_hook register_load_state_dict_pre_hook register_module
    register_parameter register_state_dict_post_hook register_state_dict_pre_hook
    requires_grad_ set_extra_state set_submodule share_memory state_dict to to_empty train
    training type update values xpu zero_grad""".split()
)

# What an element of a container is.
MODULE, STATELESS, PARAMETER, NONE, NESTED, OTHER, UNKNOWN = (
    "module", "stateless", "parameter", "none", "nested", "other", "unknown"
)


@dataclass
class _Element:
    expr: cst.BaseExpression
    key: cst.BaseExpression | None  # for dicts
    method: cst.FunctionDef
    kind: str = UNKNOWN  # decided where it is written, while its names are in scope


@dataclass
class _Container:
    """``self.attr = <container>`` in a method of an nn.Module subclass."""

    node: cst.Assign | cst.AnnAssign
    attr: str
    self_name: str
    shape: str  # "list" or "dict"
    elements: list[_Element] = field(default_factory=list)
    empty: bool = False  # filled later by `self.attr.append(...)`/`self.attr[k] = ...`


@dataclass
class _Class:
    node: cst.ClassDef
    containers: list[_Container] = field(default_factory=list)
    fills: dict[str, list[_Element]] = field(default_factory=dict)  # attr -> elements added
    methods_used: dict[str, set[str]] = field(default_factory=dict)  # attr -> methods called
    other_values: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    # Containers whose modules end up registered anyway: `self.body = nn.ModuleList(self.body)`
    # later, or `self.add_module(name, self.heads[-1])` for each element.
    registered_attrs: set[str] = field(default_factory=set)
    calls: dict[str, set[str]] = field(default_factory=dict)  # method -> self methods called


class UnregisteredSubmoduleContainer(Rule):
    """
    ## What it does
    Flags, in an `nn.Module` subclass, `self.attr = [...]`, `(...)`, `{...}` or a list/dict
    comprehension holding submodules built there (`[nn.Linear(d, d) for _ in range(n)]`),
    and an empty list or dict (`[]`, `{}`, `list()`, `dict()`, `OrderedDict()`) that the
    class fills with modules (`self.attr.append(m)`, `.extend(...)`, `.insert(i, m)`,
    `self.attr[k] = m`), or a local list filled with modules then stored as `self.attr`.
    Containers of `nn.Parameter`s are flagged the same way. Reported at the assignment.

    It does not flag `nn.ModuleList`/`nn.ModuleDict`/`nn.Sequential`/`nn.ParameterList`,
    containers of non-modules, containers of modules registered anyway (`[self.conv1,
    self.conv2]`, a module also stored as `self.x`, passed to `add_module`, or handed to a
    function of the project that registers it on a parent, `setattr(parent, name, m)`), or
    containers of stateless modules (`[nn.ReLU(), nn.MaxPool2d(2)]`: nothing to move).

    ## Why is this bad?
    `nn.Module` only registers submodules assigned directly as attributes. Modules inside a
    plain list, tuple or dict are invisible to it: `model.to(device)` and `model.cuda()`
    leave their weights on the CPU (the forward then fails with `Expected all tensors to be
    on the same device`), `model.parameters()` omits them so the optimizer never trains
    them, `state_dict()` does not save them, and `model.eval()` leaves their dropout and
    batch norm in training mode.

    ## Fix
    Wraps the container: `nn.ModuleList([...])` for a list or tuple, `nn.ModuleDict({...})`
    for a dict (string keys only), `nn.ParameterList`/`nn.ParameterDict` for parameters;
    an empty `[]`/`{}` later filled becomes `nn.ModuleList()`/`nn.ModuleDict()`. `nn` is
    spelled as the file imports it (`import torch` is added if nothing names it). No fix is
    offered when an element is not a module, a key is not a valid `ModuleDict` key, or the
    class uses a list/dict method the module containers lack (`.sort()`, `.get()`...).

    Fix safety: unsafe. The fix is what the code needs, but it changes more than where the
    weights live: `parameters()` now includes them (an optimizer built from it starts
    training layers that were frozen by accident), `state_dict()` gains their keys (loading
    a checkpoint saved before the fix with `strict=True` fails on missing keys), and
    `.eval()` now switches their dropout and batch norm.

    ## When not to use
    When a list deliberately hides a module from its owner (a frozen teacher or an EMA copy
    kept out of `parameters()` and `state_dict()`); say so with `# noqa: TDL007`.
    """

    code = "TDL007"
    preview = True  # first-look precision below 0.9 (benchmarks/precision/)
    name = "unregistered-submodule-container"
    message = "Submodules kept in a plain container are not registered: use `nn.ModuleList`/`nn.ModuleDict`"
    fix_title = "Wrap in `nn.ModuleList`/`nn.ModuleDict`"

    VALID = [
        Valid("import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n"
              "        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])\n"),
        Valid("import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.heads = nn.ModuleDict({'a': nn.Linear(4, 2)})\n"
              "        self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())\n"),
        Valid("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n"
              "        self.ws = nn.ParameterList([nn.Parameter(torch.ones(2))])\n"),
        Valid("import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self, sizes):\n"
              "        super().__init__()\n        self.sizes = [4, 8, 16]\n"
              "        self.names = {'a': 'x'}\n        self.cache = []\n"),
        Valid("import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.conv1 = nn.Conv2d(3, 8, 3)\n"
              "        self.conv2 = nn.Conv2d(8, 8, 3)\n        self.convs = [self.conv1, self.conv2]\n"),
        Valid("import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.acts = [nn.ReLU(), nn.GELU()]\n"),
        Valid("import torch.nn as nn\nclass Plain:\n    def __init__(self):\n"
              "        self.layers = [nn.Linear(2, 2)]\n"),
        # the plain containers are registered through the one built from them (monodepth2's decoder)
        Valid("from collections import OrderedDict\nimport torch.nn as nn\nclass Decoder(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n        self.convs = OrderedDict()\n"
              "        for i in range(3):\n            self.convs[('up', i)] = nn.Conv2d(4, 4, 3)\n"
              "        self.decoder = nn.ModuleList(list(self.convs.values()))\n"),
        Valid("import torch.nn as nn\nclass Encoder(nn.Module):\n    def __init__(self, dims):\n"
              "        super().__init__()\n        self.layers = []\n"
              "        for a, b in zip(dims, dims[1:]):\n            self.layers.append(nn.Linear(a, b))\n"
              "        self.net = nn.Sequential(*self.layers)\n"),
        # each element registered in a loop over the list (honk's keyword-spotting ResNet)
        Valid("import torch.nn as nn\nclass Res(nn.Module):\n    def __init__(self, n):\n"
              "        super().__init__()\n        self.convs = [nn.Conv2d(8, 8, 3) for _ in range(n)]\n"
              "        for i, conv in enumerate(self.convs):\n"
              "            self.add_module('conv{}'.format(i + 1), conv)\n"),
        # each stage registered by name first, then listed with its name (detectron2's RegNet)
        Valid("import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.stages_and_names = []\n"
              "        for i in range(3):\n            stage = nn.Linear(4, 4)\n"
              "            self.add_module(f's{i}', stage)\n"
              "            self.stages_and_names.append((stage, f's{i}'))\n"),
        # a helper of the file puts each wrapper into the wrapped network, which registers it
        # (x-transformers' test-time-training wrappers); the dict only indexes them
        Valid("from functools import reduce\nimport torch.nn as nn\n"
              "def set_module_by_path(model, path, new):\n    *parts, last = path.split('.')\n"
              "    setattr(reduce(getattr, parts, model), last, new)\n"
              "class Wrapper(nn.Module):\n    def __init__(self, net, paths):\n"
              "        super().__init__()\n        self.net = net\n        self.wrappers = dict()\n"
              "        for path in paths:\n            wrapper = nn.Linear(4, 4)\n"
              "            set_module_by_path(net, path, wrapper)\n"
              "            self.wrappers[path] = wrapper\n"),
    ]
    INVALID = [
        # the same pairs without `add_module`: nothing registers the stages (no fix: tuples)
        Invalid("import torch.nn as nn\nclass Net(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.stages_and_names = []\n"
                "        for i in range(3):\n            stage = nn.Linear(4, 4)\n"
                "            self.stages_and_names.append((stage, f's{i}'))\n", 5, 9),
        # the helper only reads the module it is given: nothing registers the wrappers
        Invalid("import torch.nn as nn\n"
                "def describe(path, module):\n    print(path, module)\n"
                "class Wrapper(nn.Module):\n    def __init__(self, paths):\n"
                "        super().__init__()\n        self.wrappers = dict()\n"
                "        for path in paths:\n            wrapper = nn.Linear(4, 4)\n"
                "            describe(path, wrapper)\n"
                "            self.wrappers[path] = wrapper\n", 7, 9,
                "import torch.nn as nn\n"
                "def describe(path, module):\n    print(path, module)\n"
                "class Wrapper(nn.Module):\n    def __init__(self, paths):\n"
                "        super().__init__()\n        self.wrappers = nn.ModuleDict()\n"
                "        for path in paths:\n            wrapper = nn.Linear(4, 4)\n"
                "            describe(path, wrapper)\n"
                "            self.wrappers[path] = wrapper\n", unsafe=True),
        Invalid(
            "import torch.nn as nn\n\nclass MLP(nn.Module):\n    def __init__(self, d, n):\n"
            "        super().__init__()\n"
            "        self.layers = [nn.Linear(d, d) for _ in range(n)]  # hidden layers\n"
            "    def forward(self, x):\n        for layer in self.layers:\n"
            "            x = layer(x)\n        return x\n",
            6, 9,
            "import torch.nn as nn\n\nclass MLP(nn.Module):\n    def __init__(self, d, n):\n"
            "        super().__init__()\n"
            "        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])  # hidden layers\n"
            "    def forward(self, x):\n        for layer in self.layers:\n"
            "            x = layer(x)\n        return x\n",
            unsafe=True,
        ),
        Invalid(
            "from torch import nn\nclass Heads(nn.Module):\n    def __init__(self, tasks):\n"
            "        super().__init__()\n        self.heads = {}\n        for t in tasks:\n"
            "            self.heads[t] = nn.Linear(8, 2)\n",
            5, 9,
            "from torch import nn\nclass Heads(nn.Module):\n    def __init__(self, tasks):\n"
            "        super().__init__()\n        self.heads = nn.ModuleDict()\n        for t in tasks:\n"
            "            self.heads[t] = nn.Linear(8, 2)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nclass Tower(torch.nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.blocks = []\n        self._grow()\n"
            "    def _grow(self):\n        self.blocks.append(torch.nn.Conv2d(3, 3, 1))\n"
            "        self.blocks.append(torch.nn.BatchNorm2d(3))\n",
            5, 9,
            "import torch\nclass Tower(torch.nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.blocks = torch.nn.ModuleList()\n        self._grow()\n"
            "    def _grow(self):\n        self.blocks.append(torch.nn.Conv2d(3, 3, 1))\n"
            "        self.blocks.append(torch.nn.BatchNorm2d(3))\n",
            unsafe=True,
        ),
        Invalid(
            "import torch.nn as nn\nclass Enc(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.stages = {'a': nn.Linear(2, 2), 'b.c': nn.Linear(2, 2)}\n",
            5, 9,
            None,
        ),
        Invalid(
            "from torch.nn import Module, Linear\nclass Net(Module):\n    def __init__(self):\n"
            "        super().__init__()\n        layers = []\n        for i in range(3):\n"
            "            layers.append(Linear(4, 4))\n        self.layers = layers\n",
            8, 9,
            "from torch.nn import Module, Linear\nimport torch\nclass Net(Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n        layers = []\n        for i in range(3):\n"
            "            layers.append(Linear(4, 4))\n        self.layers = torch.nn.ModuleList(layers)\n",
            unsafe=True,
        ),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return "torch" in source and "class " in source

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.classes: dict[int, _Class] = {}
        # Per method: local containers (name -> its display) and what was added to them.
        self.local_containers: dict[tuple[int, str], tuple[cst.BaseExpression, str]] = {}
        self.local_fills: dict[tuple[int, str], list[_Element]] = {}
        # Per method: names of modules registered some other way (`self.x = m`,
        # `self.add_module(k, m)`, `setattr(self, k, m)`).
        self.registered: dict[int, set[str]] = {}
        # Calls that hand a local name to a function of the project, which may register it
        # (`set_module_by_path(net, path, wrapper)`): followed once the file is read.
        # Keyed by (method, name handed); each answer is kept, so a method listing a name many
        # times resolves each call once.
        self.handed: dict[tuple[int, str], list[tuple[cst.ClassDef, str, cst.Call, cst.Arg]]] = {}
        self.handed_answers: dict[tuple[int, str], bool] = {}
        self.module: cst.Module | None = None
        self.resolver: callees.Callees | None = None

    def visit_Module(self, node: cst.Module) -> None:
        self.module = node

    # -- collection --------------------------------------------------------------------

    def _method(self) -> tuple[_Class, cst.FunctionDef, str] | None:
        """The class (its state here), method and self name, inside a method of an
        nn.Module subclass."""
        method = self.ctx.method
        if method is None or not method[0].is_module:
            return None
        info, function, self_name = method
        state = self.classes.get(id(info.node))
        if state is None:
            state = self.classes[id(info.node)] = _Class(info.node)
        return state, function, self_name

    def visit_Assign(self, node: cst.Assign) -> None:
        where = self._method()
        if where is None:
            return
        state, function, self_name = where
        for target in node.targets:
            self._target(where, node, target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        where = self._method()
        if where is not None and node.value is not None:
            self._target(where, node, node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        # `self.layers += [Block()]`, `layers += [Block()]`
        where = self._method()
        if where is None or not isinstance(node.operator, cst.AddAssign):
            return
        state, function, self_name = where
        added = [self._element(e, None, function) for e in _listed(node.value)]
        attr = self_attribute(node.target, self_name)
        if attr is not None:
            state.fills.setdefault(attr, []).extend(added)
        elif isinstance(node.target, cst.Name):
            self.local_fills.setdefault((id(function), node.target.value), []).extend(added)

    def _target(self, where, node, target, value) -> None:
        state, function, self_name = where
        attr = self_attribute(target, self_name)
        if attr is not None:
            if isinstance(value, cst.Name):
                self.registered.setdefault(id(function), set()).add(value.value)
            if self.ctx.value_of(value).kind is Kind.MODULE:
                state.registered_attrs.add(attr)
            container = self._container(node, attr, self_name, function, value)
            if container is not None:
                state.containers.append(container)
            else:
                state.other_values.setdefault(attr, []).append(value)
            return
        if isinstance(target, cst.Subscript):  # `self.heads[k] = m`, `layers[i] = m`
            key = _subscript_key(target)
            owner = self_attribute(target.value, self_name)
            element = self._element(value, key, function)
            if owner is not None:
                state.fills.setdefault(owner, []).append(element)
            elif isinstance(target.value, cst.Name):
                self.local_fills.setdefault((id(function), target.value.value), []).append(element)
            return
        if isinstance(target, cst.Name):
            shape = _container_shape(value)
            if shape is not None:
                self.local_containers[(id(function), target.value)] = (value, shape)
                self.local_fills.pop((id(function), target.value), None)
            else:
                self.local_containers.pop((id(function), target.value), None)

    def _container(self, node, attr, self_name, function, value) -> _Container | None:
        if isinstance(node, cst.Assign) and len(node.targets) > 1:
            return None  # `self.a = self.b = []`: one fix could not serve both
        shape = _container_shape(value)
        if shape is not None:
            container = _Container(node, attr, self_name, shape)
            container.empty = _is_empty(value)
            container.elements = [self._element(e, k, function) for e, k in _elements(value)]
            return container
        if isinstance(value, cst.Name):
            local = self.local_containers.get((id(function), value.value))
            if local is not None:
                display, shape = local
                container = _Container(node, attr, self_name, shape)  # `self.attr = layers`
                container.elements = [self._element(e, k, function) for e, k in _elements(display)]
                container.elements += self.local_fills.get((id(function), value.value), [])
                return container
        return None

    def visit_Call(self, node: cst.Call) -> None:
        where = self._method()
        if where is None:
            return
        state, function, self_name = where
        func = node.func
        registering = _registered_value(node)
        if registering is not None:
            if isinstance(registering, cst.Name):
                self.registered.setdefault(id(function), set()).add(registering.value)
                # `for i, conv in enumerate(self.convs): self.add_module(f"conv{i}", conv)`
                state.registered_attrs.update(self._looped_over(registering.value, self_name))
            owner = self_attribute(_container_of(registering), self_name)
            if owner is not None:  # `self.add_module(name, self.heads[-1])`
                state.registered_attrs.add(owner)
            return
        if self.ctx.qualified_name(func) in _REGISTERING and self._assigned_to_self(node, self_name):
            # `self.net = nn.Sequential(*self.layers)`, `nn.ModuleList(self.convs.values())`:
            # the container's modules are registered through the one built from it
            for arg in node.args:
                state.registered_attrs.update(
                    attr for attribute in tree.collect(arg.value, cst.Attribute)
                    if (attr := self_attribute(attribute, self_name)) is not None)
        for arg in node.args:
            if isinstance(arg.value, cst.Name):
                self.handed.setdefault((id(function), arg.value.value), []).append(
                    (state.node, self_name, node, arg))
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        called = classes.self_call(node, self_name)
        if called is not None:
            state.calls.setdefault(function.name.value, set()).add(called)
        attr = self_attribute(func.value, self_name)
        if attr is not None:
            state.methods_used.setdefault(attr, set()).add(method)
        if method not in _FILLS:
            return
        added = [self._element(e, k, function) for e, k in _filled(method, node)]
        if attr is not None:
            state.fills.setdefault(attr, []).extend(added)
        elif isinstance(func.value, cst.Name):
            self.local_fills.setdefault((id(function), func.value.value), []).extend(added)

    def _looped_over(self, name: str, self_name: str) -> set[str]:
        """The ``self`` attributes a loop around the current node iterates, when its target
        binds ``name`` (each element of the container is ``name`` in turn)."""
        found: set[str] = set()
        for node in self.ctx.ancestors:
            if isinstance(node, cst.For) and any(
                    isinstance(n, cst.Name) and n.value == name for n in tree.collect(node.target, cst.Name)):
                found.update(attr for attribute in tree.collect(node.iter, cst.Attribute)
                             if (attr := self_attribute(attribute, self_name)) is not None)
        return found

    def _assigned_to_self(self, call: cst.Call, self_name: str) -> bool:
        """``call`` is the value assigned to an attribute of ``self`` (so it is registered)."""
        parent = self.ctx.ancestors[-2] if len(self.ctx.ancestors) > 1 else None
        return isinstance(parent, cst.Assign) and parent.value is call and any(
            self_attribute(t.target, self_name) is not None for t in parent.targets)

    # -- decisions ---------------------------------------------------------------------

    def end_of_file(self) -> None:
        self.resolver = callees.of_file(self.ctx, self.module)
        for state in self.classes.values():
            for container in state.containers:
                self._decide(state, container)

    def _registered_by_callee(self, name: str, function: cst.FunctionDef) -> bool:
        """``function`` hands the module ``name`` to a function of the project that registers
        what it receives (`setattr(parent, attr, new)`, `parent.add_module(attr, new)`,
        `parent.attr = new`): listing it as well is an alias, not a hidden module."""
        key = (id(function), name)
        if key not in self.handed_answers:
            self.handed_answers[key] = any(
                self._callee_registers(klass, self_name, call, arg)
                for klass, self_name, call, arg in self.handed.get(key, ())
            )
        return self.handed_answers[key]

    def _callee_registers(self, klass, self_name, call: cst.Call, arg: cst.Arg) -> bool:
        target = self.resolver.target(call, klass, self_name) if self.resolver else None
        parameter = callees.parameter_for(target, call, arg) if target is not None else None
        return parameter is not None and _registers(target.function, parameter)

    def _element(self, expr, key, function) -> _Element:
        return _Element(expr, key, function, self._kind(expr, self.registered.get(id(function), set())))

    def _kind(self, expr: cst.BaseExpression, registered: set[str]) -> str:
        """What ``expr`` holds; ``registered`` names modules the method registered already
        (`self.add_module(name, stage)` then `self.stages.append((stage, name))`)."""
        if isinstance(expr, cst.Name) and expr.value == "None":
            return NONE
        if isinstance(expr, (cst.List, cst.Tuple, cst.Dict, cst.ListComp, cst.DictComp)):
            inner = {self._kind(e, registered) for e, _ in _elements(expr)}
            return NESTED if inner & {MODULE, PARAMETER, NESTED} else OTHER
        if isinstance(expr, cst.StarredElement):
            return UNKNOWN
        if isinstance(expr, cst.Call):
            qualified = self.ctx.qualified_name(expr.func) or ""
            if qualified in _PARAMETERS:
                return PARAMETER
            if kinds.is_stateless_module(qualified, expr):
                return STATELESS
        if _literal(expr):
            return OTHER
        value = self.ctx.value_of(expr)
        if value.kind is Kind.MODULE:
            # `self.conv1` is registered already; `[conv]` may be an alias (decided later).
            if isinstance(expr, cst.Attribute) or (isinstance(expr, cst.Name) and expr.value in registered):
                return UNKNOWN
            return MODULE
        return UNKNOWN if value.kind is Kind.UNKNOWN else OTHER  # a tensor, a loader...

    def _final_kind(self, element: _Element) -> str:
        expr = element.expr
        if element.kind == MODULE and isinstance(expr, cst.Name) and (
            expr.value in self.registered.get(id(element.method), ())
            or self._registered_by_callee(expr.value, element.method)
        ):
            return UNKNOWN  # also registered under another name: an alias
        return element.kind

    def _decide(self, state: _Class, container: _Container) -> None:
        if container.attr in state.registered_attrs:
            return
        elements = list(container.elements)
        if container.empty:
            # Modules added while the model runs (a cache of runners built in `forward` or
            # `__call__`) are a design of their own, not a forgotten ModuleList.
            running = classes.reachable(state.calls, ["forward", "__call__"]) - classes.reachable(
                state.calls, ["__init__"]
            )
            elements += [e for e in state.fills.get(container.attr, [])
                         if e.method.name.value not in running]
        found = [self._final_kind(e) for e in elements]
        if not set(found) & {MODULE, PARAMETER, NESTED}:
            return
        holds = "parameters" if PARAMETER in found and MODULE not in found else "submodules"
        wrapper = _wrapper(container.shape, holds)
        message = (
            f"`{container.self_name}.{container.attr}` keeps {holds} in a plain "
            f"{'dict' if container.shape == 'dict' else 'list'}: `model.to()`, "
            f"`.parameters()`, `.state_dict()` and `.eval()` miss them; use `nn.{wrapper}`"
        )
        self.report(container.node, message,
                    fix=lambda: self._fix(state, container, elements, found, wrapper))

    def _fix(self, state, container, elements, found, wrapper) -> Fix | None:
        allowed = {MODULE, STATELESS, NONE} if wrapper.startswith("Module") else {PARAMETER}
        if not set(found) <= allowed:
            return None
        if (MODULE in found or STATELESS in found) and PARAMETER in found:
            return None
        used = state.methods_used.get(container.attr, set())
        if used & (_DICT_ONLY if container.shape == "dict" else _LIST_ONLY):
            return None
        if container.shape == "dict" and not all(_valid_key(e.key) for e in elements):
            return None
        if any(_literal(v) and _container_shape(v) is None for v in state.other_values.get(container.attr, ())):
            return None  # also given a number or string elsewhere
        name, needs_import = fixes.torch_reference(self.ctx, f"torch.nn.{wrapper}")
        return Fix(Applicability.UNSAFE, [(container.node, _wrap(name))], needs_torch=needs_import)


def _registered_value(call: cst.Call) -> cst.BaseExpression | None:
    """The module ``call`` registers on an object: ``setattr(obj, name, value)``,
    ``obj.add_module(name, value)``, ``obj.register_module(name, value)``."""
    func = call.func
    if isinstance(func, cst.Name) and func.value == "setattr" and len(call.args) == 3:
        return call.args[2].value
    if (isinstance(func, cst.Attribute) and func.attr.value in ("add_module", "register_module")
            and len(call.args) >= 2):
        return call.args[1].value
    return None


def _registers(function: cst.FunctionDef, parameter: str) -> bool:
    """``function`` sets its parameter ``parameter`` as an attribute of some object."""
    found = False

    def is_parameter(expr: cst.BaseExpression | None) -> bool:
        return isinstance(expr, cst.Name) and expr.value == parameter

    def enter(node: cst.CSTNode) -> bool:
        nonlocal found
        if found or isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not function:
            return False
        if isinstance(node, cst.Call) and is_parameter(_registered_value(node)):
            found = True
        elif isinstance(node, cst.Assign) and is_parameter(node.value) and any(
            isinstance(t.target, cst.Attribute) for t in node.targets
        ):
            found = True
        return not found

    tree.walk(function, enter)
    return found


def _wrap(name: str):
    def edit(updated: cst.Assign | cst.AnnAssign) -> cst.CSTNode:
        value = updated.value
        func = fixes.expression(name)
        if _is_empty(value):
            wrapped = cst.Call(func=func)
        else:
            if isinstance(value, cst.Tuple) and not value.lpar:  # `self.x = a, b`
                value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            wrapped = cst.Call(func=func, args=[cst.Arg(value)])
        return updated.with_changes(value=wrapped)

    return edit


def _wrapper(shape: str, holds: str) -> str:
    if holds == "parameters":
        return "ParameterDict" if shape == "dict" else "ParameterList"
    return "ModuleDict" if shape == "dict" else "ModuleList"


def _container_of(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``self.heads`` for ``self.heads[-1]``."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return expr


def _container_shape(value: cst.BaseExpression) -> str | None:
    """"list" for a list/tuple display or comprehension (or an empty ``list()``), "dict"
    for a dict display or comprehension (or ``dict()``/``OrderedDict()``)."""
    if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
        return "list"
    if isinstance(value, (cst.Dict, cst.DictComp)):
        return "dict"
    if isinstance(value, cst.Call) and not value.args:
        name = dotted_name(value.func)
        if name in _EMPTY_LISTS:
            return "list"
        if name in _EMPTY_DICTS:
            return "dict"
    if (
        isinstance(value, cst.Call)
        and dotted_name(value.func) in ("list", "tuple")
        and len(value.args) == 1
        and isinstance(value.args[0].value, (cst.GeneratorExp, cst.ListComp))
    ):
        return "list"
    return None


def _is_empty(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.List, cst.Tuple, cst.Dict)):
        return not value.elements
    return isinstance(value, cst.Call) and not value.args


def _elements(value: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BaseExpression | None]]:
    if isinstance(value, (cst.List, cst.Tuple)):
        return [(e.value, None) for e in value.elements]
    if isinstance(value, cst.Dict):
        return [
            (e.value, e.key) if isinstance(e, cst.DictElement) else (e.value, None)
            for e in value.elements
        ]
    if isinstance(value, cst.ListComp):
        return [(value.elt, None)]
    if isinstance(value, cst.DictComp):
        return [(value.value, value.key)]
    if isinstance(value, cst.Call) and value.args:
        inner = value.args[0].value
        if isinstance(inner, (cst.GeneratorExp, cst.ListComp)):
            return [(inner.elt, None)]
    return []


def _listed(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The elements an iterable argument adds: a display's, a comprehension's element."""
    if isinstance(value, (cst.List, cst.Tuple)):
        return [e.value for e in value.elements]
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return [value.elt]
    return [cst.StarredElement(value=value)]  # whatever an unknown iterable holds


def _filled(method: str, call: cst.Call) -> list[tuple[cst.BaseExpression, cst.BaseExpression | None]]:
    """What ``container.<method>(...)`` adds: (element, key) pairs."""
    args = [a.value for a in call.args]
    if method == "append" and args:
        return [(args[0], None)]
    if method == "insert" and len(args) == 2:
        return [(args[1], None)]
    if method == "extend" and args:
        return [(e, None) for e in _listed(args[0])]
    if method == "setdefault" and len(args) == 2:
        return [(args[1], args[0])]
    if method == "update" and args:
        if isinstance(args[0], (cst.Dict, cst.DictComp)):
            return _elements(args[0])
        return [(cst.StarredElement(value=args[0]), None)]
    return []


def _subscript_key(target: cst.Subscript) -> cst.BaseExpression | None:
    if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
        return target.slice[0].slice.value
    return None


def _valid_key(key: cst.BaseExpression | None) -> bool:
    """A string that can name a ModuleDict entry: no ".", not one of its attributes. Keys
    built at run time are fine when they are visibly strings (f-strings, ``str(...)``) or
    plain names (a loop variable over task names)."""
    if isinstance(key, cst.SimpleString):
        text = key.evaluated_value
        return (
            isinstance(text, str) and bool(text) and "." not in text
            and not text.startswith("_") and text not in _MODULE_DICT_ATTRIBUTES
        )
    if isinstance(key, cst.FormattedString):
        return not any(
            isinstance(part, cst.FormattedStringText) and "." in part.value for part in key.parts
        )
    if isinstance(key, cst.Call):
        return dotted_name(key.func) == "str"
    return isinstance(key, (cst.Name, cst.Attribute)) and not (
        isinstance(key, cst.Name) and key.value in ("None", "True", "False")
    )


def _literal(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
                             cst.FormattedString, cst.ConcatenatedString, cst.Lambda)) or (
        isinstance(expr, cst.Name) and expr.value in ("True", "False")
    )
