"""The simulator checks ops from the first placement on its GPU on: each case printed as
`name | answer` (see tests/trace/test_first_placement.py). Run as `placement_probe.py generator`
or `placement_probe.py late`; each case catches its error, as a GPU would raise it.
"""
import sys
import threading

import torch
from probe_cases import case
from torch.utils._python_dispatch import TorchDispatchMode


class Passthrough(TorchDispatchMode):
    """A program's own dispatch mode (as profilers and tracing tools have)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


if sys.argv[1] == "generator":
    # Nothing is on the GPU yet: the first thing placed there is a default CUDA generator.
    case("cpu work before any placement", lambda: (torch.ones(3) * 2).sum().item())
    case("dispatch modes before any placement", torch._C._len_torch_dispatch_stack)
    case("randn(generator=default cuda generator) on the CPU",
         lambda: torch.randn(2, generator=torch.cuda.default_generators[0]))  # mismatch: default generator
    case("cuda.manual_seed, then cpu work",
         lambda: (torch.cuda.manual_seed(3), torch.randn(2))[1])
else:
    shared, go, done = {}, threading.Event(), threading.Event()

    def worker():
        go.wait()
        case("a thread started before the first placement mixes devices",
             lambda: shared["x"] + torch.ones(2))  # mismatch: older thread
        done.set()

    threading.Thread(target=worker, daemon=True).start()
    with Passthrough():
        # the first placement, while the program's own dispatch mode is on
        shared["x"] = torch.ones(2).cuda()
        case("placed inside the program's mode", lambda: shared["x"])
    case("the program's mode left cleanly", torch._C._len_torch_dispatch_stack)
    case("mixing after the program's mode ends",
         lambda: shared["x"] * torch.ones(2))  # mismatch: after the program's mode
    case("same device after the program's mode ends", lambda: shared["x"] * 2)
    go.set()
    done.wait(30)
print("DONE", flush=True)
