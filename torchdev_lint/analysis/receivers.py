"""What the receiver of a method call certainly is, for fixes that must not guess.

The value analysis (``kinds``/``context``) says what a value probably is, which is enough to
decide whether to report. A fix marked safe needs more: inserting ``.cpu()`` before
``.numpy()`` breaks a program whose "tensor" is in fact an object of its own class with a
``numpy()`` method and no ``cpu()``. Here a value is a tensor only when torch made it (a
torch factory or op, a tensor method of such a tensor, the output of a ``torch.nn`` layer,
an annotated ``Tensor`` parameter) along every assignment of the name in its scope.
Batch elements, model outputs of the project's own modules and unannotated parameters are
not certain.
"""

from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import kinds, tree

TENSOR = "tensor"
TORCH_MODULE = "torch_module"  # a module from torch.nn or a model zoo: its output is a tensor
PROJECT = "project"  # an object of a class defined in this file



def certainly(ctx, expr: cst.BaseExpression) -> str | None:
    """``TENSOR``, ``TORCH_MODULE`` or ``PROJECT`` when ``expr`` is certainly that, else None."""
    return _Query(ctx).of(expr)


def may_be_projects(ctx, expr: cst.BaseExpression, methods: set[str]) -> bool:
    """``expr`` is, or may be, an object of this file's own class with one of ``methods``:
    certainly one, or of no certain kind while such a class exists. A safe fix must not
    rewrite its calls: the project's methods may work differently from torch's."""
    certain = certainly(ctx, expr)
    return certain == PROJECT or (certain is None and defines_method(ctx, methods))


_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def may_be_parameter(ctx, expr: cst.BaseExpression) -> bool:
    """``expr`` may hold an ``nn.Parameter``, which a moved copy cannot replace: a module's
    registered parameter only takes a Parameter (``Module.__setattr__`` raises on the plain
    tensor ``.to()`` returns), and a name rebound to that copy holds a non-leaf tensor an
    optimizer rejects. A name some binding of which builds a Parameter (or is annotated as
    one); ``self.<attr>`` of a module class that builds a Parameter for it, registers it by
    name, or never assigns it (a parent class may have)."""
    if isinstance(expr, cst.Name):
        scope = _Query(ctx)._scope_of(expr.value)
        if scope is None:
            return True
        return any(_builds_parameter(ctx, scope, site) for site in ctx.bindings(scope)[expr.value])
    method = ctx.method
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and method is not None
            and expr.value.value == method[2]):
        return False
    info, _, self_name = method
    if not info.is_module:
        return False
    attr = expr.attr.value
    values: list[cst.BaseExpression] = []
    registered = False

    def enter(node: cst.CSTNode) -> bool:
        nonlocal registered
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else (
            [node.target] if isinstance(node, cst.AnnAssign) and node.value is not None else [])
        for target in targets:
            if (isinstance(target, cst.Attribute) and target.attr.value == attr
                    and isinstance(target.value, cst.Name) and target.value.value in ("self", self_name)):
                values.append(node.value)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
            node.func.attr.value == "register_parameter" and node.args
            and isinstance(node.args[0].value, cst.SimpleString)
            and node.args[0].value.evaluated_value == attr
        ):
            registered = True
        return True

    tree.walk(info.node, enter)
    return registered or not values or any(_parameter_call(ctx, v) for v in values)


def _parameter_call(ctx, value: cst.BaseExpression | None) -> bool:
    return isinstance(value, cst.Call) and ctx.qualified_name(value.func) in _PARAMETER_CLASSES


def _names_parameter(ctx, annotation: cst.Annotation | None) -> bool:
    return annotation is not None and (ctx.qualified_name(annotation.annotation) or "") in _PARAMETER_CLASSES


def _builds_parameter(ctx, scope: cst.CSTNode, site: cst.CSTNode) -> bool:
    if isinstance(site, cst.Assign):
        return _parameter_call(ctx, site.value)
    if isinstance(site, cst.AnnAssign):
        return _names_parameter(ctx, site.annotation) or _parameter_call(ctx, site.value)
    if isinstance(site, cst.Name) and isinstance(scope, cst.FunctionDef):
        params = scope.params
        return any(p.name is site and _names_parameter(ctx, p.annotation)
                   for p in (*params.posonly_params, *params.params, *params.kwonly_params))
    return False


def defines_method(ctx, names: frozenset[str] | set[str]) -> bool:
    """A class of this file defines one of ``names`` (``numpy``, ``cuda``...): values of
    unknown kind here may be its objects."""
    return any(ctx.method_owners.get(name) for name in names)


class _Query:
    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.seen: set[tuple[int, str]] = set()

    def of(self, expr: cst.BaseExpression) -> str | None:
        if isinstance(expr, cst.Name):
            return self._name(expr.value)
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.Subscript):
            return TENSOR if self.of(expr.value) == TENSOR else None
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in kinds.TENSOR_ATTRIBUTES and self.of(expr.value) == TENSOR:
                return TENSOR
            return None
        if isinstance(expr, cst.BinaryOperation):
            return TENSOR if TENSOR in (self.of(expr.left), self.of(expr.right)) else None
        if isinstance(expr, cst.UnaryOperation):
            return TENSOR if self.of(expr.expression) == TENSOR else None
        return None

    def _call(self, call: cst.Call) -> str | None:
        func = call.func
        qualified = self.ctx.qualified_name(func)
        if qualified is not None:
            if kinds.is_tensor_function(qualified):
                return TENSOR
            if kinds.is_module_class(qualified) and qualified.startswith("torch.nn."):
                return TORCH_MODULE
            if qualified.startswith(kinds.MODEL_ZOO_PREFIXES):
                return TORCH_MODULE
        if isinstance(func, cst.Name) and func.value in self.ctx.classes and qualified is None:
            return PROJECT if not self.ctx.classes[func.value].is_module else None
        if isinstance(func, cst.Attribute):
            receiver = self.of(func.value)
            method = func.attr.value
            if receiver == TENSOR:
                return None if method in kinds.NON_TENSOR_METHODS else TENSOR
            if receiver == TORCH_MODULE and method in kinds.MODULE_SELF_METHODS:
                return TORCH_MODULE
            if receiver == PROJECT and method in ("to", "cuda", "cpu"):
                return PROJECT  # the project's own move, taken to return its own kind
            return None
        return TENSOR if self.of(func) == TORCH_MODULE else None

    def _name(self, name: str) -> str | None:
        scope = self._scope_of(name)
        if scope is None:
            return None
        key = (id(scope), name)
        if key in self.seen:
            return ""  # `x = x.float()`: the other bindings decide
        self.seen.add(key)
        facts = {self._binding(scope, name, site) for site in self.ctx.bindings(scope)[name]}
        facts.discard("")
        return facts.pop() if len(facts) == 1 else None

    def _scope_of(self, name: str) -> cst.CSTNode | None:
        """The innermost function (or the module) binding ``name``, Python's way."""
        innermost = True
        for scope in reversed(self.ctx.scopes):
            if isinstance(scope.node, cst.ClassDef) and not innermost:
                continue
            innermost = False
            if isinstance(scope.node, cst.Lambda):
                if any(p.name.value == name for p in scope.node.params.params):
                    return None
                continue
            if name in self.ctx.bindings(scope.node):
                return scope.node
        return None

    def _binding(self, scope: cst.CSTNode, name: str, site: cst.CSTNode) -> str | None:
        if isinstance(site, cst.Assign):
            if any(isinstance(t.target, cst.Name) for t in site.targets):
                return self.of(site.value)
            # `_, pred = torch.max(out, 1)`: torch ops give tuples of tensors
            return TENSOR if self.of(site.value) == TENSOR else None
        if isinstance(site, cst.AnnAssign):
            if kinds.annotation_says_tensor(site.annotation.annotation, self.ctx.qualified_name):
                return TENSOR
            return self.of(site.value) if site.value is not None else None
        if isinstance(site, cst.AugAssign):
            return ""  # `x += y` keeps a tensor a tensor
        if isinstance(site, cst.Name) and isinstance(scope, cst.FunctionDef):
            params = scope.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                if param.name is site and param.annotation is not None:
                    if kinds.annotation_says_tensor(param.annotation.annotation, self.ctx.qualified_name):
                        return TENSOR
        return None
