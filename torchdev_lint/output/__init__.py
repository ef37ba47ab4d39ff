"""Rendering findings: one module per format, each a function from findings to text
(ruff keeps one emitter per format). A new format is a module and a line in ``FORMATS``."""

from __future__ import annotations

from typing import Callable

from torchdev_lint.finding import Finding
from torchdev_lint.output import github, gitlab, json, sarif, text
from torchdev_lint.output.context import OutputContext

Renderer = Callable[[list[Finding], OutputContext], str]

FORMATS: dict[str, Renderer] = {
    "text": text.render,
    "json": json.render,
    "github": github.render,
    "sarif": sarif.render,
    "gitlab": gitlab.render,
}


def render(findings: list[Finding], fmt: str, context: OutputContext | None = None) -> str:
    return FORMATS[fmt](findings, context or OutputContext())


summary = text.summary

# `--format` spellings of the text format's two styles (ruff's names).
TEXT_STYLES = ("full", "concise")
