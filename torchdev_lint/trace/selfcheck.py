"""Smoke test of the torch internals the simulator relies on: ``python -m torchdev_lint.trace.selfcheck``.

Prints one JSON object: the torch version, whether it is a tested one, and each check with
its result. Exit status 0 when every check passes. Each check names the private API or
behaviour it depends on, so a new torch release that breaks one says which.
"""

from __future__ import annotations

import io
import json
import sys
import traceback


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

    def dispatch_mode_skip_dynamo():
        assert hasattr(TorchDispatchMode, "_should_skip_dynamo")

    def optimizer_hooks():
        handle = register_optimizer_step_post_hook(lambda *a: None)
        handle.remove()

    def simulator_end_to_end():
        from torchdev_lint.trace import hooks, modes, recorder, sim, sites
        from torchdev_lint.trace.runtime import Runtime, SimulatedDeviceError

        record = recorder.Recorder("/dev/null")
        rt = Runtime("sim", False, sites.UserFiles(__file__), record)
        patches = sim.Patches()
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

    return [parse_to, getset_identity, storage_attributes, param_data_assignment, module_to_keeps_identity,
            device_constructors, serialization_registry, op_schema_alias_info, dispatch_mode_skip_dynamo,
            optimizer_hooks, simulator_end_to_end]


def main() -> int:
    import torch

    from torchdev_lint.trace import TESTED_TORCH_VERSIONS

    version = torch.__version__.split("+")[0]
    results = {}
    for check in _checks():
        try:
            check()
            results[check.__name__] = "ok"
        except Exception:  # noqa: BLE001 - each failure is reported, not raised
            results[check.__name__] = traceback.format_exc(limit=3).strip().splitlines()[-1]
    print(json.dumps({"torch": torch.__version__, "tested": version in TESTED_TORCH_VERSIONS,
                      "checks": results}, indent=2))
    return 0 if all(r == "ok" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
