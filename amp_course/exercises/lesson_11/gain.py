"""Lesson 11's FP8 gain check (the package's ``__init__`` registers it): the predicted gain of FP8
GEMMs at new shapes and devices, the amax-and-cast time included."""

from __future__ import annotations

import math

import torch

from ... import gpus
from ...display import shown
from .. import ExerciseFailed, call_answer, fail_on_error
from ..answers import as_number


# ---- 11.fp8_gain ------------------------------------------------------------------------------
# (m, k, n, bf16 TFLOP/s, fp8 TFLOP/s, TB/s): the H100 SXM's and the H200's published figures
# (ac.gpus), then a device given only as numbers, at shapes the lesson did not predict.
def _published(model: str) -> tuple[float, float, float]:
    gpu = gpus.GPUS[model]
    return gpu.peak("bf16"), gpu.peak("fp8"), gpu.bandwidth_tbs


H100, H200 = _published("H100 SXM"), _published("H200 SXM")
GAIN_CASES = [
    (2048, 2048, 2048, *H100),
    (16, 8192, 8192, *H100),
    (512, 4096, 11008, *H100),
    (8192, 8192, 28672, *H200),
    (4096, 4096, 4096, 500.0, 1000.0, 2.0),
    # A layer whose every time is under a microsecond: the model has no floor per kernel (a
    # launch's few microseconds, which torchao's estimate adds), and here one would show.
    (32, 1024, 1024, *H100),
]


def gain_cases(seed: int) -> list[tuple]:
    if seed == 0:
        return list(GAIN_CASES)
    generator = torch.Generator().manual_seed(seed)
    cases = []
    for _ in range(5):
        m, k, n = (2 ** torch.randint(4, 15, (3,), generator=generator)).tolist()
        peak = float(torch.randint(200, 2000, (), generator=generator))
        bandwidth = float(torch.randint(10, 80, (), generator=generator)) / 10
        cases.append((m, k, n, peak, 2 * peak, bandwidth))
    # A GEMM compute-bound in bf16 and in FP8 on any device drawn above (an intensity of 5461 and
    # 8192 FLOP/byte, above ridges of at most 2000 and 6000), so that a wrong FLOP count shows,
    # on a made-up device whose FP8 peak is three times its bf16 one: the FP8 time reads the FP8
    # peak given (twice the bf16 peak, as every other drawn device has, passed 62 seeds of 63).
    peak, _, bandwidth = cases[0][3:]
    cases.append((16384, 16384, 16384, peak, 3 * peak, bandwidth))
    return cases


def observe_gain(fn, seed: int) -> list[dict]:
    """``fn(m, k, n, bf16_tflops, fp8_tflops, bandwidth_tbs)``: three numbers per case."""
    results = []
    for case in gain_cases(seed):
        got, error = call_answer(fn, *case)
        record = {"case": list(case), "error": error, "times": None, "returned": None}
        if not isinstance(got, (str, bytes)):
            try:
                times = [as_number(t) for t in got]
                record["times"] = times if len(times) == 3 and None not in times else None
            except TypeError:  # not iterable
                pass
        if error is None and record["times"] is None:
            record["returned"] = shown(got)
        results.append(record)
    return results


PARTS = ("bf16 GEMM time", "FP8 GEMM time", "amax-and-cast time")


def compare_gain(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        m, k, n, bf16, fp8, bandwidth = want["case"]
        call = f"fp8_linear_times({m}, {k}, {n}, {bf16:g}, {fp8:g}, {bandwidth:g})"
        fail_on_error(got["error"], call)
        if got["times"] is None:
            raise ExerciseFailed(
                f"{call} returned {got['returned']}; return three numbers in seconds: "
                "(bf16 GEMM, FP8 GEMM, amax and cast passes)."
            )
        for part, yours, expected in zip(PARTS, got["times"], want["times"], strict=True):
            if not math.isclose(yours, expected, rel_tol=1e-6):
                ratio = yours / expected if expected else math.inf
                raise ExerciseFailed(
                    f"{call}: your {part} is {yours:.6g} s, expected {expected:.6g} s "
                    f"(yours / expected = {ratio:.6g})."
                )
