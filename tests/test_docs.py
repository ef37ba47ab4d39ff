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
