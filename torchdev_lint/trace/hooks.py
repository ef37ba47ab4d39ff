"""Python-level hooks that turn rule-shaped events into evidence, in every mode.

* ``torch.load``/``torch.jit.load`` without ``map_location`` (TDL004): the storages' saved
  locations, through a recording ``map_location`` callable that returns None, so that torch's
  own restore logic runs unchanged.
* ``nn.Module.to``/``.cuda``/``.cpu`` (TDL005, TDL006, TDL007): parameter identities before
  and after, the state of every optimizer built on those parameters, and tensors or
  containers of submodules that the move left behind.
* ``nn.Module.__setattr__``: the site of each plain-tensor attribute and of each list/tuple/
  dict attribute, for the two scans above.
* ``Optimizer.__init__``: the site where each optimizer was built; a global step hook counts
  steps for ``--max-steps``.
"""

from __future__ import annotations

import io
import os
import threading

import torch
import torch.nn as nn
from torch.optim.optimizer import Optimizer, register_optimizer_step_post_hook

from torchdev_lint.checkpoints import storage_locations
from torchdev_lint.trace.runtime import CPU, Runtime, StopTracing
from torchdev_lint.trace.sim import Patches

Tensor = torch.Tensor
_local = threading.local()

CUDA_LOAD_TEXT = ("Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is "
                  "False. If you are running on a CPU-only machine, please use torch.load with "
                  "map_location=torch.device('cpu') to map your storages to the CPU.")


def install(rt: Runtime, patches: Patches) -> None:
    _install_save(rt, patches)
    _install_load(rt, patches)
    _install_module_moves(rt, patches)
    _install_setattr(rt, patches)
    _install_optimizer(rt, patches)
    _install_workers(rt, patches)


# -- torch.save and where loaded files come from ---------------------------------------------

def _path_of(f) -> str | None:
    """The file a save or load reads or writes: a path, or the name of an open file object."""
    if isinstance(f, (str, os.PathLike)):
        return os.path.realpath(os.fspath(f))
    name = getattr(f, "name", None)
    if isinstance(name, str) and os.path.isfile(name):
        return os.path.realpath(name)
    return None


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _own_location(rt: Runtime, storage) -> str:
    """The location torch would tag ``storage`` with by its device (the virtual one in the simulator)."""
    for s in (storage, getattr(storage, "_untyped_storage", None)):
        device = getattr(s, "_tdl_dev", None) if s is not None else None
        if device is not None:
            return device
    device = getattr(storage, "device", None)
    if device is None or device.type != "cuda":
        return str(device) if device is not None else CPU
    return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"


def _install_save(rt: Runtime, patches: Patches) -> None:
    original = torch.save

    def save(obj, f, *args, **kwargs):
        # The location tags the storages' devices do not explain (a tagger of the program's own,
        # torch.serialization.register_package): such a file is foreign to this run's devices.
        serialization = torch.serialization
        location_tag = serialization.location_tag
        foreign: list[str] = []

        def tag(storage):
            location = location_tag(storage)
            if location != _own_location(rt, storage) and location not in foreign:
                foreign.append(location)
            return location

        serialization.location_tag = tag
        try:
            result = original(obj, f, *args, **kwargs)
        finally:
            serialization.location_tag = location_tag
        path = _path_of(f)
        if path is not None and hasattr(f, "flush"):
            f.flush()  # an open file: its size and time as the load will see them
        if path is not None:
            locations = _locations(path)
        elif hasattr(f, "getvalue"):
            locations = _locations(io.BytesIO(f.getvalue()))
        else:
            locations = []
        site = rt.site()
        stat = _stat(path) if path else None
        entry = {"site": site, "locations": locations, "mode": rt.mode, "file": path, "foreign": foreign,
                 "size": stat[0] if stat else None, "mtime_ns": stat[1] if stat else None}
        rt.saves[path if path is not None else id(f)] = entry
        rt.event("save", (tuple(site or ()), path or id(f), tuple(locations), stat), **entry)
        return result

    patches.set(torch, "save", save)


def provenance(rt: Runtime, f) -> dict:
    """Who wrote the file a load reads: this run (``torch.save`` at a site, on which device),
    an earlier run of the tracer (which wrote it on a simulated or real GPU), or someone
    before this run (a checkpoint the tracer knows nothing about)."""
    path = _path_of(f)
    stat = _stat(path) if path else None
    mine = rt.saves.get(path if path is not None else id(f))
    if mine is not None and (path is None or (mine["size"], mine["mtime_ns"]) == stat):
        return {"by": "this run", "site": mine["site"], "locations": mine["locations"], "mode": rt.mode,
                "foreign": mine["foreign"]}
    if path is not None and stat is not None:
        earlier = rt.earlier_saves.get((path, *stat))
        if earlier is not None:
            return {"by": "an earlier traced run", **{k: earlier.get(k) for k in ("site", "locations", "mode",
                                                                                 "command", "when")}}
        return {"by": "before this run", "mtime_ns": stat[1]}
    return {"by": "unknown"}


# -- torch.load ---------------------------------------------------------------------------

def _install_load(rt: Runtime, patches: Patches) -> None:
    original = torch.load

    def load(*args, **kwargs):
        if len(args) >= 2 or "map_location" in kwargs:
            return original(*args, **kwargs)
        seen: list[str] = []
        redirect = rt.mode == "cpu-only" and rt.keep_going

        def record(storage, location):
            if location not in seen:
                seen.append(location)
            if redirect and not location.startswith("cpu"):
                return storage  # the storage read from the file is on the CPU
            return None  # torch's default restore: identical behaviour

        site = rt.site()
        stack = rt.stack()
        f = args[0] if args else kwargs.get("f")
        origin = provenance(rt, f)
        file = _path_of(f)
        try:
            result = original(*args, map_location=record, **kwargs)
        except Exception as error:
            rt.event("load", (tuple(site or ()), tuple(seen), "error"), site=site, stack=stack,
                     api="torch.load", locations=seen, error=f"{type(error).__name__}: {error}",
                     file=file, provenance=origin)
            raise
        rt.event("load", (tuple(site or ()), tuple(seen), file, origin["by"]), site=site, stack=stack,
                 api="torch.load", locations=seen, error=None, file=file, provenance=origin,
                 redirected=redirect and any(not loc.startswith("cpu") for loc in seen))
        return result

    patches.set(torch, "load", load)

    jit_original = torch.jit.load
    jit_save_original = torch.jit.save
    jit_saves: dict = {}  # file (path or id of a file object) -> (stat, {name: device}) of the sim's jit.save

    def jit_save(m, f, *args, **kwargs):
        """The C++ writer tags storages with their real device (cpu): the simulated devices of the
        module's tensors, by name, for a load in this run."""
        devices = {}
        if rt.sim and hasattr(m, "named_parameters"):
            for name, t in [*m.named_parameters(), *m.named_buffers()]:
                devices[name] = rt.dev(t)
        result = jit_save_original(m, f, *args, **kwargs)
        if any(d != CPU for d in devices.values()):
            path = _path_of(f)
            jit_saves[path if path is not None else id(f)] = (_stat(path) if path else None, devices)
        return result

    def simulated_devices(f):
        path = _path_of(f)
        entry = jit_saves.get(path if path is not None else id(f))
        if entry is None or (path is not None and entry[0] != _stat(path)):
            return None
        return entry[1]

    def place(result, devices, default):
        for name, t in [*result.named_parameters(), *result.named_buffers()]:
            device = devices.get(name, default) if devices is not None else default
            if device is not None and device != CPU:
                rt.tag(t, device)

    def jit_load(f, map_location=None, *args, **kwargs):
        if map_location is not None:
            target = None
            if rt.sim and isinstance(map_location, (str, torch.device, int)):
                target = rt.normalize(f"cuda:{map_location}" if type(map_location) is int else map_location)
            if target is not None and target.startswith("cuda"):
                result = jit_original(f, "cpu", *args, **kwargs)
                place(result, None, target)
                return result
            return jit_original(f, map_location, *args, **kwargs)
        site = rt.site()
        seen = _locations(f)
        origin = provenance(rt, f)
        devices = simulated_devices(f) if rt.sim else None
        if devices is not None:  # the locations a GPU would have written
            seen = sorted(set(devices.values()), key=lambda d: (d == CPU, d))
        cuda = [loc for loc in seen if loc.startswith("cuda")]
        error = None
        try:
            if cuda and rt.sim:
                result = jit_original(f, "cpu", *args, **kwargs)
                place(result, devices, cuda[0] if ":" in cuda[0] else "cuda:0")
            elif cuda and rt.mode == "cpu-only" and rt.keep_going:
                result = jit_original(f, "cpu", *args, **kwargs)
            else:
                result = jit_original(f, None, *args, **kwargs)
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            raise
        finally:
            rt.event("load", (tuple(site or ()), tuple(seen), error is not None), site=site,
                     stack=rt.stack(), api="torch.jit.load", locations=seen, error=error,
                     file=_path_of(f), provenance=origin)
        return result

    patches.set(torch.jit, "load", jit_load)
    patches.set(torch.jit, "save", jit_save)


def _locations(f) -> list[str]:
    """The storage locations a checkpoint records (none for what is no checkpoint)."""
    return storage_locations(f) or []


# -- module moves ---------------------------------------------------------------------------

def _install_module_moves(rt: Runtime, patches: Patches) -> None:
    for name in ("to", "cuda", "cpu"):
        original = getattr(nn.Module, name)
        patches.set(nn.Module, name, _wrap_move(rt, name, original))


def _target(rt: Runtime, name: str, args, kwargs) -> str | None:
    if name == "cpu":
        return CPU
    if name == "cuda":
        device = args[0] if args else kwargs.get("device")
        return f"cuda:{rt.current_index}" if device is None else rt.normalize(device)
    if args and isinstance(args[0], Tensor):
        return rt.dev(args[0])
    try:
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
    except (TypeError, RuntimeError):
        return None
    return rt.normalize(device)


def _wrap_move(rt: Runtime, name: str, original):
    def move(self, *args, **kwargs):
        if getattr(_local, "depth", 0):
            return original(self, *args, **kwargs)
        before = {id(p): p for p in self.parameters()}
        first = next(iter(before.values()), None)
        src = rt.dev(first) if first is not None else None
        optimizers = [(o, info) for o, info in list(rt.optimizers.items())
                      if any(id(p) in before for g in o.param_groups for p in g["params"])]
        _local.depth = 1
        try:
            result = original(self, *args, **kwargs)
        finally:
            _local.depth = 0
        target = _target(rt, name, args, kwargs)
        if rt.mode == "cpu-only" and target is not None and target.startswith("cuda"):
            target = CPU  # --keep-going redirected the move
        after = {id(p) for p in self.parameters()}
        site = rt.site()
        shown = "" if name == "cpu" or (name == "cuda" and not args and not kwargs) else target or ""
        what = f"{type(self).__name__}.{name}({shown})"
        for optimizer, info in optimizers:
            _check_optimizer(rt, optimizer, info, before, after, site, what, src, target)
        if target is not None:
            _scan_left_behind(rt, self, target, site, what)
        return result

    move.__name__ = name
    move.__qualname__ = f"Module.{name}"
    move.__doc__ = original.__doc__
    return move


def _check_optimizer(rt, optimizer, info, before, after, site, what, src, target) -> None:
    held = [p for g in optimizer.param_groups for p in g["params"] if id(p) in before]
    replaced = [p for p in held if id(p) not in after]
    stale = []
    for p in held:
        if id(p) not in after:
            continue
        state = optimizer.state.get(p) or {}
        p_dev = rt.dev(p)
        for key, value in state.items():
            if not isinstance(value, Tensor):
                continue
            v_dev = rt.dev(value)
            if v_dev == p_dev or (value.dim() == 0 and v_dev == CPU):
                continue  # a CPU scalar `step` is legal with CUDA params
            stale.append((key, v_dev))
            rt.set_origin(value, {"kind": "optimizer-state-before-move", "site": info["site"],
                                  "what": f"{info['name']} state '{key}'", "move": site})
    had_state = any(optimizer.state.get(p) for p in held)
    if replaced:
        outcome = "params-replaced"
    elif stale:
        outcome = "state-left-behind"
    else:
        outcome = "followed"
    after_dev = rt.dev(held[0]) if held and id(held[0]) in after else target
    rt.event("optimizer-before-move", (tuple(info["site"] or ()), tuple(site or ()), outcome),
             site=info["site"], stack=info["stack"], optimizer=info["name"], move_site=site,
             move=what, outcome=outcome, params=len(held), replaced=len(replaced),
             stale=sorted({k for k, _ in stale}), stale_devices=sorted({d for _, d in stale}),
             had_state=bool(had_state), src=src, dst=after_dev)
    if replaced:
        info["orphaned"] = True


def _scan_left_behind(rt: Runtime, module, target: str, site, what: str) -> None:
    for m in module.modules():
        sites = rt.attr_sites.get(m, {})
        for attr, value in list(vars(m).items()):
            if isinstance(value, Tensor) and not isinstance(value, nn.Parameter):
                device = rt.dev(value)
                if device == target:
                    continue
                assigned = sites.get(attr)
                label = f"{type(m).__name__}.{attr}"
                rt.set_origin(value, {"kind": "unregistered-tensor-attribute", "site": assigned,
                                      "what": f"self.{attr}", "move": site})
                rt.event("attribute-left-behind", (tuple(assigned or ()), label),
                         site=assigned, attr=label, device=device, target=target, ndim=value.dim(),
                         move_site=site, move=what)
            elif isinstance(value, (list, tuple, dict)):
                items = value.values() if isinstance(value, dict) else value
                subs = [v for v in items if isinstance(v, nn.Module)]
                left = []
                for sub in subs:
                    for t in list(sub.parameters()) + list(sub.buffers()):
                        device = rt.dev(t)
                        if device != target:
                            left.append(device)
                            rt.set_origin(t, {"kind": "unregistered-submodule-container",
                                              "site": sites.get(attr), "what": f"self.{attr}",
                                              "move": site}, overwrite=False)
                if left:
                    label = f"{type(m).__name__}.{attr}"
                    rt.event("container-left-behind", (tuple(sites.get(attr) or ()), label),
                             site=sites.get(attr), attr=label, modules=len(subs),
                             device=sorted(set(left))[0], target=target, move_site=site, move=what)


# -- attribute assignments --------------------------------------------------------------------

def _install_setattr(rt: Runtime, patches: Patches) -> None:
    original = nn.Module.__setattr__

    def setattr_(self, name, value):
        original(self, name, value)
        if isinstance(value, Tensor):
            if isinstance(value, nn.Parameter) or name not in self.__dict__:
                return
        elif type(value) not in (list, tuple, dict) or name not in self.__dict__:
            return
        sites = rt.attr_sites.get(self)
        if sites is None:
            sites = rt.attr_sites[self] = {}
        if name not in sites:
            sites[name] = rt.site()

    patches.set(nn.Module, "__setattr__", setattr_)


# -- optimizers ---------------------------------------------------------------------------------

def _install_optimizer(rt: Runtime, patches: Patches) -> None:
    original = Optimizer.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if self in rt.optimizers:
            return
        site = rt.site()
        stack = rt.stack()
        rt.optimizers[self] = {"site": site, "stack": stack, "name": type(self).__name__}
        rt.event("optimizer-created", (tuple(site or ()), type(self).__name__), site=site, stack=stack,
                 optimizer=type(self).__name__)

    patches.set(Optimizer, "__init__", init)

    def after_step(optimizer, args, kwargs):
        rt.steps += 1
        info = rt.optimizers.get(optimizer)
        if info is not None and info.get("orphaned") and not info.get("reported"):
            info["reported"] = True
            no_grad = all(p.grad is None for g in optimizer.param_groups for p in g["params"])
            rt.event("orphaned-step", (tuple(info["site"] or ()),), site=info["site"],
                     stack=info["stack"], step_site=rt.site(), no_grad=no_grad)
        if rt.max_steps is not None and rt.steps >= rt.max_steps:
            raise StopTracing(f"max-steps:{rt.steps}")

    handle = register_optimizer_step_post_hook(after_step)
    patches.on_undo(handle.remove)


# -- DataLoader worker processes ----------------------------------------------------------------

def _install_workers(rt: Runtime, patches: Patches) -> None:
    """Lines that run only in DataLoader worker processes are not recorded: a limit of the run."""
    from torch.utils.data import dataloader

    original = dataloader._MultiProcessingDataLoaderIter.__init__

    def init(self, loader, *args, **kwargs):
        rt.limit("DataLoader workers", f"DataLoader worker processes (num_workers={loader.num_workers}): code that "
                                       "runs only there is not traced (it reads as not reached)")
        return original(self, loader, *args, **kwargs)

    patches.set(dataloader._MultiProcessingDataLoaderIter, "__init__", init)
