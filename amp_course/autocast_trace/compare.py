"""Compare traced op dtypes with the lists autocast applies; present them as a table."""

from __future__ import annotations

import torch

from .op_lists import autocast_policy
from .recorder import TracedOp


def expected_dtype(
    row: TracedOp, device_type: str, autocast_dtype: torch.dtype
) -> torch.dtype | None:
    """The dtype autocast's lists say ``row`` computes in; None for casts and non-float ops.

    Unlisted ops "run in the type defined by their inputs" (PyTorch's docs): the promotion of
    their float inputs.
    """
    floats = [d for d in row.input_dtypes if d.is_floating_point]
    if row.is_cast or not floats or row.output_dtype is None:
        return None
    policy = autocast_policy(row.documented_name, device_type)
    if policy == "lower":
        return autocast_dtype
    if policy == "float32":
        return torch.float32
    widest = floats[0]
    for d in floats[1:]:
        widest = torch.promote_types(widest, d)
    return widest


def compare_with_lists(rows, device_type: str, autocast_dtype: torch.dtype) -> list[str]:
    """Ops whose traced dtype disagrees with autocast's lists, as sentences (empty: all agree).

    A listed op must both take its inputs in and produce the listed dtype; an unlisted one
    must produce the promotion of its inputs.
    """
    problems = []
    for row in rows:
        want = expected_dtype(row, device_type, autocast_dtype)
        if want is None:
            continue
        policy = autocast_policy(row.documented_name, device_type)
        got = (
            {row.output_dtype}
            if policy is None
            else {row.output_dtype, *[d for d in row.input_dtypes if d.is_floating_point]}
        )
        if got != {want}:
            problems.append(
                f"{row.name}: ran in {sorted(map(str, got))}, the lists "
                f"({policy or 'unlisted'} on {device_type}) say {want}"
            )
    return problems


# Ops that only view, alias or copy a tensor: a summary leaves them out unless asked.
VIEW_OPS = frozenset(
    {
        "view",
        "t",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "select",
        "detach",
        "_unsafe_view",
        "clone",
        "expand",
        "slice",
        "split",
        "alias",
    }
)


def summarise(
    rows, device_type: str, autocast_dtype: torch.dtype, include_views: bool = False
) -> list[dict]:
    """Table rows for display: op, listed name and list, input/output dtypes, expected dtype."""

    def short(dtype):
        return str(dtype).replace("torch.", "")

    table = []
    for row in rows:
        if not include_views and row.op in VIEW_OPS:
            continue
        want = expected_dtype(row, device_type, autocast_dtype)
        listed = autocast_policy(row.documented_name, device_type) or "unlisted"
        table.append(
            {
                "op": row.name,
                "listed as": row.documented_name,
                "list": "cast" if row.is_cast else listed,
                "inputs": ", ".join(short(d) for d in row.input_dtypes),
                "output": short(row.output_dtype),
                "expected": "" if want is None else short(want),
            }
        )
    return table


def summary_markdown(rows, device_type: str, autocast_dtype: torch.dtype) -> str:
    """``summarise`` as a Markdown table, for ``IPython.display.Markdown``."""
    table = summarise(rows, device_type, autocast_dtype)
    if not table:
        return "(no ops traced)"
    columns = list(table[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += [
        "| " + " | ".join(f"`{row[c]}`" if c == "op" else str(row[c]) for c in columns) + " |"
        for row in table
    ]
    return "\n".join(lines)
