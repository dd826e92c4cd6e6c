"""Lesson 11's moment bytes check (the package's ``__init__`` registers it): the bytes of AdamW's
moments in fp32, bf16 and 8-bit blockwise states."""

from __future__ import annotations

import math

import torch

from ...display import shown
from .. import ExerciseFailed, call_answer, fail_on_error
from ..answers import as_number

# ---- 11.moment_bytes ----------------------------------------------------------------------------
STATE_KINDS = ("fp32", "bf16", "8bit")
# Each side of 4096 values, multiples of 256 or not: (3840,) and (16, 16) are multiples under it.
EDGE_SHAPES = [(4096,), (4095,), (4352,), (3840,), (300, 20), (64, 64), (63, 64), (16, 16), (10,)]


def _vit_b16_shapes() -> list[tuple[int, ...]]:
    from ...models import build_vit

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
        number = as_number(got)
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
