"""Lesson 10 exercises: the arithmetic intensity of a matmul, tile and wave quantisation, and
(transfer) the intensity of a convolution.

Each is a number per case: ``observe`` calls the learner's function on cases built from the seed
and records what it returned; ``compare`` names the usual mistake when it finds one. The
references are in ``solutions/lesson_10.py``; tests/test_exercises_lesson_10.py checks them
against ``ac.op_costs``'s count of real operators.
"""

from __future__ import annotations

import math

import torch

from . import ExerciseFailed, call_answer, fail_on_error, register


def _draw(seed: int, count: int, low: int, high: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, (count,), generator=generator).tolist()


def _observe(fn, cases: list[tuple]) -> list[dict]:
    results = []
    for case in cases:
        got, error = call_answer(fn, *case)
        number = isinstance(got, (int, float)) and not isinstance(got, bool)
        results.append(
            {
                "case": list(case),
                "error": error,
                "result": float(got) if number else None,
                "returned": None if number else repr(got)[:80],
            }
        )
    return results


def _compare(mine, reference, name: str, diagnose) -> None:
    """Case by case: errors, non-numbers, then ``diagnose(case, got, expected)``'s hint."""
    for got, want in zip(mine, reference, strict=True):
        call = f"{name}{tuple(want['case'])}"
        fail_on_error(got["error"], call)
        result, expected = got["result"], want["result"]
        if result is None or not math.isfinite(result):
            raise ExerciseFailed(f"{call} should return a number, got {got['returned'] or result}.")
        if not math.isclose(result, expected, rel_tol=1e-9):
            hint = diagnose(want["case"], result, expected)
            raise ExerciseFailed(f"{call} returned {result:.6g}, expected {expected:.6g}. {hint}")


# ---- 10.matmul_intensity -------------------------------------------------------------------------
MATMUL_CASES = [
    (4096, 4096, 4096, 2),  # a large square bf16 matmul
    (64 * 197, 768, 3072, 2),  # ViT-B/16's first MLP layer at batch 64, bf16
    (64 * 197, 768, 768, 4),  # an attention projection in fp32
    (1, 4096, 4096, 2),  # a matrix-vector product
    (8, 8, 8, 4),
]


def matmul_cases(seed: int) -> list[tuple]:
    if seed == 0:
        return list(MATMUL_CASES)
    sizes = _draw(seed, 15, 1, 5000)
    return [(sizes[i], sizes[i + 1], sizes[i + 2], (2, 4)[i % 2]) for i in range(0, 15, 3)]


def _diagnose_matmul(case, got, expected) -> str:
    m, k, n, itemsize = case
    flops = 2 * m * k * n
    if math.isclose(got, expected / 2, rel_tol=1e-9):
        return "You counted multiply-adds: each is 2 FLOPs (a multiply and an add)."
    if math.isclose(got, expected * itemsize, rel_tol=1e-9):
        return "Divide by bytes, not elements: multiply the element counts by itemsize."
    if math.isclose(got, flops / (itemsize * (m * k + k * n)), rel_tol=1e-9):
        return "The output is written to memory too: count its m x n elements."
    return "FLOPs are 2*m*k*n; bytes are itemsize * (m*k + k*n + m*n)."


def observe_matmul_intensity(fn, seed: int) -> list[dict]:
    return _observe(fn, matmul_cases(seed))


def compare_matmul_intensity(mine, reference, seed: int) -> None:
    _compare(mine, reference, "matmul_intensity", _diagnose_matmul)


register("10.matmul_intensity", observe_matmul_intensity, compare_matmul_intensity)


# ---- 10.wave_efficiency --------------------------------------------------------------------------
H100_SMS = 132  # streaming multiprocessors of an H100 SXM
WAVE_CASES = [
    (4096, 4096, 128, 128, H100_SMS),
    (4104, 4104, 128, 128, H100_SMS),  # one more row and column of tiles
    (4095, 4095, 128, 128, H100_SMS),
    (64 * 197, 3072, 128, 256, H100_SMS),
    (100, 100, 128, 128, H100_SMS),  # one tile, mostly padding, on one SM
    (256, 256, 64, 64, 4),
]


def wave_cases(seed: int) -> list[tuple]:
    if seed == 0:
        return list(WAVE_CASES)
    sizes = _draw(seed, 12, 1, 9000)
    tiles = (64, 128, 256)
    return [
        (sizes[i], sizes[i + 1], tiles[i % 3], tiles[(i // 2) % 3], (108, 132, 40)[i % 3])
        for i in range(0, 12, 2)
    ]


def _diagnose_waves(case, got, expected) -> str:
    m, n, tile_m, tile_n, sms = case
    tiles = math.ceil(m / tile_m) * math.ceil(n / tile_n)
    if math.isclose(got, m * n / (tiles * tile_m * tile_n), rel_tol=1e-9):
        return (
            f"That is the tile quantisation alone: {tiles} tiles run in waves of {sms} (one tile "
            "per SM), and the last wave's idle SMs count as lost too."
        )
    if got > 1:
        return "An efficiency is a fraction of the launched work: at most 1."
    return (
        "Count tiles with ceil (a partial tile is a whole tile), waves with ceil(tiles / sms); "
        "return m*n / (waves * sms * tile_m * tile_n)."
    )


def observe_wave_efficiency(fn, seed: int) -> list[dict]:
    return _observe(fn, wave_cases(seed))


def compare_wave_efficiency(mine, reference, seed: int) -> None:
    _compare(mine, reference, "wave_efficiency", _diagnose_waves)


register("10.wave_efficiency", observe_wave_efficiency, compare_wave_efficiency)


# ---- 10.conv_intensity ---------------------------------------------------------------------------
CONV_CASES = [  # (batch, c_in, c_out, size, kernel, itemsize): the MNIST CNN's layers, and more
    (128, 1, 32, 28, 3, 4),
    (128, 32, 64, 28, 3, 2),
    (128, 512, 512, 3, 3, 2),
    (128, 512, 1024, 1, 3, 2),
    (8, 64, 64, 56, 1, 4),
]


def conv_cases(seed: int) -> list[tuple]:
    if seed == 0:
        return list(CONV_CASES)
    draws = _draw(seed, 20, 1, 512)
    return [
        (1 + draws[i] % 64, draws[i + 1], draws[i + 2], 1 + draws[i + 3] % 56, (1, 3, 5)[i % 3])
        + ((2, 4)[i % 2],)
        for i in range(0, 20, 4)
    ]


def _diagnose_conv(case, got, expected) -> str:
    batch, c_in, c_out, size, kernel, itemsize = case
    if math.isclose(got, expected / 2, rel_tol=1e-9):
        return "You counted multiply-adds: each is 2 FLOPs."
    weight = c_out * c_in * kernel * kernel
    activations = batch * (c_in + c_out) * size * size
    if math.isclose(got, expected * (weight + activations) / activations, rel_tol=1e-9):
        return "The weight is read from memory too: count its c_out*c_in*kernel^2 elements."
    return (
        "Each output element (batch*c_out*size^2 of them) sums c_in*kernel^2 products; bytes are "
        "the input, the weight and the output, times itemsize."
    )


def observe_conv_intensity(fn, seed: int) -> list[dict]:
    return _observe(fn, conv_cases(seed))


def compare_conv_intensity(mine, reference, seed: int) -> None:
    _compare(mine, reference, "conv_intensity", _diagnose_conv)


register("10.conv_intensity", observe_conv_intensity, compare_conv_intensity)
