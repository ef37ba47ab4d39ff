"""Smoke test of the torch internals the simulator relies on: ``python -m torchdev_lint.trace.selfcheck``.

Prints one JSON object: the torch version, whether it is a tested one, and each check with
its result: ``"ok"``, ``"warning: ..."`` (an optimisation this torch does not allow, or a torch
behaviour the simulator works around: the simulator still works) or the error of a broken one.
Each warning is also one line on standard error. Exit status 0 when no check is broken, 1
otherwise. Each check names the private API or behaviour it depends on, so a new torch release
that breaks one says which.
"""

from __future__ import annotations

import gc
import io
import json
import sys
import traceback
import weakref


class Warned(Exception):
    """A check that found a missing optimisation or a worked-around behaviour, not a breakage."""


def _checks():
    import torch
    import torch.nn as nn
    import torch.utils._device as device_utils
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils._python_dispatch import TorchDispatchMode

    def parse_to():
        assert torch._C._nn._parse_to("cuda:0")[0] == torch.device("cuda", 0)
        assert torch._C._nn._parse_to(torch.float16)[1] == torch.float16

    def getset_identity():
        getter = torch._C.TensorBase.device.__get__
        assert getter == torch._C.TensorBase.device.__get__ and hash(getter) == hash(torch._C.TensorBase.device.__get__)

    def storage_attributes():
        x = torch.zeros(4)
        storage = x.untyped_storage()
        storage._tdl_probe = "cuda:0"
        del storage
        assert getattr(x.untyped_storage(), "_tdl_probe", None) == "cuda:0"
        assert getattr(x[1:].untyped_storage(), "_tdl_probe", None) == "cuda:0"
        assert getattr(x.detach().untyped_storage(), "_tdl_probe", None) == "cuda:0"
        assert getattr(torch.zeros(4).untyped_storage(), "_tdl_probe", None) is None

    def storage_attributes_through_gc_cycle():
        from torchdev_lint.trace import runtime

        def survives() -> bool:
            x = torch.zeros(4)
            x.untyped_storage()._tdl_dev = "cuda:0"
            buffer = io.BytesIO()
            torch.save(x, buffer)  # (torch.save leaves such cycles behind)
            cycle = _Cycle()
            cycle.self, cycle.storage = cycle, x.untyped_storage()
            alive = weakref.ref(cycle)
            del cycle
            gc.collect()
            assert alive() is None, "the cycle was not collected"
            return getattr(x.untyped_storage(), "_tdl_dev", None) == "cuda:0"

        undo = runtime.guard_storage_attributes()
        try:
            assert survives(), "a storage's attributes were lost when a reference cycle holding it was collected"
        finally:
            if undo is not None:
                undo()
        if undo is not None:
            raise Warned("the garbage collector empties the attributes of storages held by a reference cycle; "
                         "the simulator gives them back after each collection (slower)")

    def param_data_assignment():
        lin = nn.Linear(2, 2)
        weight = lin.weight
        other = torch.zeros(2, 2)
        other.untyped_storage()._tdl_probe = "x"
        weight.data = other
        assert getattr(weight.untyped_storage(), "_tdl_probe", None) == "x"

    def module_to_keeps_identity():
        assert not torch.__future__.get_overwrite_module_params_on_conversion()
        assert torch._has_compatible_shallow_copy_type(torch.zeros(1), torch.zeros(1))

    def device_constructors():
        constructors = device_utils._device_constructors()
        assert torch.zeros in constructors and torch.randn in constructors and torch.tensor in constructors
        assert hasattr(device_utils, "CURRENT_DEVICE")

    def serialization_registry():
        registry = torch.serialization._package_registry
        assert all(len(entry) == 3 for entry in registry)
        assert any(entry[0] == 10 for entry in registry)  # cpu tagger

    def op_schema_alias_info():
        returns = torch.ops.aten.add.Tensor._schema.returns
        assert returns[0].alias_info is None
        assert torch.ops.aten.add_.Tensor._schema.returns[0].alias_info is not None

    def cuda_stream_event_classes():
        import inspect

        from torchdev_lint.trace import sim

        try:
            from torch import _streambase
        except ImportError:
            return
        # torch 2.4's torch._dynamo (imported by optimizers and torch.compile) asserts that
        # torch.cuda.Stream/Event subclass these abstract classes
        for cls, name in ((sim._Stream, "_StreamBase"), (sim._Event, "_EventBase")):
            base = getattr(_streambase, name, None)
            if inspect.isclass(base) and inspect.isabstract(base):
                assert issubclass(cls, base), f"the simulator's {name[1:-4]} does not subclass {name}"
                cls()  # no abstract method left

    def dispatch_mode_skip_dynamo():
        if not hasattr(TorchDispatchMode, "_should_skip_dynamo"):
            raise Warned("TorchDispatchMode._should_skip_dynamo is missing (torch < 2.9): the simulator's first "
                         "aten op imports torch._dynamo (a few seconds), nothing else changes")

    def optimizer_hooks():
        handle = register_optimizer_step_post_hook(lambda *a: None)
        handle.remove()

    def simulator_end_to_end():
        from torchdev_lint.trace import hooks, modes, recorder, runtime, sim, sites
        from torchdev_lint.trace.runtime import Runtime, SimulatedDeviceError

        record = recorder.Recorder("/dev/null")
        rt = Runtime("sim", False, sites.UserFiles(__file__), record)
        patches = sim.Patches()
        undo_guard = runtime.guard_storage_attributes()
        if undo_guard is not None:
            patches.on_undo(undo_guard)
        sim.patch_cuda(rt, patches)
        sim.patch_serialization(rt, patches)
        hooks.install(rt, patches)
        try:
            with sim.SimDispatchMode(rt), modes.TraceFunctionMode(rt):
                assert torch.cuda.is_available()
                model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1))
                weight = model[0].weight
                model.to("cuda")
                assert model[0].weight is weight and weight.device == torch.device("cuda", 0)
                x = torch.randn(5, 3)
                try:
                    model(x)
                    raise AssertionError("no mismatch raised")
                except SimulatedDeviceError:
                    pass
                xc = x.cuda()
                assert xc.is_cuda and not x.is_cuda and xc.get_device() == 0
                loss = model(xc).sum()
                loss.backward()
                with torch.no_grad():  # (an optimizer would import torch._dynamo: 3.5 s)
                    for p in model.parameters():
                        p -= 0.1 * p.grad
                assert weight.grad.device.type == "cuda" and weight.device.type == "cuda"
                leaf = torch.randn(3, requires_grad=True)
                (leaf.to("cuda") * 2).sum().backward()
                assert leaf.grad.device.type == "cpu"
                buffer = io.BytesIO()
                torch.save(model.state_dict(), buffer)
                assert b"cuda:0" in buffer.getvalue()
                gc.collect()  # the cycles torch.save leaves must not take the parameters' devices
                assert weight.device.type == "cuda"
                buffer.seek(0)
                state = torch.load(buffer)
                assert state["0.weight"].device.type == "cuda"
                try:
                    xc.numpy()
                    raise AssertionError("no TypeError from .numpy()")
                except TypeError:
                    pass
                assert xc.cpu().numpy().shape == (5, 3)
        finally:
            patches.undo()
            record.close()

    return [parse_to, getset_identity, storage_attributes, storage_attributes_through_gc_cycle,
            param_data_assignment, module_to_keeps_identity, device_constructors, serialization_registry,
            op_schema_alias_info, cuda_stream_event_classes, dispatch_mode_skip_dynamo, optimizer_hooks,
            simulator_end_to_end]


class _Cycle:
    """An object in a reference cycle (weakly referenceable, to see that the cycle was freed)."""


def main() -> int:
    import torch

    from torchdev_lint.trace import TESTED_TORCH_VERSIONS

    version = torch.__version__.split("+")[0]
    results = {}
    for check in _checks():
        try:
            check()
            results[check.__name__] = "ok"
        except Warned as warning:
            results[check.__name__] = f"warning: {warning}"
            print(f"selfcheck: warning: {check.__name__}: {warning}", file=sys.stderr)
        except Exception:  # noqa: BLE001 - each failure is reported, not raised
            results[check.__name__] = traceback.format_exc(limit=3).strip().splitlines()[-1]
    print(json.dumps({"torch": torch.__version__, "tested": version in TESTED_TORCH_VERSIONS,
                      "checks": results}, indent=2))
    return 0 if all(r == "ok" or r.startswith("warning: ") for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
