"""The fixes as a LibCST codemod command, for teams that run LibCST codemods:

    python -m libcst.tool codemod -x --no-format torchdev_lint.codemod.FixDevicePlacement PATH

``--no-format``: LibCST otherwise pipes every changed file through black (and fails when black
is not installed); our fixes keep the file's own formatting. Each file is fixed with the
settings that govern it (``[tool.torchdev-lint]``: select, ignore, per-file-ignores,
unsafe-fixes, fix-device, preview) and its package's project index, as ``--fix`` does; the
options below act like the command line's, on top of them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand

from torchdev_lint import api, config, files


class FixDevicePlacement(VisitorBasedCodemodCommand):
    DESCRIPTION = "Apply torchdev-lint's fixes for PyTorch device-placement bugs."

    def __init__(self, context: CodemodContext, unsafe_fixes: bool = False, select: str | None = None,
                 fix_device: str | None = None, preview: bool = False) -> None:
        super().__init__(context)
        codes = config.split_codes(select) if select is not None else None
        if codes is not None:
            config.check_codes(codes, "--select")
        if fix_device is not None:
            config.check_fix_device(fix_device, "--fix-device")
        self.linter = api.Linter(config.Overrides(
            select=codes, unsafe_fixes=unsafe_fixes, fix_device=fix_device, preview=preview or None))

    def _text(self, tree: cst.Module) -> str:
        """The file's text as read (writing the tree back would recurse past the stack on
        code too complex to check); the tree's own when there is no file."""
        source = files.read(self.context.filename) if self.context.filename else None
        if isinstance(source, files.SourceFile) and source.notebook is None:
            return source.text
        try:
            return tree.code
        except RecursionError:
            raise SkipFile("too deeply nested to check") from None

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true",
                                help="also apply fixes marked unsafe")
        arg_parser.add_argument("--select", default=None,
                                help="rule codes or prefixes to fix (default: the configured selection)")
        arg_parser.add_argument("--fix-device", dest="fix_device", default=None,
                                help="cuda-or-cpu or accelerator: how fixes spell the default device")
        arg_parser.add_argument("--preview", action="store_true",
                                help="also fix possible findings, as torchdev-lint --preview reports them")

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """One call: the fixes already run to a fixpoint and need none of LibCST's metadata
        (whose copy of the tree recurses past the stack on code too complex to check)."""
        return self.transform_module_impl(tree)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        path = self.context.filename or "<stdin>"
        try:
            if config.excluded(self.linter.settings_for(path), Path(path), defaults=False):
                raise SkipFile("excluded by the configuration")
            outcome = self.linter.fix_source(self._text(tree), path)
        except config.UsageError as error:
            raise SkipFile(str(error)) from None
        if outcome.error is not None:
            raise SkipFile(outcome.error.message)
        if not outcome.fixed:
            raise SkipFile("nothing to fix")
        return cst.parse_module(outcome.source)
