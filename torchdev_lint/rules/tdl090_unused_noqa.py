"""TDL090: a ``# noqa`` code that suppresses nothing (ruff's RUF100). Opt-in: select it."""

from __future__ import annotations

from torchdev_lint.rule import Invalid, Rule, Valid


class UnusedNoqa(Rule):
    """
    ## What it does
    Flags `# noqa: TDLxxx` codes that suppress nothing on their statement: the finding
    was fixed, or the rule no longer reports it, or the code does not exist. Only `TDL`
    codes are judged (other codes belong to other tools), only for rules that ran on the
    file, and a bare `# noqa` is left alone. The check is applied after every other rule,
    by the engine, which knows which directives were used.

    Not enabled by `select = ["TDL"]`: name it, `--extend-select TDL090`.

    ## Why is this bad?
    A baseline of `# noqa` comments (`--add-noqa`) is meant to shrink. Stale codes hide
    the next real finding on the same line and tell readers a bug is there when it is not.

    ## Fix
    None: remove the code from the comment by hand (or the whole comment when it was the
    last one).

    Fix safety: no fix is offered.

    ## Confidence
    Certain: a code counts as used when it suppresses a finding of any tier, so a `noqa`
    for a possible finding hidden from the default output is not reported.

    ## When not to use
    When the same source is checked with different rule selections.
    """

    code = "TDL090"
    name = "unused-noqa"
    message = "Unused `noqa` code: it suppresses nothing here"
    opt_in = True

    VALID = [
        Valid("import torch\nx = torch.zeros(2)  # noqa\n"),
        Valid("import torch\nx = torch.zeros(2)  # noqa: E501\n"),
        Valid("import torch\nx = torch.zeros(2)  # a comment\n"),
    ]
    INVALID = [
        Invalid("import torch\nx = torch.zeros(2)  # noqa: TDL042\n", 2, 21),
        Invalid("import torch\nx = torch.zeros(2)  # noqa: E501, TDL000\n", 2, 21),
        Invalid("import torch\nx = torch.zeros(\n    2,  # noqa: TDL777\n)\n", 3, 9),
    ]

    @classmethod
    def wants(cls, source: str) -> bool:
        return "noqa" in source.lower()
