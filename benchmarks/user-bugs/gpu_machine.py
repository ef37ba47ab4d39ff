"""Run a program of a case as it would have run on a machine with a GPU, as far as the files
it writes are concerned: ``python gpu_machine.py SCRIPT [ARGS...]``.

The program runs on the CPU, but every ``torch.save`` tags its storages ``cuda:0``, as the
project's training script writes them on a GPU machine. A case uses it as its ``setup`` step to
make the checkpoint its entry program then loads: the file comes from before the traced run, as a
checkpoint downloaded from the training machine does, and loading it without ``map_location`` on
a CPU-only machine fails as the real one would (``Attempting to deserialize object on a CUDA
device ...``). See "Making a GPU-saved checkpoint without a GPU" in docs/trace.md.
"""
import os
import runpy
import sys

import torch.serialization


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python gpu_machine.py SCRIPT [ARGS...]")
    script = sys.argv[1]
    # A tagger of higher priority than torch's own names every storage's location 'cuda:0'.
    torch.serialization.register_package(1, lambda storage: "cuda:0", lambda storage, location: None)
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
