"""Where a file that code loads comes from: written by the same function (a round trip in
one process), by the test that loads it, by another function of the same file after moving
its tensors to the CPU (a worker's results sent to the main process), by code of the project
that never names a device (its own CPU preprocessing), or from outside (a path argument, a
download, a config). Only files from outside can carry tensors saved on another machine's
devices."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence

import libcst as cst

from torchdev_lint import checkpoints, pyast
from torchdev_lint.analysis import kinds, tree
from torchdev_lint.analysis.guards import code_of, is_guarded
from torchdev_lint.analysis.classes import methods, self_attribute
from torchdev_lint.analysis.imports import dotted_name
from torchdev_lint.analysis.project_index import (
    ProjectIndex, file_name_shape, is_test_path, path_template, read_facts,
)

# Methods that write checkpoints or models the test then reads back: `scripted.save(f)`,
# `trainer.save_checkpoint(p)`, `trainer.fit(model)` (its checkpoint callback).
_WRITERS = frozenset({"save", "save_checkpoint", "fit", "save_pretrained", "save_state"})
# Names of temporary places a test writes to.
_TEMPORARY = re.compile(r"tmp|temp", re.IGNORECASE)
# What a file name, key or variable says when the pickle only holds metadata.
_METADATA = re.compile(r"meta|hparams?\b|hyper_?param|vocab", re.IGNORECASE)
_NOT_ROOTS = frozenset({"os", "str", "Path", "pathlib", "torch", "open", "io"})
_PATH_QUERIES = ("os.", "glob.", "shutil.", "pathlib.")
_BUILTINS = frozenset({"str", "print", "len", "sorted", "isinstance", "open", "Path", "repr"})
# Methods of text a path or URL is built with (`self.url.rpartition("/")`); `split` is also
# a tensor's.
_TEXT_METHODS = frozenset(n for n in dir(str) if not n.startswith("_")) - {"split"}
# Bounds that keep a class of thousands of saves linear: the saves read per class, the
# nodes read to learn where one saved value comes from.
_MAX_SAVES = 64
_MAX_VISITS = 20_000
# Calls whose result holds their arguments as they are.
_CARRIERS = frozenset({"dict", "list", "tuple", "set", "frozenset", "zip", "sorted", "reversed",
                       "copy.copy", "copy.deepcopy", "collections.OrderedDict"})


def is_test_function(ctx, function: cst.FunctionDef | None, ancestors: Sequence[cst.CSTNode] = ()) -> bool:
    """A pytest/unittest test: any function of test code (a ``test_*.py`` file or one under a
    ``tests/`` folder: tests, their helpers and fixtures), or a ``test*`` method of a
    ``unittest.TestCase`` class (``ancestors``: the function's). Elsewhere a ``def test(...)``
    is what a training script calls to evaluate its model, not a test: nothing collects it."""
    if _test_code(ctx):
        return True
    if function is None or not function.name.value.startswith("test"):
        return False
    klass = next((a for a in reversed(ancestors) if isinstance(a, cst.ClassDef)), None)
    return klass is not None and any("TestCase" in code_of(base.value) for base in klass.bases)


def _test_code(ctx) -> bool:
    return is_test_path(ctx.path)


# Words of a path expression that name no particular file.
_PATH_NOISE = frozenset({"os", "path", "join", "args", "opt", "opts", "cfg", "config", "self", "str",
                         "format", "Path", "f", "pt", "pth", "ckpt", "dir", "root", "output_dir", "exists"})


def _path_words(expr: cst.CSTNode) -> tuple[set[str], set[str]]:
    """The variables (names, attributes) and the literal text a path expression is built from."""
    names: set[str] = set()
    texts: set[str] = set()

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Name):
            names.add(node.value)
        elif isinstance(node, cst.Attribute):
            names.add(node.attr.value)
        elif isinstance(node, cst.SimpleString):
            texts.add(str(node.evaluated_value))
        elif isinstance(node, cst.FormattedStringText):
            texts.add(node.value)
        return True

    tree.walk(expr, enter)
    return names - _PATH_NOISE, texts


def same_file_named(save: cst.Call, load: cst.Call, opened: dict[int, cst.BaseExpression] | None = None) -> bool:
    """A save and a load of the same path: built from the same variable (``ckpt_path``), or
    of the same literal (``"model.pt"``) when neither names a directory of its own. A resume
    from ``args.resume_dir/"optimizer.pt"`` of what a run saved to ``output_dir/"optimizer.pt"``
    reads another run's file, maybe another machine's. ``opened``: the path a save's or a
    load's file handle was opened on (``with open(path, "wb") as f``), by the call's id."""
    opened = opened or {}
    saved = opened.get(id(save)) or (save.args[1].value if len(save.args) > 1 else None)
    loaded = opened.get(id(load)) or loaded_file(load)
    if saved is None or loaded is None:
        return False
    family = _family(saved)
    if family is not None and family == _family(loaded):
        return True  # `'{}.pkl'.format(epoch)` then `'{}.pkl'.format(best_epoch)`
    (saved_names, saved_texts), (loaded_names, loaded_texts) = _path_words(saved), _path_words(loaded)
    if saved_names or loaded_names:
        return bool(saved_names & loaded_names)
    return bool(saved_texts & loaded_texts)


_JOINS = frozenset({"os.path.join", "osp.join", "path.join"})


def _family(expr: cst.BaseExpression) -> tuple[tuple[str, ...], str] | None:
    """The family of files a path expression names when its file name is a template:
    literal text with parts only known when it runs (``'{}.pkl'.format(epoch)``,
    ``f"ckpt_{e}.pt"``, ``'%d.pkl' % epoch``), under a directory spelled the same
    (``os.path.join(d, ...)``, ``d / ...``) or none: (the directory's code, the template).
    Two paths of one family name the same files whatever the arguments; a directory that
    is itself filled in when it runs (``f"{out}/ckpt_{e}.pt"``) is not compared: None."""
    directory: tuple[str, ...] = ()
    node = expr
    if isinstance(node, cst.Call) and code_of(node.func) in _JOINS and len(node.args) >= 2 \
            and all(a.keyword is None and not a.star for a in node.args):
        directory, node = tuple(code_of(a.value) for a in node.args[:-1]), node.args[-1].value
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        directory, node = (code_of(node.left),), node.right
    template = path_template(_as_ast(node), lambda name: None)
    folder, _, name = template.rpartition("/")
    if "{}" in folder or "{}" not in name or not re.search(r"[A-Za-z0-9]", name.replace("{}", "")):
        return None
    return directory, template


def opened_path(enclosing, handle: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The path ``handle`` was opened on by a ``with open(path, ...) as handle`` among
    ``enclosing`` (the nodes around the use, innermost first)."""
    if not isinstance(handle, cst.Name):
        return None
    for node in enclosing:
        for item in node.items if isinstance(node, cst.With) else ():
            opener = item.item
            if (item.asname is not None and isinstance(item.asname.name, cst.Name)
                    and item.asname.name.value == handle.value and isinstance(opener, cst.Call)
                    and dotted_name(opener.func) in ("open", "io.open") and opener.args):
                return opener.args[0].value
    return None


def loaded_file(call: cst.Call) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "f":
            return arg.value
    return None


def saved_file(call: cst.Call) -> cst.BaseExpression | None:
    """The file a ``torch.save(obj, f)`` writes: ``f=``, or its second positional argument."""
    positional = [a.value for a in call.args if a.keyword is None]
    return next((a.value for a in call.args if a.keyword and a.keyword.value == "f"),
                positional[1] if len(positional) > 1 else None)


def _prepared_path(written: cst.BaseExpression) -> str | None:
    """The path a save hands through a helper that prepares it (``make_path(path)``, which
    creates the directory and returns the path; ``str(path)``): its one argument, as code."""
    if isinstance(written, cst.Call) and len(written.args) == 1 and written.args[0].keyword is None \
            and isinstance(written.args[0].value, (cst.Name, cst.Attribute)):
        return code_of(written.args[0].value)
    return None


def _may_write(qualified: str) -> bool:
    """A call that may write the file it is handed: not a path query (``os.path.exists``)
    nor a builtin (``print``, ``len``)."""
    return not (qualified.startswith(_PATH_QUERIES) or qualified in _BUILTINS)


def written_here(ctx, call: cst.Call) -> bool:
    """The file ``call`` loads was written earlier by the same function, or by the
    module's top-level code for a load there (``torch.save(x, p)`` then ``torch.load(p)``:
    a script that reloads the best model it saved while training), or by the test that
    loads it (it saves, trains or writes to a temporary path first): it comes back on the
    machine and devices it was saved from."""
    function = ctx.function
    target = loaded_file(call)
    scope = function if function is not None else (ctx.ancestors[0] if ctx.ancestors else None)
    if scope is None or target is None:
        return False
    roots = _roots(target) | _roots_of_locals(ctx, scope, target)
    calls = _scope_calls(ctx, scope)
    position = calls.order.get(id(call), len(calls.order))
    for name in {code_of(target), *roots}:
        for index, save in calls.saves.get(name, ()):
            # the same file (`p`, `f.name`), or the buffer the loaded one is made from
            if index < position and not _only_when_missing(ctx, scope, save):
                return True  # a round trip in one process
    if function is None or not is_test_function(ctx, function, ctx.ancestors):
        return False
    if any(_TEMPORARY.search(root) for root in roots):
        return True
    if _test_code(ctx) and not function.name.value.startswith("test") and _parameter_of(
        function, target
    ):
        return True  # a test's helper checking the file the test gives it
    if any(_writing_fixture(ctx, name) for name in roots & _parameters(function)):
        return True  # a fixture of the same file wrote it, in this process, just before
    return calls.first_writer < position or calls.handed_first(ctx).get(code_of(target), position) < position


class _ScopeCalls:
    """The calls of a function (or of a module's top-level code, not its functions and
    classes) in source order, read once per scope: a function with thousands of loads
    asks about the calls before each."""

    def __init__(self, ctx, scope: cst.FunctionDef | cst.Module) -> None:
        self.calls: list[cst.Call] = []
        top_level = isinstance(scope, cst.Module)

        def enter(node: cst.CSTNode) -> bool:
            if top_level and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(node, cst.Call):
                self.calls.append(node)
            return True

        tree.walk(scope if top_level else scope.body, enter)
        self.order = {id(c): i for i, c in enumerate(self.calls)}
        # the file each save writes (its last positional argument) -> (position, save)
        self.saves: dict[str, list[tuple[int, cst.Call]]] = {}
        # the first test writer: a torch save, `.save(...)`, `trainer.fit(model)`...
        self.first_writer = len(self.calls)
        for index, c in enumerate(self.calls):
            qualified = ctx.qualified_name(c.func)
            method = c.func.attr.value if isinstance(c.func, cst.Attribute) else None
            if qualified in kinds.TORCH_SAVERS or method in ("save", "save_checkpoint"):
                written = [a.value for a in c.args if a.keyword is None][-1:]
                if written:
                    self.saves.setdefault(code_of(written[0]), []).append((index, c))
                    prepared = _prepared_path(written[0])
                    if prepared is not None:
                        self.saves.setdefault(prepared, []).append((index, c))
            if _writes_checkpoint(ctx, c):
                self.first_writer = min(self.first_writer, index)
        self._handed: dict[str, int] | None = None

    def handed_first(self, ctx) -> dict[str, int]:
        """Each argument (as code) -> the first call that may write the file it names
        (``convert_checkpoint(src, out)``; not a path query such as ``os.path.exists``)."""
        if self._handed is None:
            self._handed = {}
            for index, c in enumerate(self.calls):
                if not _may_write(ctx.qualified_name(c.func) or ""):
                    continue
                for arg in c.args:
                    self._handed.setdefault(code_of(arg.value), index)
        return self._handed


# Functions that fetch a file from elsewhere into the path they are handed.
_DOWNLOADS = re.compile(r"(?:^|\.|_)(?:urlretrieve|download\w*|wget)$", re.IGNORECASE)


def fetched_here(ctx, ancestors, call: cst.Call) -> cst.Call | None:
    """The file ``call`` loads was fetched earlier in the same function (or top-level code)
    by code that is no torch save: a download (``urlretrieve(url, path)``,
    ``download_url_to_file(url, path)``, ``path = hf_hub_download(...)``) or
    ``open(path, "wb")`` written from a response.
    Its tensors are on whatever device the publisher saved them from, which the code does
    not show. The fetching call, or None."""
    target = loaded_file(call)
    scope = _scope_of(ancestors)
    if scope is None or target is None:
        return None
    names = {code_of(target)} | _roots(target)
    if isinstance(scope, cst.FunctionDef):
        names |= _roots_of_locals(ctx, scope, target)
    for name in _roots(target):  # `path = hf_hub_download(repo, "model.pth")`
        for site in ctx.bindings(scope).get(name, ()):
            value = site.value if isinstance(site, (cst.Assign, cst.AnnAssign)) else None
            if isinstance(value, cst.Call) and _DOWNLOADS.search(ctx.qualified_name(value.func) or code_of(value.func)):
                return value
    calls = _scope_calls(ctx, scope)
    for c in calls.calls[:calls.order.get(id(call), len(calls.calls))]:
        qualified = ctx.qualified_name(c.func) or code_of(c.func)
        if qualified == "open":
            mode = c.args[1].value if len(c.args) > 1 and c.args[1].keyword is None else next(
                (a.value for a in c.args if a.keyword is not None and a.keyword.value == "mode"), None)
            if not (isinstance(mode, cst.SimpleString) and "w" in mode.evaluated_value):
                continue
            handed = c.args[:1]
        elif _DOWNLOADS.search(qualified):
            handed = c.args
        else:
            continue
        if any(code_of(a.value) in names or _roots(a.value) & names - _NOT_ROOTS for a in handed) \
                and not calls.saves.get(code_of(handed[0].value) if handed else ""):
            return c
    return None


# Where published weights of PyTorch's model zoo are: torch.hub's cache, a torchvision URL table,
# or a file named as torch.hub names what it downloads, with its hash's first hex digits
# (`inception_v3_google-0cc3c7bd.pth`; a date, `-20240101.pth`, has no letter).
_MODEL_ZOO = re.compile(r"torch[/\\]hub|\.cache[/\\]torch|hub\.get_dir|model_urls|model_zoo|download\.pytorch\.org"
                        r"|-(?=[0-9]*[a-f])[0-9a-f]{8,}\.pth?\b")


def from_model_zoo(ctx, ancestors, call: cst.Call) -> cst.CSTNode | None:
    """The file ``call`` loads is published weights from PyTorch's model zoo: its path (or
    every value a name in it is given in the same function) names torch.hub's cache, a
    ``model_urls`` table or a file torch.hub named. download.pytorch.org publishes them as
    CPU tensors. The node that says so, or None."""
    target = loaded_file(call)
    scope = _scope_of(ancestors)
    if target is None or scope is None:
        return None
    if _MODEL_ZOO.search(code_of(target)):
        return target
    for name in _roots(target):
        sites = ctx.bindings(scope).get(name, ())
        values = [s.value for s in sites if isinstance(s, (cst.Assign, cst.AnnAssign)) and s.value is not None]
        if sites and len(values) == len(sites) and all(_MODEL_ZOO.search(code_of(v)) for v in values):
            return values[0]
    return None


def _writes_checkpoint(ctx, call: cst.Call) -> bool:
    """A torch save, or a method that writes a checkpoint or model (``_WRITERS``)."""
    return ctx.qualified_name(call.func) in kinds.TORCH_SAVERS or (
        isinstance(call.func, cst.Attribute) and call.func.attr.value in _WRITERS
    )


def _scope_calls(ctx, scope: cst.FunctionDef | cst.Module) -> _ScopeCalls:
    return ctx.once(("provenance: calls of scope", id(scope)), lambda: _ScopeCalls(ctx, scope))




def _only_when_missing(ctx, scope: cst.CSTNode, save: cst.Call) -> bool:
    """``if not os.path.exists(path): torch.save(model, path)``: the program writes the
    file only when there is none, so what it loads may have been written elsewhere.
    Answered once per save, whatever the number of loads of its file."""
    return ctx.once(("provenance: saves only when missing", id(save)),
                    lambda: _saves_only_when_missing(ctx, scope, save))


def _saves_only_when_missing(ctx, scope: cst.CSTNode, save: cst.Call) -> bool:
    found = False

    def asks_existence(node: cst.CSTNode) -> bool:
        nonlocal found
        if isinstance(node, cst.Call) and (
            isinstance(node.func, cst.Attribute) and node.func.attr.value in kinds.EXISTENCE_QUERIES
            or (ctx.qualified_name(node.func) or "").endswith((".exists", ".isfile", ".is_file"))
        ):
            found = True
        return not found

    def contains(node: cst.CSTNode) -> bool:
        return tree.contains(node, save)

    def enter(node: cst.CSTNode) -> bool:
        if found:
            return False
        if isinstance(node, cst.If) and contains(node):
            tree.walk(node.test, asks_existence)
        return True

    tree.walk(scope, enter)
    return found


def _parameters(function: cst.FunctionDef) -> set[str]:
    return {p.name.value for p in (*function.params.posonly_params, *function.params.params,
                                   *function.params.kwonly_params)}


def _parameter_of(function: cst.FunctionDef, target: cst.BaseExpression) -> bool:
    """``target`` is a parameter of ``function`` (``str(path)`` included)."""
    return bool(_roots(target)) and _roots(target) <= _parameters(function)


def _writing_fixture(ctx, name: str) -> bool:
    """A pytest fixture of this file named ``name`` (``@pytest.fixture def ckpt(tmp_path):``)
    that saves with torch or writes a checkpoint: a test taking it as a parameter gets what
    it wrote in the same process, on the same machine. Fixtures of a ``conftest.py`` are not
    seen. The file's fixtures are read once, whatever the number of loads."""
    return name in ctx.once(("provenance: writing fixtures",), lambda: _writing_fixtures(ctx))


def _writing_fixtures(ctx) -> set[str]:
    module = ctx.ancestors[0] if ctx.ancestors else None
    names: set[str] = set()

    def is_fixture(decorator: cst.Decorator) -> bool:
        target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        return (ctx.qualified_name(target) or code_of(target)).rsplit(".", 1)[-1] == "fixture"

    def writes(function: cst.FunctionDef) -> bool:
        found = False

        def enter(node: cst.CSTNode) -> bool:
            nonlocal found
            found = found or isinstance(node, cst.Call) and _writes_checkpoint(ctx, node)
            return not found

        tree.walk(function.body, enter)
        return found

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.FunctionDef):
            if any(is_fixture(d) for d in node.decorators) and writes(node):
                names.add(node.name.value)
            return False
        return isinstance(node, (cst.Module, cst.ClassDef, cst.IndentedBlock, cst.SimpleStatementSuite))

    if module is not None:
        tree.walk(module, enter)
    return names


def retried_with_map_location(ctx, ancestors) -> bool:
    """The load is in the body of a ``try`` whose handler loads again with ``map_location``
    (``except RuntimeError: torch.load(f, map_location=...)``): the code already falls back
    where the saved device is missing."""
    for index in range(len(ancestors) - 1, 0, -1):
        node = ancestors[index]
        if isinstance(node, cst.Try) and index + 1 < len(ancestors) and ancestors[index + 1] is node.body:
            for handler in node.handlers:
                for call in tree.collect(handler.body, cst.Call):
                    if ctx.qualified_name(call.func) in kinds.TORCH_LOADERS and any(
                            a.keyword is not None and a.keyword.value == "map_location" for a in call.args):
                        return True
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            return False
    return False


def says_metadata(ancestors, call: cst.Call) -> bool:
    """``metadata = torch.load(d / "meta.pt")``, ``torch.load(p)["hyper_parameters"]``,
    ``vocab = torch.load(vocab_path)``: the name, key or file says the pickle holds metadata
    (hyperparameters, vocabularies), not tensors."""
    target = loaded_file(call)
    strings = []
    if target is not None:
        tree.walk(target, lambda n: strings.append(n.value) if isinstance(n, cst.SimpleString) else True)
    parent = ancestors[-2] if len(ancestors) > 1 else None
    if isinstance(parent, cst.Subscript) and parent.value is call:
        strings.append(code_of(parent.slice[0]))
    for node in reversed(ancestors[:-1]):
        if isinstance(node, cst.Assign):
            strings.extend(code_of(t.target) for t in node.targets)
            break
        if isinstance(node, cst.BaseStatement):
            break
    return any(_METADATA.search(s) for s in strings)


def _roots(expr: cst.BaseExpression) -> set[str]:
    """The variables an expression is built from (``tmp_path`` in ``str(tmp_path / "x")``)."""
    names: set[str] = set()

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Name) and node.value not in _NOT_ROOTS:
            names.add(node.value)
        elif isinstance(node, cst.Attribute):
            tree.walk(node.value, enter)  # `f.name`: `f`, not `name`
            return False
        return True

    tree.walk(expr, enter)
    return names


def _roots_of_locals(ctx, function: cst.FunctionDef, expr: cst.BaseExpression) -> set[str]:
    """Roots reached through the function's own assignments (``path = tmp_path / "a"``)."""
    found: set[str] = set()
    todo = list(_roots(expr))
    bound = ctx.bindings(function)
    while todo:
        name = todo.pop()
        for site in bound.get(name, ()):
            value = site.value if isinstance(site, (cst.Assign, cst.AnnAssign)) else None
            if isinstance(site, cst.Name):  # `with fs.open(path) as f`: what `f` reads
                value = _with_item(ctx, function, site)
            for root in _roots(value) - found if value is not None else ():
                found.add(root)
                todo.append(root)
    return found


def _with_item(ctx, scope: cst.FunctionDef | cst.Module, name: cst.Name) -> cst.BaseExpression | None:
    """What ``with <item> as name`` binds ``name`` to, in ``scope`` (read once per scope)."""
    return ctx.once(("provenance: with items", id(scope)), lambda: _with_items(scope)).get(id(name))


def _with_items(scope: cst.FunctionDef | cst.Module) -> dict[int, cst.BaseExpression]:
    items: dict[int, cst.BaseExpression] = {}

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.WithItem) and node.asname is not None:
            items.setdefault(id(node.asname.name), node.item)
        return True

    tree.walk(scope, enter)
    return items


def _calls_before(scope: cst.FunctionDef | cst.Module, call: cst.Call) -> list[cst.Call]:
    """The calls of a function (or of a module's top-level code, not its functions and
    classes) that come before ``call`` in the source."""
    calls: list[cst.Call] = []
    reached = False
    top_level = isinstance(scope, cst.Module)

    def enter(node: cst.CSTNode) -> bool:
        nonlocal reached
        if reached or node is call:
            reached = True
            return False
        if top_level and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, cst.Call):
            calls.append(node)
        return True

    tree.walk(scope if top_level else scope.body, enter)
    return calls


def saved_by_cpu_code(ctx, call: cst.Call) -> bool:
    """``torch.load(f"{manifest}.f0_stat.pt")`` where the project writes every file of that
    name with ``torch.save`` from code that never names a device (the project index's
    ``saved_on_cpu``: its own CPU preprocessing): the file holds CPU tensors only."""
    target = loaded_file(call)
    if ctx.index is None or target is None:
        return False
    scope = ctx.function if ctx.function is not None else (ctx.ancestors[0] if ctx.ancestors else None)
    shape = file_name_shape(_as_ast(target), lambda name: _single_value(ctx, scope, name))
    return shape is not None and ctx.index.saved_on_cpu(shape)


def written_by_own_class(ctx, call: cst.Call) -> bool:
    """A dataset in the style of torchvision's old MNIST: ``download()`` builds tensors from
    what it fetched and ``torch.save``s them (directly or into ``with open(p, "wb") as f``)
    at the very path ``__init__`` then loads. In a file that never names a device, from data
    the method builds itself (not from its parameters, and reading ``self`` only for the
    arguments of calls outside torch: paths, URLs), the file holds CPU tensors only.
    Not for an ``nn.Module``, whose state may have been moved by its owner."""
    method = ctx.method
    target = loaded_file(call)
    if method is None or target is None or method[0].is_module or ctx.mentions_devices:
        return False
    wanted = ast.dump(_as_ast(target))
    return wanted != ast.dump(_as_ast(cst.Name("_"))) and wanted in _files_built_by(ctx, method[0].node)


def _files_built_by(ctx, klass: cst.ClassDef) -> frozenset[str]:
    """The paths (stdlib tree dumps) that methods of ``klass`` ``torch.save`` data they
    built themselves to: found once per class, whatever the number of loads."""
    return ctx.once(("provenance: files built by class", id(klass)), lambda: _saved_data_paths(ctx, klass))


def _saved_data_paths(ctx, klass: cst.ClassDef) -> frozenset[str]:
    paths = set()
    for method, self_name in methods(klass):
        saves = _torch_saves(ctx, method)[:_MAX_SAVES]
        facts = _MethodFacts(method) if saves else None
        for save in saves:
            args = [a.value for a in save.args if a.keyword is None]
            destination = saved_file(save)
            if destination is None or not args:
                continue
            destination = opened_path(_enclosing(facts.parents, save), destination) or destination
            if _built_in(ctx, method, facts, self_name, args[0]):
                paths.add(ast.dump(_as_ast(destination)))
    return frozenset(paths)


def _torch_saves(ctx, function: cst.FunctionDef) -> list[cst.Call]:
    found: list[cst.Call] = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not function:
            return False
        if isinstance(node, cst.Call) and ctx.qualified_name(node.func) in kinds.TORCH_SAVERS:
            found.append(node)
        return True

    tree.walk(function, enter)
    return found


class _MethodFacts:
    """What one walk of a method tells: the enclosing node of each node, and the names its
    imports bind."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.parents: dict[int, cst.CSTNode] = {}
        self.imported: set[int] = set()

        def enter(node: cst.CSTNode) -> bool:
            for child in tree.children(node):
                self.parents[id(child)] = node
            if isinstance(node, cst.ImportAlias):
                self.imported.add(id(node.asname.name if node.asname else node.name))
            return True

        tree.walk(function, enter)


def _enclosing(parents: dict[int, cst.CSTNode], node: cst.CSTNode):
    """The nodes around ``node``, innermost first (``parents``: each node's enclosing one)."""
    node = parents.get(id(node))
    while node is not None:
        yield node
        node = parents.get(id(node))


def _built_in(ctx, function: cst.FunctionDef, facts: _MethodFacts, self_name: str,
              value: cst.BaseExpression) -> bool:
    """``value`` is made inside ``function``: following its local assignments, it reaches
    no parameter, no loop variable, and ``self`` only inside the arguments of calls outside
    torch (``os.path.join(self.root, ...)``, ``urlopen(self.url)``), never as data itself
    (``self.model.state_dict()``, ``{"w": self.w}``, ``torch.stack(self.items)``). Gives
    up (False) past ``_MAX_VISITS`` nodes."""
    bound = ctx.bindings(function)
    parameters = _parameters(function)
    followed: set[str] = set()
    todo: list[tuple[cst.CSTNode, bool]] = [(value, False)]
    for _ in range(_MAX_VISITS):
        if not todo:
            return True
        node, in_argument = todo.pop()
        if isinstance(node, cst.Name):
            if node.value == self_name or node.value in parameters:
                return False
            if node.value in followed or node.value not in bound:
                continue  # a global, a builtin, an import
            followed.add(node.value)
            for site in bound[node.value]:
                if isinstance(site, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and site.value is not None:
                    todo.append((site.value, False))
                elif (item := _with_item(ctx, function, site)) is not None:
                    todo.append((item, False))
                elif id(site) not in facts.imported:
                    return False  # a parameter, a loop variable, a nested def
            continue
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == self_name:
            if not in_argument:
                return False
            continue
        if isinstance(node, cst.Attribute):  # `labels.long`: only what it is read from
            todo.append((node.value, in_argument))
            continue
        if isinstance(node, cst.Call):
            qualified = ctx.qualified_name(node.func) or code_of(node.func)
            # the result of `os.path.join(self.root, ...)` is not `self.root`; of `dict(w=self.w)` it is
            made_anew = not (qualified.split(".")[0] == "torch" or qualified in _CARRIERS)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in _TEXT_METHODS:
                todo.append((node.func.value, True))  # `self.url.rpartition("/")`
            else:
                todo.append((node.func, False))
            todo.extend((a.value, made_anew or in_argument and qualified not in _CARRIERS) for a in node.args)
            continue
        todo.extend((child, in_argument) for child in tree.children(node))
    return False


def _as_ast(expr: cst.BaseExpression) -> ast.expr:
    """The stdlib tree of an expression, for the analyses the project index shares."""
    tree = pyast.parse(f"({code_of(expr)})", mode="eval")
    return ast.Name("_", ast.Load()) if tree is None else tree.body  # unknown, or the expression


# An absolute path (`/dshome/lab/runs/x.pth`, `D:\\models\\x.pt`), not a temporary or shared mount
# every machine has.
_MACHINE_PATH = re.compile(r"^(?:/(?!tmp/|dev/|proc/)[^/{}]+/|[A-Za-z]:[\\/])")


def machine_path(ctx, ancestors, call: cst.Call) -> str | None:
    """The load reads a file at an absolute path the code spells (``torch.load("/dshome/
    lab/runs/model.pth")``, through the scope's one assignment too): a place on one machine's
    disk, where the code runs with the files that machine wrote. The path, or None."""
    target = loaded_file(call)
    scope = _scope_of(ancestors)
    if target is None:
        return None
    path = path_template(_as_ast(target), lambda name: _single_value(ctx, scope, name))
    return path if _MACHINE_PATH.match(path) else None


def _single_value(ctx, scope: cst.CSTNode | None, name: str) -> ast.expr | None:
    """The value of ``name = <value>`` when that is the name's only binding in the scope, or
    when every binding assigns it the same literal (a notebook whose cells each set
    ``PATH = "weights/first.pth"`` again)."""
    sites = ctx.bindings(scope).get(name, ()) if scope is not None else ()
    if not sites or not all(isinstance(site, cst.Assign) and len(site.targets) == 1
                            and isinstance(site.targets[0].target, cst.Name) for site in sites):
        return None
    values = [_as_ast(site.value) for site in sites]
    if len(values) > 1 and not (isinstance(values[0], ast.Constant)
                                and all(ast.dump(v) == ast.dump(values[0]) for v in values)):
        return None
    return values[0]


def in_accelerator_test(ctx, ancestors) -> bool:
    """A load in test code that only runs where an accelerator is (``@require_torch_accelerator``
    on its class, ``RunIf(min_cuda_gpus=1)``, a guard): one process on a machine of the
    project's own CI, so a fixture saved on the CPU or on a GPU loads there alike."""
    return is_test_function(ctx, ctx.function, ancestors) and is_guarded(ancestors, ctx.qualified_name)


def sent_from_cpu(ctx, call: cst.Call) -> bool:
    """``torch.load(io.BytesIO(extra["metrics_bytes"]))`` where another function of the file
    returns ``{"metrics_bytes": buffer.getvalue()}`` after ``torch.save(metrics, buffer)`` of
    tensors moved to the CPU: the program's own message, with no device in it."""
    target = loaded_file(call)
    function = ctx.function
    if target is None or function is None or not ctx.ancestors:
        return False
    if isinstance(target, cst.Call) and ctx.qualified_name(target.func) == "io.BytesIO" and target.args:
        target = target.args[0].value
    if isinstance(target, cst.Name):  # `data = extra["k"]` earlier in the function
        sites = ctx.bindings(function).get(target.value, ())
        values = [s.value for s in sites if isinstance(s, cst.Assign)]
        if len(sites) != 1 or len(values) != 1:
            return False
        target = values[0]
    key = _string_key(target)
    if key is None:
        return False
    for writer, value in _keyed_values(ctx.ancestors[0], key):
        buffer = value.func.value if (
            isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "getvalue"
        ) else value
        for save in _calls_before(writer, value):
            args = [a.value for a in save.args if a.keyword is None]
            if (
                ctx.qualified_name(save.func) in kinds.TORCH_SAVERS and len(args) == 2
                and code_of(args[1]) == code_of(buffer) and _moved_to_cpu(ctx, writer, args[0])
            ):
                return True
    return False


def _string_key(expr: cst.BaseExpression) -> str | None:
    """``"k"`` of ``extra["k"]`` or ``extra.get("k")``."""
    index = None
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        index = expr.slice[0].slice.value
    elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "get" \
            and expr.args:
        index = expr.args[0].value
    if isinstance(index, cst.SimpleString) and isinstance(index.evaluated_value, str):
        return index.evaluated_value
    return None


def _keyed_values(module: cst.CSTNode, key: str) -> list[tuple[cst.FunctionDef, cst.BaseExpression]]:
    """Each ``{key: value}`` in a function of the module, with that function."""
    found: list[tuple[cst.FunctionDef, cst.BaseExpression]] = []
    stack: list[tuple[cst.CSTNode, cst.FunctionDef | None]] = [(module, None)]
    while stack:
        node, function = stack.pop()
        if isinstance(node, cst.FunctionDef):
            function = node
        elif (
            isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString)
            and node.key.evaluated_value == key and function is not None
        ):
            found.append((function, node.value))
        stack.extend((child, function) for child in tree.children(node))
    return found


def _moved_to_cpu(ctx, function: cst.FunctionDef, expr: cst.BaseExpression) -> bool:
    """``expr`` (or what its names were assigned in ``function``) is made by a move to the
    CPU: ``.cpu()``, ``.to("cpu")``, also inside ``apply_to_collection(m, Tensor, lambda t:
    t.cpu())``."""
    values = [expr]
    for name in _roots(expr):
        values += [s.value for s in ctx.bindings(function).get(name, ()) if isinstance(s, cst.Assign)]
    moved = []

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            first = node.args[0].value if node.args else None
            if method == "cpu" or (
                method == "to" and isinstance(first, cst.SimpleString) and first.evaluated_value == "cpu"
            ):
                moved.append(node)
        return not moved

    for value in values:
        tree.walk(value, enter)
    return bool(moved)


def only_arrays(ctx, call: cst.Call) -> bool:
    """What ``call`` loads only ever goes into ``torch.from_numpy``, whole or sliced
    (``data = torch.load(p)`` then ``torch.from_numpy(data[3:, :-1])``): ``from_numpy``
    rejects anything but a numeric NumPy array (a tensor, a list, an array of objects), and a
    slice of a container is a container, so where the program works the pickle is one array,
    which holds no tensor and no device to map. A key (``torch.from_numpy(q[n])``) is not
    enough: the other entries of the container may be tensors, and ``torch.load`` maps them
    all."""
    ancestors = ctx.ancestors
    if len(ancestors) < 3:
        return False
    parent, outer = ancestors[-2], ancestors[-3]
    if isinstance(parent, cst.Arg):
        return _into_from_numpy(ctx, outer, parent)
    if not (
        isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1
        and isinstance(parent.targets[0].target, cst.Name)
    ):
        return False
    name = parent.targets[0].target
    scope = ctx.function if ctx.function is not None else ancestors[0]
    parents: dict[int, cst.CSTNode] = {}
    uses: list[cst.Name] = []  # every other occurrence of the name in the scope

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Name) and node.value == name.value and node is not name:
            owner = parents.get(id(node))
            if not (isinstance(owner, cst.Attribute) and owner.attr is node):
                uses.append(node)
        for child in tree.children(node):
            parents[id(child)] = node
        return True

    tree.walk(scope, enter)
    return bool(uses) and all(_feeds_from_numpy(ctx, use, parents) for use in uses)


def _feeds_from_numpy(ctx, use: cst.Name, parents: dict[int, cst.CSTNode]) -> bool:
    """``use`` is the argument of ``torch.from_numpy``, or sliced into it (every index a
    slice)."""
    node: cst.CSTNode = use
    parent = parents.get(id(node))
    if isinstance(parent, cst.Subscript) and parent.value is node:
        if not all(isinstance(e.slice, cst.Slice) for e in parent.slice):
            return False
        node, parent = parent, parents.get(id(parent))
    call = parents.get(id(parent)) if isinstance(parent, cst.Arg) and parent.value is node else None
    return call is not None and _into_from_numpy(ctx, call, parent)


def _into_from_numpy(ctx, call: cst.CSTNode, arg: cst.Arg) -> bool:
    return (
        isinstance(call, cst.Call) and len(call.args) == 1 and call.args[0] is arg
        and arg.keyword is None and not arg.star
        and ctx.qualified_name(call.func) == "torch.from_numpy"
    )


def _scope_of(ancestors) -> cst.FunctionDef | cst.Module | None:
    """The innermost function around a node, or the module for top-level code."""
    function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    return function if function is not None else (ancestors[0] if ancestors else None)


def _load_shape(ctx, ancestors, call: cst.Call) -> str | None:
    """The name of the file a load reads (``file_name_shape``), with the scope's single
    assignments followed (``best = path + "/checkpoint.pth"``)."""
    target = loaded_file(call)
    if target is None:
        return None
    scope = _scope_of(ancestors)
    return file_name_shape(_as_ast(target), lambda name: _single_value(ctx, scope, name))


def _callee_saves(ctx, module: cst.Module, scope: cst.CSTNode, call: cst.Call, shape: str | None,
                  tail: str | None = None) -> bool:
    """``call`` reaches a ``torch.save`` of a file named ``shape`` (any file when the name is
    unknown): a function or class of the same file that saves one, or a project one whose
    module does (the index's ``saves``; without a name, one whose save's path ends with the
    attribute or key ``tail`` the load's path ends with, made by the callee or a function of
    its module it calls); a local or ``self`` attribute bound to an instance of such a class
    (``early_stopping = EarlyStopping(...)`` then ``early_stopping(loss, model, path)``; an
    instance built with the path, of a class that saves at all), or a method of such an
    instance (``record.track(net, accuracy)``) that saves."""
    func = call.func
    built = _construction(ctx, module, scope, func)
    if built is not None:
        func = built.func  # an instance (`es`, `self.early_stopping`): what its class does when called
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        method = _instance_method(ctx, module, scope, func)
        return method is not None and _calls_torch_save(ctx, method)
    if isinstance(func, cst.Name):
        for statement in module.body:
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and statement.name.value == func.value:
                return _calls_torch_save(ctx, statement)
    qualified = ctx.qualified_name(func)
    found = ctx.index.locate(qualified, ctx.path) if ctx.index is not None and qualified else None
    if found is None:
        return False
    module_facts, name = found
    if shape is not None:
        return shape in module_facts.saves
    if module_facts.saves:
        return True  # no file name to match: a save of any name in that module
    if built is not None and name in module_facts.saving_defs:
        return True  # an instance of a class that saves, built with the path the load reads
    if tail is None or tail not in module_facts.saved_tails:
        return False
    # a save of a path the handed object carries under the same name (`args.filepath`), made
    # by the callee or a function of its module it calls (`train` -> `train_epoch` -> `save_model`)
    savers = set(module_facts.saving_defs)
    reached, todo = {name}, [name]
    while todo and len(reached) < 64:
        for calls in module_facts.def_calls.get(todo.pop(), ()):
            todo += [c for c in calls if c not in reached]
            reached.update(calls)
    return bool(reached & savers)


def _construction(ctx, module: cst.Module, scope: cst.CSTNode, held: cst.BaseExpression) -> cst.Call | None:
    """The call that builds the object ``held``: a local bound once to a call
    (``record = Record()``), or an attribute of ``self`` that its class's methods set once
    (``self.early_stopping = EarlyStopping(path=self.modelpath)``). None otherwise."""
    if isinstance(held, cst.Name):
        sites = ctx.bindings(scope).get(held.value, ())
        if len(sites) == 1 and isinstance(sites[0], cst.Assign) and isinstance(sites[0].value, cst.Call):
            return sites[0].value
        return None
    if not (isinstance(held, cst.Attribute) and isinstance(held.value, cst.Name)
            and isinstance(scope, cst.FunctionDef) and scope.params.params
            and scope.params.params[0].name.value == held.value.value):
        return None
    values = _attribute_values(ctx, module).get(id(scope), {}).get(held.attr.value, ())
    return values[0] if len(values) == 1 and isinstance(values[0], cst.Call) else None


def _attribute_values(ctx, module: cst.Module) -> dict[int, dict[str, list[cst.BaseExpression]]]:
    """For each method of the module's top-level classes (by id), what its class's methods
    assign to each ``self.<name>``: read once per file."""
    def read() -> dict[int, dict[str, list[cst.BaseExpression]]]:
        found: dict[int, dict[str, list[cst.BaseExpression]]] = {}
        for klass in (c for c in module.body if isinstance(c, cst.ClassDef)):
            assigned: dict[str, list[cst.BaseExpression]] = {}
            for method, self_name in methods(klass):
                found[id(method)] = assigned
                for assign in tree.collect(method, cst.Assign):
                    name = self_attribute(assign.targets[0].target, self_name) if len(assign.targets) == 1 else None
                    if name is not None:
                        assigned.setdefault(name, []).append(assign.value)
        return found

    return ctx.once(("provenance: self attributes",), read)


def _calls_torch_save(ctx, node: cst.CSTNode) -> bool:
    return any(ctx.qualified_name(c.func) in kinds.TORCH_SAVERS for c in tree.collect(node, cst.Call))


def _instance_method(ctx, module: cst.Module, scope: cst.CSTNode, func: cst.Attribute) -> cst.FunctionDef | None:
    """The method ``obj.name`` runs when ``obj`` is a local bound once to an instance of a
    class of the same file (``record = Record()``)."""
    construction = _construction(ctx, module, scope, func.value)
    built = construction.func if construction is not None else None
    if not isinstance(built, cst.Name):
        return None
    klass = next((s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == built.value), None)
    if klass is None:
        return None
    return next((s for s in klass.body.body if isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value),
                None)


# Words of a name for the checkpoint a run resumes from: `resume` or `restart` in any name; `checkpoint`
# or `ckpt` alone or with words that name a file (`checkpoint_path`, `ckpt_file`), not a
# directory of models (`checkpoint_dir`) or another program's file (`trainer_ckpt`).
_CHECKPOINT_WORDS = frozenset({"checkpoint", "ckpt"})
_FILE_WORDS = frozenset({"path", "file", "filename", "fname", "name", "load", "from", "last", "latest"})


def _names_resume(text: str) -> bool:
    words = {w for w in re.split(r"[^a-z0-9]+", text.lower()) if w}
    return any(w.startswith(("resum", "restart")) for w in words) or (
        bool(words & _CHECKPOINT_WORDS) and words <= _CHECKPOINT_WORDS | _FILE_WORDS)


def resumes_option(ctx, ancestors, call: cst.Call) -> cst.CSTNode | None:
    """The load reads a path named for resuming (``args.resume``, ``cfg["training"]["resume"]``,
    a ``checkpoint`` variable, ``opt.ckpt_path``; not ``checkpoint_dir``), or runs under a
    test of such an option (``if args.resume:``): the node that says so, or None. Literal
    text of the path (a ``"checkpoints/"`` folder) does not count: it names where files go,
    not an option."""
    target = loaded_file(call)
    if target is None:
        return None
    found: list[cst.CSTNode] = []

    def enter(node: cst.CSTNode) -> bool:
        if found:
            return False
        if isinstance(node, cst.Name) and _names_resume(node.value):
            found.append(node)
        elif isinstance(node, cst.Attribute) and _names_resume(node.attr.value):
            found.append(node)
        elif isinstance(node, cst.SubscriptElement) and isinstance(node.slice, cst.Index) and isinstance(
                node.slice.value, cst.SimpleString) and _names_resume(str(node.slice.value.evaluated_value)):
            found.append(node)
        return True

    scope = _scope_of(ancestors)
    tree.walk(target, enter)
    if not found and isinstance(target, cst.Name):  # `checkpoint = args.resume` then `torch.load(checkpoint)`
        for site in ctx.bindings(scope).get(target.value, ()):
            if isinstance(site, cst.Assign):
                tree.walk(site.value, enter)
    for parent, child in zip(ancestors, ancestors[1:]):
        if not found and isinstance(parent, cst.If) and child is parent.body:
            tree.walk(parent.test, enter)
    return found[0] if found else None


def saves_in_a_loop(ctx, ancestors) -> cst.Call | None:
    """The code that loads belongs to a trainer: the function around the load (a script's
    top-level code, for a load there), or another method of its class, writes checkpoints in
    a ``for``/``while`` body (``torch.save``, a call named for writing one,
    ``self._save_checkpoint(epoch)``, ``save_model(net, ...)``, or a project function that
    saves), one per epoch. What a trainer loads (its own resume, the model to fine-tune, a
    teacher) it reads where it trains. A converter, which loads one file and saves another
    once, is not one. The save, or None."""
    scope = _scope_of(ancestors)
    if scope is None:
        return None
    scopes = [scope]
    if isinstance(scope, cst.FunctionDef):
        klass = next((a for a in reversed(ancestors) if isinstance(a, (cst.ClassDef, cst.FunctionDef))
                      and a is not scope), None)
        if isinstance(klass, cst.ClassDef) and any(m is scope for m, _ in methods(klass)):
            scopes = [m for m, _ in methods(klass)]
    for each in scopes:
        save = ctx.once(("provenance: saves in a loop", id(each)),
                        lambda each=each: _saves_in_a_loop(ctx, each, ancestors[0]))
        if save is not None:
            return save
    return None


# Names of calls that write a checkpoint: `save_model`, `self._save_checkpoint`, `save_networks`;
# not `savefig`, `save_image`, `save_args`, nor gradient `checkpoint(...)`. A plain `save` only
# on `self` (`image.save(path)`, `np.save` write no checkpoint).
_CHECKPOINT_SAVER = re.compile(r"^_*save_?(model|checkpoint|ckpt|network|net|state|weight)\w*$", re.IGNORECASE)


def _saves_in_a_loop(ctx, scope: cst.FunctionDef | cst.Module, module: cst.Module) -> cst.Call | None:
    nested = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
    body = scope.body if isinstance(scope, cst.FunctionDef) else scope
    for loop in tree.collect(body, (cst.For, cst.While), skip=nested):
        for call in tree.collect(loop, cst.Call, skip=nested):
            qualified = ctx.qualified_name(call.func) or _own_function(ctx, module, scope, call.func)
            name = call.func.attr.value if isinstance(call.func, cst.Attribute) else (
                call.func.value if isinstance(call.func, cst.Name) else "")
            on_self = isinstance(call.func, cst.Attribute) and code_of(call.func.value) == "self"
            if qualified in kinds.TORCH_SAVERS or _CHECKPOINT_SAVER.search(name) or (on_self and name == "save") or (
                    qualified and _project(ctx).saves_when_called(qualified, ctx.path)):
                return call
    return None


def _own_function(ctx, module: cst.Module, scope: cst.CSTNode, func: cst.BaseExpression) -> str | None:
    """The project name of a name the file binds once at its top level and ``scope`` calls
    (a script's own ``save_data(...)``), which the imports do not name: the index says
    whether the file defines a function of that name."""
    if not isinstance(func, cst.Name) or (scope is not module and func.value in ctx.bindings(scope)):
        return None
    own = _project(ctx).module_of(ctx.path)
    return f"{own}.{func.value}" if own and len(ctx.bindings(module).get(func.value, ())) == 1 else None


def _project(ctx) -> ProjectIndex:
    """The project index; for a file checked alone, an index of that one file: what the code
    in sight writes and where."""
    if ctx.index is not None:
        return ctx.index

    def alone() -> ProjectIndex:
        index = ProjectIndex()
        index.add_facts(ctx.path, read_facts(ctx.path, ctx.source))
        return index

    return ctx.once(("provenance: the file as its project",), alone)


def weights_saved_from_a_device(ctx) -> str | None:
    """Where the file's program saves weights from code that may place them on an
    accelerator ("<file>:<line>", the index's ``device_weights``): the evidence that
    checkpoints it writes, or publishes, can hold accelerator tensors. None: nothing in sight
    does, and a file it loads comes from elsewhere, saved on a device the code does not show."""
    return _project(ctx).device_weights(ctx.path)


def saved_whole_around(ctx, receiver: cst.BaseExpression) -> str | None:
    """Weights loaded into ``receiver``, a part of a module (``self.base``), while every
    save of weights from a device writes a whole model with that part: the file is not one
    the project writes, so nothing shows it holds accelerator tensors. What the index
    answers ("`<Class>`, <file>:<line>"), or None."""
    if not isinstance(receiver, cst.Attribute):
        return None
    return _project(ctx).saved_whole_around(receiver.attr.value)


def shipped_saves_on_cpu(ctx) -> str | None:
    """The repository ships what the project's savers write (files named as their saves
    name them: ``checkpoints/checkpoint_600.pth`` for ``checkpoint_{}.pth``), and every one
    holds CPU tensors only: the code that saves them ran on the CPU, whatever device it may
    name. The first such file, relative to the project's root, or None."""
    index = _project(ctx)
    shapes = index.device_saver_shapes()
    if not shapes or not re.search(r"[A-Za-z0-9]", "".join(s.replace("{}", "") for s in shapes)):
        return None
    shipped = [path for shape in shapes for path in index.files_named(shape)]
    if not shipped:
        return None
    for path in shipped:
        found = checkpoints.file_locations(path)
        if not found or any(location != "cpu" for location in found):
            return None
    return os.path.relpath(shipped[0], index.root())


def loaded_name(ctx, ancestors, call: cst.Call) -> str | None:
    """The name of the file a load reads, where the code spells it: a literal, a template,
    or the literal default of the parameter the path comes from
    (``def __init__(self, path="pretrain/hubert.pt")``). None: the name comes from outside
    (``torch.load(args.model)``), and so does which save wrote the file."""
    shape = _load_shape(ctx, ancestors, call)
    if shape is None:
        default = _path_default(ctx, ancestors, call)
        shape = file_name_shape(_as_ast(default), lambda name: None) if default is not None else None
    return shape if shape is not None and re.search(r"[A-Za-z0-9]", shape.replace("{}", "")) else None


def _path_default(ctx, ancestors, call: cst.Call) -> cst.BaseExpression | None:
    """The literal a load's path is when its caller gives none: the parameter's literal
    default (``path="pretrain/hubert.pt"``), or the one literal the function puts in place of
    a missing one (``weight_path=None`` then ``if not weight_path: weight_path = "zoo/swin.pth"``),
    when nothing else binds it."""
    target = loaded_file(call)
    scope = _scope_of(ancestors)
    if not (isinstance(target, cst.Name) and isinstance(scope, cst.FunctionDef)):
        return None
    param = next((p for p in (*scope.params.params, *scope.params.kwonly_params)
                  if p.name.value == target.value), None)
    if param is None:
        return None
    literals = [param.default] if param.default is not None and not tree.is_none(param.default) else []
    for site in ctx.bindings(scope).get(target.value, ()):
        if isinstance(site, cst.Assign) and len(site.targets) == 1:
            literals.append(site.value)
        elif site is not param.name:
            return None
    literal = literals[0] if len(literals) == 1 else None
    return literal if isinstance(literal, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)) else None


def shipped_checkpoint(ctx, ancestors, call: cst.Call) -> tuple[str, list[str]] | None:
    """The checkpoint a load reads when the code spells its whole path and the repository
    holds that file (from the loading file's folder or one above it, up to the project's
    root; for an absolute path of the author's checkout, ``C:\\Users\\me\\kws\\kaldi\\final.pkl``,
    its longest tail of a folder and more the repository holds, ``kaldi/final.pkl``): the
    path as the code spells it (that tail for an absolute one), and the devices its tensors were saved from
    (``checkpoints.storage_locations``). What the file holds is then known, not guessed."""
    target = loaded_file(call)
    if target is None or ctx.path == "-":
        return None
    scope = _scope_of(ancestors)
    path = path_template(_as_ast(target), lambda name: _single_value(ctx, scope, name))
    if "{}" in path:
        default = _path_default(ctx, ancestors, call)
        path = path_template(_as_ast(default), lambda name: None) if default is not None else "{}"
    if "{}" in path or not path.strip():
        return None
    parts = [p for p in path.split("/") if p]
    tails = ["/".join(parts[i:]) for i in range(1, len(parts) - 1)] if _MACHINE_PATH.match(path) else [path]
    for tail in tails:
        candidate = _shipped_file(ctx, tail)
        if candidate is not None:
            found = checkpoints.file_locations(candidate)
            return (tail, found) if found is not None else None
    return None


def _shipped_file(ctx, path: str) -> str | None:
    """The file the repository holds at the relative ``path``, from the loading file's folder
    or one above it, up to the project's root."""
    if os.path.isabs(path):
        return None
    folder = os.path.dirname(os.path.abspath(ctx.path))
    top = ctx.index.root() if ctx.index is not None else folder
    while True:
        candidate = os.path.join(folder, path)
        if os.path.isfile(candidate):
            return candidate
        if os.path.normcase(folder) == os.path.normcase(top) or os.path.dirname(folder) == folder \
                or not os.path.normcase(folder).startswith(os.path.normcase(top)):
            return None
        folder = os.path.dirname(folder)


def never_written(ctx, ancestors, call: cst.Call) -> str | None:
    """The load reads a file (``loaded_name``) that no ``torch.save`` or other writer of the
    project names: a release or a download, saved on a device the code does not show. The
    name, or None."""
    shape = loaded_name(ctx, ancestors, call)
    if shape is None or _project(ctx).writes_file(shape):
        return None
    return shape


def cpu_weights_somewhere(ctx) -> str | None:
    """Where the project also saves weights as CPU tensors ("<file>:<line>", the index's
    ``some_cpu_weights``): a file whose name the code does not spell may be one of those. A
    test's save counts only for a load in test code: code outside the tests never reads a
    fixture's file."""
    return _project(ctx).some_cpu_weights(tests=_test_code(ctx))


def written_by_another_method(ctx, ancestors, call: cst.Call) -> cst.Call | None:
    """A load in a method of a class another method of which writes a file of that name
    (``file_name_shape``, ``checkpoint.pth`` of ``path + "/" + "checkpoint.pth"``): with
    ``torch.save``, or through a helper of the file or the project that saves one
    (``early_stopping(loss, self.model, path)``, ``_callee_saves``). One object trains
    and then predicts from the checkpoint it wrote: a round trip. The save, or None."""
    index = next((i for i in range(len(ancestors) - 1, -1, -1) if isinstance(ancestors[i], cst.FunctionDef)), None)
    klass = ancestors[index - 2] if index is not None and index >= 2 else None
    if not isinstance(klass, cst.ClassDef):
        return None  # not in a method (asked after the file was read: from the ancestors)
    shape = _load_shape(ctx, ancestors, call)
    if shape is None:
        return None
    loading = ancestors[index]
    return ctx.once(("provenance: class writes", id(klass), id(loading), shape),
                    lambda: _class_writes(ctx, ancestors[0], klass, shape, loading))


# What Lightning's ModelCheckpoint calls the files the run's trainer wrote.
_TRAINER_CHECKPOINTS = ("best_model_path", "last_model_path")


def handed_the_savers_path(ctx, ancestors, call: cst.Call) -> str | None:
    """The load reads a path its run handed a saver too: the checkpoint a Lightning trainer
    wrote (``checkpoint_callback.best_model_path``, or an attribute that keeps it, such as
    ``self._best_model_path``), or an object's path (``self.bestModelPath``) that a torch
    save of the project writes under the same name (a checkpoint plugin and the plugin that
    reloads the best model, both built with the script's ``bestModelPath``). What the run
    wrote is read back on the machine that wrote it. Why, or None."""
    target = loaded_file(call)
    if isinstance(target, cst.Name):  # `path = ckpt.best_model_path` then `torch.load(path)`
        scope = _scope_of(ancestors)
        sites = ctx.bindings(scope).get(target.value, ()) if scope is not None else ()
        if len(sites) == 1 and isinstance(sites[0], cst.Assign):
            target = sites[0].value
    if not isinstance(target, cst.Attribute):
        return None
    name = target.attr.value
    if name.endswith(_TRAINER_CHECKPOINTS):
        return (f"`{code_of(target)}` is where the run's Lightning checkpoint callback wrote the trainer's "
                "checkpoint")
    if not (isinstance(target.value, cst.Name) and target.value.value == "self") or ctx.index is None:
        return None
    saver = ctx.index.saved_under(name)
    return None if saver is None else (f"the project saves to a path it keeps under the same name "
                                       f"(`{name}`, {saver}): the run hands its savers and this object one file")


def saved_earlier_in_every_run(ctx, ancestors, call: cst.Call) -> str | None:
    """Every run that reaches the load has called a torch save first, in the load's own
    function or in its callers however deep (``ProjectIndex.saved_earlier_in_every_run``):
    a round trip, whatever the file is named. Where the first save is, or None."""
    if ctx.index is None or ctx.path == "-" or not ctx.path.endswith(".py"):
        return None
    return ctx.index.saved_earlier_in_every_run(ctx.path, ctx.line_of(call, ancestors[0]))


def _class_writes(ctx, module: cst.Module, klass: cst.ClassDef, shape: str, loading) -> cst.Call | None:
    for function, _ in methods(klass):
        if function is loading:
            continue
        for c in _scope_calls(ctx, function).calls[:_MAX_SAVES * 4]:
            qualified = ctx.qualified_name(c.func) or ""
            if qualified in kinds.TORCH_SAVERS:
                written = saved_file(c)
                if written is not None and file_name_shape(
                        _as_ast(written), lambda name: _single_value(ctx, function, name)) == shape:
                    return c
            elif _may_write(qualified) and qualified not in kinds.TORCH_LOADERS and c.args \
                    and _callee_saves(ctx, module, function, c, shape):
                return c
    return None
