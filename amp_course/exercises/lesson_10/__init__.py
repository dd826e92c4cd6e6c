"""Lesson 10 exercises, each a case the lesson's text did not work out: the arithmetic intensity
of a batched matmul in a named dtype, tile and wave quantisation of a batched output on a given
GPU, and the intensity of a convolution.

Each is a number per case: ``observe`` calls the learner's function on cases built from the seed
and records what it returned; ``compare`` says, at the first case that differs, what the value
means against the reference's account (which bytes, FLOPs, waves or tiles it implies). The
references are in ``solutions/lesson_10.py``; tests/test_exercises_lesson_10.py checks them
against ``ac.op_costs``'s count of real operators.
"""

from __future__ import annotations

import math

from ... import gpus
from .. import register
from .intensity import HALF, close, compare, draw, known_byte_count, observe, or_flops, ratio_words


def _twice(total: int, itemsize: int) -> str:
    """The other reading of half the intensity: twice the bytes, each element at twice its size."""
    return f"{2 * total:,} bytes, every element at {2 * itemsize} bytes"


# ---- 10.matmul_intensity: a batched matmul, its dtype given by name ----------------------------
ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2}  # bytes per element of each dtype name
MATMUL_CASES = [  # (batch, m, k, n, dtype)
    (64 * 12, 197, 64, 197, "bf16"),  # ViT-B/16's attention scores Q @ K^T at batch 64, unfused
    (1, 64 * 197, 768, 3072, "fp32"),  # its first MLP layer in fp32: one product
    (64 * 12, 197, 197, 64, "fp16"),  # the scores times V
    (8, 1, 4096, 1000, "bf16"),  # eight matrix-vector products
    (3, 5, 7, 11, "fp32"),
]


def matmul_cases(seed: int) -> list[tuple]:
    if seed == 0:
        return list(MATMUL_CASES)
    sizes = draw(seed, 20, 1, 5000)
    names = list(ITEMSIZE)
    return [
        (1 + sizes[i] % 64, sizes[i + 1], sizes[i + 2], sizes[i + 3], names[(i // 4) % 3])
        for i in range(0, 20, 4)
    ]


def _explain_matmul(case, got: float) -> str:
    """What differs between ``got`` and the reference's FLOPs over bytes, for this case."""
    batch, m, k, n, dtype = case
    size = ITEMSIZE[dtype]
    flops = 2 * batch * m * k * n
    parts = {
        "the left input": batch * m * k * size,
        "the right input": batch * k * n * size,
        "the output": batch * m * n * size,
    }
    total = sum(parts.values())
    account = (
        f"The reference counts {flops:,} FLOPs over {total:,} bytes ("
        + ", ".join(f"{name} {nbytes:,}" for name, nbytes in parts.items())
        + f", at {size} bytes per {dtype} element)."
    )
    if got <= 0:
        return account
    implied_bytes, implied_flops = flops / got, got * total
    said = f"{account} At those FLOPs your value means {implied_bytes:,.0f} bytes"
    # Every reading that fits is said: at batch 2 in fp32, one product's bytes are also the
    # bytes of every element at 2 bytes.
    readings = [known_byte_count(parts, implied_bytes, size)]
    if batch > 1 and close(implied_bytes, total / batch):
        readings.append(f"one product's bytes, against the FLOPs of all {batch}")
    known = "; or ".join(r for r in readings if r)
    if known:
        return f"{said}: {known}{or_flops(implied_flops, flops)}."
    said = f"{account} Over those bytes your value means {implied_flops:,.0f} FLOPs"
    if close(implied_flops, flops / 2):
        return f"{said}: half the reference's; or, at its FLOPs, {_twice(total, size)}."
    if batch > 1 and close(implied_flops, flops / batch):
        return f"{said}: one product's FLOPs, against the bytes of all {batch}."
    return account


def observe_matmul_intensity(fn, seed: int) -> list[dict]:
    return observe(fn, matmul_cases(seed))


def compare_matmul_intensity(mine, reference, seed: int) -> None:
    compare(mine, reference, "matmul_intensity", lambda case, got, _: _explain_matmul(case, got))


register("10.matmul_intensity", observe_matmul_intensity, compare_matmul_intensity)


# ---- 10.wave_efficiency: a batched output on a given GPU ----------------------------------------
SMS = {model: gpus.GPUS[model].sms for model in ("A100 40GB", "H100 SXM", "H100 PCIe", "T4")}
WAVE_CASES = [  # (batch, m, n, tile_m, tile_n, sms)
    (1, 4096, 4096, 128, 128, SMS["A100 40GB"]),  # one matrix on an A100's 108 SMs
    (64 * 12, 197, 197, 128, 128, SMS["H100 SXM"]),  # ViT-B/16's attention scores, batch 64
    (1, 4104, 4104, 128, 128, SMS["H100 PCIe"]),  # an H100 PCIe's 114 SMs
    # A T4's 40 SMs, tiles taller than wide: 5 x 24 tiles a matrix, 9 x 12 with the two swapped
    # (or with the shorter side laid along m).
    (16, 1100, 3000, 256, 128, SMS["T4"]),
    (3, 100, 100, 128, 128, 4),  # three tiles, mostly padding, in one wave
    (1, 256, 256, 64, 64, 4),  # 16 whole tiles in 4 whole waves
]


def wave_cases(seed: int) -> list[tuple]:
    """Seed 0: WAVE_CASES. Other seeds: six drawn sizes, their tiles taller than wide in three
    (tile_m was 64 in every drawn case, never above tile_n), and as in WAVE_CASES a launch of
    fewer tiles than SMs (an answer charging such a launch for its own tiles only passed 977
    seeds of 1000 without one), one of whole tiles in whole waves (x // tile + 1 for a
    ceiling passed 180 seeds of 200 for the tiles, and tiles // sms + 1 106 for the waves) and
    one row past it."""
    if seed == 0:
        return list(WAVE_CASES)
    sizes = draw(seed, 26, 1, 9000)
    tiles = (64, 128, 256)
    drawn = [
        (
            1 + sizes[i] % 32,
            sizes[i + 1],
            sizes[i + 2],
            tiles[j % 3],
            tiles[(j + 1 + j // 3) % 3],  # (64, 128), (128, 256), (256, 64), (64, 256), ...
            (*(SMS[m] for m in ("A100 40GB", "H100 SXM", "T4", "H100 PCIe")), 80, 58)[j],
        )
        for j, i in enumerate(range(0, 18, 3))
    ]
    few = (1 + sizes[18] % 3, 1 + sizes[19] % 400, 1 + sizes[20] % 400, 128, 128, SMS["H100 SXM"])
    # Every side a whole number of tiles, sms tiles along m: batch x across waves, all full.
    tile_m, tile_n = tiles[sizes[21] % 3], tiles[sizes[22] % 3]
    sms = tuple(SMS.values())[sizes[23] % len(SMS)]
    batch, across = 1 + sizes[24] % 4, 1 + sizes[25] % 4
    whole = (batch, sms * tile_m, across * tile_n, tile_m, tile_n, sms)
    # One row more: a row of tiles past whole waves, which a few tiles of the next wave run
    # (waves rounded to the nearest passed 6 seeds of 100 without it).
    past = (batch, sms * tile_m + 1, across * tile_n, tile_m, tile_n, sms)
    return [*drawn, few, whole, past]


def _explain_waves(case, got: float) -> str:
    """What differs between ``got`` and the reference's useful over launched work."""
    batch, m, n, tile_m, tile_n, sms = case
    per_matrix = math.ceil(m / tile_m) * math.ceil(n / tile_n)
    tiles = batch * per_matrix
    waves = math.ceil(tiles / sms)
    useful, area = batch * m * n, tile_m * tile_n
    account = (
        f"The reference has {useful:,} useful elements ({batch} x {m} x {n}) in {tiles:,} tiles "
        f"({per_matrix:,} a matrix), run in {waves:,} wave{'s' if waves > 1 else ''} of {sms} "
        f"SMs: {waves * sms:,} tile slots of {tile_m} x {tile_n}."
    )
    if got <= 0:
        return account
    if batch > 1 and close(got * waves * sms * area, m * n):
        return (
            f"{account} Over those slots your value means {m * n:,} useful elements: one matrix's."
        )
    slots = useful / (got * area)
    # A whole multiple of the reference's value is said too: a percentage (100 times) also reads
    # as a number of waves where 100 times fewer slots happen to be whole waves.
    multiple = ratio_words(got, useful / (waves * sms * area))
    also = f"; or {multiple} value" if multiple else ""
    if abs(slots - round(slots)) < 1e-6 * slots and round(slots) != waves * sms:
        slots = round(slots)
        said = f"{account} For that useful work your value means {slots:,} tile slots"
        if slots % sms == 0:
            waves = slots // sms
            return f"{said}: {waves:,} wave{'s' if waves > 1 else ''} of {sms}{also}."
        return f"{said}: not a whole number of waves of {sms}{also}."
    return f"{account} Your value is {multiple} value." if multiple else account


def observe_wave_efficiency(fn, seed: int) -> list[dict]:
    return observe(fn, wave_cases(seed))


def compare_wave_efficiency(mine, reference, seed: int) -> None:
    compare(mine, reference, "wave_efficiency", lambda case, got, _: _explain_waves(case, got))


register("10.wave_efficiency", observe_wave_efficiency, compare_wave_efficiency)


# ---- 10.conv_intensity: a stride-1 convolution that keeps the image size ------------------------
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
    draws = draw(seed, 20, 1, 512)
    # Both itemsizes at every seed, so an answer that ignores the argument fails at the grader's.
    return [
        (1 + draws[i] % 64, draws[i + 1], draws[i + 2], 1 + draws[i + 3] % 56, (1, 3, 5)[i % 3])
        + ((2, 4)[(i // 4) % 2],)
        for i in range(0, 20, 4)
    ]


def _explain_conv(case, got: float) -> str:
    """What differs between ``got`` and the reference's FLOPs over bytes, for this case."""
    batch, c_in, c_out, size, kernel, itemsize = case
    shapes = {
        "the input": (batch, c_in, size, size),
        "the weight": (c_out, c_in, kernel, kernel),
        "the output": (batch, c_out, size, size),
    }
    parts = {name: math.prod(shape) * itemsize for name, shape in shapes.items()}
    flops, total = 2 * batch * c_out * size * size * c_in * kernel * kernel, sum(parts.values())
    account = (
        f"The reference counts {flops:,} FLOPs over {total:,} bytes ("
        + ", ".join(
            f"{name} {' x '.join(map(str, shapes[name]))}: {parts[name]:,}" for name in parts
        )
        + f", at {itemsize} bytes per element)."
    )
    if got <= 0:
        return account
    implied_bytes, implied_flops = flops / got, got * total
    said = f"{account} At those FLOPs your value means {implied_bytes:,.0f} bytes"
    known = known_byte_count(parts, implied_bytes, itemsize)
    if known:  # fewer bytes than the reference's
        return f"{said}: {known}{or_flops(implied_flops, flops)}."
    counted = []  # every tensor whose extra counts explain the bytes (the input and the output
    # have the same size where c_in == c_out): twice, three times or once per kernel position
    # (im2col), slips of bytes; other counts are slips of FLOPs (size for size**2 read as the
    # weight counted 310492 times)
    for name, nbytes in parts.items():
        times = round((implied_bytes - total) / nbytes) + 1
        if times in (2, 3, kernel**2) and close(implied_bytes, total + (times - 1) * nbytes):
            counted.append(f"{name} counted {times} times")
    if counted:
        return f"{said}: the reference's count with {' or '.join(counted)}."
    ratio = ratio_words(implied_flops, flops)
    if ratio:
        return (
            f"{account} Over those bytes your value means {implied_flops:,.0f} FLOPs: {ratio}"
            + (f"; or, at its FLOPs, {_twice(total, itemsize)}." if ratio == HALF else ".")
        )
    output_side = _output_side(case, got)
    if output_side:
        side, side_flops, side_bytes = output_side
        return (
            f"{account} Your value is the FLOPs over bytes of a {side} x {side} output "
            f"({side_flops:,} FLOPs over {side_bytes:,} bytes); the reference's is {size} x {size}."
        )
    extra = implied_bytes - total
    elements = abs(extra) / itemsize
    whole = (
        f" ({elements:,.0f} elements of {itemsize} bytes)"
        if close(elements, round(elements))
        else ""
    )
    return (
        f"{said}, {abs(extra):,.0f} {'more' if extra > 0 else 'fewer'} than the reference's"
        f"{whole}; or, over the reference's bytes, {implied_flops:,.0f} FLOPs."
    )


def _output_side(case, got: float) -> tuple[int, int, int] | None:
    """(side, FLOPs, bytes) of the same convolution with an output of another side whose FLOPs
    over bytes is ``got``, or None."""
    batch, c_in, c_out, size, kernel, itemsize = case
    for side in range(1, size + kernel):
        flops = 2 * batch * c_out * side * side * c_in * kernel * kernel
        nbytes = batch * c_in * size**2 + c_out * c_in * kernel**2 + batch * c_out * side**2
        if side != size and close(got, flops / (nbytes * itemsize)):
            return side, flops, nbytes * itemsize
    return None


def observe_conv_intensity(fn, seed: int) -> list[dict]:
    return observe(fn, conv_cases(seed))


def compare_conv_intensity(mine, reference, seed: int) -> None:
    compare(mine, reference, "conv_intensity", lambda case, got, _: _explain_conv(case, got))


register("10.conv_intensity", observe_conv_intensity, compare_conv_intensity)
