"""Import and alias resolution from the file's own import statements.

Full scope analysis (LibCST's QualifiedNameProvider) costs about five parses; device rules
only need to know what a dotted name's head was imported as, so we keep one table,
updated in source order as the traversal meets imports, simple aliases
(``load = torch.load``) and rebindings (``def load(...)``).
"""

from __future__ import annotations

import libcst as cst


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _module_name(node: cst.BaseExpression | None) -> str:
    return dotted_name(node) or "" if node is not None else ""


class ImportTable:
    """``module``/``is_package`` (the file's dotted name, and whether it is an
    ``__init__.py``) resolve relative imports; ``index`` (a project index) says what a star
    import binds. Without them relative imports and star imports name nothing."""

    def __init__(self, module: str | None = None, is_package: bool = False, index=None,
                 path: str | None = None) -> None:
        self._names: dict[str, str] = {}
        self._module = module
        self._is_package = is_package
        self._index = index
        self._path = path

    def record_import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self._names[alias.asname.name.value] = full
            else:
                head = full.split(".")[0]
                self._names[head] = head

    def record_import_from(self, node: cst.ImportFrom) -> None:
        module = _module_name(node.module)
        if node.relative:
            if self._module is None:  # the project's own code, from an unknown place
                if not isinstance(node.names, cst.ImportStar):
                    for alias in node.names:
                        self.unbind(self._bound_name(alias))
                return
            parts = self._module.split(".")
            keep = len(parts) - len(node.relative) + (1 if self._is_package else 0)
            module = ".".join([*parts[:max(keep, 0)], *([module] if module else [])])
        if isinstance(node.names, cst.ImportStar):
            if self._index is not None:  # `from .common import *` may bind `torch`
                self._names.update(self._index.exports(module, self._path))
            return
        for alias in node.names:
            self._names[self._bound_name(alias)] = f"{module}.{dotted_name(alias.name)}"

    @staticmethod
    def _bound_name(alias: cst.ImportAlias) -> str:
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            return alias.asname.name.value
        return (dotted_name(alias.name) or "").split(".")[0]

    def bind_alias(self, name: str, value: cst.BaseExpression) -> None:
        """``name = <expr>``: an alias if expr is an imported dotted name, else a rebinding."""
        qualified = self.qualified_name(value)
        if qualified is not None:
            self._names[name] = qualified
        else:
            self.unbind(name)

    def unbind(self, name: str) -> None:
        self._names.pop(name, None)

    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        """The imported name an expression refers to (``T.jit.load`` -> ``torch.jit.load``)."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self._names.get(head)
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    def local_name_for(self, module: str) -> str | None:
        """The name under which ``module`` itself is imported (``torch`` may be ``T``)."""
        for local, full in self._names.items():
            if full == module:
                return local
        return None
