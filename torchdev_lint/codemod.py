"""The fixes as a LibCST codemod command, for teams that run LibCST codemods:

    python -m libcst.tool codemod -x torchdev_lint.codemod.FixDevicePlacement PATH
    python -m libcst.tool codemod -x torchdev_lint.codemod.FixDevicePlacement --unsafe-fixes PATH
"""

from __future__ import annotations

import argparse

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint import config
from torchdev_lint.analysis.devices import CUDA_OR_CPU
from torchdev_lint.engine import lint_source
from torchdev_lint.fixer import fix_to_fixpoint


class FixDevicePlacement(VisitorBasedCodemodCommand):
    DESCRIPTION = "Apply torchdev-lint's fixes for PyTorch device-placement bugs."

    def __init__(self, context: CodemodContext, unsafe_fixes: bool = False, select: str = "TDL",
                 fix_device: str = CUDA_OR_CPU, preview: bool = False) -> None:
        super().__init__(context)
        self.unsafe = unsafe_fixes
        self.preview = preview
        self.fix_device = config.check_fix_device(fix_device, "--fix-device")
        codes = config.split_codes(select)
        config.check_codes(codes, "--select")
        self.rules = config.enabled_rules(codes, [])

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true",
                                help="also apply fixes marked unsafe")
        arg_parser.add_argument("--select", default="TDL", help="rule codes or prefixes to fix")
        arg_parser.add_argument("--fix-device", dest="fix_device", default=CUDA_OR_CPU,
                                help="cuda-or-cpu or accelerator: how fixes spell the default device")
        arg_parser.add_argument("--preview", action="store_true",
                                help="also fix possible findings, as torchdev-lint --preview reports them")

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        path = self.context.filename or "<stdin>"
        options = {"fix_device": self.fix_device, "preview": self.preview}
        result = lint_source(path, tree.code, self.rules, module=tree, **options)
        outcome = fix_to_fixpoint(result, lambda text: lint_source(path, text, self.rules, **options), self.unsafe)
        if outcome.error is not None:
            raise SkipFile(outcome.error.message)
        if not outcome.fixed:
            raise SkipFile("nothing to fix")
        return cst.parse_module(outcome.source)
