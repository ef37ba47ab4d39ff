"""The TorchFunctionMode: the API surface, above autograd and argument parsing.

One class serves the three modes:
* ``sim``: answers ``.device``/``.is_cuda``/``get_device()`` with the virtual device, performs
  moves and ``device=`` requests on the CPU and tags the result, raises the GPU's TypeError on
  ``.numpy()`` of an accelerator tensor, makes pinning a no-op;
* ``real``: real devices; records the same events, and turns a real mixed-device error into
  an event (and with --keep-going, retries the call with the operands moved);
* ``cpu-only``: a machine without any GPU: every CUDA request is an event, then raises
  ``AssertionError: Torch not compiled with CUDA enabled`` as a CPU build does (or, with
  --keep-going, is redirected to the CPU).

In every mode it records: discarded results of tensor moves (TDL003: the caller's next
instruction is ``POP_TOP``), ``.numpy()`` calls (TDL009), and the origin of tensors made by a
factory without ``device=`` in the program's own code (TDL008).
"""

from __future__ import annotations

import ast
import bisect
import dis
import functools
import linecache
import sys

import torch
import torch.utils._device as _device_utils
from torch.overrides import TorchFunctionMode

from torchdev_lint import pyast
from torchdev_lint.trace import sim
from torchdev_lint.trace.kernels import RNN as RNN_TEXT
from torchdev_lint.trace.text import DEVICE_ERROR
from torchdev_lint.trace.runtime import CPU, NUMPY_TEXT, Runtime, storage_of
from torchdev_lint.trace.sites import frame_site

Tensor = torch.Tensor
TB = torch._C.TensorBase
META = "meta"

_GET_DEVICE = TB.device.__get__
_GET_IS_CUDA = TB.is_cuda.__get__
_GET_IS_CPU = TB.is_cpu.__get__
_CONSTRUCTORS = _device_utils._device_constructors()
_ALIASING_CONSTRUCTORS = {torch.as_tensor, torch.asarray}
_NEW = {TB.new_zeros, TB.new_ones, TB.new_empty, TB.new_full, TB.new_tensor, TB.new_empty_strided}

_NEXT_OP: dict = {}


def next_opname(code, lasti: int) -> str | None:
    """The instruction executed after the call at ``lasti``. During a call, ``f_lasti`` may
    point at the CALL or into its inline caches (Python-to-Python calls, 3.11/3.12), so the
    call is the last instruction that starts at or before it."""
    entry = _NEXT_OP.get(code)
    if entry is None:
        instructions = list(dis.get_instructions(code))
        entry = _NEXT_OP[code] = ([i.offset for i in instructions], [i.opname for i in instructions])
    offsets, names = entry
    index = bisect.bisect_right(offsets, lasti) - 1
    if 0 <= index < len(names) - 1:
        return names[index + 1]
    return None


def _dropped(frame) -> bool:
    """The result of the call the frame is in is thrown away: popped at once, or put into a
    comprehension that is itself a statement (``{k: v.to(d) for k, v in batch.items()}``),
    whose dict or list nothing keeps."""
    following = next_opname(frame.f_code, frame.f_lasti)
    if following == "POP_TOP":
        return True
    return following in ("MAP_ADD", "LIST_APPEND") and frame.f_lineno in _dropped_comprehension_lines(
        frame.f_code.co_filename)


@functools.lru_cache(maxsize=256)
def _dropped_comprehension_lines(filename: str) -> frozenset[int]:
    """The lines of the file's dict and list comprehensions written as statements."""
    tree = pyast.parse("".join(linecache.getlines(filename)))
    if tree is None:
        return frozenset()
    return frozenset(
        line for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.DictComp, ast.ListComp))
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1))


def _constructor_name(func) -> str:
    return f"torch.{getattr(func, '__name__', func)}"


class TraceFunctionMode(TorchFunctionMode):
    def __init__(self, rt: Runtime):
        super().__init__()
        self.rt = rt
        self.sim = rt.sim
        self.real = rt.mode == "real"
        self.local = rt.local
        self.probe = rt.line_probe
        handlers = {TB.to: self._to, TB.cuda: self._to, TB.cpu: self._to,
                    TB.numpy: self._numpy, Tensor.__array__: self._numpy,
                    # Module.to(device="cuda") parses its arguments: no request yet (its moves are)
                    torch._C._nn._parse_to: self._parse_to}
        if rt.sim:
            handlers.update({
                TB.type_as: self._to,  # self.to(other.options()) in C++: the real device otherwise
                _GET_DEVICE: self._get_device, _GET_IS_CUDA: self._get_is_cuda,
                _GET_IS_CPU: self._get_is_cpu, TB.get_device: self._get_device_index,
                TB.pin_memory: self._pin_memory, TB.is_pinned: self._is_pinned,
                Tensor.__repr__: self._repr,
            })
            for new in _NEW:
                handlers[new] = self._new
            handlers[torch.nn.functional.ctc_loss] = self._lengths_on_accelerator
            handlers[torch.ctc_loss] = self._lengths_on_accelerator
            for name in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
                handlers[getattr(torch._C._VariableFunctions, name)] = self._rnn
            handlers[torch._C._VariableFunctions._pad_packed_sequence] = self._pad_packed
        if rt.sim or rt.mode == "cpu-only":
            handlers[TB.type] = self._type
        if rt.mode == "cpu-only":
            handlers[TB.pin_memory] = self._pin_without_gpu
        self.handlers = handlers

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # The hot path (every torch call): few Python frames, as each costs a trace event too.
        if kwargs is None:
            kwargs = {}
        if self.probe is not None:
            self.probe()  # which finding lines make this call (pytest's verdicts)
        on_accelerator = self.rt.on_accelerator
        if on_accelerator and getattr(self.local, "dispatch", None) is None:
            self.rt.enter_dispatch()  # a thread that ran before the first placement, or waited
        handler = self.handlers.get(func)
        if handler is not None:
            return handler(func, args, kwargs)
        if kwargs and kwargs.get("device") is not None:
            return self._device_request(func, args, kwargs)
        if func in _CONSTRUCTORS:
            return self._factory(func, args, kwargs)
        if self.sim and on_accelerator:
            # The operands' accelerator becomes the ambient device while ``func`` runs: code
            # inside it (C++ composites, Python torch functions, where this mode is off) makes
            # tensors with ``device=x.device``, which reads the real cpu; SimDispatchMode gives
            # them the ambient device.
            ambient = None
            for a in args:
                if isinstance(a, Tensor):
                    ambient = getattr(storage_of(a), "_tdl_dev", None)
                elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
                    ambient = getattr(storage_of(a[0]), "_tdl_dev", None)
                if ambient is not None:
                    break
            if ambient is None:
                return func(*args, **kwargs)
            local = self.local
            previous = getattr(local, "ambient", None)
            local.ambient = ambient
            try:
                return func(*args, **kwargs)
            except (RuntimeError, NotImplementedError) as error:
                self._missing_kernel(func, error)
                raise
            finally:
                local.ambient = previous
        if self.real:
            return self._call_real(func, args, kwargs)
        return func(*args, **kwargs)

    def _missing_kernel(self, func, error) -> None:
        """An op on accelerator operands failed for want of a CPU kernel for the low-precision
        dtype a GPU has one for (Half FFT, `lu`...): the error is marked as not simulated (pytest
        skips the test with that reason), and the run's limits say so."""
        reason = sim.missing_cpu_kernel(error, func)
        if reason is not None:
            error._tdl_not_simulated = reason
            self.rt.limit(f"CPU kernel: {reason}", f"not simulated: {reason} (the values are computed on the CPU; "
                                                   f"a GPU has this kernel)")

    def _lengths_on_accelerator(self, func, args, kwargs):
        """ctc_loss takes its length tensors on the CPU even for CUDA inputs: give the call
        copies on the inputs' device, so the C++ code inside sees what it sees on a GPU."""
        args = list(args)
        device = self.rt.dev(args[0]) if args and isinstance(args[0], Tensor) else CPU
        if device != CPU:
            for i in (2, 3):
                if i < len(args) and isinstance(args[i], Tensor) and self.rt.dev(args[i]) == CPU:
                    args[i] = args[i].clone()
                    self.rt.tag(args[i], device)
            for name in ("input_lengths", "target_lengths"):
                value = kwargs.get(name)
                if isinstance(value, Tensor) and self.rt.dev(value) == CPU:
                    value = value.clone()
                    self.rt.tag(value, device)
                    kwargs = {**kwargs, name: value}
        return self._call_sim(func, tuple(args), kwargs)

    def _rnn(self, func, args, kwargs):
        """A recurrent layer: its CUDA code checks the hidden states', then the parameters',
        devices against the input's (RNN.cpp's check_attributes) in its own words; on the CPU
        the same mix fails later, inside a cell, as an ordinary mismatch."""
        rt = self.rt
        if not rt.keep_going and len(args) > 3:
            # (input, hx, params, ...) or, packed, (data, batch_sizes, hx, params, ...); hx: a
            # tensor, or a list of them (an LSTM's h and c)
            params = 3 if isinstance(args[3], (list, tuple)) else 2
            hx = args[params - 1]
            device = rt.dev(args[0])
            for name, group in (("hidden", hx if isinstance(hx, (list, tuple)) else (hx,)),
                                ("parameter", args[params])):
                for t in group:
                    if isinstance(t, Tensor) and rt.dev(t) != device:
                        text = RNN_TEXT.format(name=name, input=device, other=rt.dev(t))
                        devices = sorted({device, rt.dev(t)}, key=lambda d: (d == CPU, d))
                        sim.report_mismatch(rt, func.__name__, [(0, args[0]), (name, t)], devices, text)
        return self._call_sim(func, args, kwargs)

    def _pad_packed(self, func, args, kwargs):
        """The lengths come back on the CPU, like the batch sizes they are made from
        (PackedSequence.cpp), not on the data's device as the composite's ambient device says."""
        padded, lengths = self._call_sim(func, args, kwargs)
        self.rt.tag(lengths, CPU)
        return padded, lengths

    def _call_sim(self, func, args, kwargs):
        """Run ``func`` with its operands' accelerator as the ambient device: code inside it
        (C++ composites, Python torch functions: this mode is off there) makes new tensors with
        ``device=x.device``, which reads the real cpu; SimDispatchMode gives them this device."""
        ambient = None
        for a in args:
            if isinstance(a, Tensor):
                ambient = getattr(sim._storage(a), "_tdl_dev", None)
            elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
                ambient = getattr(sim._storage(a[0]), "_tdl_dev", None)
            if ambient is not None:
                break
        if ambient is None:
            return func(*args, **kwargs)
        local = self.rt.local
        previous = getattr(local, "ambient", None)
        local.ambient = ambient
        try:
            return func(*args, **kwargs)
        finally:
            local.ambient = previous

    # -- getters (simulator) ------------------------------------------------------------
    def _get_device(self, func, args, kwargs):
        if getattr(self.local, "real_devices", False):  # sim.patch_fake_tensors
            return _GET_DEVICE(args[0])
        return self.rt.torch_device(self.rt.dev(args[0]))

    def _get_is_cuda(self, func, args, kwargs):
        if getattr(self.local, "real_devices", False):
            return _GET_IS_CUDA(args[0])
        return self.rt.dev(args[0]).startswith("cuda")

    def _get_is_cpu(self, func, args, kwargs):
        return self.rt.dev(args[0]) == CPU

    def _get_device_index(self, func, args, kwargs):
        device = self.rt.dev(args[0])
        return int(device.split(":")[1]) if device.startswith("cuda") else -1

    def _pin_memory(self, func, args, kwargs):
        """A pinned copy, as on a GPU machine (pinning a CPU tensor copies it to page-locked
        memory); page-locked only in name here."""
        x = args[0]
        if self.rt.dev(x) != CPU:
            return x
        out = x.clone()
        storage = sim._storage(out)
        if storage is not None:
            storage._tdl_pinned = True
        return out

    def _is_pinned(self, func, args, kwargs):
        storage = sim._storage(args[0])
        return bool(getattr(storage, "_tdl_pinned", False)) if storage is not None else False

    def _parse_to(self, func, args, kwargs):
        """``Module.to``'s parser: ``Module.to(tensor)`` takes the tensor's (simulated) device, and
        ``Module.to(0)`` means cuda:0 (torch asks the accelerator runtime, absent here)."""
        if not self.sim:
            return func(*args, **kwargs)
        args, kwargs = _int_device(args, kwargs)
        other = args[0] if args and isinstance(args[0], Tensor) else kwargs.get("tensor")
        parsed = func(*args, **kwargs)
        if isinstance(other, Tensor):
            return (self.rt.torch_device(self.rt.dev(other)), *parsed[1:])
        return parsed

    def _repr(self, func, args, kwargs):
        text = func(*args, **kwargs)
        device = self.rt.dev(args[0])
        if device == CPU or "device=" in text:
            return text
        cut = len(text) - 1
        for suffix in (", size=", ", dtype=", ", layout=", ", grad_fn=", ", requires_grad="):
            position = text.rfind(suffix)
            if position != -1 and position > text.rfind("]"):
                cut = min(cut, position)
        return f"{text[:cut]}, device='{device}'{text[cut:]}"

    def _new(self, func, args, kwargs):
        if kwargs.get("device") is not None:
            return self._device_request(func, args, kwargs)
        out = func(*args, **kwargs)
        device = self.rt.dev(args[0])
        if device != CPU and isinstance(out, Tensor):
            self.rt.tag(out, device)
        return out

    def _pin_without_gpu(self, func, args, kwargs):
        """Pinning needs an accelerator: on a machine without one it raises."""
        self.rt.request_cuda(".pin_memory()", None, site=self._user_site(sys._getframe(2)), error=RuntimeError(
            "Cannot access accelerator device when none is available."))
        return args[0]

    def _type(self, func, args, kwargs):
        """``x.type(torch.cuda.FloatTensor)``, ``x.type('torch.cuda.LongTensor')``, ``x.type()``."""
        rt = self.rt
        x = args[0]
        kind = args[1] if len(args) > 1 else kwargs.get("dtype")
        if kind is None:
            device = rt.dev(x)
            if device.startswith("cuda") and x.dtype in sim.LEGACY_NAMES:
                return f"torch.cuda.{sim.LEGACY_NAMES[x.dtype]}"
            return func(*args, **kwargs)
        wanted = sim.legacy_target(rt, kind)
        if wanted is None:
            return func(*args, **kwargs)
        target, dtype = wanted
        caller = sys._getframe(2)
        if target.startswith("cuda"):
            name = kind if isinstance(kind, str) else f"torch.cuda.{kind.__name__}"
            rt.request_cuda(f".type({name})", target, site=self._user_site(caller))
            if not rt.sim:
                target = CPU
        if rt.dev(x) == target:
            return x if x.dtype == dtype else x.to(dtype=dtype)
        return sim.move(rt, x, target, dtype)

    def _user_site(self, frame):
        users = self.rt.users
        while frame is not None and frame.f_code.co_filename not in users:
            frame = frame.f_back
        return frame_site(frame, users) if frame is not None else None

    # -- moves --------------------------------------------------------------------------
    def _parse_move(self, func, args, kwargs):
        """(target device or None, dtype, memory_format, copy) of .to/.cuda/.cpu."""
        rt = self.rt
        if func is TB.cpu:
            return CPU, None, kwargs.get("memory_format"), False
        if func is TB.cuda:
            device = args[1] if len(args) > 1 else kwargs.get("device")
            if device is None:
                return f"cuda:{rt.current_index}", None, kwargs.get("memory_format"), False
            return rt.normalize(device), None, kwargs.get("memory_format"), False
        rest = args[1:]
        kw = dict(kwargs)
        copy = kw.pop("copy", False)
        if self.sim:
            rest, kw = _int_device(rest, kw)
        if rest and isinstance(rest[0], Tensor):
            other = rest[0]
            copy = rest[3] if len(rest) > 3 else (rest[2] if len(rest) > 2 else copy)
            return rt.dev(other), other.dtype, kw.get("memory_format"), bool(copy)
        if "other" in kw and isinstance(kw["other"], Tensor):
            return rt.dev(kw["other"]), kw["other"].dtype, kw.get("memory_format"), bool(copy)
        try:
            device, dtype, _non_blocking, memory_format = torch._C._nn._parse_to(*rest, **kw)
        except TypeError:
            if rest and isinstance(rest[-1], bool):  # .to(device, dtype, non_blocking, copy)
                copy = rest[-1]
                device, dtype, _non_blocking, memory_format = torch._C._nn._parse_to(*rest[:-1], **kw)
            else:
                raise
        return rt.normalize(device), dtype, memory_format, bool(copy)

    def _to(self, func, args, kwargs):
        rt = self.rt
        x = args[0] if args else None
        if not isinstance(x, Tensor):
            return func(*args, **kwargs)
        caller = sys._getframe(2)
        target, dtype, memory_format, copy = self._parse_move(func, args, kwargs)
        src = rt.dev(x)
        if target not in (None, CPU):
            rt.accelerated = True
            rt.gpu_requests += 1
        if target is not None and target.startswith("cuda"):
            self._cuda_request(caller, func, target)
            if rt.mode == "cpu-only":  # --keep-going: stay on the CPU
                target = CPU
        if rt.mode == "real":
            out = self._call_real(func, args, kwargs)
        elif target is None or target == src:
            if dtype is None and memory_format is None and not copy:
                out = x
            else:
                kw = {"copy": copy}
                if dtype is not None:
                    kw["dtype"] = dtype
                if memory_format is not None:
                    kw["memory_format"] = memory_format
                out = x.to(**kw)
        elif rt.sim and (target == CPU or target.startswith("cuda")):
            if target.startswith("cuda") and int(target.split(":")[1]) >= rt.device_count:
                raise RuntimeError("CUDA error: invalid device ordinal")
            out = sim.move(rt, x, target, dtype, memory_format)
        else:
            out = func(*args, **kwargs)
            if target == META and rt.sim and out is not x:
                rt.tag(out, META)  # the meta device, a stand-in for a GPU in demos: a device of its own
        if out is not x and isinstance(out, Tensor) and target is not None and target != src:
            where = frame_site(caller, rt.users) if caller.f_code.co_filename in rt.users else rt.site()
            if where is not None:
                rt.set_src(out, {"what": _move_text(func, target), "site": where})
        if caller.f_code.co_filename in rt.users and _dropped(caller):
            self._discarded(caller, func, x, out, src, target)
        return out

    def _discarded(self, caller, func, x, out, src, target) -> None:
        rt = self.rt
        site = frame_site(caller, rt.users)
        new = out is not x
        after = rt.dev(out) if isinstance(out, Tensor) else src
        rt.event("discarded-move", (tuple(site), new, src, after),
                 site=site, what=_move_text(func, target or after), src=src, dst=after, new=new)
        if new:
            rt.set_origin(x, {"kind": "discarded-to-result", "site": site,
                              "what": _move_text(func, target or after), "dst": after})

    def _cuda_request(self, caller, func, target, what=None) -> None:
        """A request for a CUDA device: an event everywhere; on a machine without GPU, the error."""
        rt = self.rt
        site = self._user_site(caller)
        rt.request_cuda(what or _move_text(func, target), target, site=site)  # the stack: when new

    # -- device= and factories ----------------------------------------------------------
    def _device_request(self, func, args, kwargs):
        rt = self.rt
        target = rt.normalize(kwargs["device"])
        if target not in (None, CPU):
            rt.accelerated = True
            rt.gpu_requests += 1
        if target == META and rt.sim:
            out = func(*args, **kwargs)
            self._retag(out, [a for a in args if isinstance(a, Tensor)], META)
            return out
        if target is None or not (target.startswith("cuda") or target == CPU):
            return func(*args, **kwargs)
        if target.startswith("cuda"):
            caller = sys._getframe(2)
            self._cuda_request(caller, func, target, f"{_constructor_name(func)}(device='{target}')"
                               if func in _CONSTRUCTORS else f"device='{target}'")
            if rt.mode == "cpu-only":
                return func(*args, **{**kwargs, "device": CPU})
            if not rt.sim:
                return self._call_real(func, args, kwargs)
            index = int(target.split(":")[1])
            if index >= rt.device_count:
                raise RuntimeError("CUDA error: invalid device ordinal")
            if kwargs.get("generator") is not None:
                # which device SimDispatchMode checks the generator against (a CPU op runs)
                local = self.local
                previous = getattr(local, "factory_device", None)
                local.factory_device = target
                try:
                    out = func(*args, **{**kwargs, "device": CPU})
                finally:
                    local.factory_device = previous
            else:
                out = func(*args, **{**kwargs, "device": CPU})
            inputs = [a for a in args if isinstance(a, Tensor)]
            if isinstance(out, Tensor) and any(out is a for a in inputs):
                out = out.clone()  # as_tensor(cpu_t, device='cuda') copies on a GPU
            self._retag(out, inputs, target)
            if isinstance(out, Tensor) and caller.f_code.co_filename in rt.users:
                rt.set_src(out, {"what": f"device='{target}'", "site": frame_site(caller, rt.users)})
            return out
        if not rt.sim:
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        self._retag(out, [a for a in args if isinstance(a, Tensor)], CPU)
        return out

    def _retag(self, out, inputs, device) -> None:
        shared = set()
        for a in inputs:
            storage = sim._storage(a)
            if storage is not None:
                shared.add(storage._cdata)
        for o in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(o, Tensor):
                storage = sim._storage(o)
                if storage is not None and storage._cdata not in shared:
                    self.rt.tag(o, device)

    def _factory(self, func, args, kwargs):
        rt = self.rt
        default = _device_utils.CURRENT_DEVICE
        if default is not None and (rt.normalize(default).startswith("cuda") or rt.sim and rt.normalize(default) == META):
            # set_default_device("cuda") / `with torch.device("cuda")`: its mode sits below ours.
            return self._device_request(func, args, {**kwargs, "device": default})
        out = func(*args, **kwargs)
        caller = sys._getframe(2)
        if rt.mode != "cpu-only" and caller.f_code.co_filename in rt.users and isinstance(out, Tensor):
            if func in _ALIASING_CONSTRUCTORS and any(out is a for a in args):
                return out
            site = frame_site(caller, rt.users)
            rt.set_origin(out, {"kind": "factory-without-device", "site": site, "what": _constructor_name(func)})
            if rt.accelerated:  # where its CPU result can meet an accelerator's tensors (TDL008)
                rt.event("factory-while-accelerated", (tuple(site),), site=site)
        return out

    # -- numpy ----------------------------------------------------------------------------
    def _numpy(self, func, args, kwargs):
        rt = self.rt
        x = args[0]
        if rt.mode == "cpu-only":
            return func(*args, **kwargs)
        device = rt.dev(x)
        force = func is TB.numpy and kwargs.get("force", False)
        site = rt.site(2)
        what = ".numpy()" if func is TB.numpy else "numpy.asarray()"
        if site is not None:
            rt.event("numpy", (tuple(site), device, force), site=site, device=device, what=what,
                     force=bool(force), raised=device != CPU and not force and not rt.keep_going,
                     src=rt.src(x), origin=rt.origin(x) if device != CPU else None)
        if device != CPU and not force:
            if not rt.keep_going:
                raise TypeError(NUMPY_TEXT.format(dev=device))
            if not rt.sim:
                return func(x.cpu(), *args[1:], **kwargs)
        return func(*args, **kwargs)

    # -- real devices ---------------------------------------------------------------------
    def _call_real(self, func, args, kwargs):
        try:
            return func(*args, **kwargs)
        except RuntimeError as error:
            message = str(error)
            if not DEVICE_ERROR.search(message):  # the GPU's wordings: mixed ops, RNN hidden state...
                raise
            target = self._real_mismatch(func, args, kwargs, message)
            if not self.rt.keep_going or target is None:
                raise
        # --keep-going on a real GPU: move the odd operands (differentiably) and retry once.
        args = tuple(self._to_device(a, target, i == 0 and _inplace(func)) for i, a in enumerate(args))
        kwargs = {k: self._to_device(v, target, False) for k, v in kwargs.items()}
        return func(*args, **kwargs)

    def _to_device(self, value, target, inplace):
        if isinstance(value, Tensor):
            if value.dim() == 0 and value.device.type == "cpu" or str(value.device) == target:
                return value
            if inplace:
                value.data = value.data.to(target)
                return value
            return value.to(target)
        if isinstance(value, (list, tuple)):
            return type(value)(self._to_device(v, target, inplace) for v in value)
        return value

    def _real_mismatch(self, func, args, kwargs, message):
        rt = self.rt
        candidates = [(i, t) for i, a in enumerate(list(args) + list(kwargs.values()))
                      for t in (a if isinstance(a, (list, tuple)) else (a,)) if isinstance(t, Tensor)]
        devices = {rt.dev(t) for _, t in candidates if not (t.dim() == 0 and t.device.type == "cpu")}
        if len(devices) < 2:  # a CUDA wrapper's check refused a 0-dim CPU tensor (kernels.py)
            devices = {rt.dev(t) for _, t in candidates}
        devices = sorted(devices, key=lambda d: (d == CPU, d))
        operands = sim.describe_operands(rt, candidates, devices)
        op = getattr(func, "__qualname__", None) or getattr(func, "__name__", str(func))
        site = rt.site(3)
        origins = tuple(sorted({(o["origin"]["kind"], tuple(o["origin"].get("site") or ()))
                                for o in operands if "origin" in o}))
        rt.event("mismatch", (op, tuple(site or ()), origins), op=op, devices=devices, site=site,
                 stack=rt.stack(3), operands=operands, raised=not rt.keep_going, message=message)
        accelerators = [d for d in devices if d != CPU]
        return accelerators[0] if accelerators else None


def _int_device(args, kwargs):
    """``.to(0)``, ``.to(device=0)``: an index means the accelerator (torch asks the accelerator
    runtime, which a CPU build lacks): ``cuda:N``."""
    if args and type(args[0]) is int:
        args = (f"cuda:{args[0]}", *args[1:])
    if type(kwargs.get("device")) is int:
        kwargs = {**kwargs, "device": f"cuda:{kwargs['device']}"}
    return args, kwargs


def _inplace(func) -> bool:
    name = getattr(func, "__name__", "")
    return name.endswith("_") and not name.endswith("__")


def _move_text(func, target) -> str:
    if func is TB.cuda:
        return ".cuda()"
    if func is TB.cpu:
        return ".cpu()"
    if func is TB.type_as:
        return f".type_as({target})" if target else ".type_as()"
    return f".to({target})" if target else ".to()"
