"""Defer running LibCST until a file is really parsed.

Importing LibCST costs about 0.3 s (it builds some 250 node classes): more than a whole
run of the command line whose files all come from the cache. The CLI registers LibCST as a
deferred module before anything imports it, so ``import libcst as cst`` binds a stand-in
that runs the package on first real use. Only the CLI does this; the flake8 plugin, the
language server and the pytest plugin parse on every call anyway.

The stand-in is a plain ``types.ModuleType`` of our own: it holds what the import system
reads from a module it finds in ``sys.modules`` (``__spec__``, ``__name__``, ``__loader__``)
and runs the package, in place, the first time anything else is asked of it. It relies on
public import machinery only (``find_spec`` and the loader's ``exec_module``), so it behaves
the same on every CPython: ``importlib.util._LazyModule``, which this once subclassed, changed
in 3.12.3 so that a subclass recursed for ever.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types


class _Deferred(types.ModuleType):
    """A module that runs its code on the first attribute it does not hold yet."""

    _lock = threading.RLock()

    def __getattr__(self, attr):
        # Only called for attributes missing from the module's namespace: the first real use.
        with _Deferred._lock:
            if type(self) is _Deferred:  # another thread may have run it while we waited
                spec = self.__spec__
                # From here on an ordinary module: the package's own imports of itself (and any
                # failure) see plain module behaviour, never this hook again.
                self.__class__ = types.ModuleType
                if spec.submodule_search_locations is not None:
                    self.__path__ = spec.submodule_search_locations
                try:
                    spec.loader.exec_module(self)
                except BaseException:
                    if sys.modules.get(spec.name) is self:  # as a failed import leaves it
                        del sys.modules[spec.name]
                    raise
        return getattr(self, attr)


def defer_import(name: str) -> None:
    """Register package ``name`` to run on first use, unless it is imported already."""
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return  # nothing we can run later in place: let the first import do it as usual
    module = importlib.util.module_from_spec(spec)
    # Without ``__path__`` a submodule import (``import libcst.metadata``) asks for it, and so
    # runs the package first, as a plain import would.
    module.__dict__.pop("__path__", None)
    module.__class__ = _Deferred
    sys.modules[name] = module
