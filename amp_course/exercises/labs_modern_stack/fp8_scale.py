"""The modern-stack labs' lab 6 check (the package's ``__init__`` registers it): a float8 scale
for an all-zero tensor, its values within one e4m3 rounding of the reference's and rounded once."""

from __future__ import annotations

import torch

from ...labs.fp8_scale import FP8, FP8_MAX, fp8_roundings
from .. import ExerciseFailed, fail_on_error
from ..labs_more_failures import _first_non_finite, _tensor_like, _where

# ---- Lab 6: a float8 scale and an all-zero tensor -----------------------------------------------
FP8_SMALLEST = 2.0**-9  # e4m3's smallest subnormal
# How far a scale may be from the reference's, relative. For small gradients, an epsilon added to
# the amax (448 / (amax + 1e-12), a right answer) moves it by up to 1e-3. Elsewhere the floor
# cannot matter and a right scale is 448 / amax in fp32, however written (a few fp32 roundings);
# a scale computed in bf16 and cast to fp32 is off by up to 2^-8 (it passed 63 seeds of 200 at
# 1e-3).
SCALE_RTOL = 1e-3
EXACT_SCALE_RTOL = 1e-6
FLOOR_REACH = 1e-6  # an amax below this: the floor's epsilon may move the scale


def _fp8_values(got: dict, want: dict, what: str) -> None:
    """The float8 values, within one e4m3 rounding of the reference's."""
    values, expected = got["values"], want["values"]
    # e4m3 keeps 3 bits after the leading one: neighbours are |value| / 8 apart, or closer.
    off = (values - expected).abs() - (expected.abs() / 8 + FP8_SMALLEST)
    if (off > 0).any():
        index = tuple(int(i) for i in torch.unravel_index(off.argmax(), off.shape))
        raise ExerciseFailed(
            f"{what} your float8 value at {_where(index)} is {values[index].item():.4g}; the "
            f"reference's {expected[index].item():.4g} (the input there: "
            f"{want['input'][index].item():.4g})."
        )


def _rounded_once(got: dict, what: str) -> None:
    """The float8 values are the input times the learner's own scale, a product in fp32 rounded
    once to e4m3. A product formed in a 16-bit dtype is rounded twice, and where its first rounding
    lands on a tie of the second (3-5% of the values of bf16 activations) it ends one e4m3 step
    away. A learner's fp32 product written another way (x / amax * 448) can differ from this one in
    its last bit, which moves an e4m3 value only when the product sits on a tie. Inputs with few
    significant bits (bf16 activations with an amax like 6.5) put many products exactly on ties,
    so where a product lies within a few fp32 roundings of a tie either neighbour is allowed."""
    scale = torch.tensor(got["scale"], dtype=torch.float32)
    once, *window = fp8_roundings(got["input"], scale)
    values = got["values"]
    differ = (values != once) & (values != window[0]) & (values != window[1])
    if differ.any():  # a single value rounded twice is one too many
        index = tuple(int(i) for i in differ.nonzero()[0])
        value = got["input"][index].item()
        product = got["input"][index] * scale  # in fp32, as the reference forms it
        count = int(differ.sum())
        raise ExerciseFailed(
            f"{what} {count} of your {differ.numel()} float8 values {'is' if count == 1 else 'are'}"
            " not the input "
            f"times your scale ({scale.item():.9g}) in fp32, rounded to float8: at {_where(index)} "
            f"the input is {value:.9g}, times your scale {product.item():.9g}, which rounds "
            f"to {once[index].item():.4g}; your value is {values[index].item():.4g}."
        )


def compare_fp8(mine: dict, reference: dict, seed: int) -> None:
    for name, want in reference.items():
        got, what = mine[name], f"For {name} (amax {want['input'].abs().max().item():.3g}),"
        fail_on_error(got["error"], f"{what} your function")
        if got.get("returned"):
            raise ExerciseFailed(
                f"{what} your function returned {got['returned']}; the reference returns a "
                "pair (float8 tensor, scale)."
            )
        if got["dtype"] != str(FP8):
            raise ExerciseFailed(f"{what} your values are {got['dtype']}; the reference's {FP8}.")
        _tensor_like(got["values"], want["values"], f"{what} your float8 values (as fp32)")
        bad = _first_non_finite(got["values"])
        if bad:
            raise ExerciseFailed(
                f"{what} your float8 values hold {bad[1]} at {_where(bad[0])}; the reference's "
                "are finite."
            )
        scale, amax = got["scale"], want["input"].abs().max().item()
        # An all-zero tensor's reference scale is 448 over the reference's floor: printing it
        # would hand the floor over, so the check says only what kind of number it is.
        theirs = f"{want['scale']:.6g}" if amax > 0 else "a finite positive number"
        if not (scale == scale and abs(scale) != float("inf") and scale > 0):
            raise ExerciseFailed(
                f"{what} your scale is {scale}; the reference's is "
                + (f"{want['scale']:.4g}, finite and positive." if amax > 0 else f"{theirs}.")
            )
        if got["scale_bits"] < 32:  # a 16-bit scale: off by up to 1/512 (bf16), at random
            reach = (
                f", which takes the amax to {FP8_MAX:g}, float8's largest value. Yours takes it "
                f"to {amax * scale:.6g}."
                if amax > 0
                else "."
            )
            raise ExerciseFailed(
                f"{what} your scale is a {got['scale_dtype']} tensor, {scale:.6g}; the "
                f"reference's is float32, {theirs}{reach}"
            )
        rtol, digits = (SCALE_RTOL, 4) if amax < FLOOR_REACH else (EXACT_SCALE_RTOL, 9)
        if amax > 0 and abs(scale - want["scale"]) > rtol * want["scale"]:
            raise ExerciseFailed(
                f"{what} your scale is {scale:.{digits}g}; the reference's "
                f"{want['scale']:.{digits}g}, which takes the amax to {FP8_MAX:g}, float8's "
                f"largest value. Yours takes it to {amax * scale:.{digits}g}."
            )
        _fp8_values(got, want, what)
        _rounded_once(got, what)
