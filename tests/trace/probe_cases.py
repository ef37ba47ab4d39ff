"""How the probe programs print their cases: `name | answer`, the answer a device (of a tensor or
generator), a short value, or `ERR Type: message` (read back by tracehelp.printed_cases)."""
import torch


def answer(value) -> str:
    if isinstance(value, (torch.Tensor, torch.Generator)):
        return str(value.device)
    return repr(value)


def case(name, fn):
    try:
        text = answer(fn())
    except Exception as error:  # noqa: BLE001 - the answer is the error
        text = f"ERR {type(error).__name__}: {str(error).strip().splitlines()[0]}"
    print(f"{name} | {text}", flush=True)
