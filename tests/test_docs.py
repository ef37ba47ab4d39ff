"""Rule pages are generated from the rules: the committed pages must match."""

from pathlib import Path

import pytest

import torchdev_lint.rules  # noqa: F401
from torchdev_lint.docs import SECTION_ORDER, page, write_pages
from torchdev_lint.rule import Rule

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rules"


@pytest.mark.parametrize("code", sorted(Rule.registry))
def test_committed_page_matches_the_rule(code):
    committed = (DOCS / f"{code}.md").read_text(encoding="utf-8")
    assert committed == page(Rule.registry[code]), "run `python -m torchdev_lint.docs`"


@pytest.mark.parametrize("code", sorted(Rule.registry))
def test_page_has_every_section(code):
    text = page(Rule.registry[code])
    for title in SECTION_ORDER:
        assert f"## {title}\n" in text
    assert "Fix safety" in text


def test_index_lists_every_rule(tmp_path):
    write_pages(tmp_path)
    index = (tmp_path / "README.md").read_text()
    assert all(code in index for code in Rule.registry)


def test_check_names_a_stale_page_and_writes_nothing(tmp_path, capsys):
    from torchdev_lint.docs import main

    assert main([str(tmp_path)]) == 0
    assert main([str(tmp_path), "--check"]) == 0
    edited = tmp_path / "TDL001.md"
    edited.write_text("old text", encoding="utf-8")
    capsys.readouterr()
    assert main([str(tmp_path), "--check"]) == 1
    assert "TDL001.md: out of date" in capsys.readouterr().out
    assert edited.read_text(encoding="utf-8") == "old text"
    assert not (tmp_path / "--check").exists()


@pytest.mark.parametrize("code", ["TDL010", "TDL011", "TDL012", "TDL013"])
def test_rules_the_tracer_judges_say_how_before_when_not_to_use(code):
    text = page(Rule.registry[code])
    assert text.index("## Confidence\n") < text.index("## At run time\n") < text.index("## When not to use\n")
    assert "torchdev-lint trace" in text.split("## At run time\n")[1].split("## ")[0]
