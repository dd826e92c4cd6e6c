"""The labs' common setup: the device, the scaler settings, the autocast cases a check runs, the
generator every lab draws from, the call that records what a learner's function raised (the
modern-stack labs'), and the error a kit raises when what the function returned is not what its
lab takes."""

from __future__ import annotations

import torch

from ..display import error_text, kind_of

DEVICE_TYPE = "cpu"
SCALER_KWARGS = dict(init_scale=2.0**16, growth_interval=3)
# The autocast dtype of each case a check runs (None: no autocast, fp32).
AUTOCAST_CASES = {"fp16 autocast": torch.float16, "bf16 autocast": torch.bfloat16, "fp32": None}


def seeded(seed: int) -> torch.Generator:
    """The generator every lab draws its inputs from."""
    return torch.Generator().manual_seed(seed)


def autocast(dtype: torch.dtype | None) -> torch.autocast:
    """CPU autocast in ``dtype``, or disabled (plain fp32) for None."""
    # A disabled autocast still takes a dtype its device supports.
    return torch.autocast(DEVICE_TYPE, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def attempt(fn, *args) -> tuple[object, str | None]:
    """``(fn(*args), None)``, or ``(None, "ErrorType: message")`` if the learner's ``fn`` raised."""
    try:
        return fn(*args), None
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        return None, error_text(error)


class Returned(TypeError):
    """What a learner's function returned is not what its lab takes. Raised by a lab's kit, not by
    the learner's code: its text is the whole phrase ("returned None; ..."), which a check says as
    it is ("your function returned None; ..."), never as something the function raised."""

    said_whole = True  # display.error_text gives the text alone, with no type name


def returned_tensor(value, what: str):
    """``value`` if it is a tensor; else Returned, naming ``what`` the lab takes."""
    if not isinstance(value, torch.Tensor):
        raise Returned(f"returned {kind_of(value)}; the lab takes {what}, a tensor")
    return value


def returned_tensors(value, count: int, what: str) -> tuple:
    """``value`` as a tuple if it holds ``count`` tensors; else Returned, naming ``what``."""
    if not isinstance(value, (tuple, list)) or len(value) != count:
        held = f" of {len(value)}" if isinstance(value, (tuple, list)) else ""
        raise Returned(f"returned {kind_of(value)}{held}; the lab takes {what}, {count} tensors")
    for item in value:
        returned_tensor(item, what)
    return tuple(value)
