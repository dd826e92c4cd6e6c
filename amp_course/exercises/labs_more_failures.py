"""More failures: the checks of the learner's fixes (their setup: ``labs.more_failures``).

An optimizer whose parameters got no gradient under a GradScaler, a mask value fp16 cannot hold,
attention rows with no key to attend, and rotary angles autocast computes in bf16. Each lab
observes what the kit's ``run_*`` function records for the learner's code; ``compare`` names the
first difference from the reference fix (``solutions/labs_more_failures.py``) that matters.
"""

from __future__ import annotations

import torch

from ..display import kind_of
from ..labs.masked_attention import (
    MASKED_ABOVE,
    MASKED_BF16_FAR_ABOVE,
    MASKED_FAR_ABOVE,
    run_masked,
    run_padded,
)
from ..labs.more_failures import run_multitask
from ..labs.rotary import run_rope
from ..precisions import name_of
from . import ExerciseFailed, fail_on_error, register
from .answers import compare_params, telling_digits

# How far a value may be from the reference's, relative to the largest reference value, by the
# dtype the case computes in: a few roundings of that dtype (fp16 keeps 11 bits, bf16 8).
TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 4e-2, torch.float32: 1e-4}


def _where(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _first_non_finite(tensor: torch.Tensor) -> tuple[tuple[int, ...], str] | None:
    """(index, "NaN" or "inf" or "-inf") of the first element that is not finite, else None."""
    bad = (~torch.isfinite(tensor.float())).nonzero()
    if not len(bad):
        return None
    index = tuple(int(i) for i in bad[0])
    value = tensor[index].item()
    return index, "NaN" if value != value else f"{value}"


def _compare_values(got, want, dtype, what: str, where=None) -> None:
    """Fail with the largest difference, and where it is, when ``got`` is not close to ``want``
    (only where ``where`` is true, if given)."""
    got, want = got.float(), want.float()
    if where is not None:
        got, want = got * where, want * where
    off = (got - want).abs()
    allowed = TOLERANCE[dtype] * want.abs().max().item() + 1e-6
    if off.max().item() > allowed:
        index = tuple(int(i) for i in torch.unravel_index(off.argmax(), off.shape))
        mine, theirs = got[index].item(), want[index].item()
        digits = telling_digits(mine, theirs, 4, 9)
        raise ExerciseFailed(
            f"{what} differs from the reference's by up to {off[index].item():.3g}, at "
            f"{_where(index)}: yours {mine:.{digits}g}, the reference's {theirs:.{digits}g} "
            f"(the check allows {allowed:.2g})."
        )


def _tensor_like(got, want, what: str) -> None:
    if not isinstance(got, torch.Tensor):
        raise ExerciseFailed(
            f"{what} is {kind_of(got)}, not a tensor; the reference's is a tensor of shape "
            f"{tuple(want.shape)}."
        )
    if got.shape != want.shape:
        raise ExerciseFailed(
            f"{what} has shape {tuple(got.shape)}; the reference's {tuple(want.shape)}."
        )
    if got.dtype != want.dtype:
        raise ExerciseFailed(
            f"{what} is {name_of(got.dtype)}, the reference's {name_of(want.dtype)}."
        )


# ---- Lab 1: an optimizer none of whose parameters got a gradient ---------------------------------
def _batch(observed: dict, index: int) -> str:
    if index >= len(observed["has_aux"]):
        return f"batch {index}"
    kind = "with" if observed["has_aux"][index] else "without"
    corrupt = ", corrupt" if index in observed["corrupt"] else ""
    return f"batch {index} ({kind} parity labels{corrupt})"


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


def compare_multitask(mine: dict, reference: dict, seed: int) -> None:
    updates, wanted = mine["updates"], reference["updates"]
    if mine["error"]:
        count = len(updates)
        done = (
            f"after {count} update() call{'s' if count > 1 else ''}"
            if count
            else "before any update()"
        )
        raise ExerciseFailed(
            f"on {_batch(reference, len(updates))}, {done}, your loop raised {mine['error']}"
        )
    if len(updates) != len(wanted):
        raise ExerciseFailed(
            f"update() ran {len(updates)} times for the {len(wanted)} batches; in the "
            f"reference {len(wanted)} times, once per batch."
        )
    for index, (got, want) in enumerate(zip(updates, wanted, strict=True)):
        if got[1:] != want[1:]:
            raise ExerciseFailed(
                f"after {_batch(reference, index)}, the trunk and digit head's optimizer had "
                f"taken {_steps(got[1])} and the parity head's {_steps(got[2])}; in the "
                f"reference {want[1]} and {want[2]}."
            )
        if got[0] != want[0]:
            raise ExerciseFailed(
                f"after {_batch(reference, index)} the scale is {got[0]:g}; the reference's "
                f"{want[0]:g}."
            )
    compare_params(
        mine["aux_moments"],
        reference["aux_moments"],
        "the parity head's Adam first moments (exp_avg: the running mean of the gradients its "
        "steps used)",
        rtol=1e-3,
    )
    compare_params(mine["main"], reference["main"], "the trunk and digit head's weights")
    compare_params(mine["aux"], reference["aux"], "the parity head's weights")


register("labs.no_inf_checks", run_multitask, compare_multitask)


# ---- Lab 2: a mask value fp16 cannot hold --------------------------------------------------------
CASE_DTYPES = {
    "fp16 autocast": torch.float16,
    "bf16 autocast": torch.bfloat16,
    "fp32": torch.float32,
    MASKED_ABOVE: torch.float16,
    "fp16 autocast, scores near -12000": torch.float16,
    "fp32, keys drawn at random": torch.float32,
    MASKED_FAR_ABOVE: torch.float32,
    "fp32, scores near -100000": torch.float32,
    MASKED_BF16_FAR_ABOVE: torch.bfloat16,
    "bf16 autocast, scores near -100000": torch.bfloat16,
}


def compare_masked(mine: dict, reference: dict, seed: int) -> None:
    for case, want in reference.items():
        got, label = mine[case], f"In the case '{case}',"
        fail_on_error(got["error"], f"{label} your function")
        _tensor_like(got["out"], want["out"], f"{label} your output")
        bad = _first_non_finite(got["out"])
        if bad:
            raise ExerciseFailed(
                f"{label} your output holds {bad[1]} at {_where(bad[0])}; the reference's is "
                "finite."
            )
        weight, allowed = got["masked_weight"].float(), want["masked_weight"].float() + 1e-3
        if (weight > allowed).any():
            at = (weight - allowed).argmax()
            query = _where(torch.unravel_index(at, weight.shape))
            raise ExerciseFailed(
                f"{label} query {query} gives its masked keys a weight of "
                f"{weight.flatten()[at].item():.3g} in all (its output when the values are 1 at "
                "the masked keys and 0 elsewhere); the reference gives them "
                f"{want['masked_weight'].float().flatten()[at].item():.3g}."
            )
        _compare_values(got["out"], want["out"], CASE_DTYPES[case], f"{label} your output")


register("labs.masked_fill_fp16", run_masked, compare_masked)


# ---- Lab 3: attention rows with no key to attend -------------------------------------------------
# The gradients compared, by case: scores near -12000 are 55 apart (near -100000, 160), so each
# query's weights are one-hot up to rounding and the gradients of q and k are that rounding alone.
GRADIENTS = {
    "fp16 autocast, scores near -12000": "v",
    "fp32, scores near -100000": "v",
    "bf16 autocast, scores near -100000": "v",
}


def compare_padded(mine: dict, reference: dict, seed: int) -> None:
    for case, want in reference.items():
        got, label = mine[case], f"In the case '{case}',"
        fail_on_error(got["error"], f"{label} your function")
        _tensor_like(got["out"], want["out"], f"{label} your output")
        bad = _first_non_finite(got["out"])
        if bad:
            query = bad[0][:3]
            keys = "has keys" if want["has_key"][query] else "has no key to attend"
            raise ExerciseFailed(
                f"{label} your output holds {bad[1]} at {_where(bad[0])} (query {_where(query)}, "
                f"which {keys}); the reference's output is finite everywhere."
            )
        dtype, has_key = CASE_DTYPES[case], want["has_key"][..., None]
        what = f"{label} at the queries that have keys, your output"
        _compare_values(got["out"], want["out"], dtype, what, where=has_key)
        for name in GRADIENTS.get(case, "qkv"):
            grad, what = got[f"grad_{name}"], f"{label} the gradient of {name}"
            _tensor_like(grad, want[f"grad_{name}"], what)
            bad = _first_non_finite(grad)
            if bad:
                raise ExerciseFailed(
                    f"{what} holds {bad[1]} at {_where(bad[0])}; the reference's is finite."
                )
            _compare_values(grad, want[f"grad_{name}"], dtype, what)


register("labs.fully_masked_rows", run_padded, compare_padded)


# ---- Lab 4: rotary angles under bf16 autocast ----------------------------------------------------
ROPE_TOLERANCE = 1e-2  # absolute, on cos and sin: a few bf16 roundings near 1


def _shared_rows(values: torch.Tensor) -> torch.Tensor:
    """Whether each row (a position's cos or sin values) equals the next row."""
    return (values[1:] == values[:-1]).all(-1)


def compare_rope(mine: dict, reference: dict, seed: int) -> None:
    for case, want in reference.items():
        got, label = mine[case], f"In the case '{case}',"
        fail_on_error(got["error"], f"{label} your function")
        for name in ("cos", "sin"):
            _tensor_like(got[name], want[name], f"{label} your {name}")
            off = (got[name].float() - want[name].float()).abs()
            if off.max().item() <= ROPE_TOLERANCE:
                continue
            row, column = (int(i) for i in torch.unravel_index(off.argmax(), off.shape))
            positions = want["positions"].tolist()
            shared = _shared_rows(got["cos"]) & _shared_rows(got["sin"])
            shared &= ~(_shared_rows(want["cos"]) & _shared_rows(want["sin"]))
            same = ""
            if shared.any():
                first = int(shared.nonzero()[0])
                same = (
                    f" In yours, positions {positions[first]} and {positions[first + 1]} get the "
                    f"same cos and sin in every column (rows {first} and {first + 1}); in the "
                    "reference they differ."
                )
            raise ExerciseFailed(
                f"{label} your {name} at position {positions[row]} (row {row}), column {column}, "
                f"is {got[name][row, column].item():.4g}; the reference's "
                f"{want[name][row, column].item():.4g} (the largest difference, of "
                f"{off.max().item():.3g}; the check allows {ROPE_TOLERANCE:g}).{same}"
            )


register("labs.rope_bf16", run_rope, compare_rope)
