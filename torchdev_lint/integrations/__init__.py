"""Adapters that put torchdev-lint where users already are (pytest, editors); each calls the
linter's API (and the tracer's simulator), and re-implements neither."""
