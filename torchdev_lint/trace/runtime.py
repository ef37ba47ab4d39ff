"""State shared by the child's instrumentation: the mode, the event recorder, and where a
tensor lives (its virtual device in the simulator, its real device otherwise).

Child side only: imports torch.

Provenance is kept on the tensor's ``UntypedStorage`` Python object, which torch preserves
for as long as the storage lives and which views, ``.data``, ``detach()`` and ``param.data =``
share:
* ``_tdl_dev``: the virtual device (simulator only; absent means cpu);
* ``_tdl_origin``: why the storage matters for a rule (e.g. the result of a factory called
  without ``device=`` at a site), so a later mismatch can name the static finding's line;
* ``_tdl_src``: where it got its device (a move or a factory with ``device=``).

Up to torch 2.8, the garbage collector empties that object's ``__dict__`` when it frees a
reference cycle that holds it (``torch.save`` makes such cycles), and torch then keeps the
emptied object for the tensors that still use the storage: ``StorageGuard`` gives the storages
their attributes back after each collection (installed only where
``storage_attributes_survive_gc()`` says torch needs it).
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Mapping

import torch

from torchdev_lint.trace import sites

_functorch = getattr(torch._C, "_functorch", None)
_WRAPPED = getattr(_functorch, "is_functorch_wrapped_tensor", None)


def unwrapped(t):
    """The tensor that holds ``t``'s values: a tensor inside ``torch.func`` (grad, vmap, jvp)
    is a wrapper with no storage of its own; the tensor it wraps has it, and with it the device
    (as on a GPU, where the wrapper reports the wrapped tensor's device)."""
    while _WRAPPED is not None and _WRAPPED(t):
        t = _functorch.get_unwrapped(t)
    return t


def storage_of(t):
    """``t``'s storage, which carries its simulated device; None for a tensor without one."""
    try:
        return unwrapped(t).untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):
        return None

CPU = "cpu"
ACCEL = "cuda"

NUMPY_TEXT = ("can't convert {dev} device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
              "to host memory first.")
NO_CUDA_TEXT = "Torch not compiled with CUDA enabled"


class StopTracing(BaseException):
    """Ends the traced program (time limit, --max-steps); a BaseException so that the
    program's ``except Exception`` does not swallow it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class SimulatedDeviceError(RuntimeError):
    """The error a real GPU raises for mixed devices (a RuntimeError, as there)."""


class NotSimulatedError(RuntimeError):
    """Something the simulated GPU does not model decided the outcome (TorchScript reading the
    real CPU device, a CPU kernel missing for a dtype a GPU has): the simulation cannot say what a
    GPU does here. ``pytest --simulate-gpu`` skips the test with ``reason``."""

    def __init__(self, reason: str):
        super().__init__(f"not simulated: {reason}")
        self.reason = reason


TAGS = ("_tdl_dev", "_tdl_origin", "_tdl_src")  # the attributes the tracer keeps on storages


class _Probe:
    """A reference cycle that holds a storage object (weakly referenceable, unlike a list)."""


_SURVIVES: bool | None = None


def storage_attributes_survive_gc() -> bool:
    """Whether a storage object's attributes survive a collection of a reference cycle that
    holds it while a tensor still uses the storage (torch 2.9+: yes; 2.4-2.8: no)."""
    global _SURVIVES
    if _SURVIVES is None:
        x = torch.zeros(1)
        storage = x.untyped_storage()
        storage._tdl_probe = True
        cycle = _Probe()
        cycle.self, cycle.storage = cycle, storage
        alive = weakref.ref(cycle)
        del storage, cycle
        gc.collect(0)  # the cycle is young, unless a collection just aged it
        if alive() is not None:
            gc.collect()
        _SURVIVES = getattr(x.untyped_storage(), "_tdl_probe", None) is True
    return _SURVIVES


class StorageGuard:
    """A ``gc.callbacks`` hook: when a collection starts, it notes the attributes of the storage
    objects (of the generations it collects) that carry some, with a weak reference to each C++
    storage (``_weak_ref``, as torch.multiprocessing keeps them); when it ends, each storage still
    alive gets back the attributes the collector emptied. It holds no storage object across the
    collection. Costs a walk over the collected generations' objects, so it is installed only
    where torch needs it."""

    def __init__(self):
        self._noted: list | None = None

    def __call__(self, phase: str, info: dict) -> None:
        storage_type = torch.UntypedStorage
        if phase == "start":
            generation = info.get("generation")
            if isinstance(generation, int) and 0 <= generation < len(gc.get_threshold()):
                objects = [o for g in range(generation + 1) for o in gc.get_objects(g)]
            else:
                objects = gc.get_objects()
            noted = []
            for o in objects:
                if type(o) is storage_type:
                    # A storage object reached other than through torch (here: the collector's
                    # list) must be handed to Python's ownership, as after a weak reference, or
                    # torch frees it under that reference with a warning.
                    o._fix_weakref()
                    # (getattr, not __dict__, which would give every storage object a dict)
                    attributes = {name: value for name in TAGS if (value := getattr(o, name, None)) is not None}
                    if attributes:
                        noted.append((o._weak_ref(), attributes))
            self._noted = noted
            return
        noted, self._noted = self._noted, None
        for weak, attributes in noted or ():
            try:
                if not storage_type._expired(weak):
                    storage = storage_type._new_with_weak_ptr(weak)
                    if storage is not None:
                        for name, value in attributes.items():
                            if name not in storage.__dict__:
                                setattr(storage, name, value)
            finally:
                storage_type._free_weak_ref(weak)

    def install(self) -> None:
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def uninstall(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
        noted, self._noted = self._noted, None
        for weak, _ in noted or ():
            torch.UntypedStorage._free_weak_ref(weak)


def guard_storage_attributes():
    """Install a ``StorageGuard`` where torch needs one; returns its undo (or None)."""
    if storage_attributes_survive_gc():
        return None
    guard = StorageGuard()
    guard.install()
    return guard.uninstall


class IdentityMap:
    """A mapping from live objects (modules, optimizers) to values, keyed by identity.

    A ``WeakKeyDictionary`` hashes and compares its keys with their own ``__hash__``/``__eq__``,
    which a program's class may define to do anything (torchmetrics' ``Metric.__eq__`` builds a
    new metric, whose ``__setattr__`` the tracer hooks: endless recursion). Here a key is its
    ``id()``, checked against a weak reference (ids are reused once an object dies), and the
    entry goes when the object does."""

    def __init__(self):
        self._data: dict[int, tuple[weakref.ref, object]] = {}

    def _forget(self, key: int):
        data = self._data

        def forget(ref):
            entry = data.get(key)
            if entry is not None and entry[0] is ref:
                del data[key]
        return forget

    def get(self, obj, default=None):
        entry = self._data.get(id(obj))
        if entry is None or entry[0]() is not obj:
            return default
        return entry[1]

    def __contains__(self, obj) -> bool:
        entry = self._data.get(id(obj))
        return entry is not None and entry[0]() is obj

    def __getitem__(self, obj):
        entry = self._data.get(id(obj))
        if entry is None or entry[0]() is not obj:
            raise KeyError(id(obj))
        return entry[1]

    def __setitem__(self, obj, value) -> None:
        key = id(obj)
        self._data[key] = (weakref.ref(obj, self._forget(key)), value)

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    def items(self) -> list[tuple[object, object]]:
        """The live entries, as a list (safe while objects die)."""
        out = []
        for ref, value in list(self._data.values()):
            obj = ref()
            if obj is not None:
                out.append((obj, value))
        return out


class _Lazy:
    """A value of a record computed only when a recorder writes the record: ``function(*args)``."""

    __slots__ = ("function", "args")

    def __init__(self, function, *args):
        self.function = function
        self.args = args


class _Record(Mapping):
    """An event's fields for ``recorder.event``, whose ``_Lazy`` values are computed when the
    recorder copies the record (a new event), not for a repeat, which it only counts."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict):
        self._fields = fields

    def __getitem__(self, key):
        value = self._fields[key]
        if type(value) is _Lazy:
            value = self._fields[key] = value.function(*value.args)
        return value

    def __iter__(self):
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


class Runtime:
    def __init__(self, mode: str, keep_going: bool, users: sites.UserFiles, recorder,
                 device_count: int = 1):
        self.mode = mode  # "sim", "real" or "cpu-only"
        self.sim = mode == "sim"
        self.keep_going = keep_going
        self.users = users
        self.recorder = recorder
        self.device_count = device_count
        self.current_index = 0
        # optimizer -> {"site", "stack", "name"}; module -> {attribute: site} (by identity: a
        # program's __eq__/__hash__ is never called)
        self.optimizers = IdentityMap()
        self.attr_sites = IdentityMap()
        self.steps = 0
        self.saves: dict = {}  # realpath (or id of a file object) -> what torch.save wrote in this run
        self.earlier_saves: dict = {}  # (realpath, size, mtime_ns) -> what an earlier traced run wrote
        self.max_steps: int | None = None
        self.ranks: int | None = None  # the world size, when run as one of the tracer's ranks (TDL011)
        self.accelerated = False  # the program has asked for a device other than the CPU
        self.gpu_requests = 0  # how often (pytest's verdicts: whether a test asked for the GPU)
        self._devices: dict[str, torch.device] = {}
        # the C++ generator (its _cdata) of each simulated CUDA generator -> a weak reference to it
        self.generators: dict = {}
        self.local = threading.local()  # .ambient: see TraceFunctionMode._call_sim; .dispatch: below
        # The simulator's dispatch mode (sim.SimDispatchMode), entered by each thread only once a
        # storage or generator is on a simulated accelerator: before that it has nothing to check,
        # and it costs about as much as the rest of the simulator on code that stays on the CPU.
        self.dispatch_mode = None
        self.on_accelerator = False
        # Called on every torch call the modes intercept (pytest's verdicts: FindingLines.probe)
        self.line_probe = None

    # -- devices ------------------------------------------------------------------------
    def dev(self, t) -> str:
        """The device ``t`` lives on, as a string ("cpu", "cuda:0")."""
        if self.sim:
            inner = unwrapped(t)
            fake = getattr(inner, "fake_device", None)  # a fake tensor (make_fx) is where it says
            if fake is not None:
                return CPU if fake.type == "cpu" else str(fake)
            return getattr(storage_of(inner), "_tdl_dev", CPU)
        device = t.device
        if device.type == "cuda" and device.index is None:
            return f"cuda:{torch.cuda.current_device()}"
        return str(device)

    def tag(self, t, device: str) -> None:
        """Put ``t``'s storage on a virtual device (simulator only)."""
        storage = storage_of(t)
        if storage is None:
            return
        if device == CPU:
            if "_tdl_dev" in storage.__dict__:
                del storage._tdl_dev
        else:
            storage._tdl_dev = device
            if not self.on_accelerator:
                self.placed_on_accelerator()

    def placed_on_accelerator(self) -> None:
        """Something now lives on a simulated accelerator: from here on every op is checked."""
        self.on_accelerator = True
        self.enter_dispatch()

    def enter_dispatch(self) -> None:
        """Enter the dispatch mode in this thread (once), at the bottom of the dispatch stack: while
        the program's own dispatch mode is on (modes leave in the order they came), wait for it."""
        if self.dispatch_mode is None or getattr(self.local, "dispatch", None) is not None:
            return
        if torch._C._len_torch_dispatch_stack():
            return
        mode = self.dispatch_mode(self)
        mode.__enter__()
        self.local.dispatch = mode

    def exit_dispatch(self) -> None:
        mode = getattr(self.local, "dispatch", None)
        if mode is not None:
            self.local.dispatch = None
            mode.__exit__(None, None, None)

    def torch_device(self, name: str) -> torch.device:
        device = self._devices.get(name)
        if device is None:
            device = self._devices[name] = torch.device(name)
        return device

    def normalize(self, device) -> str | None:
        """"cuda" -> "cuda:0" (the current index), 1 -> "cuda:1", None -> None."""
        if device is None:
            return None
        if isinstance(device, int):
            return f"cuda:{device}"
        if not isinstance(device, torch.device):
            device = torch.device(device)
        if device.type == "cuda":
            return f"cuda:{self.current_index if device.index is None else device.index}"
        if device.type == "cpu":
            return CPU
        return str(device)

    # -- provenance ---------------------------------------------------------------------
    _storage = staticmethod(storage_of)

    def origin(self, t) -> dict | None:
        storage = self._storage(t)
        return getattr(storage, "_tdl_origin", None) if storage is not None else None

    def set_origin(self, t, origin: dict, overwrite: bool = True) -> None:
        storage = self._storage(t)
        if storage is not None and (overwrite or not hasattr(storage, "_tdl_origin")):
            storage._tdl_origin = origin

    def src(self, t) -> dict | None:
        storage = self._storage(t)
        return getattr(storage, "_tdl_src", None) if storage is not None else None

    def set_src(self, t, src: dict) -> None:
        storage = self._storage(t)
        if storage is not None:
            storage._tdl_src = src

    # -- sites and events ---------------------------------------------------------------
    def site(self, depth: int = 1):
        return sites.site(self.users, depth + 1)

    def stack(self, depth: int = 1):
        return sites.stack(self.users, depth + 1)

    def event(self, kind: str, key: tuple, **fields) -> bool:
        return self.recorder.event((kind, *key), {"kind": kind, **fields})

    def request_cuda(self, what: str, target: str | None, site=None, stack=None, error=None) -> None:
        """A request for a CUDA device: an event in every mode; on a machine without a GPU, the
        error it raises there (``error``, default: a CPU build's AssertionError), unless the
        run keeps going (the caller then stays on the CPU)."""
        if site is None:
            site = self.site(2)
        raised = self.mode == "cpu-only" and not self.keep_going
        if error is None:
            error = AssertionError(NO_CUDA_TEXT)
        # The same request repeats on every step of a training loop, and the recorder only counts
        # a repeat: the stack (a walk up every frame) is taken only when the event is new. It is
        # taken from a frame below the callers' (the recorder's, ours: never the program's), so it
        # names the same frames.
        if not stack:
            stack = _Lazy(sites.stack, self.users)
        self.recorder.event(("cuda-request", tuple(site or ()), what), _Record(
            {"kind": "cuda-request", "site": site, "stack": stack, "what": what, "target": target,
             "raised": raised, "error": f"{type(error).__name__}: {error}"}))
        if raised:
            raise error

    def limit(self, key: str, text: str) -> None:
        """Something the tracer does not model ran: the report says so (once per ``key``)."""
        self.event("limit", (key,), site=self.site(2), what=text)

    def operand(self, t, index) -> dict:
        """How a mismatch operand is described: its device, origin and where it got its device."""
        entry = {"arg": index, "device": self.dev(t), "shape": list(t.shape)}
        origin = self.origin(t)
        if origin is not None:
            entry["origin"] = origin
        src = self.src(t)
        if src is not None:
            entry["src"] = src
        return entry
