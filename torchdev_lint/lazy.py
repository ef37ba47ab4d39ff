"""Defer running LibCST until a file is really parsed.

Importing LibCST costs about 0.3 s (it builds some 250 node classes): more than a whole
run of the command line whose files all come from the cache. The CLI registers LibCST as a
deferred module before anything imports it, so ``import libcst as cst`` binds a stand-in
that runs the package on first real use. Only the CLI does this; the flake8 plugin, the
language server and the pytest plugin parse on every call anyway.
"""

from __future__ import annotations

import importlib.util
import sys

# What the import system reads from a module it finds in ``sys.modules``; answering these
# from the stand-in keeps ``import libcst`` in another module from running the package.
_IMPORT_ATTRIBUTES = frozenset({"__spec__", "__name__", "__loader__"})


class _Deferred(importlib.util._LazyModule):
    def __getattribute__(self, attr):
        if attr in _IMPORT_ATTRIBUTES:
            return object.__getattribute__(self, "__dict__")[attr]
        return super().__getattribute__(attr)


def defer_import(name: str) -> None:
    """Register package ``name`` to run on first use, unless it is imported already."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.__class__ = _Deferred
    except Exception:  # any surprise (another Python, no such package): import it normally
        return
    sys.modules[name] = module
