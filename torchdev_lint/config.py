"""Settings from ``[tool.torchdev-lint]``, per file: the nearest ``pyproject.toml`` with that
table governs each file (ruff's hierarchical model; ``extend`` inherits another file's),
``--config`` replaces them all, and command-line options apply on top. ``Resolver.for_path``
is the one answer to "which settings govern this file"; every way in asks it."""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from torchdev_lint.analysis.devices import CUDA_OR_CPU, FIX_DEVICES
from torchdev_lint import verdict_store
from torchdev_lint.rule import Rule

SECTION = "torchdev-lint"
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".eggs", "*.egg-info",
    "build", "dist", "__pycache__", "node_modules", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", "site-packages", ".ipynb_checkpoints", ".history",
)


class UsageError(Exception):
    """A mistake in the command line or the configuration: exit status 2."""


@dataclass
class Settings:
    select: list[str] = field(default_factory=lambda: ["TDL"])
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    unsafe_fixes: bool = False
    fix_device: str = CUDA_OR_CPU  # how fixes spell the default device (analysis/devices.py)
    preview: bool = False  # also report POSSIBLE findings (docs/confidence.md)
    # The machines the code must run on (docs/confidence.md); None: inferred per file (auto).
    target_devices: tuple[str, ...] | None = None
    root: Path = field(default_factory=Path.cwd)  # what patterns are relative to
    source: Path | None = None  # the pyproject.toml they came from

    @property
    def rules(self) -> list[type[Rule]]:
        return enabled_rules(self.select, self.ignore)

    def for_path(self, path: str | Path) -> Settings:
        """One set of settings for every file (``--config``, ``--isolated``, a host's own)."""
        return self


_KEYS = {"select", "ignore", "extend-select", "exclude", "extend-exclude", "per-file-ignores",
         "unsafe-fixes", "fix-device", "extend", "preview", "target-devices"}


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.torchdev-lint] table, walking up."""
    start = start.resolve()
    for directory in [start, *start.parents] if start.is_dir() else start.parents:
        candidate = directory / "pyproject.toml"
        # A broken pyproject.toml on the way is an error, not a reason to look further up:
        # skipping it would drop its settings in silence (ruff stops too).
        if _is_file(candidate) and _section(_read(candidate), candidate) is not None:
            return candidate
    return None


def _is_file(path: Path) -> bool:
    """False also inside a directory that cannot be looked into: nothing in it can be read,
    so nothing there is governed by it (the walk reports that directory)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _read(pyproject: Path) -> dict:
    try:
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise UsageError(f"{pyproject}: cannot read configuration: {error}") from None


def _section(data: dict, pyproject: Path) -> dict | None:
    """``[tool.torchdev-lint]`` of a parsed pyproject.toml, None when it has none; a ``tool``
    or a section that is not a table is the file's error (it used to raise a traceback)."""
    tool = data.get("tool")
    if tool is not None and not isinstance(tool, dict):
        raise UsageError(f"{pyproject}: 'tool' must be a table, not {_type(tool)}")
    table = (tool or {}).get(SECTION)
    if table is not None and not isinstance(table, dict):
        raise UsageError(f"{pyproject}: [tool.{SECTION}] must be a table, not {_type(table)}")
    return table


def _type(value) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def load(pyproject: Path | None, _seen: tuple[Path, ...] = ()) -> Settings:
    if pyproject is None:
        return Settings()
    pyproject = Path(pyproject)
    table = _section(_read(pyproject), pyproject) or {}
    settings = Settings(root=pyproject.parent, source=pyproject)
    if "extend" in table:
        settings = _extended(pyproject, table["extend"], _seen)
    for key, value in table.items():
        key = key.replace("_", "-")
        if key not in _KEYS:
            raise UsageError(f"{pyproject}: unknown option '{key}' in [tool.{SECTION}]")
        if key == "extend":
            continue
        if key in ("unsafe-fixes", "preview"):
            if not isinstance(value, bool):  # "false" is a true value in Python
                raise UsageError(f"{pyproject}: '{key}' must be true or false, not {_type(value)}")
            setattr(settings, key.replace("-", "_"), value)
        elif key == "fix-device":
            settings.fix_device = check_fix_device(value, f"{pyproject}: 'fix-device'")
        elif key == "target-devices":
            settings.target_devices = target_devices(value, f"{pyproject}: 'target-devices'")
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise UsageError(f"{pyproject}: 'per-file-ignores' must be a table, not {_type(value)}")
            settings.per_file_ignores = {k: _codes(v, pyproject, key) for k, v in value.items()}
        elif key == "select":
            settings.select = _codes(value, pyproject, key)
        elif key == "extend-select":
            settings.select = [*settings.select, *_codes(value, pyproject, key)]
        elif key == "ignore":
            settings.ignore = _codes(value, pyproject, key)
        else:
            settings.exclude = [*settings.exclude, *_strings(value, pyproject, key)]
    return settings


def _extended(pyproject: Path, target, seen: tuple[Path, ...]) -> Settings:
    """The settings ``extend = "../pyproject.toml"`` inherits, re-rooted here: the base's
    path patterns keep meaning the paths they meant, made absolute."""
    if not isinstance(target, str):
        raise UsageError(f"{pyproject}: 'extend' must be a path to another pyproject.toml")
    base_file = (pyproject.parent / target).resolve()
    if base_file in seen or base_file == pyproject.resolve():
        raise UsageError(f"{pyproject}: 'extend' makes a cycle through {base_file}")
    if not base_file.is_file():
        raise UsageError(f"{pyproject}: 'extend': no such file {base_file}")
    base = load(base_file, (*seen, pyproject.resolve()))
    anchor = base.root.resolve().as_posix()
    return replace(
        base, root=pyproject.parent, source=pyproject,
        exclude=[anchored(p, anchor) for p in base.exclude],
        per_file_ignores={anchored(p, anchor): c for p, c in base.per_file_ignores.items()},
    )


def anchored(pattern: str, anchor: str) -> str:
    """A pattern made absolute; a bare name (``*.pyi``, ``build``) matches anywhere, so stays."""
    pattern = pattern[2:] if pattern.startswith("./") else pattern
    return f"{anchor}/{pattern}" if "/" in pattern.rstrip("/") and not pattern.startswith("/") else pattern


def _strings(value, pyproject, key) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        bad = next((v for v in value if not isinstance(v, str)), None) if isinstance(value, list) else value
        raise UsageError(f"{pyproject}: '{key}' must be a list of strings: {bad!r} is {_type(bad)}")
    return value


def _codes(value, pyproject, key) -> list[str]:
    return [c.strip().upper() for c in _strings(value, pyproject, key) if c.strip()]


def check_fix_device(value, origin: str) -> str:
    if value not in FIX_DEVICES:
        choices = " or ".join(f'"{d}"' for d in FIX_DEVICES)
        raise UsageError(f"{origin} must be {choices}, not {value!r}")
    return value


TARGET_DEVICES = ("cpu", "cuda", "mps", "xpu", "xla", "rocm")
AUTO = "auto"


def target_devices(value, origin: str) -> tuple[str, ...] | None:
    """``["cpu", "cuda"]``, ``"cpu,cuda"`` or ``"auto"`` (None: inferred per file)."""
    if value == AUTO or value == [AUTO]:
        return None
    items = [v.strip().lower() for v in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        raise UsageError(f'{origin} must be "auto" or a list of devices such as ["cpu", "cuda"], not {value!r}')
    unknown = [v for v in items if v not in TARGET_DEVICES]
    if unknown:
        raise UsageError(f"{origin}: unknown device {unknown[0]!r} (known: {', '.join(TARGET_DEVICES)}, or auto)")
    return tuple(dict.fromkeys(items))


def split_codes(text: str) -> list[str]:
    return [c.strip().upper() for c in text.split(",") if c.strip()]


def check_codes(codes: list[str], origin: str) -> None:
    # the runtime codes too: a test's device problem shows as a finding (docs/verdicts.md)
    known = [*Rule.registry, verdict_store.MISMATCH_CODE, verdict_store.NO_GPU_CODE]
    for code in codes:
        if code != "ALL" and not any(k.startswith(code) for k in known):
            raise UsageError(f"{origin}: unknown rule code or prefix '{code}'")


def enabled_rules(select: list[str], ignore: list[str]) -> list[type[Rule]]:
    def matches(code: str, patterns: list[str]) -> bool:
        return any(p == "ALL" or code.startswith(p) for p in patterns)

    return [
        cls for code, cls in sorted(Rule.registry.items())
        if (code in select if cls.opt_in else matches(code, select)) and not matches(code, ignore)
    ]


def relative_to_root(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


@functools.lru_cache(maxsize=1024)
def glob_regex(pattern: str) -> re.Pattern:
    """A glob as ruff reads one (globset): `*` and `?` also cross `/`, `**/` is any number of
    directories (none included), `{a,b}` either, `[...]`/`[!...]` a class."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("(?:/.*)?")
            i += 3
            continue
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:end]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end
        elif c == "{":
            end = pattern.find("}", i)
            if end == -1:
                out.append(re.escape(c))
            else:
                out.append("(?:" + "|".join(re.escape(a) for a in pattern[i + 1:end].split(",")) + ")")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def matches_any(relative: str, patterns, absolute: str | None = None) -> bool:
    """Whether a path (relative to the settings' root) matches a pattern: the whole path,
    its file name, or a directory it is under. Absolute patterns (from ``extend``) are
    matched against ``absolute``."""
    name = relative.rsplit("/", 1)[-1]
    for pattern in patterns:
        target = (absolute or relative) if pattern.startswith("/") else relative
        directory = pattern.rstrip("/")
        if (glob_regex(pattern).match(target) or glob_regex(pattern).match(name)
                or glob_regex(directory + "/**").match(target)):
            return True
    return False


def ignored_codes(settings: Settings, path: Path) -> list[str]:
    relative = relative_to_root(path, settings.root)
    absolute = path.resolve().as_posix()
    return [
        code
        for pattern, codes in settings.per_file_ignores.items()
        if matches_any(relative, [pattern], absolute)
        for code in codes
    ]


def excluded(settings: Settings, path: Path, defaults: bool = True) -> bool:
    """The path is excluded by these settings (and by the default excludes, unless named)."""
    patterns = [*DEFAULT_EXCLUDE, *settings.exclude] if defaults else settings.exclude
    if not patterns:
        return False
    real = resolved(path)
    try:
        relative = real.relative_to(resolved(settings.root)).as_posix()
    except ValueError:
        relative = path.as_posix()
    return matches_any(relative, patterns, real.as_posix())


def resolved(path: str | Path) -> Path:
    """``Path(path).resolve()``, with each directory resolved once: a walk asks it of every
    file, and resolving follows every component of a deep path."""
    absolute = os.path.abspath(path)
    if os.path.islink(absolute):
        return Path(os.path.realpath(absolute))
    head, name = os.path.split(absolute)
    return Path(_real_directory(head), name) if name else Path(_real_directory(absolute))


@functools.lru_cache(maxsize=4096)
def _real_directory(directory: str) -> str:
    return os.path.realpath(directory)


@dataclass
class Overrides:
    """What the command line sets on top of every file's settings."""

    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    unsafe_fixes: bool = False
    fix_device: str | None = None
    preview: bool | None = None  # --preview / --no-preview; None keeps the configured value
    target_devices: tuple[str, ...] | None | str = "configured"  # --target-devices; "configured" keeps it

    def apply(self, settings: Settings) -> Settings:
        # An explicit --select replaces the configured selection, its ignores included.
        select = self.select if self.select is not None else settings.select
        ignore = [*([] if self.select is not None else settings.ignore), *self.ignore]
        exclude = self.exclude if self.exclude is not None else settings.exclude
        result = replace(
            settings, select=[*select, *self.extend_select], ignore=ignore,
            exclude=[*exclude, *self.extend_exclude],
            per_file_ignores={**settings.per_file_ignores, **self.per_file_ignores},
            unsafe_fixes=settings.unsafe_fixes or self.unsafe_fixes,
            fix_device=self.fix_device or settings.fix_device,
            preview=settings.preview if self.preview is None else self.preview,
            target_devices=(settings.target_devices if self.target_devices == "configured"
                            else self.target_devices),
        )
        check_settings(result)
        return result


def check_settings(settings: Settings) -> None:
    where = f"{settings.source}: " if settings.source else ""
    check_codes(settings.select, f"{where}select")
    check_codes(settings.ignore, f"{where}ignore")
    for pattern, codes in settings.per_file_ignores.items():
        check_codes(codes, f"{where}per-file-ignores '{pattern}'")


class Resolver:
    """Which settings govern each file: the nearest pyproject.toml with a [tool.torchdev-lint]
    table above it, with the command line's overrides on top. One answer per directory,
    computed once; picklable, for worker processes."""

    def __init__(self, overrides: Overrides | None = None, fallback: Path | None = None) -> None:
        self.overrides = overrides or Overrides()
        self.fallback = fallback or Path.cwd()  # the root of files no configuration governs
        self._by_directory: dict[Path, Settings] = {}
        self._by_file: dict[Path | None, Settings] = {}
        self._pyprojects: dict[Path, Path | None] = {}

    def for_path(self, path: str | Path) -> Settings:
        path = resolved(path)
        directory = path if path.is_dir() else path.parent
        settings = self._by_directory.get(directory)
        if settings is None:
            pyproject = self._pyproject_for(directory)
            settings = self._by_file.get(pyproject)
            if settings is None:
                base = load(pyproject) if pyproject else Settings(root=self.fallback)
                settings = self._by_file[pyproject] = self.overrides.apply(base)
            self._by_directory[directory] = settings
        return settings

    def _pyproject_for(self, directory: Path) -> Path | None:
        """``find_pyproject`` one directory at a time: a directory without a configuration of
        its own has its parent's answer, so each pyproject.toml of a tree is read once."""
        if directory in self._pyprojects:
            return self._pyprojects[directory]
        candidate = directory / "pyproject.toml"
        if _is_file(candidate) and _section(_read(candidate), candidate) is not None:
            found = candidate
        else:
            found = None if directory.parent == directory else self._pyproject_for(directory.parent)
        self._pyprojects[directory] = found
        return found

    def __repr__(self) -> str:
        return f"Resolver({self.overrides!r})"
