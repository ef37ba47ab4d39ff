"""Rule documentation pages, generated from the rules themselves so they cannot drift.

``python -m torchdev_lint.docs`` rewrites ``docs/rules/TDL00N.md``; a test checks that the
committed pages match.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint.analysis.guards import GUARDS_DOC
from torchdev_lint.rule import Rule

SECTION_ORDER = ("What it does", "Why is this bad?", "Example", "Fix", "When not to use")


def _sections(doc: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", doc, flags=re.M)
    return {title.strip(): body.strip() for title, body in zip(parts[1::2], parts[2::2])}


def _example(rule: type[Rule]) -> str:
    shown = next((i for i in rule.INVALID if i.fixed is not None), rule.INVALID[0])
    text = f"```python\n{shown.code.rstrip()}\n```\n"
    if shown.fixed is not None:
        flag = " --unsafe-fixes" if shown.unsafe else ""
        text += f"\nAfter `torchdev-lint --fix{flag}`:\n\n```python\n{shown.fixed.rstrip()}\n```\n"
    text += f"\nNot flagged:\n\n```python\n{rule.VALID[0].code.rstrip()}\n```"
    return text


def page(rule: type[Rule]) -> str:
    sections = _sections(rule.documentation())
    sections["Example"] = _example(rule)
    body = "\n\n".join(f"## {title}\n\n{sections[title]}" for title in SECTION_ORDER if title in sections)
    fix = f"Fix: {rule.fix_title}." if rule.fix_title else "No automatic fix."
    return f"# {rule.code}: {rule.name}\n\nMessage: {rule.message}\n\n{fix}\n\n{body}\n"


def write_pages(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for code, rule in sorted(Rule.registry.items()):
        target = directory / f"{code}.md"
        target.write_text(page(rule), encoding="utf-8")
        written.append(target)
    index = ["# Rules", "", "| code | name | message |", "|---|---|---|"]
    index += [f"| [{c}]({c}.md) | {r.name} | {r.message} |" for c, r in sorted(Rule.registry.items())]
    index += ["", GUARDS_DOC]
    (directory / "README.md").write_text("\n".join(index), encoding="utf-8")
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent.parent / "docs" / "rules"
    for path in write_pages(target):
        print(path)
