"""Lesson 05's largest-batch check (the package's ``__init__`` registers it): the memory account
of section 6, applied to other models and GPUs."""

from __future__ import annotations

import math

import torch

from ...display import shown
from .. import ExerciseFailed, call_answer, fail_on_error
from ..answers import as_number, as_whole
from ..memory_cases import GIB, USABLE, exactly_full

# ---- Will it fit? (the memory account of section 6, applied to other models) ---------------------
# (parameters, fp32 activation bytes saved per sample, AMP/fp32 activation ratio, memory bytes)
FIT_CASES = [
    (86_600_000, 0.25 * GIB, 0.55, 15 * GIB),  # a ViT-B/16-sized model on a T4's 15 GiB
    (1_300_000_000, 0.5 * GIB, 0.6, 24 * GIB),  # a 1.3B model on 24 GiB: weights dominate
    (7_000_000_000, 1.0 * GIB, 0.55, 80 * GIB),  # 7B parameters on 80 GiB
    # fp32's state and 100 samples fill the 36 usable GiB of 40 to the byte: the step may.
    (738_197_504, 0.25 * GIB, 0.55, 40 * GIB),
]
STATE_BYTES, COPY_BYTES = 16, 2  # per parameter: fp32 weights, grads, two Adam moments; 16-bit copy


def fit_cases(seed: int) -> list[tuple]:
    """Seed 0: FIT_CASES. Other seeds: five random models and GPUs, then, as in FIT_CASES, one
    whose state alone overflows the GPU (batch 0), one where AMP's 16-bit weight copies leave
    less room than its smaller activations save (AMP fits fewer samples, here none), one each
    slip gets wrong, and one that fp32's state and a whole batch fill to the byte (< for "fits"
    passed every seed without it)."""
    if seed == 0:
        return list(FIT_CASES)
    generator = torch.Generator().manual_seed(seed)
    draws = torch.rand(25, generator=generator, dtype=torch.float64).tolist()
    cases = []
    for n, a, r, m in zip(*[iter(draws[:20])] * 4, strict=True):
        memory = [15, 24, 40, 80][int(4 * m)] * GIB
        cases.append((int(10 ** (7 + 2.7 * n)), (0.01 + 2 * a) * GIB, 0.45 + 0.35 * r, memory))
    m, over, t, a, r = draws[20:]
    memory = [15, 24, 40, 80][int(4 * m)] * GIB
    usable = USABLE * memory
    too_big = int(usable / STATE_BYTES * (1.1 + 0.5 * over))
    cases.append((too_big, (0.01 + 2 * a) * GIB, 0.45 + 0.35 * r, memory))
    # 16 + 2t bytes per parameter fill the usable memory: fp32 leaves 2t of them per parameter
    # for activations, AMP's 2-byte copies leave 2t - 2 < 0.
    copies_win = int(usable / (STATE_BYTES + 2 * (0.5 + 0.45 * t)))
    room = usable - STATE_BYTES * copies_win
    cases.append((copies_win, room * (0.2 + 0.7 * a), 0.45 + 0.35 * r, memory))
    # fp32's state and a whole batch filling the usable memory to the byte, as in FIT_CASES
    pick = lambda low, high: int(torch.randint(low, high + 1, (1,), generator=generator))  # noqa: E731
    num_params, activation, _, gpu_gib = exactly_full(pick, STATE_BYTES, False, 400)
    return [*cases, _slips_decide(generator), (num_params, float(activation), 0.55, gpu_gib * GIB)]


def _slips_decide(generator) -> tuple:
    """A model and GPU, drawn until found, where each slip gives another batch: 4-byte copies
    under AMP, the headroom read as need x 1.1 <= memory, rounding to nearest (each passed a few
    grader seeds of 200, up to 7, among the cases drawn above)."""
    while True:
        n, a, r, m = torch.rand(4, generator=generator, dtype=torch.float64).tolist()
        case = (int(10 ** (7 + 2.7 * n)), (0.01 + 2 * a) * GIB, 0.45 + 0.35 * r)
        case += ([15, 24, 40, 80][int(4 * m)] * GIB,)
        fixed, per_sample, usable = _parts(*case, amp=False)
        amp_fixed, amp_sample, _ = _parts(*case, amp=True)
        right, amp_right = (usable - fixed) / per_sample, (usable - amp_fixed) / amp_sample
        slipped = (usable - amp_fixed - COPY_BYTES * case[0]) / amp_sample  # 4-byte copies
        headroom = (case[3] / 1.1 - fixed) / per_sample
        if (
            min(right, amp_right) >= 1  # where the reference's clamp at 0 hides none of them
            and math.floor(slipped) != math.floor(amp_right)
            and math.floor(headroom) != math.floor(right)
            and round(right) != math.floor(right)
        ):
            return case


def _parts(num_params, fp32_bytes, ratio, memory, amp) -> tuple[float, float, float]:
    """(fixed bytes, bytes per sample, usable bytes) of a case."""
    fixed = num_params * (STATE_BYTES + (COPY_BYTES if amp else 0))
    return fixed, fp32_bytes * (ratio if amp else 1.0), USABLE * memory


def observe_fit(largest_batch, seed: int) -> list[dict]:
    results = []
    for case in fit_cases(seed):
        for amp in (False, True):
            got, error = call_answer(largest_batch, *case, amp)
            whole = as_whole(got)  # numpy integers and 0-dim integer tensors are whole too
            number = whole if whole is not None else as_number(got)
            if whole is None and number is not None and number.is_integer():
                whole = number = int(number)  # 48.0, from a float's // or math.floor of one
            results.append(
                {
                    "case": [*case, amp],
                    "error": error,
                    "result": number,
                    "whole": whole is not None,
                    "returned": None if number is not None else shown(got),
                }
            )
    return results


def _fit_account(case, batch: int) -> str:
    """What the step holds at ``batch`` in this case, against the usable memory, in words."""
    num_params, fp32_bytes, ratio, memory, amp = case
    (fixed, per_sample, usable), per_param = _parts(*case), STATE_BYTES + COPY_BYTES * amp
    used = fixed + batch * per_sample
    scaled = f" ({fp32_bytes / GIB:.4g} GiB x {ratio:.3g})" if amp else ""
    return (
        f"at batch {batch} the step holds {per_param} bytes x {num_params:_} parameters = "
        f"{fixed / GIB:.3f} GiB and {batch} x {per_sample / GIB:.4g} GiB{scaled} of activations, "
        f"{used / GIB:.3f} GiB in all: {'within' if used <= usable else 'more than'} the "
        f"{usable / GIB:.3f} GiB usable ({USABLE:.0%} of {memory / GIB:.4g} GiB)"
    )


def compare_fit(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        case = want["case"]
        num_params, fp32_bytes, ratio, memory, amp = case
        call = (
            f"largest_batch({num_params:.3g}, {fp32_bytes / GIB:.3g} GiB, {ratio:.3g}, "
            f"{memory / GIB:.0f} GiB, amp={amp})"
        )
        fail_on_error(got["error"], call)
        result, expected = got["result"], want["result"]
        if result is None:
            raise ExerciseFailed(f"{call} returned {got['returned']}; expected the int {expected}.")
        if not got["whole"]:
            raise ExerciseFailed(
                f"{call} returned the float {result!r}; expected the int {expected}."
            )
        fixed, per_sample, usable = _parts(*case)
        quotient = (usable - fixed) / per_sample  # the exact value the batch rounds down
        on_an_edge = abs(quotient - round(quotient)) < 1e-9 * max(1.0, abs(quotient))
        if result == expected or (on_an_edge and result in (round(quotient), expected)):
            continue  # a float rounding on the very edge of a whole batch goes either way
        if result < 0:
            raise ExerciseFailed(
                f"{call} returned {result}, expected {expected}: a batch is never negative (where "
                "not even one sample fits, the reference returns 0)."
            )
        bigger = "a larger batch fits, " if result < expected and expected > 0 else ""
        account = _fit_account(case, max(result, expected))
        raise ExerciseFailed(f"{call} returned {result}, expected {expected}: {bigger}{account}.")
