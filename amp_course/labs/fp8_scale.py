"""Lab 6 of the modern-stack labs: a float8 scale and an all-zero tensor (the tensors a recipe
scales, the float8 values a right answer may hold, and a run that records the learner's values and
scale). ``modern_stack`` gives the notebook these under ``lab.``."""

from __future__ import annotations

import torch

from ..display import error_text, kind_of
from .more_failures import seeded

# ---- Lab 6: a float8 scale and an all-zero tensor -----------------------------------------------
FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # e4m3's largest value, where a recipe's scale puts the amax


def fp8_tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    """Tensors a float8 recipe scales: activations, small gradients, an all-zero gradient."""
    generator = seeded(seed)
    shape = (16, 32) if seed == 0 else tuple(torch.randint(4, 48, (2,), generator=generator))
    # Gradients as small as the lab names (about 1e-9) at every seed: their amax is 3.7e-9 in the
    # notebook, drawn between 1.3e-9 and 5e-9 elsewhere. An amax floored at a "small" epsilon
    # such as 1e-8 or float32's eps (1.2e-7) fails every seed alike (1e-8 passed the seeds that
    # drew gradients ten times larger), and one added to it (amax + 1e-12) moves the scale by
    # less than the check's tolerance for them.
    small = 1e-9 if seed == 0 else 10 ** -float(8.3 + 0.6 * torch.rand((), generator=generator))
    activations = 3 * torch.randn(shape, generator=generator)
    while seed != 0 and _rounded_twice(activations, via=torch.float16) < 1:
        activations = 3 * torch.randn(shape, generator=generator)
    bf16 = (2 * torch.randn(shape, generator=generator)).bfloat16()
    while _rounded_twice(bf16) < 3:
        bf16 = (2 * torch.randn(shape, generator=generator)).bfloat16()
    gradients = torch.randn(shape, generator=generator)
    if seed != 0:  # small is their amax
        gradients /= gradients.abs().max()
    # Their largest magnitude negative at every seed: an amax read as x.max() (no abs) passed the
    # seeds, the notebook's among them, where every tensor's was positive (a test learner's).
    gradients = gradients if -gradients.min() > gradients.max() else -gradients
    return {
        "activations (fp32)": activations,
        "activations (bf16)": bf16,
        "small gradients": small * gradients,
        "an all-zero gradient": torch.zeros(shape),
    }


# Relative: about 3 fp32 roundings, far inside bf16's 2^-9. A product this close to a float8 tie
# may round to either neighbour, depending on how an fp32 product was written (x / amax * 448).
TIE_WINDOW = 4e-7


def fp8_roundings(x: torch.Tensor, scale: torch.Tensor) -> list[torch.Tensor]:
    """The float8 values (as fp32) of ``x * scale`` formed in fp32 and rounded once, and of the
    exact product moved by the tie window either way: a right answer's values are one of these."""
    once = (x.float() * scale).clamp(-FP8_MAX, FP8_MAX).to(FP8).float()
    exact = x.double() * scale.double()
    return [once] + [
        (exact * (1 + side * TIE_WINDOW)).clamp(-FP8_MAX, FP8_MAX).to(FP8).float()
        for side in (-1, 1)
    ]


def _rounded_twice(x: torch.Tensor, via: torch.dtype | None = None) -> int:
    """How many of ``x``'s float8 values a product formed in bf16 (x * an fp32 0-dim scale stays
    bf16 for bf16 ``x``), or formed in fp32 and rounded to ``via`` first, rounds to none of the
    right ones. Some amaxes leave none (7.0 makes the scale 64, and every product exact), and then
    no check could tell the two apart (a product rounded through fp16 passed 47 seeds of 200)."""
    scale = FP8_MAX / x.abs().max().float()
    product = x * scale if via is None else (x.float() * scale).to(via)
    twice = product.clamp(-FP8_MAX, FP8_MAX).to(FP8).float()
    return int(torch.stack([twice != right for right in fp8_roundings(x, scale)]).all(0).sum())


def run_fp8(fn, seed: int = 0) -> dict:
    """``fn(x)`` for each tensor: the float8 values (as fp32) and their dtype, and the scale."""
    observed = {}
    for name, x in fp8_tensors(seed).items():
        try:
            got, error = fn(x.clone()), None
        except Exception as failure:  # noqa: BLE001 - the learner's code may raise anything
            got, error = None, error_text(failure)
        record = {"error": error, "input": x.float(), "returned": None}
        if error is None:
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                record["returned"] = kind_of(got)
            else:
                values, scale = got
                record["dtype"] = str(getattr(values, "dtype", type(values).__name__))
                record["values"] = values.float() if torch.is_tensor(values) else None
                record["scale"] = float(scale)
                tensor = torch.is_tensor(scale)  # else a Python float, whose bits are float64's
                record["scale_dtype"] = str(scale.dtype) if tensor else type(scale).__name__
                record["scale_bits"] = 8 * scale.element_size() if tensor else 64
        observed[name] = record
    return observed
