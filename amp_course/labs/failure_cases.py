"""The more-failures labs' common setup: the device, the scaler settings, the autocast cases a check
runs, the generator every lab draws from (``more_failures`` and ``rotary`` use them), and the call
that records what a learner's function raised (the modern-stack labs')."""

from __future__ import annotations

import torch

from ..display import error_text

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
