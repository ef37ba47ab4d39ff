"""The core: parse a file once, run every enabled rule over that one tree in one traversal,
and turn what the rules reported into positioned, noqa-filtered findings."""

from __future__ import annotations

import ast
import functools
import re
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import libcst as cst

from torchdev_lint.analysis import project_index
from torchdev_lint.analysis.context import FileContext
from torchdev_lint.analysis.tree import child_fields, is_node, walk
from torchdev_lint import limits, placement, pyast
from torchdev_lint.files import SourceFile
from torchdev_lint.finding import Confidence, Evidence, FileError, Finding, Fix
from torchdev_lint.noqa import NoqaMap, unused
from torchdev_lint.rule import Rule


@dataclass
class FileResult:
    path: str
    source: str
    findings: list[Finding] = field(default_factory=list)
    error: FileError | None = None
    module: cst.Module | None = None  # kept for the fixer
    context: FileContext | None = None
    hidden: int = 0  # possible findings the default output does not show
    set_aside: int = 0  # of those, portability findings in code judged CUDA-only (auto)


class _Traversal:
    """One walk over the tree for all rules: the shared context first, then each rule's
    ``visit_<Node>``; on the way out each rule's ``leave_<Node>``, then the context.

    LibCST's own visitor machinery rebuilds every node on the way back up and visits every
    whitespace and comma; a lint pass needs neither, and skipping them halves its cost.
    """

    def __init__(self, context: FileContext, rules: list[Rule]) -> None:
        self.context = context
        self.visits: dict[str, list] = {}
        self.leaves: dict[str, list] = {}
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_"):
                    self.visits.setdefault(attr[6:], []).append(getattr(rule, attr))
                elif attr.startswith("leave_"):
                    self.leaves.setdefault(attr[6:], []).append(getattr(rule, attr))

    def walk(self, node: cst.CSTNode) -> None:
        cls = type(node)
        name = cls.__name__
        self.context.enter(node)
        for hook in self.visits.get(name, ()):
            hook(node)
        for field_name in child_fields(cls):
            value = getattr(node, field_name)
            kind = type(value)
            if kind is tuple or kind is list:
                for item in value:
                    if is_node(type(item)):
                        self.walk(item)
            elif is_node(kind):
                self.walk(value)
        for hook in self.leaves.get(name, ()):
            hook(node)
        self.context.leave(node)


def _positions(module: cst.Module):
    """Line and column of every node, for a file with findings.

    ``MetadataWrapper.resolve(PositionProvider)`` walks the whole tree once more (rebuilding
    every node) before generating the code that positions come from; on large files that
    walk costs as much as the code generation. We run the provider's code generation alone,
    and fall back to the wrapper if LibCST's internals ever change shape."""
    from libcst.metadata import MetadataWrapper, PositionProvider  # LibCST runs once a file is parsed
    from libcst.metadata.position_provider import PositionProvidingCodegenState

    try:
        provider = PositionProvider()
        state = PositionProvidingCodegenState(
            default_indent=module.default_indent,
            default_newline=module.default_newline,
            provider=provider,
        )
        module._codegen(state)
        return provider._computed
    except (AttributeError, TypeError):  # pragma: no cover - a different LibCST
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


class Positions(Mapping):
    """``_positions(module)``, computed one top-level statement at a time as nodes are
    asked about: a file's findings sit in a few statements, and generating code with
    positions costs more than parsing it. A statement starts on a fresh line, where the plain
    code generation (six times cheaper) of what comes before it ends, and the module spans
    all of that code. A node of no statement (of the header or footer) gets every position
    computed. The plain code generation of the whole module runs first: it recurses as deep
    as the one with positions, so a file too deeply nested for that fails here, as it did
    before."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.computed: dict = {}
        self._starts = self._statement_starts()  # where each statement begins
        self._done: set[int] = set()  # the statements computed
        self._owner: dict[int, int] | None = None  # id(node) -> its statement
        self._index: dict[int, int] | None = None  # id(statement) -> its place in the body
        self._whole = False

    def __getitem__(self, node: cst.CSTNode):
        try:
            return self.computed[node]
        except KeyError:
            self._compute(node)
            return self.computed[node]

    def __contains__(self, node) -> bool:
        if node not in self.computed:
            self._compute(node)
        return node in self.computed

    def __iter__(self):
        self._compute_whole()
        return iter(self.computed)

    def __len__(self) -> int:
        self._compute_whole()
        return len(self.computed)

    def statement(self, index: int) -> None:
        """Compute the positions of the nodes of the module's ``index``-th statement."""
        if self._whole or index in self._done:
            return
        from libcst.metadata import PositionProvider
        from libcst.metadata.position_provider import PositionProvidingCodegenState

        provider = PositionProvider()
        state = PositionProvidingCodegenState(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            provider=provider,
        )
        state.line, state.column = self._starts[index]
        self.module.body[index]._codegen(state)
        self._done.add(index)
        self.computed.update(provider._computed)

    def _statement_starts(self) -> list[tuple[int, int]]:
        """Where each statement begins; the module's own position is recorded too."""
        from libcst._nodes.internal import CodegenState
        from libcst.metadata import CodePosition, CodeRange

        module = self.module
        state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
        at = [1, 0]
        generated = [False]

        def advance(tokens: list[str]) -> None:
            for token in tokens:  # as PositionProvidingCodegenState counts them
                generated[0] = True
                segments = _NEWLINE.split(token)
                if len(segments) == 1:
                    at[1] += len(token)
                else:
                    at[0] += len(segments) - 1
                    at[1] = len(segments[-1])

        def generate(part: cst.CSTNode) -> None:
            state.tokens = []
            part._codegen(state)
            advance(state.tokens)

        for line in module.header:
            generate(line)
        starts = []
        for statement in module.body:
            starts.append((at[0], at[1]))
            generate(statement)
        for line in module.footer:
            generate(line)
        if module.has_trailing_newline and not generated[0]:
            advance([module.default_newline])  # `Module._codegen_impl`: an empty file's newline
        self.computed[module] = CodeRange(CodePosition(1, 0), CodePosition(at[0], at[1]))
        return starts

    def prime(self, ancestors: tuple[cst.CSTNode, ...]) -> None:
        """Compute the statement among a reported node's ``ancestors`` (a context's: the
        module first), without looking for it."""
        if len(ancestors) > 1 and ancestors[0] is self.module:
            if self._index is None:
                self._index = {id(statement): index for index, statement in enumerate(self.module.body)}
            index = self._index.get(id(ancestors[1]))
            if index is not None:
                self.statement(index)

    def _compute(self, node: cst.CSTNode) -> None:
        if self._whole:
            return
        if self._owner is None:
            self._owner = {}
            for index, statement in enumerate(self.module.body):
                def enter(child, index=index) -> bool:
                    self._owner[id(child)] = index
                    return True
                walk(statement, enter)
        index = self._owner.get(id(node))
        if index is None:
            self._compute_whole()
        else:
            self.statement(index)
            if node not in self.computed:  # pragma: no cover - a node LibCST positions elsewhere
                self._compute_whole()

    def _compute_whole(self) -> None:
        if not self._whole:
            self.computed = dict(_positions(self.module))
            self._whole = True


# LibCST's parser, its code generation and our tree walk all recurse once per level of the
# tree. The limits of `limits.py` bound that depth; these make room for it.
_STACK_BYTES = 256 << 20
_RECURSION_LIMIT = 20_000
_large_stack = threading.local()
_raised = threading.Lock()
_running = [0, 0]  # threads on a large stack now, and the recursion limit before the first


def on_large_stack(function):
    """Run ``function`` on a thread with a large C stack and a raised recursion limit (the
    main thread's 8 MiB stack and limit of 1000 frames run out on trees a few hundred levels
    deep), unless it already runs on one."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        if getattr(_large_stack, "active", False):
            return function(*args, **kwargs)
        outcome: dict = {}

        def target() -> None:
            _large_stack.active = True
            try:
                outcome["value"] = function(*args, **kwargs)
            except BaseException as error:  # handed to the calling thread
                outcome["error"] = error

        with _raised:
            if _running[0] == 0:
                _running[1] = sys.getrecursionlimit()
                sys.setrecursionlimit(max(_running[1], _RECURSION_LIMIT))
            _running[0] += 1
            previous = threading.stack_size(_STACK_BYTES)
            try:
                thread = threading.Thread(target=target, name="torchdev-lint", daemon=True)
                thread.start()
            finally:
                threading.stack_size(previous)
        try:
            thread.join()
        finally:
            with _raised:
                _running[0] -= 1
                if _running[0] == 0:
                    sys.setrecursionlimit(_running[1])
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return run


UNUSED_NOQA = "TDL090"  # judged here: only the engine knows which noqa codes were used

_PARSER_POSITION = re.compile(r"error at (\d+):(\d+)")
_NEWLINE = re.compile(r"\r\n?|\n")  # LibCST's own (libcst.metadata.position_provider)


def parse(path: str, source: str) -> cst.Module | FileError:
    excess = limits.measure(source)
    if excess is not None:
        # Deeper brackets than CPython allows are its syntax error; the rest is valid Python
        # that LibCST would take minutes over, or crash on.
        error = cpython_syntax_error(path, source) if excess.invalid else None
        if error is None:
            line, column = excess.position(source)
            error = FileError(path, f"too complex to check: {excess.what}", line, column)
        return error
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        # CPython's parser says where and what far better (LibCST puts every tokenizer error
        # at 1:1); it only costs a second parse of a file that is already broken.
        cpython = cpython_syntax_error(path, source)
        if cpython is not None:
            return cpython
        match = _PARSER_POSITION.search(error.message)
        line, column = (
            (int(match.group(1)), int(match.group(2))) if match
            else (error.raw_line, error.raw_column + 1)
        )
        detail = error.message.split(": ", 2)[-1].splitlines()[0]
        return FileError(path, f"syntax error: {detail}", line, column)
    except RecursionError:
        return FileError(path, "file too deeply nested to parse")
    except UnicodeEncodeError as error:
        # Text from an editor or an API caller, not from a file (files are decoded strictly).
        line = source.count("\n", 0, error.start) + 1
        column = error.start - source.rfind("\n", 0, error.start)
        return FileError(path, f"cannot check: {error.object[error.start]!r} is a lone surrogate, "
                         "not a character", line, column)


def cpython_syntax_error(path: str, source: str, flags: int = 0) -> FileError | None:
    """The syntax error CPython reports for ``source``, at its line and column, or None when
    CPython compiles it (then only LibCST's grammar objects, and its own message stands)."""
    try:
        compile(source, path, "exec", flags=flags, dont_inherit=True)
    except SyntaxError as error:  # IndentationError and TabError too
        line = error.lineno or 1
        return FileError(path, f"syntax error: {error.msg}", line, max(error.offset or 1, 1))
    except (ValueError, RecursionError, MemoryError, OverflowError):
        return None
    return None


@on_large_stack
def lint_source(
    path: str,
    source: str,
    rule_classes: list[type[Rule]],
    *,
    apply_noqa: bool = True,
    module: cst.Module | None = None,
    index=None,
    fix_device: str | None = None,
    preview: bool = False,
    target_devices: tuple[str, ...] | None = None,
    gpu_runtime: str | None = None,
) -> FileResult:
    """Check one file's text with the given rules. ``apply_noqa=False`` keeps findings that a
    ``# noqa`` comment suppresses, for hosts that apply their own (the flake8 plugin);
    ``module`` is the text's tree when a host has already parsed it (the LibCST codemod);
    ``index`` is the project index (``analysis/project_index.py``), built once per run by
    the host and shared by every file. Only CERTAIN findings are kept unless ``preview``
    (docs/confidence.md); a ``# noqa`` still counts as used by a finding it hides.
    ``target_devices``: the machines the code must run on; None infers it per file."""
    unused_wanted = apply_noqa and any(cls.code == UNUSED_NOQA for cls in rule_classes)
    # Every finding of a preview rule is possible: the default tier would drop them all, so
    # they are not looked for (unless TDL090 must know which noqa codes they use); nor are a
    # rule's findings in a file where none of them could be certain (`Rule.may_be_certain`).
    certain_only = not (preview or unused_wanted)
    running = [cls for cls in rule_classes if not cls.preview] if certain_only else rule_classes
    wanted = [cls for cls in running if cls.wants(source)]
    if wanted and index is not None:
        found = index.sites_of(path, source)
        if found is not None:  # the index's tree shows where each rule could report
            wanted = [cls for cls in wanted if (cls.sites is None or not cls.sites.isdisjoint(found)) and (
                not certain_only or cls.may_be_certain(index, path, found))]
    if not wanted and module is None:
        # No rule needs the tree, but a broken file is still reported: the stdlib parser
        # checks it at a fraction of LibCST's cost (unless the project index just did), and
        # LibCST confirms (it knows newer syntax).
        if project_index.parsed_lately(source):
            return FileResult(path, source)
        if pyast.parse(source) is None:
            error = parse(path, source)
            if isinstance(error, FileError):
                return FileResult(path, source, error=error)
        return FileResult(path, source)
    if module is None:
        module = parse(path, source)
    if isinstance(module, FileError):
        return FileResult(path, source, error=module)
    context = FileContext(path, source, index)
    if fix_device is not None:
        context.fix_device = fix_device  # how fixes spell the default device (analysis/devices.py)
    context.target_devices = target_devices
    context.gpu_runtime = gpu_runtime
    rules = [cls(context) for cls in wanted]
    try:
        _Traversal(context, rules).walk(module)
        for rule in rules:
            rule.end_of_file()
    except RecursionError:
        return FileResult(path, source, error=FileError(path, "file too deeply nested to check"))
    result = FileResult(path, source, module=module, context=context)
    unused_check = apply_noqa and any(cls.code == UNUSED_NOQA for cls in wanted)
    # Positions only for what is kept: a possible finding only shows with `--preview`.
    reports = context.reports if preview or unused_check else [r for r in context.reports if r.certain]
    hidden = [] if preview else [r for r in context.reports if not r.certain]
    if hidden and reports is not context.reports:
        if apply_noqa and "noqa" in source:
            reports = context.reports  # counted below, unless a noqa comment suppresses it
        else:
            result.hidden, result.set_aside = len(hidden), sum(r.set_aside for r in hidden)
    if not reports and not unused_check:
        return result
    try:
        positions = context.positions if context.positions is not None else Positions(module)
        for report in reports:
            positions.prime(report.ancestors)
    except RecursionError:  # code generation recurses deeper than this Python allows (limits.py)
        return FileResult(path, source, error=FileError(path, "file too deeply nested to check"))
    context.positions = positions
    noqa = NoqaMap(source) if apply_noqa else None
    for report in reports:
        where = positions[report.node]
        line, column = where.start.line, where.start.column + 1
        if noqa is not None and noqa.suppresses(line, report.rule.code):
            continue
        if not (report.certain or preview):
            result.hidden += 1
            result.set_aside += report.set_aside
            continue
        fix = report.fix() if callable(report.fix) else report.fix
        result.findings.append(
            Finding(
                path=path,
                line=line,
                column=column,
                end_line=where.end.line,
                end_column=where.end.column + 1,
                code=report.rule.code,
                name=report.rule.name,
                message=report.message,
                fix=fix if isinstance(fix, Fix) else None,
                node=report.node,
                confidence=Confidence.CERTAIN if report.certain else Confidence.POSSIBLE,
                evidence=tuple(Evidence(path, positions[step].start.line, positions[step].start.column + 1, text)
                               for step, text in report.evidence if step in positions),
            )
        )
    placement.withhold_unplaceable(module, result.findings)  # `[*]` only on what --fix changes
    if unused_check:
        enabled = {cls.code for cls in rule_classes}
        for line, column, code in unused(noqa, enabled, set(Rule.registry)):
            result.findings.append(Finding(path, line, column, line, column + 1, UNUSED_NOQA,
                                           Rule.registry[UNUSED_NOQA].name,
                                           f"Unused `noqa` code {code}: it suppresses nothing here"))
    result.findings.sort(key=Finding.sort_key)
    return result


def lint_file(source: SourceFile, rule_classes: list[type[Rule]], **options) -> FileResult:
    """Check a file as read from disk: for a notebook, positions are given per cell."""
    notebook = source.notebook
    if notebook is not None:
        options.setdefault("gpu_runtime", notebook.gpu_runtime())
    result = lint_source(source.path, source.text, rule_classes, **options)
    if notebook is not None and notebook.lines:
        for finding in result.findings:
            finding.cell, finding.line = notebook.locate(finding.line)
            finding.end_line = notebook.locate(finding.end_line)[1]
            finding.evidence = tuple(_in_cell(step, notebook) for step in finding.evidence)
        if result.error is not None and result.error.line is not None:
            result.error = _notebook_syntax_error(source.path, notebook, result.error)
    return result


def _in_cell(step: Evidence, notebook) -> Evidence:
    cell, line = notebook.locate(step.line)
    return Evidence(step.path, line, step.column, step.message, cell)


def _notebook_syntax_error(path: str, notebook, error: FileError) -> FileError:
    """A syntax error in a notebook, in the first cell that fails on its own (as IPython runs
    each cell alone: an unclosed bracket must not be blamed on the next cell)."""
    for first, text in notebook.cell_texts():
        cell_error = cpython_syntax_error(path, text, ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if cell_error is not None:
            error = cell_error
            error.line += first
            break
    error.cell, error.line = notebook.locate(error.line)
    return error
