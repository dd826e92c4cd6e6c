"""Number formats: bits, range and precision of fp32, TF32, fp16, bf16 and fp8, from torch.finfo."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import precisions


@dataclass(frozen=True)
class FloatFormat:
    """One floating-point format: its bit layout and the numbers that follow from it."""

    name: str
    dtype: torch.dtype | None  # None where torch has no storage dtype (TF32)
    bits: int
    exponent_bits: int
    mantissa_bits: int
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float
    note: str = ""


@dataclass(frozen=True)
class Layout:
    """A format's definition: its bit split and torch's storage dtype for it (None for TF32,
    which torch does not store). Every number of a FloatFormat then follows from torch.finfo."""

    name: str
    storage: str | None  # the torch dtype's name; the training precisions' is their row's
    exponent_bits: int
    mantissa_bits: int
    note: str = ""

    @property
    def dtype(self) -> torch.dtype | None:
        """torch's dtype, where this build has it (fp8 dtypes came with torch 2.1)."""
        return getattr(torch, self.storage, None) if self.storage else None


# The course's one definition of each format; block_formats builds its fp8 elements from these.
LAYOUTS = {
    layout.name: layout
    for layout in (
        Layout("fp32", precisions.FP32.storage, 8, 23, "master weights, optimizer state"),
        Layout("tf32", None, 8, 10, "fp32 storage, 10-bit mantissa inside Ampere+ matmuls"),
        Layout("fp16", precisions.FP16.storage, 5, 10, "narrow range: needs GradScaler"),
        Layout("bf16", precisions.BF16.storage, 8, 7, "fp32's range, coarse precision"),
        Layout(
            "fp8 e4m3",
            "float8_e4m3fn",
            4,
            3,
            "fp8 tensor cores (Ada, Hopper+): forward pass; no inf",
        ),
        Layout("fp8 e5m2", "float8_e5m2", 5, 2, "fp8 tensor cores (Ada, Hopper+): gradients"),
    )
}


def _tf32_format(layout: Layout) -> FloatFormat:
    # TF32 keeps fp32's 8-bit exponent (so fp32's range) with fp16's 10-bit mantissa.
    # torch has no tf32 dtype, so finfo cannot describe it: derive it from fp32's limits.
    fp32 = torch.finfo(torch.float32)
    eps = 2.0**-layout.mantissa_bits
    return FloatFormat(
        name=layout.name,
        dtype=None,
        bits=1 + layout.exponent_bits + layout.mantissa_bits,
        exponent_bits=layout.exponent_bits,
        mantissa_bits=layout.mantissa_bits,
        max=(2 - eps) * 2.0**127,
        smallest_normal=fp32.smallest_normal,
        smallest_subnormal=fp32.smallest_normal * eps,
        eps=eps,
        note=layout.note,
    )


def get_format(name: str) -> FloatFormat:
    """The FloatFormat called ``name`` (``"fp16"``, ``"fp8 e4m3"``...)."""
    for fmt in format_table():
        if fmt.name == name:
            return fmt
    raise ValueError(
        f"Unknown format {name!r}. Valid choices: {', '.join(f.name for f in format_table())}."
    )


def format_table() -> list[FloatFormat]:
    """All formats this torch build knows, fp32 first; fp8 rows are left out where torch lacks
    them."""
    rows = []
    for layout in LAYOUTS.values():
        if layout.storage is None:
            rows.append(_tf32_format(layout))
            continue
        dtype = layout.dtype
        if dtype is None:
            continue
        info = torch.finfo(dtype)
        assert info.bits == 1 + layout.exponent_bits + layout.mantissa_bits, layout.name
        rows.append(
            FloatFormat(
                name=layout.name,
                dtype=dtype,
                bits=info.bits,
                exponent_bits=layout.exponent_bits,
                mantissa_bits=layout.mantissa_bits,
                max=float(info.max),
                smallest_normal=float(info.smallest_normal),
                # The smallest subnormal is one unit in the last place above zero.
                smallest_subnormal=float(info.smallest_normal) * float(info.eps),
                eps=float(info.eps),
                note=layout.note,
            )
        )
    return rows


def format_table_markdown(rows: list[FloatFormat] | None = None) -> str:
    """The format table as Markdown, for ``IPython.display.Markdown``."""
    rows = format_table() if rows is None else rows
    lines = [
        "| format | bits | exp | mantissa | max | smallest normal | smallest subnormal "
        "| eps | use |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for f in rows:
        lines.append(
            f"| {f.name} | {f.bits} | {f.exponent_bits} | {f.mantissa_bits} | {f.max:.6g} "
            f"| {f.smallest_normal:.3g} | {f.smallest_subnormal:.3g} | {f.eps:.3g} | {f.note} |"
        )
    return "\n".join(lines)
