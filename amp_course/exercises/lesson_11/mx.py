"""Lesson 11's MX round trip check (the package's ``__init__`` registers it): element layouts the
lesson did not show (OCP FP6 and made-up ones), blocks scaled by a shared power of two."""

from __future__ import annotations

import math

import torch

from ...display import kind_of, shown, with_article
from .. import ExerciseFailed, call_answer, fail_on_error
from ..answers import fail_on_input_changed, input_changed

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
    other seeds: three random layouts and block sizes, among them a layout of each exponent width
    and a block of each size (a seed of one width, or one size, passed an answer that ignored the
    exponent bits or the block size)."""
    generator = torch.Generator().manual_seed(seed)
    if seed == 0:
        chosen = [
            ("MXFP6 E3M2", 3, 2, 32),
            ("MXFP6 E2M3", 2, 3, 32),
            ("E3M3, blocks of 16", 3, 3, 16),
        ]
    else:
        order = torch.randperm(len(LAYOUT_POOL), generator=generator).tolist()
        widths = sorted({e for e, _ in LAYOUT_POOL})
        kept = [next(i for i in order if LAYOUT_POOL[i][0] == e) for e in widths]
        kept.append(next(i for i in order if i not in kept))
        picks = [i for i in order if i in kept]
        blocks = [(16, 32)[i] for i in torch.randperm(2, generator=generator).tolist()]
        blocks.append((16, 32)[int(torch.randint(2, (), generator=generator))])
        chosen = []
        for index, block in zip(picks, blocks, strict=True):
            e, m = LAYOUT_POOL[index]
            chosen.append((f"E{e}M{m}, blocks of {block}", e, m, block))
    return [_case(name, e, m, block, generator) for name, e, m, block in chosen]


def observe_mx(fn, seed: int) -> list[dict]:
    """``fn(x, exponent_bits, mantissa_bits, block_size)`` on every case, then on the first with x
    in float64 and three dimensions (an answer that unpacked two passed every seed): the values as
    fp32, and the dtype returned."""
    cases = mx_cases(seed)
    first = cases[0]
    x = first["x"].double().reshape(2, -1, first["x"].shape[-1])
    cases.append(
        {**first, "name": f"{first['name']}, x in float64 of shape {tuple(x.shape)}", "x": x}
    )
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
            said = got["returned"] or got["dtype"]
            if got["returned"] is None and "tensor" in got["dtype"]:
                said = f"{got['dtype']} of shape {tuple(got['got'].shape)}"
            raise ExerciseFailed(
                f"{call} returned {said}; return a tensor of x's shape {tuple(x.shape)}, the "
                "dequantized values."
            )
        if got["dtype"] != want["dtype"]:
            raise ExerciseFailed(
                f"{call} returned {got['dtype']}; x is {_kind(x)}, and the reference returns "
                f"{want['dtype']}."
            )
        same = _same(got["got"], expected)
        if bool(same.all()):
            continue
        flat = [t.reshape(-1, x.shape[-1]) for t in (same, x, got["got"], expected)]
        row, column = (~flat[0]).nonzero()[0].tolist()
        index, number = column % block, column // block
        values = flat[1][row, number * block : (number + 1) * block]
        amax = float(values.abs().max())
        yours, spec = float(flat[2][row, column]), float(flat[3][row, column])
        if x.dim() > 2:  # the row as x's index
            row = tuple(int(i) for i in torch.unravel_index(torch.tensor(row), x.shape[:-1]))
        # Values only: the block's shared scale and the layout's largest value are what the
        # exercise asks the learner to work out, so the message does not print them.
        # Nine digits tell every float32 apart (a value one ulp below a power of two included).
        raise ExerciseFailed(
            f"{call}: row {row}, block {number} (amax {amax:.9g}), element {index} = "
            f"{float(values[index]):.9g} comes back as {yours:.9g}; section 2's rule gives "
            f"{spec:.9g}."
        )
