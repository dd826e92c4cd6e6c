"""Lesson 11 exercises: an MX round trip for element layouts the lesson did not show (OCP FP6 and
made-up ones), the predicted FP8 gain of new GEMM shapes and devices, and the bytes of AdamW's
moments with 8-bit blockwise states.

Each is three pieces: ``observe`` runs a function on cases built from a seed and records what it
returned; ``compare`` raises ExerciseFailed at the first difference, saying what differs; the
references are in ``solutions/lesson_11.py``.
"""

from __future__ import annotations

import math

import torch

from .. import gpus
from ..display import kind_of, shown, with_article
from . import ExerciseFailed, call_answer, fail_on_error, register
from .answers import fail_on_input_changed, input_changed

# ---- 11.mx_roundtrip ---------------------------------------------------------------------------
# Layouts with no inf or NaN (every code a number), as OCP's FP6 and FP4: (exponent, mantissa) bits.
LAYOUT_POOL = [(3, 2), (2, 3), (2, 1), (3, 3), (3, 1), (2, 2)]


def layout_max(exponent_bits: int, mantissa_bits: int) -> float:
    """The largest number of a layout whose all-ones exponent holds numbers too."""
    bias = 2 ** (exponent_bits - 1) - 1
    return (2 - 2.0**-mantissa_bits) * 2.0 ** (2**exponent_bits - 1 - bias)


def _emax(exponent_bits: int, mantissa_bits: int) -> int:
    return math.floor(math.log2(layout_max(exponent_bits, mantissa_bits)))


def _case(name, e, m, block, generator, rows=4, blocks=2, spread=3.0):
    """Rows of blocks at magnitudes spread over decades, then the planted blocks of row 0-3."""
    x = torch.randn(rows, blocks * block, generator=generator)
    x *= 10 ** (torch.rand(rows, 1, generator=generator) * 2 * spread - spread)
    top, emax = layout_max(e, m), _emax(e, m)
    # Row 0, block 0: an outlier whose block scale makes it exceed the format's largest value
    # (the spec clamps it), beside values far below it.
    # 2^shift scales the planted blocks: 3 to 20 binades either way, never -2..2, where float32's
    # log2 of the number just below 2^shift is exact (row 2, block 1 needs it to round up).
    shift = int(torch.randint(3, 21, (), generator=generator))
    shift *= 1 - 2 * int(torch.randint(2, (), generator=generator))
    x[0, :block] = torch.randn(block, generator=generator) * 2.0 ** (emax + shift - 6)
    over = (top / 2**emax + 2) / 2  # between max / 2^emax and 2: floor keeps the scale
    x[0, 3] = over * 2.0 ** (emax + shift)
    # Row 0, block 1: the same, negative: the clamp has two sides, and this block's amax is the
    # magnitude of a negative value (a one-sided clamp passed 123 grader seeds of 203, an amax
    # without abs() 31, while every planted amax was positive).
    x[0, block : 2 * block] = torch.randn(block, generator=generator) * 2.0 ** (emax + shift - 6)
    x[0, block + 3] = -over * 2.0 ** (emax + shift)
    # Row 1, block 0: exact ties between neighbours of [1, 2) under a scale of 2^shift.
    x[1, :block] = 2.0**shift
    x[1, 0] = 2.0 ** (emax + shift)
    steps = 2**m
    for i in range(1, block):
        x[1, i] = (1 + ((2 * (i % steps) + 1) / (2 * steps))) * 2.0**shift
    x[2, :block] = 0.0  # a block of zeros
    # Row 2, block 1: an amax just below a power of two, where float32's log2 rounds up to it
    # (log2 of the float32 below 2^10 is 10.0): floor(log2(amax)) is one too high there.
    below = torch.nextafter(torch.tensor(2.0**shift), torch.tensor(0.0))
    x[2, block : 2 * block] = torch.rand(block, generator=generator) * 2.0 ** (shift - 1)
    x[2, block] = below
    # Tiny values (fp32 subnormals): the block's scale stops at E8M0's smallest, 2^-127.
    x[3, block:] = torch.randn(block * (blocks - 1), generator=generator) * 4e-39
    return {"name": name, "layout": [e, m, block], "x": x}


def mx_cases(seed: int) -> list[dict]:
    """Seed 0: OCP's FP6 layouts (E3M2, E2M3) in blocks of 32 and a made-up E3M3 in blocks of 16;
    other seeds: three random layouts and block sizes."""
    generator = torch.Generator().manual_seed(seed)
    if seed == 0:
        chosen = [
            ("MXFP6 E3M2", 3, 2, 32),
            ("MXFP6 E2M3", 2, 3, 32),
            ("E3M3, blocks of 16", 3, 3, 16),
        ]
    else:
        picks = torch.randperm(len(LAYOUT_POOL), generator=generator)[:3].tolist()
        chosen = []
        for index in picks:
            e, m = LAYOUT_POOL[index]
            block = (16, 32)[int(torch.randint(2, (), generator=generator))]
            chosen.append((f"E{e}M{m}, blocks of {block}", e, m, block))
    return [_case(name, e, m, block, generator) for name, e, m, block in chosen]


def observe_mx(fn, seed: int) -> list[dict]:
    """``fn(x, exponent_bits, mantissa_bits, block_size)`` on every case, then on the first with x
    in float64: the values as fp32, and the dtype returned."""
    cases = mx_cases(seed)
    first = cases[0]
    cases.append({**first, "name": f"{first['name']}, x in float64", "x": first["x"].double()})
    results = []
    for case in cases:
        e, m, block = case["layout"]
        given = case["x"].clone()
        got, error = call_answer(fn, given, e, m, block)
        record = {**case, "error": error, "got": None, "returned": None, "dtype": None}
        record["changed"] = input_changed(given, case["x"])
        if error is None:
            try:
                record["dtype"] = _kind(got)
                record["got"] = torch.as_tensor(got).detach().to(torch.float32).cpu()
            except (TypeError, ValueError, RuntimeError):
                record["returned"] = shown(got)
        results.append(record)
    return results


def _kind(value) -> str:
    """ "a float32 tensor", "an int8 tensor", or what else ``value`` is ("an ndarray")."""
    if isinstance(value, torch.Tensor):
        return with_article(f"{str(value.dtype).removeprefix('torch.')} tensor")
    return kind_of(value)


def _same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a == b) | (a.isnan() & b.isnan())


def compare_mx(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        e, m, block = want["layout"]
        call = f"mx_roundtrip(x, {e}, {m}, {block}) for {want['name']}"
        fail_on_error(got["error"], call)
        fail_on_input_changed(got["changed"], f"{call}:")
        x, expected = want["x"], want["got"]
        if got["got"] is None or tuple(got["got"].shape) != tuple(x.shape):
            shape = None if got["got"] is None else tuple(got["got"].shape)
            raise ExerciseFailed(
                f"{call} returned {got['returned'] or shape}; return a tensor of x's shape "
                f"{tuple(x.shape)}, the dequantized values."
            )
        if got["dtype"] != want["dtype"]:
            raise ExerciseFailed(
                f"{call} returned {got['dtype']}; x is {_kind(x)}, and the reference returns "
                f"{want['dtype']}."
            )
        same = _same(got["got"], expected)
        if bool(same.all()):
            continue
        row, column = (~same).nonzero()[0].tolist()
        index, number = column % block, column // block
        values = x[row, number * block : (number + 1) * block]
        amax = float(values.abs().max())
        yours, spec = float(got["got"][row, column]), float(expected[row, column])
        # Values only: the block's shared scale and the layout's largest value are what the
        # exercise asks the learner to work out, so the message does not print them.
        # Nine digits tell every float32 apart (a value one ulp below a power of two included).
        raise ExerciseFailed(
            f"{call}: row {row}, block {number} (amax {amax:.9g}), element {index} = "
            f"{float(values[index]):.9g} comes back as {yours:.9g}; section 2's rule gives "
            f"{spec:.9g}."
        )


register("11.mx_roundtrip", observe_mx, compare_mx)


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
                times = [_number(t) for t in got]
                record["times"] = times if len(times) == 3 and None not in times else None
            except TypeError:  # not iterable
                pass
        if error is None and record["times"] is None:
            record["returned"] = shown(got)
        results.append(record)
    return results


def _number(value) -> float | None:
    """``value`` as a float if it is a number of any kind (Python, NumPy, a 0-d tensor)."""
    if isinstance(value, (bool, str, bytes)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        return None


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


register("11.fp8_gain", observe_gain, compare_gain)


# ---- 11.moment_bytes ----------------------------------------------------------------------------
STATE_KINDS = ("fp32", "bf16", "8bit")
# Each side of 4096 values, multiples of 256 or not: (3840,) and (16, 16) are multiples under it.
EDGE_SHAPES = [(4096,), (4095,), (4352,), (3840,), (300, 20), (64, 64), (63, 64), (16, 16), (10,)]


def _vit_b16_shapes() -> list[tuple[int, ...]]:
    from ..models import build_vit

    with torch.device("meta"):  # shapes only, nothing allocated
        model = build_vit("b16")
    return sorted({tuple(p.shape) for p in model.parameters()})


def moment_cases(seed: int) -> list[tuple[tuple[int, ...], str]]:
    """Seed 0: ViT-B/16's parameter shapes, other seeds random ones, 1-D to 4-D (a count that
    read only the first two sides passed 62 seeds of 63 when they drew 1-D and 2-D shapes only);
    every seed the edge sizes."""
    if seed == 0:
        shapes = _vit_b16_shapes() + EDGE_SHAPES
    else:
        generator = torch.Generator().manual_seed(seed)
        sizes = torch.randint(1, 2049, (12, 2), generator=generator).tolist()
        shapes = [tuple(s) for s in sizes] + [(256 * int(s[0]),) for s in sizes[:4]]
        a, b, c = torch.randint(2, 65, (3,), generator=generator).tolist()
        shapes += [(1, 4 * a, 32 * b), (32 * c, 3, a, a)]  # a token table, a patch convolution
        shapes += EDGE_SHAPES  # the rules' boundaries, which random shapes rarely meet
    return [(shape, kind) for kind in STATE_KINDS for shape in shapes]


def observe_moments(fn, seed: int) -> list[dict]:
    """``fn(shape, state)`` for every shape and state precision."""
    results = []
    for shape, kind in moment_cases(seed):
        got, error = call_answer(fn, shape, kind)
        number = _number(got)
        results.append(
            {
                "case": [list(shape), kind],
                "error": error,
                "bytes": number,
                "returned": None if number is not None else shown(got),
            }
        )
    return results


def compare_moments(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        shape, kind = tuple(want["case"][0]), want["case"][1]
        call = f"moment_bytes({shape}, {kind!r})"
        fail_on_error(got["error"], call)
        if got["bytes"] is None:
            raise ExerciseFailed(f"{call} returned {got['returned']}; return a number of bytes.")
        if got["bytes"] != want["bytes"]:
            numel = math.prod(shape)
            raise ExerciseFailed(
                f"{call} returned {_count(got['bytes'])} bytes for the two moments of a parameter "
                f"of {numel:,} values; expected {_count(want['bytes'])} "
                f"({want['bytes'] / numel:g} bytes per value)."
            )


def _count(value: float) -> str:
    """A byte count in full (a rounded figure can hide the difference), with its fraction if any."""
    return f"{int(value):,}" if float(value).is_integer() else repr(value)


register("11.moment_bytes", observe_moments, compare_moments)
