"""The flake8 plugin: ``flake8 --select TDL`` runs every registered torchdev-lint rule.

Registered under the ``flake8.extension`` entry point ``TDL`` (the code prefix). flake8
imports this module on every run, ``flake8 --version`` included, so it imports nothing
heavy: LibCST and the rules are imported on the first file the plugin checks. torch is
never imported.

What stays with flake8, so that it behaves as flake8 users expect:

* ``# noqa`` (and ``--disable-noqa``): findings are yielded unfiltered;
* which codes are shown (``--select``, ``--extend-select``, ``--ignore``,
  ``--extend-ignore``, ``--per-file-ignores``): every rule runs, flake8 filters;
* which files are checked (``--exclude``, ``--extend-exclude``, ``--filename``) and ``-j``.

The tier is the CLI's: certain findings only, possible ones too with ``--tdl-preview``
(or ``tdl-preview = true`` in flake8's configuration), marked ``(possible)`` as in the CLI.

``[tool.torchdev-lint]`` in pyproject.toml is the CLI's configuration and is not read here;
docs/integrations.md gives the flake8 equivalent of each setting.
"""

from __future__ import annotations

from torchdev_lint import __version__

# A file LibCST cannot parse (flake8's own parser accepted it) is reported under this code
# rather than skipped in silence; the CLI reports it as an error and exits 2.
PARSE_ERROR_CODE = "TDL000"

_rules = None  # the rule classes, imported on first use
_indexes: dict = {}  # package root -> project index, built once per process


def _index_for(filename: str):
    """The project index of the file's package (flake8 shows us one file at a time)."""
    if filename in ("-", "stdin") or not filename.endswith(".py"):
        return None
    from torchdev_lint.analysis import project_index

    root = project_index.package_root(filename)
    index = _indexes.get(root)
    if index is None:
        index = _indexes[root] = project_index.build([filename])
    return index


def _all_rules() -> list:
    global _rules
    if _rules is None:
        import torchdev_lint.rules  # noqa: F401  (registers the rules)
        from torchdev_lint.rule import Rule

        _rules = [cls for _, cls in sorted(Rule.registry.items())]
    return _rules


class TorchDevLintChecker:
    """A flake8 "tree" plugin (flake8 classifies plugins by these parameter names).

    The ``ast`` tree is not used: the rules need LibCST's tree, parsed from ``lines``.
    """

    name = "torchdev-lint"
    version = __version__
    preview = False

    @classmethod
    def add_options(cls, manager) -> None:
        manager.add_option("--tdl-preview", action="store_true", parse_from_config=True,
                           help="torchdev-lint: also report possible findings (docs/confidence.md)")

    @classmethod
    def parse_options(cls, options) -> None:
        cls.preview = bool(getattr(options, "tdl_preview", False))

    def __init__(self, tree, lines: list[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    def run(self):
        source = "".join(self.lines)
        rules = [cls for cls in _all_rules() if cls.wants(source)]
        if not rules:
            # flake8 has parsed the file already, so there is no syntax error to report
            # (lint_source would parse it again to find one).
            return
        from torchdev_lint.engine import lint_source

        result = lint_source(
            self.filename, source, rules, apply_noqa=False, index=_index_for(self.filename),
            preview=self.preview,
        )
        if result.error is not None:
            error = result.error
            yield (
                error.line or 1,
                max((error.column or 1) - 1, 0),
                f"{PARSE_ERROR_CODE} torchdev-lint could not check this file: {error.message}",
                type(self),
            )
        for finding in result.findings:
            # Our columns are 1-based; flake8 wants a 0-based offset and adds 1 itself.
            yield finding.line, finding.column - 1, f"{finding.code} {finding.shown_message}", type(self)
