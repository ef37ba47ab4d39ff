"""The per-file state every rule shares: ancestors, scopes, imports, classes and values.

The engine calls ``enter``/``leave`` around each node of its single traversal, so when a
rule's ``visit_Call`` runs, the context describes the program at that point: which names
are bound to tensors or modules, which imports are in effect, which class and function
enclose the call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import libcst as cst

from torchdev_lint.analysis import conditions, devices, evidence, kinds, narrowing
from torchdev_lint.analysis.guards import is_guarded, remember_blocks
from torchdev_lint.analysis.imports import ImportTable, dotted_name
from torchdev_lint.analysis.kinds import Kind, Value
from torchdev_lint.analysis.project_index import names_devices
from torchdev_lint.finding import Fix

if TYPE_CHECKING:
    from torchdev_lint.rule import Rule

_STEP_METHODS = ("training_step", "validation_step", "test_step", "predict_step")


@dataclass
class ClassInfo:
    name: str
    node: cst.ClassDef
    is_module: bool
    attrs: dict[str, Value] = field(default_factory=dict)

    @property
    def method_names(self) -> set[str]:
        """The functions defined directly in the class body."""
        return {s.name.value for s in self.node.body.body if isinstance(s, cst.FunctionDef)}


@dataclass
class Scope:
    node: cst.CSTNode  # Module, FunctionDef, Lambda or ClassDef
    values: dict[str, Value] = field(default_factory=dict)
    class_info: ClassInfo | None = None  # for class scopes
    self_name: str | None = None  # for methods: the name of their first parameter

    @property
    def is_class(self) -> bool:
        # Methods carry their class's info too; only the class body itself is a class scope.
        return isinstance(self.node, cst.ClassDef)


@dataclass
class Report:
    rule: Rule
    node: cst.CSTNode
    message: str
    ancestors: tuple[cst.CSTNode, ...]
    fix: Fix | Callable[[], Fix | None] | None
    # Why the finding holds: (node, what it shows) steps, located by the engine.
    evidence: tuple[tuple[cst.CSTNode, str], ...] = ()
    certain: bool = True
    # Possible only because the code shows no machine without CUDA (target-devices auto):
    # `--target-devices cpu,cuda` makes it certain.
    set_aside: bool = False


class FileContext:
    """``index``: the project index, when the host built one (what other files define)."""

    def __init__(self, path: str, source: str, index=None) -> None:
        remember_blocks()  # guards read each block's early exits once for this file
        narrowing.remember_blocks()  # and tensor checks
        self.path = path
        self.source = source
        self.index = index
        module = index.module_of(path) if index is not None and path != "-" else None
        self.imports = ImportTable(
            module, path.endswith("__init__.py"), index, path
        ) if module else ImportTable(index=index, path=path)
        self.ancestors: list[cst.CSTNode] = []
        self.scopes: list[Scope] = []
        self.classes: dict[str, ClassInfo] = {}
        # method name -> the classes of ``classes`` defining it: kept as classes are entered,
        # so "does a class here define numpy()" costs the same in a file of 10,000 classes.
        self.method_owners: dict[str, set[str]] = {}
        self._mentions: dict[str, bool] = {}
        self.reports: list[Report] = []
        self.positions = None  # set by the engine once a rule has reported
        self._mentions_devices: bool | None = None
        self._bindings: dict[int, dict] = {}
        self.fix_device = devices.CUDA_OR_CPU  # `fix-device`: how fixes spell the default device
        self.target_devices: tuple[str, ...] | None = None  # `target-devices`; None: auto
        # what a notebook's metadata asks its host for, when a GPU runtime (`Notebook.gpu_runtime`)
        self.gpu_runtime: str | None = None
        self._by_use: dict[tuple[int, str], Value] = {}
        self._memo: dict[int, Value] | None = None  # during one value_of question
        self.shared: dict[object, object] = {}  # whole-file analyses rules share, built on first need

    def once(self, key: tuple, compute: Callable[[], object]):
        """``compute()``, remembered under ``key`` for the rest of the file: an answer about
        a scope or class that every finding (or load) asks for is worked out once."""
        if key not in self.shared:
            self.shared[key] = compute()
        return self.shared[key]

    def line_of(self, node: cst.CSTNode, module: cst.Module) -> int:
        """The line ``node`` starts on, for a question asked before any finding is placed
        (positions are computed on first need, one statement at a time)."""
        if self.positions is None:
            from torchdev_lint.engine import Positions  # the engine places findings with them
            self.positions = Positions(module)
        return self.positions[node].start.line

    def bindings(self, scope: cst.CSTNode) -> dict[str, list[cst.CSTNode]]:
        """Names bound directly in a function or module body (computed once per scope)."""
        cached = self._bindings.get(id(scope))
        if cached is None:
            cached = self._bindings[id(scope)] = devices.bindings(scope)
        return cached

    def mentions(self, text: str) -> bool:
        """``text`` occurs in the file. Fixes ask for each finding; searching the whole text
        each time made a file with thousands of findings quadratic."""
        found = self._mentions.get(text)
        if found is None:
            found = self._mentions[text] = text in self.source
        return found

    @property
    def mentions_devices(self) -> bool:
        """The file names a device or moves something to one: a model it calls may be on an
        accelerator. A file that never does runs where torch's default device is."""
        if self._mentions_devices is None:
            self._mentions_devices = names_devices(self.source)
        return self._mentions_devices

    @property
    def torch_name(self) -> str:
        """The name ``torch`` is imported under here (``torch`` if it is not imported)."""
        return self.imports.local_name_for("torch") or "torch"

    # -- traversal hooks -------------------------------------------------------------

    def enter(self, node: cst.CSTNode) -> None:
        self.ancestors.append(node)
        handler = _ENTER.get(type(node).__name__)
        if handler is not None:
            handler(self, node)

    def leave(self, node: cst.CSTNode) -> None:
        handler = _LEAVE.get(type(node).__name__)
        if handler is not None:
            handler(self, node)
        self.ancestors.pop()

    def _enter_module(self, node: cst.Module) -> None:
        # tests may compare a device with its constants, or with those it imports
        imported = (lambda name: self.index.imported_constant(self.path, name)) \
            if self.index is not None and self.path != "-" else None
        conditions.remember_module(node, imported)
        self.scopes.append(Scope(node))

    def _enter_lambda(self, node: cst.Lambda) -> None:
        scope = Scope(node)
        for param in node.params.params:
            scope.values[param.name.value] = kinds.UNKNOWN
        self.scopes.append(scope)

    def _enter_loop(self, node: cst.For | cst.CompFor) -> None:
        self._bind_loop(node.target, node.iter)

    def _leave_assign(self, node: cst.Assign) -> None:
        value = self.value_of(node.value)
        for target in node.targets:
            self._bind_target(target.target, value, node.value)

    def _leave_ann_assign(self, node: cst.AnnAssign) -> None:
        value = self.value_of(node.value) if node.value is not None else kinds.UNKNOWN
        if kinds.annotation_says_tensor(node.annotation.annotation, self.qualified_name):
            value = kinds.TENSOR
            scope = self.scopes[-1]
            if scope.is_class and isinstance(node.target, cst.Name):
                scope.class_info.attrs[node.target.value] = value  # a dataclass field: `self.mask` is a tensor
        self._bind_target(node.target, value, node.value)

    def _leave_expr(self, node: cst.Expr) -> None:
        """``self.register_buffer("pe", pe)`` in a method: ``self.pe`` is module state, which
        moves with the module (to an accelerator, where the program moves it there)."""
        call = node.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
                and call.func.attr.value in ("register_buffer", "register_parameter") and call.args
                and isinstance(call.func.value, cst.Name) and isinstance(call.args[0].value, cst.SimpleString)):
            return
        method = self._method_scope()
        if method is not None and call.func.value.value == method.self_name:
            method.class_info.attrs[call.args[0].value.evaluated_value] = kinds.MODULE_STATE

    def _leave_with_item(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind_target(node.asname.name, kinds.UNKNOWN)

    def _leave_definition(self, node: cst.FunctionDef | cst.ClassDef) -> None:
        self.scopes.pop()
        self._bind_name(node.name.value, kinds.UNKNOWN)

    def _leave_lambda(self, node: cst.Lambda) -> None:
        self.scopes.pop()

    # -- questions rules ask -----------------------------------------------------------

    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name) and self._lookup_local(node.value) is not None:
            return None  # a local variable or parameter shadows the import
        return self.imports.qualified_name(node)

    def is_guarded(self) -> bool:
        """The code being visited runs only where an accelerator is wanted or present."""
        return is_guarded(self.ancestors, self.qualified_name)

    @property
    def function(self) -> cst.FunctionDef | None:
        for scope in reversed(self.scopes):
            if isinstance(scope.node, cst.FunctionDef):
                return scope.node
        return None

    @property
    def enclosing_class(self) -> ClassInfo | None:
        """The class whose method we are in (or whose body we are in)."""
        for scope in reversed(self.scopes):
            if scope.class_info is not None:
                return scope.class_info
        return None

    @property
    def method(self) -> tuple[ClassInfo, cst.FunctionDef, str] | None:
        """Inside a method defined directly in a class (not a nested function, not a
        static method): its class, its definition and the name of its ``self``."""
        scope = self._method_scope()
        if scope is None:
            return None
        return scope.class_info, scope.node, scope.self_name

    def value_of(self, expr: cst.BaseExpression | None) -> Value:
        """What ``expr`` evaluates to, as far as the file says."""
        if self._memo is not None:
            key = id(expr)
            if key not in self._memo:
                self._memo[key] = self._evaluate(expr)
            return self._memo[key]
        # Nothing changes while one question is answered: each sub-expression is evaluated
        # once (asking about `x.t()` and then about its receiver `x` again, link by link,
        # made a chain `x.t().t()...` cost 2**n).
        self._memo = {}
        try:
            return self._evaluate(expr)
        finally:
            self._memo = None

    def _evaluate(self, expr: cst.BaseExpression | None) -> Value:
        if expr is None:
            return kinds.UNKNOWN
        if isinstance(expr, cst.Name):
            value = self._lookup_local(expr.value)
            if value is None or (
                value == kinds.UNKNOWN and kinds.names_optimizer_class(expr.value)
            ):
                return self._named_value(expr)
            return value
        if isinstance(expr, cst.Attribute):
            value = self._attribute_value(expr)
            return value if value != kinds.UNKNOWN else self._named_value(expr)
        if isinstance(expr, cst.Call):
            return self._call_value(expr)
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.value_of(expr.left), self.value_of(expr.right)
            if Kind.TENSOR in (left.kind, right.kind):
                return _combined(left, right)
            return kinds.UNKNOWN
        if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
            return self.value_of(expr.expression)
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1 and not isinstance(
            expr.comparisons[0].operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)
        ):
            # `torch.tril(ones) == 0`: an elementwise comparison is a (bool) tensor.
            left = self.value_of(expr.left)
            right = self.value_of(expr.comparisons[0].comparator)
            if Kind.TENSOR in (left.kind, right.kind):
                return _combined(left, right)
        if isinstance(expr, cst.Subscript):
            base = self.value_of(expr.value)
            if base.kind is Kind.TENSOR:
                return base
            if base.kind is Kind.BATCH:
                return Value(Kind.TENSOR, base.maybe_accelerator, placed=base.placed)
            return kinds.UNKNOWN
        if isinstance(expr, cst.IfExp):
            body, orelse = self.value_of(expr.body), self.value_of(expr.orelse)
            return body if body == orelse else kinds.UNKNOWN
        if isinstance(expr, (cst.DictComp, cst.ListComp, cst.GeneratorExp)):
            # `{k: v.to(device) for k, v in batch.items()}`: a batch on the device.
            element = self.value_of(expr.value if isinstance(expr, cst.DictComp) else expr.elt)
            if element.maybe_accelerator:
                return Value(Kind.BATCH, maybe_accelerator=True, placed=element.placed)
        return kinds.UNKNOWN

    def value_by_use(self, expr: cst.BaseExpression) -> Value:
        """``value_of(expr)``, or for a parameter it cannot place, what the function's uses
        of it say (``x.view(-1)``: a tensor; ``net.eval()``: a module; both: unknown)."""
        value = self.value_of(expr)
        function = self.function
        if value == kinds.UNKNOWN and isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name):
            # `batch[key]` of a parameter the function uses as a batch: one of its tensors
            if self.value_by_use(expr.value).kind is Kind.BATCH:
                return kinds.TENSOR
            return value
        if value != kinds.UNKNOWN or not isinstance(expr, cst.Name) or function is None:
            return value
        params = function.params
        names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
        if expr.value not in names or self._lookup_local(expr.value) != kinds.UNKNOWN:
            return value
        method = self.method
        if method is not None and method[1] is function and method[2] == expr.value:
            return value  # a method's `self` is its class's object: `self.mean` is no tensor's method
        key = (id(function), expr.value)
        found = self._by_use.get(key)
        if found is None:
            found = self._by_use[key] = evidence.kind_by_use(function, expr.value)
        return found

    def lookup(self, name: str) -> Value:
        value = self._lookup_local(name)
        return value if value is not None else kinds.UNKNOWN

    def report(self, rule: Rule, node: cst.CSTNode, message: str, fix, evidence=(), certain=True,
               set_aside=False) -> None:
        ancestors = tuple(self.ancestors)
        if certain and ancestors:
            # A branch the code's own constants rule out (`SHOW = False` ... `if SHOW:`) never
            # runs: what is there fails nowhere, so nothing shows how it fails.
            parents = {id(child): parent for parent, child in zip(ancestors, ancestors[1:])}
            certain = not conditions.never_runs(ancestors[-1], parents)
        self.reports.append(Report(rule, node, message, ancestors, fix, tuple(evidence), certain,
                                   set_aside and not certain))

    # -- internals ---------------------------------------------------------------------

    def _lookup_local(self, name: str) -> Value | None:
        innermost = True
        for scope in reversed(self.scopes):
            # Class bodies do not enclose their methods (Python's scoping rule).
            if scope.is_class and not innermost:
                continue
            if name in scope.values:
                return scope.values[name]
            innermost = False
        return None

    def _enter_class(self, node: cst.ClassDef) -> None:
        is_module = False
        for base in node.bases:
            qualified = self.qualified_name(base.value)
            dotted = dotted_name(base.value) or ""
            if (qualified and kinds.is_module_class(qualified)) or (
                dotted in self.classes and self.classes[dotted].is_module
            ) or (
                qualified and self.index is not None
                and self.index.is_module_class(qualified, self.path)
            ):
                is_module = True
        info = ClassInfo(node.name.value, node, is_module)
        replaced = self.classes.get(info.name)
        for method in replaced.method_names if replaced is not None else ():
            self.method_owners[method].discard(info.name)
        self.classes[info.name] = info
        for method in info.method_names:
            self.method_owners.setdefault(method, set()).add(info.name)
        self.scopes.append(Scope(node, class_info=info))

    def _enter_function(self, node: cst.FunctionDef) -> None:
        outer = self.scopes[-1]
        scope = Scope(node)
        params = node.params
        positional = [*params.posonly_params, *params.params]
        if outer.is_class and positional and not _is_static(node):
            scope.self_name = positional[0].name.value
            scope.class_info = outer.class_info
            scope.values[scope.self_name] = (
                kinds.MODULE if outer.class_info.is_module else kinds.UNKNOWN
            )
            positional = positional[1:]
        name = node.name.value
        in_module = outer.is_class and outer.class_info.is_module
        for index, param in enumerate([*positional, *params.kwonly_params]):
            scope.values[param.name.value] = self._parameter_value(param, name, index, in_module)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                scope.values[star.name.value] = kinds.UNKNOWN
        self.scopes.append(scope)

    def _parameter_value(
        self, param: cst.Param, function: str, index: int, in_module: bool
    ) -> Value:
        annotation = param.annotation
        if annotation is not None:
            if kinds.annotation_says_tensor(annotation.annotation, self.qualified_name):
                return kinds.TENSOR
            return kinds.UNKNOWN
        if not in_module:
            return kinds.UNKNOWN
        if function == "forward":
            default = param.default
            if default is None or (isinstance(default, cst.Name) and default.value == "None"):
                return kinds.TENSOR
        elif function in _STEP_METHODS and index == 0:
            return Value(Kind.BATCH, maybe_accelerator=True)  # Lightning moved it to the device
        return kinds.UNKNOWN

    def _method_scope(self) -> Scope | None:
        for scope in reversed(self.scopes):
            if isinstance(scope.node, cst.FunctionDef):
                return scope if scope.self_name else None
        return None

    def _named_value(self, expr: cst.Name | cst.Attribute) -> Value:
        """What a name that the file does not bind says it is: an optimizer class imported
        (``AdamW``, ``torch.optim.SGD``) or held in a name that says so (``optimizer_cls``)."""
        qualified = self.qualified_name(expr)
        if qualified is not None and kinds.is_optimizer_class(qualified):
            return kinds.OPTIMIZER_CLASS
        name = expr.value if isinstance(expr, cst.Name) else expr.attr.value
        if kinds.names_optimizer_class(name):
            return kinds.OPTIMIZER_CLASS
        return kinds.UNKNOWN

    def _attribute_value(self, expr: cst.Attribute) -> Value:
        attr = expr.attr.value
        if isinstance(expr.value, cst.Name):
            method = self._method_scope()
            if method is not None and expr.value.value == method.self_name:
                return method.class_info.attrs.get(attr, kinds.UNKNOWN)
        if attr in kinds.TENSOR_ATTRIBUTES:
            base = self.value_of(expr.value)
            if base.kind is Kind.TENSOR:
                return base
        elif attr not in kinds.NON_TENSOR_ATTRIBUTES:
            # A field of a model's output (`outputs.logits`) lives where the output does.
            base = self.value_of(expr.value)
            if base.kind is Kind.TENSOR and base.maybe_accelerator:
                return base
        return kinds.UNKNOWN

    def _call_value(self, call: cst.Call) -> Value:
        func = call.func
        qualified = self.qualified_name(func)
        if qualified is not None:
            if kinds.is_tensor_function(qualified) or kinds.is_variable_class(qualified) or (
                qualified in ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
            ):
                return self._tensor_call(qualified, call)
            if qualified.endswith("DataLoader"):
                return Value(Kind.LOADER)
            if kinds.is_optimizer_class(qualified):
                return Value(Kind.OPTIMIZER)
            if kinds.is_module_class(qualified) or qualified.startswith(kinds.MODEL_ZOO_PREFIXES):
                return kinds.MODULE
            if qualified == "copy.deepcopy" and call.args:
                return self.value_of(call.args[0].value)
            if self.index is not None:  # the project's own classes and helpers
                if self.index.is_module_class(qualified, self.path):
                    return kinds.MODULE
                returned = self.index.returns(qualified, self.path)
                if returned == "module":
                    return kinds.MODULE
                if returned == "tensor":
                    return kinds.TENSOR
        if (
            isinstance(func, cst.Name)
            and func.value in ("tuple", "list", "dict")
            and len(call.args) == 1
            and isinstance(call.args[0].value, (cst.GeneratorExp, cst.ListComp, cst.DictComp))
        ):
            return self.value_of(call.args[0].value)
        if (
            isinstance(func, cst.Name)
            and func.value == "getattr"
            and call.args
            and self.qualified_name(call.args[0].value) in kinds.OPTIMIZER_MODULES
        ):
            return kinds.OPTIMIZER_CLASS  # getattr(torch.optim, name)
        if self.value_of(func).kind is Kind.OPTIMIZER_CLASS:
            return Value(Kind.OPTIMIZER)  # optimizer_cls(model.parameters())
        if isinstance(func, cst.Name) and func.value in self.classes:
            return kinds.MODULE if self.classes[func.value].is_module else kinds.UNKNOWN
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method == "from_pretrained":
                owner = (dotted_name(func.value) or "").rsplit(".", 1)[-1]
                # a tokenizer's output is a BatchEncoding, whose `.to` works in place
                return kinds.UNKNOWN if owner.endswith(kinds.PREPROCESSOR_SUFFIXES) else kinds.MODULE
            if self.value_of(func).kind is Kind.MODULE:  # `self.encoder(x)`: a submodule's output
                return self._model_output(call, self.value_of(func))
            receiver = self.value_of(func.value)
            if method == "to" and self._names_the_cpu(call):
                method = "cpu"  # `device = "cpu"` ... `x.to(device)`
            value = kinds.method_call_value(receiver, method, call)
            if value == kinds.UNKNOWN and receiver.kind is Kind.UNKNOWN and qualified is None:
                return self._fed_from_accelerator(call)  # `codec.decode(codes.to(device))`
            return value
        callee = self.value_of(func)
        if callee.kind is Kind.MODULE:
            return self._model_output(call, callee)
        if callee.kind is Kind.UNKNOWN and (qualified is None or qualified.startswith("torch.")):
            value = self._fed_from_accelerator(call)  # `model(x.to(device))`, model a parameter
            if value.placed and self._names_a_function(func):
                # `to_mask(out)` of a helper the module defines or imports: its body, out of
                # sight here, decides where the result is (perhaps a `torch.zeros` of its own)
                return Value(Kind.UNKNOWN, maybe_accelerator=True)
            return value
        return kinds.UNKNOWN

    def _names_a_function(self, func: cst.BaseExpression) -> bool:
        """``func`` is a module-level ``def``, an imported name or one a ``*`` import brings,
        not an object held in a variable or parameter (a model handed in)."""
        if not isinstance(func, cst.Name) or not self.ancestors:
            return False
        if self.function is not None and func.value in self.bindings(self.function):
            return False
        sites = self.bindings(self.ancestors[0]).get(func.value, ())
        return all(isinstance(site, cst.Name) for site in sites)

    def _names_the_cpu(self, call: cst.Call) -> bool:
        """``x.to(device)`` where every binding of ``device`` in sight (the function's, else
        the module's) is ``"cpu"`` or ``torch.device("cpu")``: a script that hardcodes its
        device as the CPU places nothing on an accelerator."""
        first = call.args[0].value if call.args and call.args[0].keyword is None else None
        return first is not None and self._bound_to_the_cpu(first)

    def _bound_to_the_cpu(self, expr: cst.BaseExpression) -> bool:
        """``device`` whose every binding in sight is ``"cpu"`` or ``torch.device("cpu")``, or
        ``cfg.dev`` of a ``cfg`` bound once to a call given ``dev=torch.device("cpu")`` (a
        notebook's config object)."""
        attribute = None
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            attribute, expr = expr.attr.value, expr.value
        if not isinstance(expr, cst.Name):
            return False
        for scope in (self.function, self.ancestors[0] if self.ancestors else None):
            sites = self.bindings(scope).get(expr.value) if scope is not None else None
            if not sites:
                continue
            if attribute is None:
                return all(isinstance(site, cst.Assign) and conditions.device_named(site.value) is conditions.CPU
                           for site in sites)
            site = sites[0]
            if len(sites) != 1 or not isinstance(site, cst.Assign) or not isinstance(site.value, cst.Call):
                return False
            given = next((a.value for a in site.value.args
                          if a.keyword is not None and a.keyword.value == attribute), None)
            return given is not None and conditions.device_named(given) is conditions.CPU
        return False

    def _fed_from_accelerator(self, call: cst.Call) -> Value:
        """A call of unknown kind given data on an accelerator: what it returns (if it is a
        tensor at all) is there too. The kind stays unknown."""
        values = [self.value_of(arg.value) for arg in call.args]
        if any(v.maybe_accelerator for v in values):
            return Value(Kind.UNKNOWN, maybe_accelerator=True, placed=any(v.placed for v in values))
        return kinds.UNKNOWN

    def _tensor_call(self, qualified: str, call: cst.Call) -> Value:
        """A torch factory or op: where ``device=`` says, else where its inputs are; a
        factory without ``device=`` builds on the CPU."""
        if self._device_argument(call):
            return Value(Kind.TENSOR, maybe_accelerator=True, placed=True)
        if self._follows_inputs(qualified, call):
            return Value(Kind.TENSOR, maybe_accelerator=True, placed=self._fed_placed(call))
        last = qualified.rsplit(".", 1)[-1]
        if any(a.keyword is not None and a.keyword.value == "device" for a in call.args):
            return kinds.CPU_TENSOR if not _device_follows(call) else kinds.TENSOR
        if last == "from_numpy" or (last in kinds.TENSOR_FACTORIES and not last.endswith("_like")):
            return kinds.CPU_TENSOR
        inputs = [self.value_of(a.value) for a in call.args if a.keyword is None]
        tensors = [v for v in inputs if v.kind is Kind.TENSOR]
        if tensors and all(v.on_cpu for v in tensors):
            return kinds.CPU_TENSOR
        return kinds.TENSOR

    def _model_output(self, call: cst.Call, model: Value) -> Value:
        """A model's output: on an accelerator if the file places anything on one, unless
        every input is a tensor known to be on the CPU (a module computes where its inputs
        are, or fails). Placed where the model or an input was moved."""
        inputs = [self.value_of(a.value) for a in call.args if a.keyword is None or a.star]
        on_cpu = bool(inputs) and all(v.kind is Kind.TENSOR and v.on_cpu for v in inputs)
        if on_cpu:
            return kinds.CPU_TENSOR
        return Value(Kind.TENSOR, maybe_accelerator=self.mentions_devices,
                     placed=model.placed or any(v.placed for v in inputs))

    def _device_argument(self, call: cst.Call) -> bool:
        """``device=`` names an accelerator, or may: ``"cpu"`` does not, and
        ``device=x.device`` follows ``x``."""
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                value = arg.value
                if isinstance(value, cst.Attribute) and value.attr.value == "device":
                    return self.value_of(value.value).maybe_accelerator
                return _has_device_argument(call) and not self._bound_to_the_cpu(value)
        return False

    def _fed_placed(self, call: cst.Call) -> bool:
        """An argument (or an element of a list or tuple argument) was placed by a move."""
        for arg in call.args:
            value = arg.value
            elements = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
            if any(self.value_of(e).placed for e in elements):
                return True
        return False

    def _follows_inputs(self, qualified: str, call: cst.Call) -> bool:
        """An op (not a factory, except ``*_like``) computes where its tensor inputs live."""
        last = qualified.rsplit(".", 1)[-1]
        if last in kinds.TENSOR_FACTORIES and not last.endswith("_like"):
            return False
        for arg in call.args:
            value = arg.value
            elements = (
                [e.value for e in value.elements]
                if isinstance(value, (cst.List, cst.Tuple)) else [value]
            )
            if any(self.value_of(e).maybe_accelerator for e in elements):
                return True
        return False

    def _bind_loop(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """``for i, (x, y) in enumerate(loader)`` binds the index and a batch."""
        if (
            isinstance(iterable, cst.Call)
            and dotted_name(iterable.func) == "enumerate"
            and iterable.args
            and isinstance(target, (cst.Tuple, cst.List))
            and len(target.elements) == 2
        ):
            self._bind_target(target.elements[0].value, kinds.UNKNOWN)
            target, iterable = target.elements[1].value, iterable.args[0].value
        mapping = _mapping_view(iterable)
        if mapping is not None and self.value_of(mapping[0]).kind is Kind.BATCH:
            # `for k, v in batch.items()` / `for v in batch.values()`: the batch's tensors
            batch = self.value_of(mapping[0])
            tensor = Value(Kind.TENSOR, batch.maybe_accelerator, placed=batch.placed)
            if mapping[1] == "values":
                self._bind_target(target, tensor)
                return
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                self._bind_target(target.elements[0].value, kinds.UNKNOWN)
                self._bind_target(target.elements[1].value, tensor)
                return
        self._bind_target(target, self._element_value(iterable))

    def _element_value(self, iterable: cst.BaseExpression) -> Value:
        """The value of each element when iterating over ``iterable``."""
        if isinstance(iterable, cst.Call) and iterable.args:
            if dotted_name(iterable.func) in ("tqdm", "tqdm.tqdm", "iter"):
                return self._element_value(iterable.args[0].value)
        name = dotted_name(iterable.func if isinstance(iterable, cst.Call) else iterable)
        if self.value_of(iterable).kind is Kind.LOADER or (
            name and kinds.LOADER_NAME.search(name.rsplit(".", 1)[-1])
        ):
            return Value(Kind.BATCH)
        return kinds.UNKNOWN

    def _bind_target(
        self, target: cst.BaseExpression, value: Value, source: cst.BaseExpression | None = None
    ) -> None:
        if isinstance(target, cst.Name):
            self._bind_name(target.value, value)
            if source is not None and len(self.scopes) == 1:
                self.imports.bind_alias(target.value, source)
            else:
                self.imports.unbind(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            sources = (
                [e.value for e in source.elements]
                if isinstance(source, (cst.Tuple, cst.List))
                and len(source.elements) == len(target.elements)
                else None
            )
            for index, element in enumerate(target.elements):
                if sources is not None:
                    element_value = self.value_of(sources[index])
                elif value.kind is Kind.BATCH:
                    # The parts of a batch are tensors, or nested batches.
                    nested = isinstance(element.value, (cst.Tuple, cst.List))
                    element_value = Value(
                        Kind.BATCH if nested else Kind.TENSOR, value.maybe_accelerator, placed=value.placed
                    )
                elif value.kind is Kind.TENSOR:
                    # Unpacking a tensor (or a model's tuple output, or `torch.max(x, 1)`)
                    # gives tensors on the same device.
                    element_value = value
                else:
                    element_value = kinds.UNKNOWN
                self._bind_target(element.value, element_value)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            method = self._method_scope()
            if method is not None and target.value.value == method.self_name:
                attrs = method.class_info.attrs
                # Keep the most informative value seen for the attribute.
                if value.kind is not Kind.UNKNOWN or target.attr.value not in attrs:
                    attrs[target.attr.value] = value
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value, kinds.UNKNOWN)

    def _bind_name(self, name: str, value: Value) -> None:
        self.scopes[-1].values[name] = value


def _is_static(node: cst.FunctionDef) -> bool:
    return any(dotted_name(d.decorator) == "staticmethod" for d in node.decorators)


def _combined(left: Value, right: Value) -> Value:
    """The value of an elementwise op on ``left`` and ``right`` (one of them a tensor)."""
    tensors = [v for v in (left, right) if v.kind is Kind.TENSOR]
    return Value(
        Kind.TENSOR,
        left.maybe_accelerator or right.maybe_accelerator,
        on_cpu=all(v.on_cpu for v in tensors),
        placed=left.placed or right.placed,
    )


def _device_follows(call: cst.Call) -> bool:
    """``device=x.device``: wherever ``x`` is."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            return isinstance(arg.value, cst.Attribute) and arg.value.attr.value == "device"
    return False


def _has_device_argument(call: cst.Call) -> bool:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            value = arg.value
            return not (isinstance(value, cst.SimpleString) and "cpu" in value.value)
    return False


# What the context does on entering and leaving each kind of node (a dict lookup per node:
# isinstance chains on LibCST's abstract classes cost more than the rest of the walk), keyed
# by class name because LibCST runs only once a file is parsed.
_ENTER = {
    "Module": FileContext._enter_module,
    "FunctionDef": FileContext._enter_function,
    "Lambda": FileContext._enter_lambda,
    "ClassDef": FileContext._enter_class,
    "Import": lambda self, node: self.imports.record_import(node),
    "ImportFrom": lambda self, node: self.imports.record_import_from(node),
    "For": FileContext._enter_loop,
    "CompFor": FileContext._enter_loop,
}
_LEAVE = {
    "Assign": FileContext._leave_assign,
    "AnnAssign": FileContext._leave_ann_assign,
    "WithItem": FileContext._leave_with_item,
    "Expr": FileContext._leave_expr,
    "FunctionDef": FileContext._leave_definition,
    "ClassDef": FileContext._leave_definition,
    "Lambda": FileContext._leave_lambda,
}


def _mapping_view(iterable: cst.BaseExpression) -> tuple[cst.BaseExpression, str] | None:
    """``(batch, "items")`` for ``batch.items()`` (or ``values``), else None."""
    if (isinstance(iterable, cst.Call) and not iterable.args and isinstance(iterable.func, cst.Attribute)
            and iterable.func.attr.value in ("items", "values")):
        return iterable.func.value, iterable.func.attr.value
    return None
