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
(or ``tdl-preview = true`` in flake8's configuration), marked ``(possible)`` as in the CLI;
``--tdl-target-devices cpu,cuda`` (``tdl-target-devices``) is the CLI's ``--target-devices``.
The verdicts the project's tests recorded (docs/verdicts.md) apply as in the CLI;
``--tdl-no-verdicts`` is the CLI's ``--no-verdicts``.

``[tool.torchdev-lint]`` in pyproject.toml is the CLI's configuration and is not read here;
docs/integrations.md gives the flake8 equivalent of each setting.
"""

from __future__ import annotations

from torchdev_lint import __version__
from torchdev_lint.finding import CHECK_ERROR_CODE

# A file LibCST cannot parse (flake8's own parser accepted it) is reported under this code
# rather than skipped in silence; the CLI reports it as an error and exits 2.
PARSE_ERROR_CODE = CHECK_ERROR_CODE

_linters: dict = {}  # tier -> the Linter (imported on first use), its package indexes kept


def _linter(preview: bool, target_devices: str, verdicts: bool = True):
    """The shared entry point, with flake8's settings: every rule, this tier, these target
    devices (``cpu,cuda`` or ``auto``); flake8 itself selects codes, applies ``noqa`` and
    picks files."""
    linter = _linters.get((preview, target_devices, verdicts))
    if linter is None:
        from torchdev_lint import api, config

        settings = config.Settings(
            preview=preview, target_devices=config.target_devices(target_devices, "--tdl-target-devices"))
        linter = _linters[preview, target_devices, verdicts] = api.Linter(settings=settings, verdicts=verdicts)
    return linter


class TorchDevLintChecker:
    """A flake8 "tree" plugin (flake8 classifies plugins by these parameter names).

    The ``ast`` tree is not used: the rules need LibCST's tree, parsed from ``lines``.
    """

    name = "torchdev-lint"
    version = __version__
    preview = False
    target_devices = "auto"
    verdicts = True

    @classmethod
    def add_options(cls, manager) -> None:
        manager.add_option("--tdl-preview", action="store_true", parse_from_config=True,
                           help="torchdev-lint: also report possible findings (docs/confidence.md)")
        manager.add_option("--tdl-target-devices", default="auto", parse_from_config=True,
                           help="torchdev-lint: the machines the code must run on, e.g. cpu,cuda "
                           "(default: auto, inferred per file)")
        manager.add_option("--tdl-no-verdicts", action="store_true", parse_from_config=True,
                           help="torchdev-lint: ignore the verdicts the project's tests recorded on a "
                           "simulated GPU (docs/verdicts.md)")

    @classmethod
    def parse_options(cls, options) -> None:
        cls.preview = bool(getattr(options, "tdl_preview", False))
        cls.target_devices = getattr(options, "tdl_target_devices", None) or "auto"
        cls.verdicts = not getattr(options, "tdl_no_verdicts", False)
        if cls.target_devices != "auto":  # checked now, one line, not a traceback per file
            from torchdev_lint import config

            try:
                config.target_devices(cls.target_devices, "--tdl-target-devices")
            except config.UsageError as error:
                raise SystemExit(f"flake8: {error}") from None

    def __init__(self, tree, lines: list[str], filename: str) -> None:
        self.lines = lines
        self.filename = filename

    def run(self):
        linter = _linter(self.preview, self.target_devices, self.verdicts)
        source = "".join(self.lines)
        if not any(cls.wants(source) for cls in linter.rules):
            # flake8 has parsed the file already, so there is no syntax error to report
            # (checking would parse it again to find one).
            return
        result = linter.check_source(source, self.filename, apply_noqa=False)
        # What the project's tests showed on a simulated GPU, for this text of the file.
        linter.apply_verdicts(result, source)
        if result.error is not None:
            error = result.error
            yield (
                error.line or 1,
                max((error.column or 1) - 1, 0),
                error.as_finding_message,
                type(self),
            )
        for finding in result.findings:
            # Our columns are 1-based; flake8 wants a 0-based offset and adds 1 itself.
            yield finding.line, finding.column - 1, f"{finding.code} {finding.shown_message}", type(self)
