"""What the methods of a class do with ``self``: which attribute an expression names, and
which methods ``__init__`` (or ``forward``) reaches through ``self.method(...)`` calls."""

from __future__ import annotations

import collections
import io
import re
import tokenize
from typing import Callable, Iterable, Iterator

import libcst as cst

from torchdev_lint.analysis import run_order
from torchdev_lint.analysis.guards import code_of
from torchdev_lint.analysis.tree import collect


def self_attribute(expr: cst.BaseExpression, self_name: str) -> str | None:
    """``attr`` for ``self.attr``, else None."""
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == self_name
    ):
        return expr.attr.value
    return None


def methods(klass: cst.ClassDef) -> Iterator[tuple[cst.FunctionDef, str]]:
    """Each method defined in ``klass``'s body that takes a first parameter, with that
    parameter's name (``self`` by convention, any name in fact)."""
    for method in klass.body.body:
        if isinstance(method, cst.FunctionDef):
            params = [*method.params.posonly_params, *method.params.params]
            if params:
                yield method, params[0].name.value


def self_call(call: cst.Call, self_name: str) -> str | None:
    """``method`` for ``self.method(...)``, else None."""
    return self_attribute(call.func, self_name) if isinstance(call.func, cst.Attribute) else None


def reachable(calls: dict[str, set[str]], starts: Iterable[str]) -> set[str]:
    """The methods ``starts`` run, directly or through ``self.method(...)`` calls, given
    the calls each method makes."""
    seen = set(starts)
    todo = list(seen)
    while todo:
        for callee in calls.get(todo.pop(), ()):
            if callee not in seen:
                seen.add(callee)
                todo.append(callee)
    return seen


# Methods torch itself calls on a module, which the code that uses it never names.
_MODULE_HOOKS = frozenset({"forward", "extra_repr", "reset_parameters", "_apply", "_load_from_state_dict",
                           "_save_to_state_dict", "_replicate_for_data_parallel", "_get_name", "_check_input_dim"})
# Bases whose machinery calls no other method of a subclass.
PLAIN_BASES = frozenset({"object", "nn.Module", "torch.nn.Module", "Module"})
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def _names_in_code(source: str, libraries: frozenset[str] = frozenset()) -> collections.Counter[str]:
    """How often each name appears where code may use it: in the code, in an f-string, or
    as a whole string literal (``getattr(self, "test")``, ``choices=["train", "test"]``); not
    in a comment nor a sentence ("no model to test"), which call nothing, nor as an attribute
    of a library module the file imports (``libraries``: ``torch.load`` is no ``load`` of
    the file's). Every word of the text when it does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return collections.Counter(_IDENTIFIER.findall(source))
    found: collections.Counter[str] = collections.Counter()
    for at, token in enumerate(tokens):
        if token.type == tokenize.NAME:
            if not (at > 1 and tokens[at - 1].string == "." and tokens[at - 2].string in libraries):
                found[token.string] += 1
        elif token.type == tokenize.STRING or token.type not in _PLAIN_TOKENS:  # f-string parts (3.12)
            text = token.string
            quote = text.lstrip("rRbBuUfF")[:1] if token.type == tokenize.STRING else ""
            inner = text.lstrip("rRbBuUfF").strip(quote) if quote else text
            if token.type != tokenize.STRING or "f" in text[:text.find(quote)].lower() \
                    or _IDENTIFIER.fullmatch(inner.strip()):
                found.update(_IDENTIFIER.findall(inner))
    return found


# token kinds that hold no name a call could use
_PLAIN_TOKENS = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                           tokenize.OP, tokenize.NUMBER, tokenize.ENDMARKER, tokenize.ERRORTOKEN})


def _library_names(module: cst.Module) -> frozenset[str]:
    """The names the module's top-level imports bind to libraries (``torch``, ``np``)."""
    found = set()
    for statement in module.body:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import):
                found.update(code_of(a.asname.name) if a.asname else code_of(a.name).split(".")[0]
                             for a in small.names if code_of(a.name).split(".")[0] in run_order.FOREIGN_ROOTS)
            elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative \
                    and code_of(small.module).split(".")[0] in run_order.FOREIGN_ROOTS \
                    and not isinstance(small.names, cst.ImportStar):
                found.update(code_of(a.asname.name) if a.asname else code_of(a.name) for a in small.names)
    return frozenset(found)


def uncalled_methods(module: cst.Module, source: str, mentioned_elsewhere: Callable[[str], bool | None]
                     ) -> frozenset[tuple[str, str]]:
    """(class, method) for the methods of the file's top-level classes that nothing calls: no
    other module mentions an attribute of the name (``mentioned_elsewhere`` is False), the file
    names it only as ``self.<name>`` inside methods that are themselves uncalled (every other
    mention, a string or a comment included, may call it), and it is no hook torch or a
    base class calls (a dunder, ``forward``; every method of a class with another base)."""
    classes = [s for s in module.body if isinstance(s, cst.ClassDef)]
    plain: set[str] = set()
    for _ in classes:  # bases of the file's own, in any order
        plain.update(k.name.value for k in classes if not k.decorators and all(
            code_of(b.value) in PLAIN_BASES or code_of(b.value) in plain for b in k.bases))
    words = _names_in_code(source, _library_names(module))
    defined: collections.Counter[str] = collections.Counter(
        s.name.value for s in module.body if isinstance(s, cst.FunctionDef))
    uses: dict[str, set[str]] = {}
    mentions: collections.Counter[str] = collections.Counter()
    starts: set[str] = set()
    for klass in classes:
        for method, self_name in methods(klass):
            name = method.name.value
            defined[name] += 1
            found = [a for a in (self_attribute(n, self_name) for n in collect(method.body, cst.Attribute)) if a]
            uses.setdefault(name, set()).update(found)
            mentions.update(found)
            if klass.name.value not in plain or method.decorators or name.startswith("__") \
                    or name in _MODULE_HOOKS or mentioned_elsewhere(name) is not False:
                starts.add(name)
    starts.update(n for n in defined if words[n] > defined[n] + mentions[n])
    called = reachable(uses, starts)
    return frozenset((klass.name.value, method.name.value) for klass in classes if klass.name.value in plain
                     for method, _ in methods(klass) if method.name.value not in called)
