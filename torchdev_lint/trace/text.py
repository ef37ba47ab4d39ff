"""Error messages as evidence: one clean sentence (no ANSI escapes, no banner lines), and the
kinds of error the verdicts recognise. Plain text, used on both sides (no torch)."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_BANNER = re.compile(r"^[\W_]*$")  # "=====", "-----", "***": decoration, not words
_LONG = 300
_SENTENCE_END = re.compile(r"(?<=[a-z)\]'][.!?])\s+(?=[A-Z])")

# Errors that say tensors of two devices met (a GPU's, the simulator's, the meta device's...).
DEVICE_ERROR = re.compile(
    r"Expected all tensors to be on the same device|is not on the expected device|"
    r"can't convert \S+ device type tensor|Input and (?:hidden|parameter) tensors are not (?:at|on) the same device|"
    r"Expected object of device type|device type for generator but found|Tensors of the same index must be on the same device|"
    r"indices should be either on cpu or on the same device|Expected tensor for argument #\d+ .* to have the same device|"
    r"expected self and mask to be on the same device|argument should be a 1D CPU int64 tensor, but got \S+ (?!cpu )\S+ |"
    # a library's own check (kornia: "Patch and homography must be on the same device")
    r"(?:must|should|needs? to|ha(?:ve|s) to|are expected to|is expected to) (?:all )?be on the same device|"
    r"(?:are|is|were|was) not on the same device|(?:are|were) on different devices|device mismatch",
    re.IGNORECASE)
# Errors a machine without a GPU raises where a program asks for one.
NO_GPU_ERROR = re.compile(
    r"Torch not compiled with CUDA enabled|Attempting to deserialize object on a CUDA device|"
    r"Cannot access accelerator device when none is available|No CUDA GPUs are available|"
    r"Found no NVIDIA driver|doesn't have NCCL built in|ProcessGroupNCCL is only supported with GPUs|"
    r"type torch\.cuda\.\w+ not available|CUDA driver initialization failed")
# Errors of the simulated GPU's own limits: the program asked for something it does not model.
SIM_LIMIT_ERROR = re.compile(
    r"Cannot initialize CUDA without ATen_cuda|not linked with support for cuda devices|"
    r"Torch not compiled with CUDA enabled|with arguments from the '(?:CUDA|NCCL)' backend|"
    r"Cannot access accelerator device when none is available|doesn't have NCCL built in|"
    r"has no attribute '_(?:cuda|scatter|gather|nccl)\w*'|Cannot get CUDA generator|No CUDA GPUs are available")


def clean(message: str | None) -> str:
    """The message without terminal escape codes."""
    return _ANSI.sub("", message or "")


def sentence(message: str | None) -> str:
    """The first line of the message that has words in it, escape codes removed, cut to a
    readable length: what goes into evidence and summaries (the full text is in the JSON)."""
    for line in clean(message).splitlines():
        line = " ".join(line.split())
        if line and not _BANNER.match(line):
            line = _SENTENCE_END.split(line, 1)[0]
            return line if len(line) <= _LONG else line[:_LONG - 3].rstrip() + "..."
    return ""
