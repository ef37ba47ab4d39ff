"""The simulated accelerator: real values on the CPU, a virtual device per storage.

Child side only. Design (see docs/trace.md): every tensor's data is an ordinary CPU tensor;
its *virtual* device is an attribute of its ``UntypedStorage`` (``Runtime.tag``). The function
mode (``modes.py``) handles the API surface (``device=``, ``.to``/``.cuda``/``.cpu``,
``.device``...). ``SimDispatchMode`` here sees every aten op (forward, backward, optimizer
``_foreach_*``): it checks that the operands' virtual devices agree, as a GPU would, and gives
new outputs the operands' device. ``Patches`` make ``torch.cuda``/``torch.accelerator`` report
one device, and make ``torch.save``/``torch.load`` write and read ``cuda:N`` location tags.

Private torch APIs used here (checked by tests/trace/test_sim_smoke.py):
``torch.serialization._package_registry``, ``OpOverload._schema`` alias info,
``torch.utils._device.CURRENT_DEVICE``, storage PyObject preservation.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import sys
import threading
import types
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchdev_lint.trace import kernels
from torchdev_lint.trace.runtime import CPU, NO_CUDA_TEXT, TAGS, Runtime, SimulatedDeviceError, storage_of

aten = torch.ops.aten
Tensor = torch.Tensor
_FAKE = torch._subclasses.FakeTensor

# How an op treats its operands' devices (decided once per op overload):
NORMAL = 0      # all tensor operands must agree (0-dim CPU tensors excepted, as TensorIterator does)
SELF_ONLY = 1   # cross-device by design (copy_, _to_copy, set_): only ``self`` decides the output
IGNORE = 2      # some operands may stay on the CPU (index with CPU indices, lengths...)
STRICT = 3      # all tensor operands must agree, 0-dim ones too (a CUDA wrapper's device check)

_SELF_ONLY = {"copy_", "_to_copy", "_foreach_copy_", "set_", "lift_fresh", "lift_fresh_copy",
              "_copy_from", "_copy_from_and_resize", "detach", "alias", "_local_scalar_dense",
              "_has_compatible_shallow_copy_type", "is_pinned", "_pin_memory"}
# op name -> (positions of operands a GPU accepts on the CPU, output positions that stay on CPU,
#             whether the exemption needs ``self`` on the accelerator); _decide adds the position
#             of the operand it takes on the CPU only (kernels.CPU_ONLY), or None
_IGNORE = {
    "index": ((1,), (), True),
    "index_put": ((1,), (), True),
    "index_put_": ((1,), (), True),
    "_index_put_impl_": ((1,), (), True),
    "_unsafe_index": ((1,), (), True),
    "_unsafe_index_put": ((1,), (), True),
    "_pack_padded_sequence": ((1,), (1,), False),
    "ctc_loss": ((2, 3), (), False),
    "_ctc_loss": ((2, 3), (), False),
}


def _decide(func):
    name = func._schema.name.split("::", 1)[-1]
    if name in _SELF_ONLY:
        return SELF_ONLY, None
    if name in _IGNORE:
        return IGNORE, (*_IGNORE[name], kernels.CPU_ONLY.get(name))
    if kernels.checks_devices(name, func._schema.overload_name):
        return STRICT, None
    return NORMAL, None


def _generator_argument(func) -> tuple[int, str] | None:
    """(position, name) of the op's ``Generator?`` argument (random ops), or None."""
    for i, a in enumerate(func._schema.arguments):
        if "Generator" in str(a.type):
            return i, a.name
    return None


def _fresh(func) -> tuple[bool, ...]:
    """Which outputs are new storage (not a view or an in-place result of an input)."""
    return tuple(r.alias_info is None for r in func._schema.returns)


class SimDispatchMode(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # True (the default) wraps __torch_dispatch__ in torch._disable_dynamo, whose first call
        # imports torch._dynamo (3.4 s here); torch.compile is patched to eager mode anyway.
        return False

    def __init__(self, rt: Runtime):
        super().__init__()
        self.rt = rt
        self.local = rt.local
        self._rules: dict = {}  # id(op) -> (kind, extra, fresh outputs, op, generator argument)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        rule = self._rules.get(id(func))  # OpOverload.__hash__ is Python code: key by id
        if rule is None:
            rule = self._rules[id(func)] = (*_decide(func), _fresh(func), func, _generator_argument(func))
        kind, extra, fresh, _, generator = rule
        if kind == SELF_ONLY:
            out = func(*args, **kwargs)
            if args and isinstance(args[0], Tensor):
                device = getattr(_storage(args[0]), "_tdl_dev", None)
                if device is not None:
                    _tag_outputs(fresh, out, device, ())
            return out

        skip = ()
        keep_cpu = ()
        if kind == IGNORE:
            positions, keep_cpu, needs_accel_self, cpu_only = extra
            if not needs_accel_self or (args and isinstance(args[0], Tensor)
                                        and getattr(_storage(args[0]), "_tdl_dev", None)):
                skip = positions
            if cpu_only is not None and cpu_only < len(args) and isinstance(args[cpu_only], Tensor) \
                    and getattr(_storage(args[cpu_only]), "_tdl_dev", None):
                self._not_on_cpu(func, args[cpu_only], cpu_only)
        strict = kind == STRICT
        # The operands' virtual devices, walked by hand (tree_flatten costs ~9 us an op) and
        # inline (each Python frame costs a trace event too, see coverage.py).
        accel = None
        has_cpu = mixed = False
        tensors = 0
        try:
            for i, a in enumerate(args if not kwargs else (*args, *kwargs.values())):
                if isinstance(a, Tensor):
                    group = (a,)
                elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
                    group = a
                else:
                    continue
                if skip and i < len(args) and i in skip:
                    continue
                for t in group:
                    tensors += 1
                    d = getattr(t.untyped_storage(), "_tdl_dev", None)
                    if d is None:
                        if not has_cpu and (strict or t.dim() != 0):
                            has_cpu = True
                    elif accel is None:
                        accel = d
                    elif d != accel:
                        mixed = True
        except (RuntimeError, NotImplementedError, TypeError, AttributeError):  # tensors without storage
            accel, has_cpu, mixed, tensors = _gather(args, kwargs, skip, strict)
        if generator is not None:
            self._check_generator(func, args, kwargs, generator, accel, tensors)
        if accel is None:
            out = func(*args, **kwargs)
            if not tensors:
                ambient = getattr(self.local, "ambient", None)
                if ambient is not None:
                    # a factory inside a composite op or a Python torch function
                    device = kwargs.get("device")
                    if device is None or device.type == "cpu":
                        _tag_outputs(fresh, out, ambient, keep_cpu)
            return out
        if has_cpu or mixed:
            self._mismatch(func, args, kwargs, skip, strict)
        out = func(*args, **kwargs)
        if len(fresh) == 1 and isinstance(out, Tensor):
            if fresh[0]:
                try:
                    out.untyped_storage()._tdl_dev = accel
                except (RuntimeError, NotImplementedError, TypeError):
                    pass
        else:
            _tag_outputs(fresh, out, accel, keep_cpu)
        return out

    def _mismatch(self, func, args, kwargs, skip, strict) -> None:
        rt = self.rt
        if any(isinstance(t, _FAKE) for a in (*args, *kwargs.values())
               for t in (a if isinstance(a, (list, tuple)) else (a,))):
            # tracing with fake tensors (make_fx, torch.export): the fake mode below this one makes
            # the real operands fake before anything runs; no kernel meets them
            return
        if getattr(self.local, "script_device", None) is not None:
            # Compiled TorchScript on accelerator inputs: inside it x.device reads the real CPU and
            # constants are folded on the CPU, so a CPU operand here is one the simulator cannot
            # place; it is taken as being on the inputs' device (the limit says so).
            rt.limit("TorchScript mismatch", TORCHSCRIPT_MISMATCH)
            return
        names = [a.name for a in func._schema.arguments]
        candidates = []  # (position or keyword, argument name, tensor), in the schema's order
        for i, a in enumerate(args):
            if i in skip:
                continue
            for t in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(t, Tensor):
                    candidates.append((i, names[i] if i < len(names) else str(i), t))
        candidates += [(k, k, t) for k, t in kwargs.items() if isinstance(t, Tensor)]
        devices: list[str] = []
        for _, _, t in candidates:
            d = rt.dev(t)
            if d not in devices and (strict or not (t.dim() == 0 and d == CPU)):
                devices.append(d)
        devices.sort(key=lambda d: (d == CPU, d))  # accelerator first, as CUDA words it
        text = gpu_text(rt, func, candidates, devices, strict)
        report_mismatch(rt, str(func.overloadpacket), [(i, t) for i, _, t in candidates], devices, text)

    def _check_generator(self, func, args, kwargs, argument, accel, tensors) -> None:
        """A random op given a generator of another device type than its own: a GPU's kernel
        refuses it (ATen's check_generator), the CPU's would not know (a simulated CUDA
        generator is a CPU one)."""
        position, name = argument
        gen = args[position] if position < len(args) else kwargs.get(name)
        if gen is None:
            return
        if accel is not None:
            device = accel
        elif tensors:
            device = CPU
        else:  # a factory: the device= it was asked for (modes.py), or the composite's operands'
            local = self.local
            device = getattr(local, "factory_device", None) or getattr(local, "ambient", None) or CPU
        kind = device.split(":", 1)[0]
        if kind not in ("cpu", "cuda"):
            return  # the meta device's kernels take any generator
        where = generator_device(self.rt, gen)
        found = where.split(":", 1)[0]
        if found == kind:
            return
        text = GENERATOR_TEXT.format(expected=kind, found=found)
        candidates = [(i, a) for i, a in enumerate((*args, *kwargs.values())) if isinstance(a, Tensor)]
        devices = sorted({device, where}, key=lambda d: (d == CPU, d))
        report_mismatch(self.rt, str(func.overloadpacket), candidates, devices, text)

    def _not_on_cpu(self, func, t, index) -> None:
        """An operand the CUDA kernel takes on the CPU only is on the accelerator."""
        device = self.rt.dev(t)
        text = kernels.CPU_LENGTHS.format(dim=t.dim(), device=device, dtype=type_name(t.dtype))
        report_mismatch(self.rt, str(func.overloadpacket), [(index, t)], [device, CPU], text)


def gpu_text(rt: Runtime, func, candidates, devices: list[str], strict: bool) -> str:
    """What a GPU says where this op's operands are on ``devices`` (see kernels.py)."""
    name = func._schema.name.split("::", 1)[-1]
    named = [(argument, rt.dev(t)) for _, argument, t in candidates]
    if "meta" in devices:  # the meta device's own wording
        other = next(d for d in devices if d != "meta")
        return f"Tensor on device {other} is not on the expected device meta!"
    if name in kernels.INDEXING and named and any(a == "indices" and d != named[0][1] for a, d in named):
        return kernels.INDICES.format(device=named[0][1])
    if name in kernels.MASKED_FILL:
        found = dict(named)
        if "mask" in found and found["mask"] != found.get("self"):
            return kernels.MASK.format(mask=found["mask"], self=found["self"])
    if strict:
        text = kernels.named_text(name, func._schema.overload_name, named)
        if text is not None:
            return text
    return kernels.GENERIC.format(a=devices[0], b=devices[1])


def report_mismatch(rt: Runtime, op: str, candidates, devices: list[str], text: str) -> None:
    """Record a device mismatch of ``op`` (an event); unless the run keeps going, raise ``text``."""
    operands = describe_operands(rt, candidates, devices)
    site = rt.site(2)
    origins = tuple(sorted({(o["origin"]["kind"], tuple(o["origin"].get("site") or ()))
                            for o in operands if "origin" in o}))
    rt.event("mismatch", (op, tuple(site or ()), origins),
             op=op, devices=devices, site=site, stack=rt.stack(2), operands=operands,
             raised=not rt.keep_going, message=text)
    if not rt.keep_going:
        error = SimulatedDeviceError(text)
        rt.local.failure = error  # TorchScript's interpreter keeps only the type of an error it passes on
        raise error


def type_name(dtype) -> str:
    """``torch.int64`` -> "Long", as torch's C++ code prints a scalar type."""
    return LEGACY_NAMES[dtype].removesuffix("Tensor") if dtype in LEGACY_NAMES else str(dtype)


def describe_operands(rt: Runtime, candidates, devices: list[str], limit: int = 8) -> list[dict]:
    """At most ``limit`` operands of a mismatch, so that every device shows and those with an
    origin (the tensors a finding explains) come first: an optimizer's long lists of
    parameters must not hide the one CPU state tensor. A 0-dim CPU operand shows only as the
    CPU side of a mismatch no larger CPU tensor is part of (a CUDA wrapper refuses it)."""
    chosen, seen_devices = [], set()
    described = []
    for index, t in candidates:
        d = rt.dev(t)
        if t.dim() == 0 and d == CPU:
            continue
        entry = rt.operand(t, index)
        described.append(entry)
        if "origin" in entry or d not in seen_devices:
            seen_devices.add(d)
            chosen.append(entry)
        if len(chosen) >= limit and len(seen_devices) >= len(devices):
            break
    if CPU in devices and CPU not in seen_devices:
        scalar = next(((i, t) for i, t in candidates if t.dim() == 0 and rt.dev(t) == CPU), None)
        if scalar is not None:
            chosen.insert(0, rt.operand(scalar[1], scalar[0]))
    for entry in described:
        if len(chosen) >= limit:
            break
        if entry not in chosen:
            chosen.append(entry)
    return chosen[:limit]


def _gather(args, kwargs, skip, strict):
    """(first accelerator device, a CPU operand (0-dim ones count if ``strict``)?, two accelerators?,
    number of tensors).

    The careful twin of the scan inlined in ``__torch_dispatch__`` (kept inline there because
    each Python frame costs a trace event per op): used when an operand has no storage."""
    accel = None
    has_cpu = mixed = False
    tensors = 0
    items = list(args) + list(kwargs.values()) if kwargs else args
    for i, a in enumerate(items):
        if isinstance(a, Tensor):
            group = (a,)
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            group = a
        else:
            continue
        if skip and i < len(args) and i in skip:
            continue
        for t in group:
            if not isinstance(t, Tensor):
                continue
            tensors += 1
            d = getattr(_storage(t), "_tdl_dev", None)
            if d is None:
                if not has_cpu and (strict or t.dim() != 0):
                    has_cpu = True
            elif accel is None:
                accel = d
            elif d != accel:
                mixed = True
    return accel, has_cpu, mixed, tensors


def _tag_outputs(fresh, out, device, keep_cpu) -> None:
    if len(fresh) == 1:
        if fresh[0]:
            _tag_any(out, device)
        return
    if isinstance(out, (tuple, list)):
        for i, (o, new) in enumerate(zip(out, fresh)):
            if new and i not in keep_cpu:
                _tag_any(o, device)


_storage = storage_of


def _tag_any(out, device) -> None:
    if isinstance(out, Tensor):
        storage = _storage(out)
        if storage is not None:
            storage._tdl_dev = device
    elif isinstance(out, (list, tuple)):
        for o in out:
            if isinstance(o, Tensor):
                storage = _storage(o)
                if storage is not None:
                    storage._tdl_dev = device


# -- CPU kernels a GPU run does not need ---------------------------------------------------

LOW_PRECISION = ("Half", "BFloat16", "ComplexHalf", "Float8_e4m3fn", "Float8_e5m2")
_MISSING_KERNEL = re.compile(
    r'"(?P<kernel>\w+)" not implemented for \'(?P<dtype>\w+)\'|'
    r"Unsupported dtype (?P<fft>\w+)|"
    r"doesn't support tensors of type: (?P<mkl>\w+)|"
    r"(?P<op>[\w.]+): Low precision dtypes not supported\. Got (?P<linalg>\w+)")


def missing_cpu_kernel(error: BaseException, func=None) -> str | None:
    """"<op> has no CPU <dtype> kernel" when ``error`` says the CPU lacks a kernel for a
    low-precision dtype (which CUDA runs use: Half FFT, Half ``lu``...), else None."""
    match = _MISSING_KERNEL.search(str(error))
    if match is None:
        return None
    dtype = match.group("dtype") or match.group("fft") or match.group("mkl") or match.group("linalg")
    if dtype not in LOW_PRECISION:
        return None
    op = match.group("kernel") or match.group("op") or getattr(func, "__name__", None) or "this operation"
    op = re.sub(r"_cpu_?$", "", op)
    return f"{op} has no CPU {dtype} kernel"


# -- storages ------------------------------------------------------------------------------

def patch_storage(rt: Runtime, patches: Patches) -> None:
    """A storage's copy is on the storage's device: ``UntypedStorage.clone`` (which
    ``copy.deepcopy`` of a tensor, a buffer, a module or a storage uses) makes its new storage
    with ``device=self.device``, the real CPU, and would drop the virtual device (parameters kept
    theirs only because ``Parameter.__deepcopy__`` clones the tensor)."""
    original = torch.UntypedStorage.clone

    def clone(self):
        out = original(self)
        for name in TAGS:
            value = getattr(self, name, None)
            if value is not None:
                setattr(out, name, value)
        return out

    clone.__doc__ = original.__doc__
    patches.set(torch.UntypedStorage, "clone", clone)


# -- TorchScript ------------------------------------------------------------------------------

TORCHSCRIPT_EAGER = ("TorchScript functions (torch.jit.script/trace of a function) ran as their Python source, so "
                     "that they see the simulated device; the compiled graph itself is not simulated")
TORCHSCRIPT_GRAPH = ("TorchScript modules (torch.jit.script/trace of a module) ran as compiled code, which reads "
                     "the real (CPU) device: tensors they make follow their inputs' simulated device")
TORCHSCRIPT_MISMATCH = ("TorchScript code mixed its inputs' simulated device with CPU tensors: inside it x.device "
                        "reads the real CPU and constants are folded on the CPU, so the simulator took those CPU "
                        "tensors as being on the inputs' device (a device mix inside compiled code is not checked)")


def _first_accelerator(values) -> str | None:
    for value in values:
        if isinstance(value, Tensor):
            device = getattr(_storage(value), "_tdl_dev", None)
        elif isinstance(value, (list, tuple)):
            device = _first_accelerator(value)
        elif isinstance(value, dict):
            device = _first_accelerator(value.values())
        else:
            continue
        if device is not None:
            return device
    return None


def patch_torchscript(rt: Runtime, patches: Patches) -> None:
    """TorchScript runs in its own interpreter, where ``x.device``, ``x.is_cuda`` and
    ``.to(y.device)`` read the real (CPU) device. A scripted or traced *function* keeps its Python
    source (``_torchdynamo_inline``): it runs as that, eagerly, and is simulated like any Python.
    A scripted or traced *module* runs compiled, with its inputs' simulated device as the ambient
    device (tensors it makes go there), and a CPU tensor a device mix inside it meets is taken as
    being on that device (TORCHSCRIPT_MISMATCH, a limit of the run).
    ``torch.jit.trace`` records its graph on the real CPU, without the simulator's modes: the JIT
    tracer cannot record through a Python dispatch mode, and would record the function mode's
    own frames as the ops' sources (its sanity check then finds two graphs that differ)."""
    function_call = torch._C.ScriptFunction.__call__
    method_call = torch._C.ScriptMethod.__call__
    local = rt.local

    def compiled(call, self, args, kwargs):
        device = _first_accelerator(args) or _first_accelerator(kwargs.values())
        if device is not None:
            rt.limit("TorchScript graph", TORCHSCRIPT_GRAPH)
        saved = (getattr(local, "ambient", None), getattr(local, "script_device", None))
        local.failure = None
        if device is not None:
            local.ambient = local.script_device = device
        try:
            return call(self, *args, **kwargs)
        except RuntimeError as error:
            failure = local.failure
            if failure is None or failure is error or isinstance(error, SimulatedDeviceError):
                raise
            # The interpreter passes a Python error on as "RuntimeError: " without its message; a
            # GPU's error reads "...TorchScript interpreter... RuntimeError: <message>"
            text = str(error).rstrip()
            text = f"{text} {failure}" if text.endswith("Error:") else str(failure)
            raise SimulatedDeviceError(text) from error
        finally:
            local.ambient, local.script_device = saved

    def call_function(self, *args, **kwargs):
        python = getattr(self, "_torchdynamo_inline", None)
        if callable(python):
            rt.limit("TorchScript", TORCHSCRIPT_EAGER)
            return python(*args, **kwargs)
        return compiled(function_call, self, args, kwargs)

    def call_method(self, *args, **kwargs):
        return compiled(method_call, self, args, kwargs)

    patches.set(torch._C.ScriptFunction, "__call__", call_function)
    patches.set(torch._C.ScriptMethod, "__call__", call_method)

    def untraced(original):
        def trace(*args, **kwargs):
            with _no_modes():
                return original(*args, **kwargs)
        trace.__wrapped__ = original
        trace.__doc__ = original.__doc__
        trace.__name__ = original.__name__
        return trace

    for name in ("trace", "trace_module"):
        original = getattr(torch.jit, name, None)
        if original is not None:
            patches.set(torch.jit, name, untraced(original))


@contextlib.contextmanager
def _no_modes():
    """Pop this thread's Python dispatch and function modes, push them back after (as
    ``torch.utils._python_dispatch._disable_current_modes`` does for dispatch modes, without its
    imports of torch.fx, which cost seconds)."""
    from torch.utils._python_dispatch import _len_torch_dispatch_stack, _pop_mode, _push_mode

    dispatch = [_pop_mode() for _ in range(_len_torch_dispatch_stack())]
    function = [torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]
    try:
        yield
    finally:
        for mode in reversed(function):
            torch._C._push_on_torch_function_stack(mode)
        for mode in reversed(dispatch):
            _push_mode(mode)


# -- moves that autograd can follow -------------------------------------------------------

def cpu_copy(x, dtype=None, memory_format=None):
    kwargs = {"copy": True}
    if dtype is not None:
        kwargs["dtype"] = dtype
    if memory_format is not None:
        kwargs["memory_format"] = memory_format
    return x.to(CPU, **kwargs)


class VirtualMove(torch.autograd.Function):
    """A copy to another virtual device whose gradient goes back to the source device
    (a plain ``_to_copy`` would give the gradient the destination's tag)."""

    @staticmethod
    def forward(ctx, x, target, dtype, memory_format, rt):
        ctx.src = rt.dev(x)
        ctx.dtype = x.dtype
        ctx.rt = rt
        y = cpu_copy(x, dtype, memory_format)
        rt.tag(y, target)
        return y

    @staticmethod
    def backward(ctx, grad):
        g = grad.to(dtype=ctx.dtype, copy=True)
        ctx.rt.tag(g, ctx.src)
        return g, None, None, None, None


def move(rt: Runtime, x, target: str, dtype=None, memory_format=None):
    if x.requires_grad and torch.is_grad_enabled():
        return VirtualMove.apply(x, target, dtype, memory_format, rt)
    y = cpu_copy(x, dtype, memory_format)
    rt.tag(y, target)
    return y


# -- torch.cuda / torch.accelerator as if one GPU were present ----------------------------

def _stream_bases() -> tuple[tuple, tuple]:
    """The bases torch.cuda.Stream/Event must have for torch._dynamo: torch 2.4's device interface
    asserts (when an optimizer or torch.compile imports torch._dynamo) that they subclass
    ``torch._streambase._StreamBase``/``_EventBase``, plain abstract classes there. Later releases
    make those deprecated aliases of the C types ``torch.Stream``/``torch.Event`` (whose
    constructors want a real device) and no longer assert: no base then."""
    try:
        from torch import _streambase
    except ImportError:
        return (), ()
    bases = []
    for name in ("_StreamBase", "_EventBase"):
        base = getattr(_streambase, name, None)
        plain = isinstance(base, type) and all(
            b.__module__ in ("abc", "builtins", "torch._streambase") for b in base.__mro__)
        bases.append((base,) if plain else ())
    return bases[0], bases[1]


_STREAM_BASES, _EVENT_BASES = _stream_bases()


class _Stream(*_STREAM_BASES):
    def __init__(self, *args, **kwargs):
        self.device = torch.device("cuda", 0)
        self.cuda_stream = 0

    def synchronize(self):
        return None

    def wait_stream(self, stream):
        return None

    def wait_event(self, event):
        return None

    def record_event(self, event=None):
        return event or _Event()

    def query(self):
        return True

    def is_capturing(self):
        return False

    def __eq__(self, other):  # one simulated stream: every stream is the same
        return isinstance(other, _Stream)

    def __hash__(self):
        return hash(_Stream)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Event(*_EVENT_BASES):
    def __init__(self, *args, **kwargs):
        pass

    def record(self, stream=None):
        return None

    def synchronize(self):
        return None

    def wait(self, stream=None):
        return None

    def query(self):
        return True

    def elapsed_time(self, other):
        return 0.0


# -- CUDA generators: torch.Generator(device="cuda"), torch.cuda.default_generators ----------

# ATen's check_generator (ATen/core/Generator.h), where a kernel meets a generator of another device type
GENERATOR_TEXT = "Expected a '{expected}' device type for generator but found '{found}'"
_CGenerator = torch._C.Generator


class _GeneratorMeta(type(_CGenerator)):
    # every generator is a torch.Generator while the simulator stands in for the class, as before
    def __instancecheck__(cls, obj):
        return type(_CGenerator).__instancecheck__(_CGenerator, obj)

    def __subclasscheck__(cls, sub):
        return type(_CGenerator).__subclasscheck__(_CGenerator, sub)


class SimGenerator(_CGenerator, metaclass=_GeneratorMeta):
    """``torch.Generator`` under the simulator. For the CPU (or any device but CUDA) it makes the
    generator torch makes; for CUDA, a CPU generator that reports the simulated device: it seeds
    and draws as a CPU generator does (the CPU's stream, not a GPU's Philox one), and
    SimDispatchMode refuses it where a GPU would (a CPU op), and a CPU generator in a CUDA op."""

    _rt = None  # the Runtime, while patched

    def __new__(cls, device=None):
        rt = cls._rt
        target = None
        if rt is not None and device is not None:
            with contextlib.suppress(RuntimeError, TypeError):
                target = rt.normalize(device if not isinstance(device, int) else torch.device(device))
        if target is None or not target.startswith("cuda"):
            return _CGenerator() if device is None else _CGenerator(device)
        rt.accelerated = True
        rt.gpu_requests += 1
        rt.request_cuda(f"torch.Generator(device='{target}')", target)
        gen = _sim_generator(rt, target)
        rt.placed_on_accelerator()
        return gen

    @property
    def device(self):
        return torch.device(self._tdl_dev)

    def __reduce__(self):  # copy.deepcopy, pickle: a CUDA generator again, with the same state
        return SimGenerator, (self._tdl_dev,), _CGenerator.__reduce__(self)[2]

    def __repr__(self):
        return f"<torch._C.Generator object at {hex(id(self))}>"


SimGenerator.__module__ = "torch"  # pickled as torch.Generator, which it is while patched
SimGenerator.__name__ = SimGenerator.__qualname__ = "Generator"


def _sim_generator(rt: Runtime, target: str):
    index = int(target.split(":")[1])
    if index >= rt.device_count:
        raise RuntimeError("CUDA error: invalid device ordinal")
    gen = _CGenerator.__new__(SimGenerator)
    gen._tdl_dev = target
    rt.generators[gen._cdata] = weakref.ref(gen)
    return gen


def generator_device(rt: Runtime, gen) -> str:
    """Where a generator is, as a GPU sees it: "cuda:N" for a simulated CUDA generator (the
    dispatcher hands ops a new Python object for it: it is found by its C++ generator), else
    its real device."""
    ref = rt.generators.get(gen._cdata)
    if ref is not None:
        found = ref()
        if found is not None and found._cdata == gen._cdata:
            return found._tdl_dev
    device = _CGenerator.device.__get__(gen)
    return CPU if device.type == "cpu" else str(device)


def _reduce_generator(gen):
    # pickle would look torch.Generator up and find SimGenerator, not this class: name that
    return SimGenerator, (_CGenerator.device.__get__(gen),), _CGenerator.__reduce__(gen)[2]


def patch_generators(rt: Runtime, patches: Patches) -> None:
    """``torch.Generator(device="cuda")``, ``torch.cuda.default_generators`` and the
    ``torch.cuda`` seeding functions, on simulated CUDA generators (see SimGenerator)."""
    import copyreg

    patches.set(SimGenerator, "_rt", rt)
    patches.set(torch, "Generator", SimGenerator)
    previous = copyreg.dispatch_table.get(_CGenerator)
    copyreg.dispatch_table[_CGenerator] = _reduce_generator

    def restore():
        if previous is None:
            copyreg.dispatch_table.pop(_CGenerator, None)
        else:
            copyreg.dispatch_table[_CGenerator] = previous

    patches.on_undo(restore)
    defaults = _DefaultGenerators(rt, (_sim_generator(rt, f"cuda:{i}") for i in range(rt.device_count)))
    cuda = torch.cuda

    def current():
        return tuple.__getitem__(defaults, rt.current_index)

    def manual_seed(seed):
        current().manual_seed(int(seed))

    def manual_seed_all(seed):
        for gen in tuple.__iter__(defaults):
            gen.manual_seed(int(seed))

    def seed_all():
        value = current().seed()
        for gen in tuple.__iter__(defaults):
            gen.manual_seed(value)

    for name, value in {
        "default_generators": defaults,
        "manual_seed": manual_seed,
        "manual_seed_all": manual_seed_all,
        "seed": lambda: current().seed(),
        "seed_all": seed_all,
        "initial_seed": lambda: current().initial_seed(),
    }.items():
        patches.set(cuda, name, value)


class _DefaultGenerators(tuple):
    """``torch.cuda.default_generators``: a program that takes one out can hand it to an op, which
    the dispatch mode checks from then on (seeding through ``torch.cuda`` hands it to none)."""

    def __new__(cls, rt: Runtime, generators):
        self = super().__new__(cls, generators)
        self._rt = rt
        return self

    def __getitem__(self, index):
        self._rt.placed_on_accelerator()
        return super().__getitem__(index)

    def __iter__(self):
        self._rt.placed_on_accelerator()
        return super().__iter__()


class Patches:
    """Attribute patches, undone in reverse order."""

    def __init__(self):
        self._undo: list = []

    def set(self, owner, name, value) -> None:
        missing = object()
        old = owner.__dict__.get(name, missing) if isinstance(owner, type) else getattr(owner, name, missing)

        def restore():
            if old is missing:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
            else:
                setattr(owner, name, old)

        self._undo.append(restore)
        setattr(owner, name, value)

    def on_undo(self, callback) -> None:
        self._undo.append(callback)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


def patch_cuda(rt: Runtime, patches: Patches) -> None:
    cuda = torch.cuda
    count = rt.device_count

    def setter(what):
        def set_device(device):
            index = device if isinstance(device, int) else torch.device(device).index
            if index is not None and index >= 0:
                rt.current_index = index
                site = rt.site()
                # which device each rank chose (TDL011)
                rt.event("set-device", (tuple(site or ()), what, index), site=site, what=f"{what}({index})",
                         index=index)
        return set_device

    set_device = setter("torch.cuda.set_device")
    set_device_index = setter("torch.accelerator.set_device_index")

    def properties(device=None):
        return types.SimpleNamespace(
            name="Simulated CUDA device (torchdev-lint trace)", major=8, minor=0,
            total_memory=80 * 2**30, multi_processor_count=108, is_integrated=False,
            is_multi_gpu_board=False, uuid="00000000-0000-0000-0000-000000000000",
        )

    class device_ctx:  # torch.cuda.device(i) / torch.cuda.device_of(t)
        def __init__(self, device):
            self.index = device if isinstance(device, int) else (
                torch.device(device).index if device is not None else None)
            self.prev = None

        def __enter__(self):
            self.prev = rt.current_index
            if self.index is not None and self.index >= 0:
                rt.current_index = self.index
                site = rt.site()
                rt.event("set-device", (tuple(site or ()), "torch.cuda.device", self.index), site=site,
                         what=f"with torch.cuda.device({self.index})", index=self.index)

        def __exit__(self, *exc):
            rt.current_index = self.prev
            return False

    def returning(value):
        # a distinct function per name: torch._dynamo maps torch.* objects by identity and
        # refuses one object under two names with different rules
        return lambda *a, **k: value
    values = {
        "is_available": lambda: True,
        "device_count": lambda: count,
        "current_device": lambda: rt.current_index,
        "set_device": set_device,
        "synchronize": returning(None),
        "get_device_name": lambda device=None: properties().name,
        "get_device_capability": lambda device=None: (8, 0),
        "get_device_properties": properties,
        "get_arch_list": lambda: ["sm_80"],
        "is_bf16_supported": lambda *a, **k: True,
        "is_initialized": lambda: True,
        "_lazy_init": returning(None),
        "init": returning(None),
        "current_stream": lambda device=None: _Stream(),
        "default_stream": lambda device=None: _Stream(),
        "Stream": _Stream,
        "Event": _Event,
        "stream": lambda stream=None: contextlib.nullcontext(stream),
        "device": device_ctx,
        "is_current_stream_capturing": lambda: False,
        "empty_cache": returning(None),
        "ipc_collect": returning(None),
        "memory_allocated": returning(0),
        "max_memory_allocated": returning(0),
        "memory_reserved": returning(0),
        "max_memory_reserved": returning(0),
        "reset_peak_memory_stats": returning(None),
        "reset_max_memory_allocated": returning(None),
        "mem_get_info": lambda device=None: (80 * 2**30, 80 * 2**30),
        "memory_summary": lambda *a, **k: "(simulated device: no memory statistics)",
        "get_rng_state": lambda device="cuda": torch.get_rng_state(),
        "get_rng_state_all": lambda: [torch.get_rng_state() for _ in range(count)],
        "set_rng_state": returning(None),
        "set_rng_state_all": returning(None),
    }
    for name, value in values.items():
        patches.set(cuda, name, value)
    for name, cls in legacy_cuda_types(rt).items():
        patches.set(cuda, name, cls)
    if hasattr(cuda, "amp") and hasattr(cuda.amp, "common"):
        patches.set(cuda.amp.common, "amp_definitely_not_available", lambda: False)

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        for name, value in {
            "is_available": lambda *a, **k: True,
            "device_count": lambda: count,
            "current_accelerator": lambda check_available=False: torch.device("cuda"),
            "current_device_index": lambda: rt.current_index,
            "current_device_idx": lambda: rt.current_index,
            "set_device_index": set_device_index,
            "set_device_idx": set_device_index,
            "current_stream": lambda device=None: _Stream(),
            "synchronize": returning(None),
        }.items():
            if hasattr(accelerator, name):
                patches.set(accelerator, name, value)

    patch_generators(rt, patches)
    patch_autocast(rt, patches)
    # cuDNN is never acceptable here (the RNN path would warn that torch lacks cuDNN)
    patches.set(torch.backends.cudnn, "is_acceptable", lambda tensor: False)

    # torch.compile would trace through the simulator's Python modes: run eagerly instead.
    def compile(model=None, **kwargs):
        rt.limit("torch.compile", "torch.compile ran the model eagerly (compiled kernels are not simulated)")
        if model is None:
            return lambda m: m
        return model

    patches.set(torch, "compile", compile)
    patch_fake_tensors(rt, patches)
    # nn.DataParallel scatters through torch._C._scatter (absent on CPU builds): one device anyway.
    patches.set(torch.nn.DataParallel, "forward", lambda self, *a, **k: self.module(*a, **k))


FAKE_LIMIT = ("fake tensors (make_fx, torch.export) were made from the CPU tensors that hold the values: the trace "
              "was taken on the CPU (a device mix inside traced code is not checked)")


def patch_fake_tensors(rt: Runtime, patches: Patches) -> None:
    """A fake tensor copies the device its real tensor reports: made from a simulated CUDA
    tensor, it would reach CUDA code this torch does not have (its autograd aborts the
    process) and meet fake CPU tensors made from the same run's constants. Fake tensors are
    made from the real (CPU) device instead."""
    converter = getattr(getattr(torch._subclasses, "fake_tensor", None), "FakeTensorConverter", None)
    original = getattr(converter, "from_real_tensor", None)
    if original is None:
        return

    def from_real_tensor(self, *args, **kwargs):
        local = rt.local
        previous = getattr(local, "real_devices", False)
        local.real_devices = True
        rt.limit("fake tensors", FAKE_LIMIT)
        try:
            return original(self, *args, **kwargs)
        finally:
            local.real_devices = previous

    patches.set(converter, "from_real_tensor", from_real_tensor)


AUTOCAST_LIMIT = ("autocast('cuda') ran as the CPU's autocast with the same dtype: the ops it casts are the "
                  "CPU's list, close to a GPU's but not the same")


def patch_autocast(rt: Runtime, patches: Patches) -> None:
    """``autocast("cuda")`` also enters the CPU's autocast with its dtype: the values are on the
    CPU, where CUDA's autocast never applies, and code written for it (half inputs to a float
    layer) would fail with a dtype error a GPU never raises."""
    autocast = torch.amp.autocast_mode.autocast
    enter, exit_ = autocast.__enter__, autocast.__exit__

    def __enter__(self):
        result = enter(self)
        inner = None
        if getattr(self, "device", None) == "cuda" and getattr(self, "_enabled", False):
            rt.limit("autocast", AUTOCAST_LIMIT)
            inner = autocast("cpu", dtype=self.fast_dtype, cache_enabled=getattr(self, "_cache_enabled", None))
            inner.__enter__()
        self.__dict__.setdefault("_tdl_inner", []).append(inner)
        return result

    def __exit__(self, *exc):
        inners = self.__dict__.get("_tdl_inner")
        inner = inners.pop() if inners else None
        if inner is not None:
            inner.__exit__(*exc)
        return exit_(self, *exc)

    patches.set(autocast, "__enter__", __enter__)
    patches.set(autocast, "__exit__", __exit__)


def patch_serialization(rt: Runtime, patches: Patches) -> None:
    """torch.save writes ``cuda:N`` location tags for virtual-device storages, as on a GPU;
    torch.load puts ``cuda:N`` storages on the virtual device (or raises as a GPU would)."""

    def tagger(storage):
        for s in (storage, getattr(storage, "_untyped_storage", None)):
            device = getattr(s, "_tdl_dev", None) if s is not None else None
            if device is not None:
                return device
        return None

    def deserialize(obj, location):
        if not location.startswith("cuda"):
            return None
        index = int(location.split(":", 1)[1]) if ":" in location else rt.current_index
        if index >= rt.device_count:
            raise RuntimeError(
                f"Attempting to deserialize object on CUDA device {index} but "
                f"torch.cuda.device_count() is {rt.device_count}. Please use torch.load with "
                "map_location to map your storages to an existing device.")
        target = getattr(obj, "_untyped_storage", obj)
        target._tdl_dev = f"cuda:{index}"
        rt.placed_on_accelerator()
        return obj

    registry = torch.serialization._package_registry
    # Priorities must be unique: torch.serialization.register_package sorts the tuples, so a
    # program's own package of the same priority would compare functions (TypeError). A
    # fraction no program picks, before torch's own (10 and up) and after a program's 0.
    entry = (0.5, tagger, deserialize)
    registry.append(entry)
    registry.sort(key=lambda e: e[0])
    patches.on_undo(lambda: registry.remove(entry) if entry in registry else None)


def patch_threads(enter_modes, patches: Patches) -> None:
    """Modes are thread-local: new threads (the DataLoader pin-memory thread...) re-enter them."""
    original = threading.Thread.run

    def run(self):
        with enter_modes():
            return original(self)

    patches.set(threading.Thread, "run", run)


RANK_GROUP_TIMEOUT = 60  # seconds a rank of the tracer's waits in a collective (default: 30 minutes)


def patch_distributed(rt: Runtime, patches: Patches) -> None:
    """A one-process world: NCCL (absent from CPU builds, and meaningless on a simulated GPU)
    becomes gloo, which computes the same collectives on the CPU; recorded as a limit."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    c10d = dist.distributed_c10d
    original = c10d.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        asked = str(backend or "")
        site = rt.site()
        if "nccl" in asked.lower() and rt.mode == "cpu-only":
            rt.request_cuda(f"init_process_group(backend='{asked}')", None,
                            error=RuntimeError("Distributed package doesn't have NCCL built in"))
        if "nccl" in asked.lower() or not asked:
            backend = "gloo"
        world = kwargs.get("world_size", -1)
        if rt.ranks:
            # a rank that waits for one that failed must not wait the default 30 minutes
            kwargs.setdefault("timeout", datetime.timedelta(seconds=RANK_GROUP_TIMEOUT))
            rt.limit("torch.distributed", f"torch.distributed ran with the gloo backend (asked: "
                                          f"{asked or 'default'}) between the {rt.ranks} ranks the tracer started")
        else:
            rt.limit("torch.distributed", f"torch.distributed ran with the gloo backend (asked: {asked or 'default'}) "
                                          f"in this one process{'' if world in (-1, 1, None) else f' of {world}'}; "
                                          "collectives and other ranks are not simulated")
        result = original(backend, *args, **kwargs)
        try:
            rank, size = dist.get_rank(), dist.get_world_size()
        except (RuntimeError, ValueError):
            rank = size = None
        # each rank's group (TDL011): the judge pairs it with the devices the rank then used
        rt.event("process-group", (tuple(site or ()),), site=site, backend=asked or None, rank=rank, world=size,
                 what=f"init_process_group(backend={asked!r})" if asked else "init_process_group()")
        return result

    init_process_group.__wrapped__ = original
    patches.set(c10d, "init_process_group", init_process_group)
    patches.set(dist, "init_process_group", init_process_group)
    ddp = one_process_ddp(rt)
    patches.set(torch.nn.parallel, "DistributedDataParallel", ddp)
    patches.set(torch.nn.parallel.distributed, "DistributedDataParallel", ddp)


def one_process_ddp(rt: Runtime):
    """DistributedDataParallel for a world of one process, where its gradient all-reduce is an
    identity: the wrapped module itself, with the input move that ``device_ids`` asks for. The
    real class cannot run here: its C++ reducer keeps gradient buckets on the real (CPU) device,
    which would read as a device mismatch of the simulator's own making."""

    class DistributedDataParallel(torch.nn.Module):
        def __init__(self, module, device_ids=None, output_device=None, *args, **kwargs):
            super().__init__()
            self.module = module
            self.device_ids = list(device_ids) if device_ids else None
            self.output_device = output_device
            self.require_backward_grad_sync = True
            rt.limit("DistributedDataParallel", "DistributedDataParallel ran as the module it wraps (the gradient "
                                                "all-reduce between ranks is not simulated)" if rt.ranks else
                     "DistributedDataParallel ran as the module it wraps (one process: the gradient all-reduce is "
                     "not simulated)")

        def forward(self, *inputs, **kwargs):
            if self.device_ids and rt.sim:
                device = rt.normalize(self.device_ids[0])

                def move(t):
                    return t.to(device) if rt.dev(t) != device else t
                inputs, kwargs = torch.utils._pytree.tree_map_only(Tensor, move, (inputs, kwargs))
            return self.module(*inputs, **kwargs)

        def no_sync(self):
            return contextlib.nullcontext()

        def join(self, *args, **kwargs):
            return contextlib.nullcontext()

        def register_comm_hook(self, state, hook):
            return None

        def _set_static_graph(self):
            return None

        @staticmethod
        def _get_active_ddp_module():  # torch.compile asks which DDP module it is tracing: none here
            return None

    return DistributedDataParallel


# -- legacy tensor types: torch.cuda.FloatTensor(...), x.type(torch.cuda.FloatTensor) ------

LEGACY_DTYPES = {
    "FloatTensor": torch.float32, "DoubleTensor": torch.float64, "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16, "ByteTensor": torch.uint8, "CharTensor": torch.int8,
    "ShortTensor": torch.int16, "IntTensor": torch.int32, "LongTensor": torch.int64, "BoolTensor": torch.bool,
}
LEGACY_NAMES = {dtype: name for name, dtype in LEGACY_DTYPES.items()}


def legacy_cuda_types(rt: Runtime) -> dict:
    """``torch.cuda.<X>Tensor`` classes that build the tensor as the CPU class does, then put it on
    the (virtual) accelerator; on a machine without a GPU each call is a CUDA request."""

    class LegacyMeta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, Tensor) and obj.dtype == cls.dtype and rt.dev(obj).startswith("cuda")

        def __repr__(cls):
            return f"<class 'torch.cuda.{cls.__name__}'>"

    def make(name, dtype):
        def __new__(cls, *args, **kwargs):
            target = f"cuda:{rt.current_index}"
            rt.request_cuda(f"torch.cuda.{name}(...)", target, error=TypeError(
                f"type torch.cuda.{name} not available. Torch not compiled with CUDA enabled."))
            out = getattr(torch, name)(*args, **kwargs)
            if rt.sim:
                rt.tag(out, target)
            return out

        return LegacyMeta(name, (), {"__new__": __new__, "dtype": dtype, "is_cuda": True,
                                     "__module__": "torch.cuda"})

    return {name: make(name, dtype) for name, dtype in LEGACY_DTYPES.items()}


def legacy_target(rt: Runtime, kind) -> tuple[str, torch.dtype] | None:
    """(device, dtype) that ``x.type(kind)`` asks for, when ``kind`` is a legacy tensor type
    (a class or its name, CPU or CUDA); None for a dtype or anything else."""
    name = kind if isinstance(kind, str) else f"{getattr(kind, '__module__', '')}.{getattr(kind, '__name__', '')}"
    head, _, short = name.rpartition(".")
    if short not in LEGACY_DTYPES or head not in ("torch", "torch.cuda"):
        return None
    return (f"cuda:{rt.current_index}" if head == "torch.cuda" else CPU), LEGACY_DTYPES[short]


def patch_no_cuda(rt: Runtime, patches: Patches) -> None:
    """A machine without a GPU: the ``torch.cuda`` calls that need a device are CUDA requests
    (they raise as on such a machine, or with --keep-going answer as a harmless one would)."""
    cuda = torch.cuda
    answers = {
        "set_device": None, "synchronize": None, "current_device": 0,
        "get_device_name": "(no GPU)", "get_device_capability": (0, 0),
        "get_device_properties": None, "current_stream": _Stream(), "default_stream": _Stream(),
    }

    torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep

    def request(name, answer):
        def call(*args, **kwargs):
            if sys._getframe(1).f_code.co_filename.startswith(torch_dir):
                # torch's own code asking (torch 2.4's inductor names the GPU in its cache key,
                # inside `except (AssertionError, RuntimeError)`): it is written for machines
                # without a GPU, so it gets their error, and no request is the program's. Should
                # the error reach the program, the run stops there, as on such a machine.
                raise AssertionError(NO_CUDA_TEXT)
            rt.request_cuda(f"torch.cuda.{name}()", f"cuda:{rt.current_index}")
            return answer
        return call

    for name, answer in answers.items():
        patches.set(cuda, name, request(name, answer))

    class NoGpuStream(_Stream):  # a class, for torch._dynamo (see _stream_bases)
        def __init__(self, *args, **kwargs):
            rt.request_cuda("torch.cuda.Stream()", f"cuda:{rt.current_index}")
            super().__init__()

    patches.set(cuda, "Stream", NoGpuStream)
    for name, cls in legacy_cuda_types(rt).items():
        patches.set(cuda, name, cls)
