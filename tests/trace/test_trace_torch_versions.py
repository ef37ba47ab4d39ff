"""What the simulator does for the torch releases it supports (2.4 to 2.14), pinned on whatever
torch is installed here, with the simulator on the CPU.

* torch <= 2.8 empties the ``__dict__`` of a storage object held by a reference cycle when the
  garbage collector frees the cycle (torch.save leaves such cycles), which held the simulated
  device and the provenance: the tracer's guard must keep them.
* torch 2.4's torch._dynamo (imported by every optimizer) asserts that torch.cuda.Stream/Event
  subclass ``torch._streambase._StreamBase``/``_EventBase``.
* The selfcheck tells a missing optimisation (a warning, exit 0) from a broken internal (exit 1).

One child process imports torch and runs every check (this process never imports torch).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tracehelp import ROOT

SCRIPT = r'''
import abc, contextlib, gc, io, json, sys, weakref

import torch

from torchdev_lint.trace import runner, runtime, selfcheck, sim, sites

out = {"torch": torch.__version__, "survives_unguarded": runtime.storage_attributes_survive_gc()}


class Events:
    def __init__(self):
        self.events = []

    def write(self, record):
        pass

    def event(self, key, record):
        self.events.append(record)
        return True


class Cycle:
    pass


def cycle_holding(storage):
    c = Cycle()
    c.self, c.storage = c, storage
    alive = weakref.ref(c)
    del c
    return alive


# 1. A simulated GPU tensor and a parameter keep their device through torch.save and a collected cycle.
rt = runtime.Runtime("sim", False, sites.UserFiles(sys.argv[1]), Events())
with runner.instrumented(rt):
    x = torch.zeros(3).to("cuda")
    model = torch.nn.Linear(2, 2).to("cuda")
    rt.set_origin(x, {"kind": "probe"})
    torch.save({"x": x, "model": model.state_dict()}, io.BytesIO())
    alive = cycle_holding(x.untyped_storage())
    gc.collect()
    out["cycle_collected"] = alive() is None
    out["after_gc"] = [str(x.device), str(model.weight.device), (rt.origin(x) or {}).get("kind")]
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    gc.collect()
    out["saved_tags"] = b"cuda:0" in buffer.getvalue()
out["guard_removed"] = not any(isinstance(c, runtime.StorageGuard) for c in gc.callbacks)

# 2. The guard itself, whether or not this torch needs it: when a collection starts it notes the
# attributes of the storages that carry some (by a weak reference to the C++ storage), and after
# it gives back any the collector emptied.
guard = runtime.StorageGuard()
guard.install()
seen = {}
y = torch.zeros(2)
y.untyped_storage()._tdl_dev = "cuda:0"
plain = torch.zeros(2)


def probe(phase, info):
    if phase == "start":
        noted = {weak: attributes for weak, attributes in guard._noted or ()}
        seen["tagged"] = noted.get(y.untyped_storage()._cdata)
        seen["untagged"] = plain.untyped_storage()._cdata in noted
        y.untyped_storage().__dict__.clear()  # as torch <= 2.8's collector does


gc.callbacks.append(probe)
try:
    alive = cycle_holding(y.untyped_storage())
    gc.collect()
finally:
    gc.callbacks.remove(probe)
    guard.uninstall()
out["guard"] = {**seen, "released": guard._noted is None, "kept": getattr(y.untyped_storage(), "_tdl_dev", None)}


# 3. torch.cuda.Stream/Event stand-ins and torch 2.4's abstract bases (a copy of their shape).
class FakeStreamBase(abc.ABC):
    for _name in ("wait_event", "wait_stream", "record_event", "query", "synchronize", "__eq__"):
        locals()[_name] = abc.abstractmethod(lambda self, *a: None)


class FakeEventBase(abc.ABC):
    for _name in ("wait", "query", "synchronize"):
        locals()[_name] = abc.abstractmethod(lambda self, *a: None)


fake = type(sys)("torch._streambase")
fake._StreamBase, fake._EventBase = FakeStreamBase, FakeEventBase
FakeStreamBase.__module__ = FakeEventBase.__module__ = "torch._streambase"
real = sys.modules.get("torch._streambase")
had = hasattr(torch, "_streambase")
old = getattr(torch, "_streambase", None)
sys.modules["torch._streambase"] = fake
torch._streambase = fake
try:
    out["bases_found"] = sim._stream_bases() == ((FakeStreamBase,), (FakeEventBase,))
finally:
    if real is None:
        del sys.modules["torch._streambase"]
    else:
        sys.modules["torch._streambase"] = real
    if had:
        torch._streambase = old
    else:
        del torch._streambase
stream = type("Stream", (sim._Stream, FakeStreamBase), {})
event = type("Event", (sim._Event, FakeEventBase), {})
out["stand_ins_complete"] = [type(stream()).__name__, type(event()).__name__]
try:
    from torch._streambase import _EventBase, _StreamBase
    import inspect
    out["real_bases"] = [issubclass(sim._Stream, _StreamBase) or not inspect.isabstract(_StreamBase),
                         issubclass(sim._Event, _EventBase) or not inspect.isabstract(_EventBase)]
except ImportError:
    out["real_bases"] = [True, True]

# 4. On a machine without a GPU (keep going), torch.cuda.Stream is a class whose construction is a CUDA request.
events = Events()
rt = runtime.Runtime("cpu-only", True, sites.UserFiles(sys.argv[1]), events)
with runner.instrumented(rt):
    cls = torch.cuda.Stream
    cls()
out["cpu_only_stream"] = [isinstance(cls, type), [e.get("what") for e in events.events if e["kind"] == "cuda-request"]]


# 5. The selfcheck: a missing optimisation warns (exit 0), a broken internal fails (exit 1).
def run_selfcheck():
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = selfcheck.main()
    return status, json.loads(stdout.getvalue())["checks"], stderr.getvalue()


from torch.utils._python_dispatch import TorchDispatchMode

skip = TorchDispatchMode.__dict__.get("_should_skip_dynamo")
if skip is not None:
    del TorchDispatchMode._should_skip_dynamo
try:
    status, checks, err = run_selfcheck()
finally:
    if skip is not None:
        TorchDispatchMode._should_skip_dynamo = skip
out["selfcheck_missing_optimisation"] = [status, checks["dispatch_mode_skip_dynamo"],
                                         "selfcheck: warning: dispatch_mode_skip_dynamo" in err]
parse_to = torch._C._nn._parse_to
torch._C._nn._parse_to = lambda *a, **k: (None, None, None, None)
try:
    status, checks, err = run_selfcheck()
finally:
    torch._C._nn._parse_to = parse_to
out["selfcheck_broken"] = [status, checks["parse_to"]]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    directory = tmp_path_factory.mktemp("torch-versions")
    script = directory / "checks.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    process = subprocess.run([sys.executable, str(script), str(directory)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
    if process.returncode == 1 and "No module named 'torch'" in process.stderr:
        pytest.skip("torch is not installed")
    assert process.returncode == 0, process.stderr
    return json.loads(process.stdout.strip().splitlines()[-1])


def test_simulated_devices_survive_a_collected_cycle_after_torch_save(checks):
    assert checks["cycle_collected"]
    assert checks["after_gc"] == ["cuda:0", "cuda:0", "probe"]
    assert checks["saved_tags"]
    assert checks["guard_removed"]


def test_the_gc_guard_gives_back_the_attributes_a_collection_emptied(checks):
    assert checks["guard"] == {"tagged": {"_tdl_dev": "cuda:0"}, "untagged": False, "released": True,
                               "kept": "cuda:0"}


def test_stream_and_event_stand_ins_fit_torch_2_4_abstract_bases(checks):
    assert checks["bases_found"]
    assert checks["stand_ins_complete"] == ["Stream", "Event"]  # no abstract method left
    assert checks["real_bases"] == [True, True]


def test_cpu_only_stream_is_a_class_and_a_cuda_request(checks):
    assert checks["cpu_only_stream"] == [True, ["torch.cuda.Stream()"]]


def test_selfcheck_warns_about_a_missing_optimisation_and_fails_a_broken_internal(checks):
    status, verdict, warned = checks["selfcheck_missing_optimisation"]
    assert status == 0 and verdict.startswith("warning: ") and warned
    status, verdict = checks["selfcheck_broken"]
    assert status == 1 and verdict != "ok" and not verdict.startswith("warning")
