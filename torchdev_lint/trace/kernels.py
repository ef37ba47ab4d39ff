"""What a CUDA kernel checks about its operands' devices, and how it words a failure.

Child side only (the simulator, ``sim.py``). The source is torch's own: the
``native_functions.yaml`` packaged with it (in ``torchgen``), from which torch generates its CUDA
wrappers. A wrapper checks that every tensor operand (out, then positional arguments, 0-dim ones
included) is on the first one's device, unless the op is marked ``device_check: NoCheck``
(TensorIterator ops, which accept 0-dim CPU tensors and word the error their own way). A few
kernels check by hand and say so in their own words (indexing, ``masked_fill``, RNNs, packed
sequences). Where the op is not known, the TensorIterator wording is used.
"""

from __future__ import annotations

import functools
import importlib.util
import os

# The wording observed on a GPU (torch 2.11; older releases say "found at least two devices, A and B!
# (when checking argument for argument NAME in method M)").
GENERIC = "Expected all tensors to be on the same device, but found at least two devices, {a} and {b}!"
NAMED = ("Expected all tensors to be on the same device, but got {name} is on {device}, different from other "
         "tensors on {common}")
METHOD = " (when checking argument in method {method})"
INDICES = "indices should be either on cpu or on the same device as the indexed tensor ({device})"
MASK = "expected self and mask to be on the same device, but got mask on {mask} and self on {self}"
RNN = "Input and {name} tensors are not at the same device, found input tensor at {input} and {name} tensor at {other}"
CPU_LENGTHS = "'lengths' argument should be a 1D CPU int64 tensor, but got {dim}D {device} {dtype} tensor"

# Ops the simulator sees whole whose CUDA code runs another checked kernel: (that kernel, or None
# when the kernel depends on the GPU's libraries; its names for this op's arguments, where they
# differ). The first operand is never named: it sets the device the others must be on.
COMPOSITES = {
    "embedding": ("index_select", {"indices": "index"}),
    "stack": ("cat", {}),
    "convolution": (None, {}),
}
INDEXING = {"index", "_unsafe_index", "index_put", "index_put_", "_index_put_impl_", "_unsafe_index_put"}
MASKED_FILL = {"masked_fill", "masked_fill_"}
# operands the CUDA kernel takes on the CPU only (PackedSequence.cpp's checkLongTensor), for the ops
# the simulator sees (the batch sizes of _pad_packed_sequence, a composite, are PackedSequence's,
# which refuses them on CUDA in Python)
CPU_ONLY = {"_pack_padded_sequence": 1}


@functools.lru_cache(maxsize=1)
def wrappers() -> dict[str, tuple[bool, bool]]:
    """``name.overload`` -> (its CUDA wrapper checks devices, the op is structured), for the ops
    with a CUDA kernel; empty when torch ships no ``native_functions.yaml``."""
    spec = importlib.util.find_spec("torchgen")
    locations = list(spec.submodule_search_locations or ()) if spec else []
    path = next((p for p in (os.path.join(d, "packaged", "ATen", "native", "native_functions.yaml")
                             for d in locations) if os.path.exists(p)), None)
    if path is None:
        return {}
    table: dict[str, tuple[bool, bool]] = {}

    def close(entry):
        if entry is not None and (entry["cuda"] or entry["structured"]):
            table[entry["name"]] = (entry["check"], entry["structured"])

    entry = None
    in_dispatch = False
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("- func:"):
                close(entry)
                entry = {"name": line[len("- func:"):].strip().split("(", 1)[0], "check": True,
                         "structured": False, "cuda": False}
                in_dispatch = False
                continue
            if entry is None:
                continue
            stripped = line.split("#", 1)[0].strip()
            if line.startswith("  ") and not line.startswith("    "):
                in_dispatch = stripped == "dispatch:"
                if stripped == "device_check: NoCheck":
                    entry["check"] = False
                elif stripped.startswith("structured_delegate:") or stripped == "structured: True":
                    entry["structured"] = True
            elif in_dispatch and ":" in stripped:
                keys = {k.strip() for k in stripped.split(":", 1)[0].split(",")}
                entry["cuda"] = entry["cuda"] or "CUDA" in keys
    close(entry)
    return table


def wrapper(name: str, overload: str) -> tuple[bool, str] | None:
    """(whether the CUDA wrapper checks devices, its name) of an op; None when unknown."""
    known = wrappers().get(f"{name}.{overload}" if overload else name)
    if known is None:
        return None
    check, structured = known
    method = f"wrapper_CUDA_{name}_{overload}" if structured and overload else (
        f"wrapper_CUDA_{name}" if structured else f"wrapper_CUDA_{overload}_{name}")
    return check, method


def checks_devices(name: str, overload: str) -> bool:
    """Whether every tensor operand, a 0-dim CPU one too, must be on the same device on a GPU."""
    if name in COMPOSITES:
        return True
    known = wrapper(name, overload)
    return known is not None and known[0]


def named_text(name: str, overload: str, operands) -> str | None:
    """The checked wrapper's text for ``operands`` [(argument name, device)] in the order it checks
    them; None when the op's wrapper does not check, or the operands agree."""
    renames: dict[str, str] = {}
    if name in COMPOSITES:
        inner, renames = COMPOSITES[name]
        known = wrapper(inner, "") if inner else None
    else:
        known = wrapper(name, overload)
        if known is None or not known[0]:
            return None
    common = None
    for argument, device in operands:
        if common is None:
            common = device
        elif device != common:
            text = NAMED.format(name=renames.get(argument, argument), device=device, common=common)
            return text + METHOD.format(method=known[1]) if known else text
    return None
