"""Rule documentation pages, generated from the rules themselves so they cannot drift.

``python -m torchdev_lint.docs`` rewrites ``docs/rules/TDL00N.md`` (``--check`` only reports
stale pages); a test checks that the committed pages match.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torchdev_lint.rules  # noqa: F401  (registers the rules)
from torchdev_lint.analysis.guards import GUARDS_DOC
from torchdev_lint.rule import Rule

SECTION_ORDER = ("What it does", "Why is this bad?", "Example", "Fix", "Confidence", "When not to use")
# Sections a rule may add, placed before the section named with them.
OPTIONAL_SECTIONS = {"At run time": "When not to use"}
PREVIEW_CONFIDENCE = (
    "A preview rule: every finding is *possible*, shown and fixed only with `--preview` "
    "(docs/confidence.md). Its first-look precision on repositories it was never tuned on "
    "(benchmarks/precision/) is below 0.9; it joins the default output when it earns it."
)


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
    if rule.preview:
        sections["Confidence"] = PREVIEW_CONFIDENCE
    order = [title for required in SECTION_ORDER for title in
             [*(extra for extra, before in OPTIONAL_SECTIONS.items() if before == required), required]]
    body = "\n\n".join(f"## {title}\n\n{sections[title]}" for title in order if title in sections)
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


def rendered_pages() -> dict[str, str]:
    """File name -> text of every generated page, the rule index included."""
    pages = {f"{code}.md": page(rule) for code, rule in sorted(Rule.registry.items())}
    index = ["# Rules", "", "Tier: *default* rules show their certain findings without options; *preview* rules",
             "show only with `--preview` ([confidence](../confidence.md)).", "",
             "| code | name | tier | message |", "|---|---|---|---|"]
    index += [f"| [{c}]({c}.md) | {r.name} | {'preview' if r.preview else 'default'} | {r.message} |"
              for c, r in sorted(Rule.registry.items())]
    index += ["", GUARDS_DOC]
    pages["README.md"] = "\n".join(index)
    return pages


def write_pages(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered_pages().items():
        target = directory / name
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def stale_pages(directory: Path) -> list[Path]:
    """Pages of ``directory`` that are missing or differ from what the rules generate."""
    stale = []
    for name, text in rendered_pages().items():
        target = directory / name
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            stale.append(target)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchdev_lint.docs", description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", type=Path,
                        default=Path(__file__).parent.parent / "docs" / "rules")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming the pages that are out of date")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages(args.directory)
        for path in stale:
            print(f"{path}: out of date, run `python -m torchdev_lint.docs`")
        return 1 if stale else 0
    for path in write_pages(args.directory):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
