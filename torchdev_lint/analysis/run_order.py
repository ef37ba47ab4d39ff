"""Which calls of a run come before which: the order a module's code makes its calls in.

A ``torch.load`` that reads a checkpoint the same run saved moments earlier (the best
model at the end of ``train()``, ``test()`` after ``train()`` in ``main()``, a script that
reloads what its training call wrote) reads it on the machine that wrote it: it cannot
fail for want of that device. Whether a save comes first is a question of order, asked
across functions and files: ``read`` records, for each call of a module, the scope it is
made in and where it stands in that scope's blocks; ``precedes`` compares two such places;
``ProjectIndex.saved_earlier_in_every_run`` follows a load's callers up to the runs' starts.
"""
from __future__ import annotations

import ast
import bisect
import builtins
import functools
import re
import sys
from collections.abc import Callable, Iterator

from . import kinds, requirements

SAVE = "!save"  # a torch save: it writes a checkpoint
LOAD = "!load"  # a torch load
CUDA = "!cuda"  # a torch call that raises without CUDA (`torch.cuda.synchronize()`)

# calls through these modules are never the project's own functions
FOREIGN_ROOTS = frozenset(sys.stdlib_module_names) | frozenset({
    "torch", "numpy", "scipy", "PIL", "cv2", "matplotlib", "pandas", "sklearn", "tqdm", "wandb", "yaml",
    "torchvision", "torchaudio", "transformers", "tensorboardX", "skimage", "imageio", "h5py"})
_BUILTINS = frozenset(dir(builtins))
# `model.train(False)` / `model.train(mode=...)` switch a module's mode: no project function of
# that name runs (`exp.train()` may be one: without an argument, the call says nothing)
_MODE_SWITCHES = frozenset({"train", "eval"})


def read(tree: ast.Module, scopes: list[tuple[ast.AST, list[ast.AST]]],
         qualify: Callable[[ast.expr], str | None], imported: dict[str, str],
         flag_scopes: set[str] | None = None) -> list[str]:
    """``ModuleFacts.run_calls``: one entry per call, "scope|callee@line|place|detail". The
    scope is the function the call is made in ("" for the module's own code), a method as
    "Class.name" (only ``x.name(...)`` calls it), a class's ``__init__`` as the class's name
    (``Class(...)`` calls it). The callee is the name called, ".name" for ``x.name(...)``,
    ``SAVE``/``LOAD`` for torch's, ``CUDA`` for a torch call that raises without CUDA, or
    "=Class" for a name or attribute bound to ``Class(...)`` (``self.early_stopping =
    EarlyStopping(...)``: a later ``self.early_stopping(...)`` runs its ``__call__``), with
    that name as the place. The
    place is where the call's statement stands, one level per enclosing block
    ("statement.block"; block -1 for the statement's own expressions, ``x`` after the blocks
    of an ``if`` or ``match``, which exclude each other), then where the call ends
    ("line:column": of two calls in one statement, the one that ends first returns first, as
    ``train(...)`` inside ``torch.load(train(...))``). The detail says which arguments a
    call passes ("2,path,device": two positional and two keywords; "*" for ``*args`` or
    ``**kwargs``), after ";" the object it is called on (``_receiver``), and after another
    ";" what the arguments' literals say (``_literals``); for a load, the
    optional parameter it runs under ("path:1" for ``if path is not None:`` in ``def
    create(self, name, path=None)``): a call that does not pass it does not load; for a
    ``CUDA`` call, the function called. ``scopes`` holds each scope's calls
    (``project_index._scope_nodes``): only statements are walked here, and each call is
    placed by its line. ``flag_scopes`` receives the scopes with an ``if`` on one of their
    parameters (``if pretrained:``): which branches run depends on what their callers pass."""
    names: dict[int, str] = {id(tree): ""}
    parameters: dict[int, set[str]] = {}  # function -> its parameters' names
    # scope -> (first line, last line, place of the enclosing block, index in it, "x" or "",
    # the optional parameter the block runs under, the statement, under a test whether a file exists)
    regions: dict[int, list[tuple[int, int, str, int, str, str, ast.stmt, bool]]] = {}

    def define(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, method: bool) -> None:
        names.setdefault(id(function), name)
        if flag_scopes is not None:
            parameters[id(function)] = {a.arg for a in (*function.args.posonlyargs, *function.args.args,
                                                         *function.args.kwonlyargs)}
        block(function.body, id(function), "", _optional(function, method), "", False)

    def block(statements: list[ast.stmt], owner: int, place: str, optional: dict[str, int], guard: str,
              missing: bool) -> None:
        spans = regions.setdefault(owner, [])
        for index, statement in enumerate(statements):
            kind = type(statement)
            if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                define(statement, statement.name, False)
                continue
            if kind is ast.ClassDef:
                for member in statement.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        define(member, statement.name if member.name == "__init__" else
                               f"{statement.name}.{member.name}", True)
                continue
            branches = _blocks(statement) if kind in _COMPOUND else None
            if not branches:  # a simple statement
                spans.append((statement.lineno, statement.end_lineno or statement.lineno, place, index, "", guard,
                              statement, missing))
                continue
            exclusive = "x" if kind is ast.If or kind is ast.Match else ""
            own_end = min((b[0].lineno - 1 for b in branches if b), default=statement.lineno)
            spans.append((statement.lineno, own_end, place, index, exclusive, guard, statement, missing))
            if kind is ast.If and owner in parameters and names[owner] not in flag_scopes \
                    and any(type(n) is ast.Name and n.id in parameters[owner] for n in ast.walk(statement.test)):
                flag_scopes.add(names[owner])
            tested = _tested_parameter(statement.test, optional) if kind is ast.If else None
            absent = kind is ast.If and _asks_existence(statement.test)
            for number, branch in enumerate(branches):
                inner = f"{tested}:{optional[tested]}" if tested is not None and number == 0 else guard
                block(branch, owner, _join(place, f"{index}.{number}{exclusive}"), optional, inner, missing or absent)

    block(tree.body, id(tree), "", {}, "", False)
    found: dict[str, None] = {}
    for scope, nodes in scopes:
        spans = sorted(regions.get(id(scope), ()), key=lambda region: region[0])
        starts = [region[0] for region in spans]
        name = names.get(id(scope))
        if not spans or name is None:
            continue
        bound = functools.cache(lambda nodes=nodes: assigned_values(nodes))
        for node in nodes:
            if type(node) is ast.Assign:
                made = _instance_of(node, imported)
                if made is not None:
                    found[f"{name}|={made[1]}@{node.lineno}|{made[0]}|"] = None
            if type(node) is not ast.Call:
                continue
            # regions do not nest (a compound statement's own lines end where its first block
            # starts): the last to start at or before the call holds it, or none does (a class body)
            at = bisect.bisect_right(starts, node.lineno) - 1
            if at < 0 or spans[at][1] < node.lineno:
                continue
            callee = _callee(node, qualify, imported, bound)
            if callee:
                _, _, place, index, exclusive, guard, statement, missing = spans[at]
                if callee == SAVE and missing:
                    continue  # `if not os.path.exists(path): torch.save(...)`: the file may come from elsewhere
                if callee == CUDA and _evaluated_if(statement, node):
                    continue  # `torch.cuda.current_device() if torch.cuda.is_available() else "cpu"`
                detail = guard if callee == LOAD else (ast.unparse(node.func) if callee == CUDA
                                                       else f"{_arguments(node)};{_receiver(node.func)};"
                                                            f"{_literals(node)}")
                where = f"{_join(place, f'{index}.-1{exclusive}')},{node.end_lineno}:{node.end_col_offset}"
                found[f"{name}|{callee}@{node.lineno}|{where}|{detail}"] = None
    return list(found)


def _optional(function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> dict[str, int]:
    """The parameters of ``function`` that default to None, by position (``self`` not counted
    for a method: its callers do not pass it)."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args][1 if method else 0:]
    defaults = dict(zip(reversed([a.arg for a in positional]), reversed(arguments.defaults)))
    defaults.update((a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None)
    order = {a.arg: at for at, a in enumerate(positional)}
    return {name: order.get(name, -1) for name, value in defaults.items()
            if isinstance(value, ast.Constant) and value.value is None}


def _tested_parameter(test: ast.expr, optional: dict[str, int]) -> str | None:
    """The optional parameter an ``if`` runs its block only when given: ``if path:``, ``if path
    is not None:``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        test = test.left
    return test.id if isinstance(test, ast.Name) and test.id in optional else None


def _arguments(call: ast.Call) -> str:
    """``read``'s detail of a call: its positional count and keywords, "*" when it unpacks."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return "*"
    return ",".join([str(len(call.args)), *(k.arg for k in call.keywords if k.arg)])


# what a literal argument says of a flag: true, false, None; "?" for anything else
TRUE, FALSE, NONE, UNKNOWN = "1", "0", "n", "?"


def literal_mark(value: ast.expr | None) -> str:
    """What a flag holding ``value`` (an argument, a parameter's default) is, by its literal."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    if not isinstance(value, ast.Constant) or value.value is ...:
        return UNKNOWN
    return NONE if value.value is None else TRUE if value.value else FALSE


def _literals(call: ast.Call) -> str:
    """``read``'s detail of what a call's arguments are as flags: each positional one's
    ``literal_mark``, then "keyword=mark" ("1,0,pretrained=1"); "" when it unpacks."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return ""
    return ",".join([*(literal_mark(a) for a in call.args), *(f"{k.arg}={literal_mark(k.value)}" for k in call.keywords)])


def takes_branch(arguments: str, flags: list[tuple[str, int, str, str]]) -> bool:
    """A call whose detail is ``arguments`` may run a branch that runs only when each flag
    (parameter, position, what it must be, its default's mark) is what it must be: true
    ("1"), false ("0": a false literal or None), None ("n"), not None ("!n"). Only a literal
    the call passes, or a default it leaves, can say it does not."""
    count, _, rest = arguments.partition(";")
    if count == "*":
        return True
    marks = rest.partition(";")[2].split(",") if rest.count(";") else []
    positional = [m for m in marks if m and "=" not in m]
    keywords = dict(m.split("=", 1) for m in marks if "=" in m)
    for name, position, must, default in flags:
        mark = positional[position] if 0 <= position < len(positional) else keywords.get(name, default)
        if not _may_be(mark, must):
            return False
    return True


def _may_be(mark: str, must: str) -> bool:
    if mark == UNKNOWN:
        return True
    if must == TRUE:
        return mark == TRUE
    if must == FALSE:
        return mark in (FALSE, NONE)
    if must == NONE:
        return mark == NONE
    return mark != NONE  # "!n": not None


def receiver_of(arguments: str) -> str:
    """The object a call whose detail is ``arguments`` is made on ("" for a plain call)."""
    return arguments.split(";")[1] if arguments.count(";") else ""


def _receiver(func: ast.expr) -> str:
    """The name of the object a method is called on (``trainable`` of ``trainable.create()``,
    ``model`` of ``self.model.fit()``): which class's method it may be (``ProjectIndex``
    reads the names bound to ``Class(...)``); "" for a plain call."""
    value = func.value if isinstance(func, ast.Attribute) else None
    return value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else ""


def passes(arguments: str, parameter: str) -> bool:
    """A call whose detail is ``arguments`` gives the optional ``parameter`` ("name:position"
    of a load's detail; "" for a load that runs under no such test)."""
    arguments = arguments.partition(";")[0]
    if not parameter or arguments == "*":
        return True
    name, _, position = parameter.rpartition(":")
    count, *keywords = arguments.split(",")
    return name in keywords or 0 <= int(position) < int(count)


def _join(place: str, level: str) -> str:
    return f"{place},{level}" if place else level


_COMPOUND = frozenset({ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
                       *([ast.TryStar] if hasattr(ast, "TryStar") else [])})


def _blocks(statement: ast.stmt) -> list[list[ast.stmt]]:
    """A compound statement's blocks, in the order they run (its own expressions run before them)."""
    if isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While)):
        return [statement.body, statement.orelse]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [statement.body]
    if isinstance(statement, ast.Match):
        return [case.body for case in statement.cases]
    return [statement.body, *(h.body for h in statement.handlers), statement.orelse, statement.finalbody]


def _callee(call: ast.Call, qualify: Callable[[ast.expr], str | None], imported: dict[str, str],
            bound: Callable[[], dict[str, list[ast.expr]]]) -> str:
    """What ``read`` records a call as: torch's save or load, else the name called when it
    may be a project function's ("" for builtins, calls through a library module, and
    ``model.train()``'s mode switch)."""
    qualified = qualify(call.func)
    if qualified in kinds.TORCH_SAVERS:
        saved = call.args[0] if call.args else None
        if isinstance(saved, ast.Name):  # `torch.save(save_files, path)`: what the name was bound to
            return SAVE if any(_holds_weights(value) for value in bound().get(saved.id, [saved])) else ""
        return SAVE if saved is not None and _holds_weights(saved) else ""
    if qualified in kinds.TORCH_LOADERS:
        return LOAD
    if _needs_cuda(call, qualified, bound):
        return CUDA
    func = call.func
    if isinstance(func, ast.Name):
        if func.id in imported:
            return "" if imported[func.id].split(".")[0] in FOREIGN_ROOTS else func.id
        return "" if func.id in _BUILTINS else func.id
    if not isinstance(func, ast.Attribute):
        return ""
    root = func.value
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and imported.get(root.id, "").split(".")[0] in FOREIGN_ROOTS:
        return ""
    if func.attr in _MODE_SWITCHES and (call.keywords and call.keywords[0].arg == "mode" or len(call.args) == 1
                                        and isinstance(call.args[0], ast.Constant)
                                        and isinstance(call.args[0].value, bool)):
        return ""
    return f".{func.attr}"


def assigned_values(nodes: list[ast.AST]) -> dict[str, list[ast.expr]]:
    """Each name the assignments among a scope's ``nodes`` bind -> the values bound to it."""
    values: dict[str, list[ast.expr]] = {}
    for node in nodes:
        if type(node) is ast.Assign:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
    return values


def _asks_existence(test: ast.expr) -> bool:
    """An ``if`` test that asks whether a file exists (``not os.path.exists(path)``): a save
    in its blocks writes only where the file was missing, so a load after it may read a file
    from elsewhere."""
    return any(isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", ""))
               in kinds.EXISTENCE_QUERIES for node in ast.walk(test))


def _evaluated_if(statement: ast.stmt, call: ast.Call) -> bool:
    """``call`` runs only when a test in ``statement`` says so: in a branch of a conditional
    expression, or after the first operand of ``and``/``or``."""
    for node in ast.walk(statement):
        branches = [node.body, node.orelse] if isinstance(node, ast.IfExp) else \
            node.values[1:] if isinstance(node, ast.BoolOp) else ()
        if any(call is inner for branch in branches for inner in ast.walk(branch)):
            return True
    return False


def _needs_cuda(call: ast.Call, qualified: str | None, bound: Callable[[], dict[str, list[ast.expr]]]) -> bool:
    """A torch call that raises on a machine without CUDA: one of ``requirements.NEEDS_CUDA``,
    ``torch.cuda.set_device`` of anything but a name the scope binds to a device string (a
    choice the code may have made: its fix is the choice's), ``torch.set_default_tensor_type``
    of a CUDA type, a ``DistributedDataParallel`` wrap given device ids (GPU modules only)."""
    if qualified in requirements.NEEDS_CUDA:
        return True
    first = call.args[0] if call.args else None
    if qualified == requirements.SET_DEVICE:
        return first is not None and not (isinstance(first, ast.Name) and any(
            isinstance(value, (ast.Constant, ast.JoinedStr, ast.IfExp)) or "device" in ast.unparse(value)
            for value in bound().get(first.id, ())))
    if qualified in requirements.DDP:
        given = next((k.value for k in call.keywords if k.arg == "device_ids"), call.args[1] if len(call.args) > 1 else None)
        return given is not None and not (isinstance(given, ast.Constant) and given.value is None)
    return qualified == "torch.set_default_tensor_type" and first is not None and "cuda" in ast.unparse(first)


def _instance_of(assign: ast.Assign, imported: dict[str, str]) -> tuple[str, str] | None:
    """(name, class) of ``name = Class(...)`` or ``self.name = Class(...)``, a class of the
    project's by its capital and its import (not ``nn.Linear``)."""
    value, targets = assign.value, assign.targets
    if type(value) is not ast.Call or len(targets) != 1:
        return None
    func, target = value.func, targets[0]
    made = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    if not made[:1].isupper() or isinstance(root, ast.Name) and imported.get(root.id, "").split(".")[0] in \
            FOREIGN_ROOTS:
        return None
    name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
    return (name, made) if name else None


# the words of what a checkpoint holds: a model, its state, its weights or a network's part
_WEIGHT_WORDS = re.compile(
    r"state|model|net|ckpt|checkpoint|weight|param|encoder|decoder|generator|discriminator|actor|critic|policy|"
    r"backbone|module", re.IGNORECASE)


def _holds_weights(saved: ast.expr) -> bool:
    """What a torch save writes is a model or its weights, as its names say
    (``model.state_dict()``, ``{"net": net.state_dict(), ...}``, ``state``), not a cache of
    data (``torch.save(new_ids, ids_file)``): a run that cached its data has written no
    checkpoint that a later load could read back."""
    for node in ast.walk(saved):
        word = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else \
            node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
        if word and _WEIGHT_WORDS.search(word):
            return True
    return False


def callers_of(scope: str) -> tuple[str, ...]:
    """The callees (as ``read`` records them) that may run ``scope``: a method only through
    an attribute (``x.name(...)``), a function or class by its name or through its module
    (``utils.train``)."""
    return (f".{scope.rpartition('.')[2]}",) if "." in scope else (scope, f".{scope}")


def entries(run_calls: list[str]) -> Iterator[tuple[str, str, int, str, str]]:
    """``read``'s entries as (scope, callee, line, place, detail)."""
    for entry in run_calls:
        scope, call, place, detail = entry.split("|")
        callee, _, line = call.rpartition("@")
        yield scope, callee, int(line), place, detail


def precedes(first: str, second: str, always: bool = False) -> bool:
    """A call at place ``first`` runs before one at ``second`` of the same scope whenever
    both run: it stands earlier in a block both are in, in a statement's test or iterable
    before its blocks, or in an earlier block of a ``try`` or a loop; in the same statement,
    it ends first (an argument's call returns before the call it is handed to). Two branches
    of one ``if`` exclude each other; a loop's later statement comes after on its first pass, which
    is the one that reads what the run found on disk. With ``always``, the first call must
    also run whenever the second does: not in a branch of an ``if`` the second is not in
    (``if torch.cuda.is_available(): torch.cuda.synchronize()``)."""
    levels, others = first.split(","), second.split(",")
    for depth, (one, other) in enumerate(zip(levels, others)):
        if one == other:
            continue
        if always and any(level.endswith("x") and not level.split(".")[1].startswith("-")
                          for level in levels[depth:]):
            return False
        if ":" in one and ":" in other:  # two calls of one statement: the first to end runs first
            return tuple(map(int, one.split(":"))) < tuple(map(int, other.split(":")))
        statement, _, branch = one.partition(".")
        statement_other, _, branch_other = other.partition(".")
        if statement != statement_other:
            return int(statement) < int(statement_other)
        number, number_other = int(branch.rstrip("x")), int(branch_other.rstrip("x"))
        if number == -1:
            return True
        return number_other != -1 and "x" not in branch and number < number_other
    return False
