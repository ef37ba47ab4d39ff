"""Rule documentation pages, generated from the rules themselves so they cannot drift.

``python -m torchdev_lint.docs`` rewrites ``docs/rules/TDL00N.md``; a test checks that the
committed pages match.
"""

from __future__ import annotations

import json
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


# Codes that no static rule reports: the tracer's (docs/trace.md).
RUNTIME_CODES = {
    "TDL100": (
        "runtime-device-mismatch",
        "A device mismatch seen while `torchdev-lint trace` ran the program, that no static rule predicted",
        "Reported only by `torchdev-lint trace`: an operation met tensors on different devices "
        "(or a CUDA-only call on a machine without CUDA) at a place no static finding covers. "
        "The finding names the operation, the devices and the line. See docs/trace.md.",
    ),
}


def explain(code: str) -> str | None:
    """A rule's page, or a runtime code's explanation; None for an unknown code."""
    if code in Rule.registry:
        return page(Rule.registry[code])
    if code in RUNTIME_CODES:
        name, message, text = RUNTIME_CODES[code]
        return f"# {code}: {name}\n\nMessage: {message}\n\nNo automatic fix.\n\n{text}\n"
    return None


def rule_list(as_json: bool) -> str:
    """Every code, for `torchdev-lint rules`: code, name, message, fix, whether static."""
    rows = [
        {"code": code, "name": rule.name, "message": rule.message, "fix": rule.fix_title,
         "static": True}
        for code, rule in sorted(Rule.registry.items())
    ]
    rows += [{"code": code, "name": name, "message": message, "fix": None, "static": False}
             for code, (name, message, _) in sorted(RUNTIME_CODES.items())]
    if as_json:
        return json.dumps(rows, indent=2)
    width = max(len(row["name"]) for row in rows)
    return "\n".join(
        f"{row['code']}  {row['name']:<{width}}  {'fix ' if row['fix'] else '    '}"
        f"{'' if row['static'] else '(trace) '}{row['message']}"
        for row in rows
    )


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
