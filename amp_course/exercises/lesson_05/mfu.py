"""Lesson 05's MFU checks (the package's ``__init__`` registers them): MFU from a step's FLOPs
(``05.mfu``, the grading tests' toy lesson grades it) and MFU estimated from a model's shape
(``05.mfu_estimate``, the lesson's exercise)."""

from __future__ import annotations

import math

import torch

from ... import gpus
from ...display import shown
from .. import ExerciseFailed, call_answer, fail_on_error
from ..answers import as_number


# ---- MFU from a step's FLOPs: the grading tests' toy lesson (tests/fixtures/grading) grades it;
# lesson 05's exercise is 05.mfu_estimate below, which asks for a case the lesson did not show.
def _peak(model: str, precision: str) -> float:
    """A dense peak of ac.gpus's table, in TFLOP/s."""
    return gpus.GPUS[model].peak(precision)


H100_BF16, A100_BF16 = _peak("H100 SXM", "bf16"), _peak("A100 SXM4 80GB", "bf16")
T4_FP32, T4_FP16 = _peak("T4", "fp32"), _peak("T4", "fp16")
MFU_CASES = [(106.6e9 * 64, 0.1, H100_BF16), (371e9 * 32, 0.25, A100_BF16), (1e12, 1.0, 1.0)]


def mfu_cases(seed: int) -> list[tuple[float, float, float]]:
    """Seed 0: MFU_CASES (ViT steps on an H100 and an A100). Other seeds: random steps and
    peaks, each step's FLOPs drawn so that its MFU is 2% to 90%, as a real GPU's is (random
    FLOPs gave MFUs up to 35, where an answer that caps MFU at 1 is right to refuse)."""
    if seed == 0:
        return list(MFU_CASES)
    generator = torch.Generator().manual_seed(seed)
    draws = torch.rand(6, 3, generator=generator, dtype=torch.float64).tolist()
    steps = [(0.02 + 0.88 * u, 10 ** (2 * s - 2), 10 ** (3 * p)) for u, s, p in draws]
    return [(share * seconds * peak * 1e12, seconds, peak) for share, seconds, peak in steps]


def _observe_numbers(fn, cases) -> list[dict]:
    """``fn(*case)`` for every case: the inputs, and the number returned or the error."""
    results = []
    for case in cases:
        got, error = call_answer(fn, *case)
        number = as_number(got)
        returned = None if number is not None else shown(got)
        results.append({"case": list(case), "error": error, "result": number, "returned": returned})
    return results


def observe_mfu(mfu, seed: int) -> list[dict]:
    return _observe_numbers(mfu, mfu_cases(seed))


def compare_mfu(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        flops, seconds, peak = want["case"]
        fail_on_error(got["error"], f"mfu({flops:.4g}, {seconds:.4g}, {peak:.4g})")
        expected, result = want["result"], got["result"]
        if result is None or not math.isfinite(result):
            said = got["returned"] if result is None else result
            raise ExerciseFailed(f"mfu{(flops, seconds, peak)} should be a number, got {said}.")
        if not math.isclose(result, expected, rel_tol=1e-6):
            # What differs, by a factor the units make (100, 1e12) where it is one of them.
            times = next(
                (
                    f": {name} times it"
                    for factor, name in ((100, "100"), (1e12, "1e12"))
                    if math.isclose(result, factor * expected, rel_tol=1e-6)
                ),
                " (achieved FLOP/s over peak FLOP/s)",
            )
            raise ExerciseFailed(
                f"mfu({flops:.4g}, {seconds:.4g}, {peak:.4g}) returned {result:.4g}, "
                f"expected {expected:.4g}{times}."
            )


# ---- MFU estimated from a model's shape, for a case lesson 05 did not show ----------------------
# (parameters, layers, width, tokens per sample, batch, step ms, peak TFLOP/s, training step?)
ESTIMATE_CASES = [
    (124_000_000, 12, 768, 1024, 32, 350.0, A100_BF16, True),  # a GPT-2-small-sized LM, A100 bf16
    (6_700_000_000, 32, 4096, 2048, 8, 900.0, H100_BF16, False),  # a 7B LM's forward, H100 bf16
    (304_000_000, 24, 1024, 197, 64, 400.0, T4_FP16, False),  # ViT-L/16 evaluation, T4 fp16
    (110_000_000, 12, 768, 512, 64, 800.0, T4_FP16, True),  # a BERT-base-sized step, T4 fp16
]


def estimate_cases(seed: int) -> list[tuple]:
    """Seed 0: ESTIMATE_CASES. Other seeds: six random shapes and peaks, both kinds of step, each
    timed so that its MFU is a plausible 10% to 60%."""
    if seed == 0:
        return list(ESTIMATE_CASES)
    generator = torch.Generator().manual_seed(seed)
    cases = []
    for i, draw in enumerate(torch.rand(6, 6, generator=generator, dtype=torch.float64).tolist()):
        n, layers, width, tokens, batch, share = draw
        peak, training = (T4_FP32, T4_FP16, A100_BF16, H100_BF16)[i % 4], i % 2 == 0
        shape = (int(10 ** (7 + 3 * n)), 4 + int(44 * layers), 128 * (2 + int(62 * width)))
        run = (2 ** (7 + int(5 * tokens)), 1 + int(63 * batch))
        flops = run[1] * (6 * shape[0] * run[0] + 12 * shape[1] * shape[2] * run[0] ** 2)
        seconds = flops / (3 if not training else 1) / (peak * 1e12 * (0.1 + 0.5 * share))
        cases.append((*shape, *run, max(0.1, round(seconds * 1e3, 1)), peak, training))
    return cases


def observe_estimate(mfu_estimate, seed: int) -> list[dict]:
    return _observe_numbers(mfu_estimate, estimate_cases(seed))


def compare_estimate(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        n, layers, width, tokens, batch, step_ms, peak, training = want["case"]
        call = (
            f"mfu_estimate({n:_}, {layers}, {width}, {tokens}, {batch}, {step_ms:g}, {peak:g}, "
            f"training={training})"
        )
        fail_on_error(got["error"], call)
        result, expected = got["result"], want["result"]
        if result is None or not math.isfinite(result):
            said = got["returned"] if result is None else result
            raise ExerciseFailed(f"{call} should return a number, got {said}.")
        if math.isclose(result, expected, rel_tol=1e-6):
            continue
        flops = expected * peak * 1e12 * step_ms / 1e3  # what the expected value counts per step
        kind = "a training step (forward and backward)" if training else "a forward pass alone"
        raise ExerciseFailed(
            f"{call} returned {result:.4g}, {result / expected:.4g}x the expected {expected:.4g}: "
            f"{kind} of {batch} samples counts {flops / 1e12:.4g} TFLOP; in {step_ms:g} ms that "
            f"is {flops / step_ms * 1e3 / 1e12:.4g} TFLOP/s, against a peak of {peak:g} TFLOP/s."
        )
