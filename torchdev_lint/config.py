"""Settings from ``[tool.torchdev-lint]`` in the nearest ``pyproject.toml``, overridden by
the command line, and the choice of rules they make."""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from torchdev_lint.analysis.devices import CUDA_OR_CPU, FIX_DEVICES
from torchdev_lint.rule import Rule

SECTION = "torchdev-lint"
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".eggs", "*.egg-info",
    "build", "dist", "__pycache__", "node_modules", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", "site-packages",
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
    root: Path = field(default_factory=Path.cwd)  # what patterns are relative to
    source: Path | None = None  # the pyproject.toml they came from


_KEYS = {"select", "ignore", "extend-select", "exclude", "extend-exclude", "per-file-ignores",
         "unsafe-fixes", "fix-device"}


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml with a [tool.torchdev-lint] table, walking up."""
    start = start.resolve()
    for directory in [start, *start.parents] if start.is_dir() else start.parents:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue
            if SECTION in data.get("tool", {}):
                return candidate
    return None


def load(pyproject: Path | None) -> Settings:
    if pyproject is None:
        return Settings()
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise UsageError(f"{pyproject}: cannot read configuration: {error}") from None
    table = data.get("tool", {}).get(SECTION, {})
    settings = Settings(root=pyproject.parent, source=pyproject)
    for key, value in table.items():
        key = key.replace("_", "-")
        if key not in _KEYS:
            raise UsageError(f"{pyproject}: unknown option '{key}' in [tool.{SECTION}]")
        if key == "unsafe-fixes":
            settings.unsafe_fixes = bool(value)
        elif key == "fix-device":
            settings.fix_device = check_fix_device(value, f"{pyproject}: 'fix-device'")
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise UsageError(f"{pyproject}: 'per-file-ignores' must be a table")
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


def _strings(value, pyproject, key) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{pyproject}: '{key}' must be a list of strings")
    return value


def _codes(value, pyproject, key) -> list[str]:
    return [c.strip().upper() for c in _strings(value, pyproject, key) if c.strip()]


def check_fix_device(value, origin: str) -> str:
    if value not in FIX_DEVICES:
        choices = " or ".join(f'"{d}"' for d in FIX_DEVICES)
        raise UsageError(f"{origin} must be {choices}, not {value!r}")
    return value


def split_codes(text: str) -> list[str]:
    return [c.strip().upper() for c in text.split(",") if c.strip()]


def check_codes(codes: list[str], origin: str) -> None:
    known = list(Rule.registry)
    for code in codes:
        if code != "ALL" and not any(k.startswith(code) for k in known):
            raise UsageError(f"{origin}: unknown rule code or prefix '{code}'")


def enabled_rules(select: list[str], ignore: list[str]) -> list[type[Rule]]:
    def matches(code: str, patterns: list[str]) -> bool:
        return any(p == "ALL" or code.startswith(p) for p in patterns)

    return [
        cls for code, cls in sorted(Rule.registry.items())
        if matches(code, select) and not matches(code, ignore)
    ]


def relative_to_root(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def matches_any(relative: str, patterns) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(name, p)
        or fnmatch.fnmatch(relative, p.rstrip("/") + "/*")
        for p in patterns
    )


def ignored_codes(settings: Settings, path: Path) -> list[str]:
    relative = relative_to_root(path, settings.root)
    return [
        code
        for pattern, codes in settings.per_file_ignores.items()
        if matches_any(relative, [pattern])
        for code in codes
    ]
