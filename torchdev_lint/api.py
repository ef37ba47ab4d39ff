"""The one way to ask "lint these files, or this text, with this configuration"
(docs/api.md). Every way in (the command line, flake8, the language server, the LibCST
codemod, the tracer and the pytest plugin) asks a ``Linter``: it resolves the settings that
govern each file (the nearest ``pyproject.toml``, then the caller's overrides) and builds or
reuses the project index of the file's package, so that no way in can forget either.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint import config, files, runner, verdict_store
from torchdev_lint.analysis import project_index
from torchdev_lint.cache import detached
from torchdev_lint.engine import FileResult
from torchdev_lint.finding import FileError, Finding
from torchdev_lint.fixer import FixOutcome, fix_to_fixpoint
from torchdev_lint.rule import Rule

__all__ = ["Linter", "Report", "check_paths", "check_source", "fix_source"]


@dataclass
class Report:
    """What a run found: findings in path and position order, and the files it could not check."""

    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)


class Linter:
    """Checks and fixes files with the settings that govern each one.

    ``overrides`` act like command-line options on top of every file's ``pyproject.toml``;
    ``settings`` (one ``config.Settings`` for every file, or a ``config.Resolver``) replaces
    that lookup. ``cache`` and ``jobs`` are the command line's result cache and processes.
    """

    def __init__(self, overrides: config.Overrides | None = None, *,
                 settings: config.Settings | config.Resolver | None = None,
                 cache=None, jobs: int = 1, verdicts: bool | verdict_store.VerdictStore = True) -> None:
        self.settings = settings if settings is not None else config.Resolver(overrides)
        # What the project's tests showed on a (simulated) GPU (docs/verdicts.md): a store, True
        # for each file's project cache directory, False to ignore them (`--no-verdicts`).
        self.verdicts = verdicts
        self._stores: dict[str, verdict_store.VerdictStore] = {}
        self.rules = [cls for _, cls in sorted(Rule.registry.items())]  # each file's settings choose
        self.cache = cache
        self.jobs = jobs
        self._run_index: project_index.ProjectIndex | None = None
        self._package_indexes: dict[str, project_index.ProjectIndex | None] = {}

    def settings_for(self, path: str) -> config.Settings:
        """The settings that govern ``path``; ``config.UsageError`` when they are invalid."""
        return self.settings.for_path(path)

    def index_paths(self, paths: list[str], say=None) -> None:
        """Index what these files (and the rest of their packages) define, for a run that
        checks them all: one index, read in ``jobs`` processes and through the cache.
        ``say`` is told about each file too large or complex to index (``-v``)."""
        self._run_index = runner.build_index(paths, self.cache, self.jobs, say)

    def index_for(self, path: str) -> project_index.ProjectIndex | None:
        """The run's index, else the index of ``path``'s package, built on first use."""
        if self._run_index is not None:
            return self._run_index
        if not path.endswith(".py"):
            return None
        root = project_index.package_root(path)
        if root not in self._package_indexes:
            self._package_indexes[root] = runner.build_index([path], self.cache)
        return self._package_indexes[root]

    def forget(self) -> None:
        """Drop what was learnt about the files and their settings (an editor's save may
        change another module's classes or a ``pyproject.toml``)."""
        self._package_indexes.clear()
        self._run_index = None
        if isinstance(self.settings, config.Resolver):
            self.settings = config.Resolver(self.settings.overrides, self.settings.fallback)

    def check_source(self, source: files.SourceFile | str, path: str | None = None,
                     apply_noqa: bool = True) -> FileResult:
        """Check one file's text (a ``files.SourceFile``, or ``source`` text named ``path``).
        The result keeps its tree, for hosts that go on to fix it; ``apply_noqa=False``
        keeps what ``# noqa`` hides, for hosts that apply their own."""
        if isinstance(source, str):
            source = files.SourceFile(path or "<stdin>", source, "utf-8")
        return runner.check_source(source, self.rules, self.settings, self.index_for(source.path), apply_noqa)

    def store_for(self, path: str) -> verdict_store.VerdictStore | None:
        """The verdict store that speaks for ``path`` (None with verdicts off)."""
        if self.verdicts is False:
            return None
        if isinstance(self.verdicts, verdict_store.VerdictStore):
            return self.verdicts
        root = str(self.settings_for(path).root)
        store = self._stores.get(root)
        if store is None:
            store = self._stores[root] = verdict_store.VerdictStore.for_root(root)
        return store

    def apply_verdicts(self, result: FileResult, text: str | None = None) -> verdict_store.Tally:
        """Give ``result``'s findings the verdicts recorded for this text of the file (read
        from disk when ``text`` is None): after the result cache, so that a cached result never
        hides a verdict recorded since."""
        store = self.store_for(result.path)
        if store is None or result.error is not None or not store.exists():
            return verdict_store.Tally()
        if text is None:
            source = files.read(result.path)
            if not isinstance(source, files.SourceFile):
                return verdict_store.Tally()
            text = source.file_text
        entry = store.lookup(text)
        if entry is None:
            return verdict_store.Tally()
        settings = self.settings_for(result.path)
        enabled_codes = {r.code for r in runner.rules_for(self.rules, self.settings, result.path)}
        ignored = config.ignored_codes(settings, Path(result.path))

        def enabled(code: str) -> bool:
            if code in verdict_store.RUNTIME_NAMES:
                return (any(code.startswith(c) or c == "ALL" for c in settings.select)
                        and not any(code.startswith(c) for c in [*settings.ignore, *ignored]))
            return code in enabled_codes

        noqa_map = None

        def suppressed(line: int, code: str) -> bool:
            nonlocal noqa_map
            if noqa_map is None:
                from torchdev_lint.noqa import NoqaMap

                noqa_map = NoqaMap(text)
            return noqa_map.suppresses(line, code)

        def relint():
            preview = dataclasses.replace(settings, preview=True)
            source = files.SourceFile(result.path, text, "utf-8") if not result.path.endswith(".ipynb") \
                else files.read(result.path)
            if not isinstance(source, files.SourceFile):
                return []
            found = runner.check_source(source, self.rules, preview, self.index_for(result.path))
            return [detached(f) for f in found.findings]

        return verdict_store.apply(result, text, entry, preview=settings.preview, enabled=enabled,
                                   suppressed=suppressed, relint=relint)

    def relint(self, path: str):
        """A function that checks new text of ``path`` as ``check_source`` does (for fixes)."""
        return lambda text: self.check_source(text, path)

    def fix_source(self, text: str, path: str, unsafe: bool | None = None) -> FixOutcome:
        """``text`` with every applicable fix applied until none changes it; ``unsafe``
        defaults to the file's ``unsafe-fixes`` setting."""
        if unsafe is None:
            unsafe = self.settings_for(path).unsafe_fixes
        result = self.check_source(text, path)
        if result.error is not None:
            return FixOutcome(text, [], result.error)
        return fix_to_fixpoint(result, self.relint(path), unsafe)

    def job(self) -> runner.Job:
        """What worker processes check each file with (picklable)."""
        return runner.Job(self.rules, self.settings, cache=self.cache, index=self._run_index)

    def check_paths(self, paths: list[str], respect_gitignore: bool = True) -> Report:
        """Lint files and directories like the command line: discovery, exclusions, the
        run's project index, each file's settings."""
        found, errors = files.discover(paths or ["."], self.settings, respect_gitignore)
        self.index_paths(found)
        report = Report(errors=errors)
        for checked in runner.check_paths(found, self.job(), self.jobs):
            if checked.result.error:
                report.errors.append(checked.result.error)
            self.apply_verdicts(checked.result)
            report.findings.extend(checked.result.findings)
        report.findings.sort(key=Finding.sort_key)
        return report


def check_paths(
    paths: list[str], select: list[str] | None = None, ignore: list[str] | None = None,
    preview: bool | None = None, verdicts: bool = True,
) -> tuple[list[Finding], list[FileError]]:
    """Lint files and directories, each with the settings that govern it, like the CLI.
    ``preview``: True or False overrides the configured tier (docs/confidence.md);
    ``verdicts=False`` ignores what the project's tests recorded (docs/verdicts.md)."""
    report = Linter(config.Overrides(select=select, ignore=ignore or [], preview=preview),
                    verdicts=verdicts).check_paths(paths)
    return report.findings, report.errors


def check_source(text: str, path: str, preview: bool | None = None) -> list[Finding]:
    """The findings in ``text`` as if it were the file ``path`` (its settings, its package)."""
    return [detached(f) for f in Linter(config.Overrides(preview=preview)).check_source(text, path).findings]


def fix_source(text: str, path: str, unsafe: bool | None = None) -> str:
    """``text`` with the fixes the file ``path``'s settings allow applied (``unsafe``
    overrides its ``unsafe-fixes``). Raises ``ValueError`` when the text cannot be checked."""
    outcome = Linter().fix_source(text, path, unsafe)
    if outcome.error is not None and not outcome.fixed:
        raise ValueError(str(outcome.error))
    return outcome.source
