"""Labs beyond autocast: the checks of the learner's fixes (their setup: ``labs.beyond_autocast``).

Where autocast's state does not reach (a recompute, a thread), what it does not cover (a custom
op, a bf16 running sum), and a pool that carries it (lab 5, a transfer). Most labs observe what
the kit's ``run_*`` function records for the learner's code; ``compare`` names the first
difference from the reference fix (``solutions/labs_beyond_autocast.py``) that matters.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from ...labs.beyond_autocast import (
    DEVICE_TYPE,
    PLATEAU,
    alternating_losses,
    lab_losses,
    plateau_losses,
    run_checkpointed,
    run_fused_op,
    run_in_workers,
    thirds_losses,
)
from ...precisions import name_of
from ...recipe import AmpRecipe
from .. import ExerciseFailed, register
from ..answers import error_text, what_happened
from .pool import compare_pool, observe_pool

# ---- Lab 1: a checkpoint whose recompute runs outside autocast -----------------------------------
# bf16 is CPU autocast's default dtype: the fp16 case tells a recompute that re-enters autocast in
# the default dtype (or always in bf16) from one that replays the forward's; the case without
# autocast, one that replays the dtype but not whether autocast was on (it passed every seed).
# The residual block's output is fp32 under autocast: it tells a recompute that reads the
# autocast dtype from grad_output (the MLP's output dtype, which passed the other three).
CHECKPOINT_CASES = {
    "Under bf16 autocast": (AmpRecipe(DEVICE_TYPE, "bf16"), False),
    "Under fp16 autocast": (AmpRecipe(DEVICE_TYPE, "fp16"), False),
    "Without autocast": (AmpRecipe(DEVICE_TYPE, "fp32"), False),
    "Under bf16 autocast, on a residual block (x + block(x), its output fp32)": (
        AmpRecipe(DEVICE_TYPE, "bf16"),
        True,
    ),
}


def observe_checkpointed(fn, seed: int) -> dict:
    return {
        case: run_checkpointed(fn, seed, recipe, residual)
        for case, (recipe, residual) in CHECKPOINT_CASES.items()
    }


def compare_checkpointed(mine: dict, reference: dict, seed: int) -> None:
    for case, want in reference.items():
        _compare_checkpointed_case(mine[case], want, f"{case},")


def _compare_checkpointed_case(mine: dict, reference: dict, label: str) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"{label} your function {what_happened(mine['error'])}")
    if not mine["dtypes"]["backward"]:
        kept = (
            f"the forward kept {mine['saved_bytes']} bytes for backward, the checkpointed "
            f"reference {reference['saved_bytes']}"
            if mine["saved_bytes"] > reference["saved_bytes"]
            else "the block ran in the forward pass only; the reference runs it again in backward"
        )
        raise ExerciseFailed(f"{label} nothing was recomputed in backward: {kept}.")
    forward, recompute = mine["dtypes"]["forward"], mine["dtypes"]["backward"]
    if set(recompute) != set(forward):
        raise ExerciseFailed(
            f"{label} the forward ran the block's Linear layers in {sorted(set(forward))}, the "
            f"recompute in backward in {sorted(set(recompute))}."
        )
    # Fewer bytes than the input's are a lossy copy of it (the input cast to 16 bits): right
    # here, where every block starts with a Linear that rounds its input anyway, not elsewhere.
    if mine["saved_bytes"] != reference["saved_bytes"]:
        raise ExerciseFailed(
            f"{label} the forward kept {mine['saved_bytes']} bytes in autograd's saved tensors "
            "(ctx.save_for_backward, or what the ops it recorded keep; a tensor set as an "
            f"attribute of ctx is not among them), the reference {reference['saved_bytes']} (the "
            "block's input only, as it was given)."
        )
    got, want = mine["output"], reference["output"]
    if got.dtype != want.dtype or not torch.equal(got, want):
        off = (got.float() - want.float()).abs().max().item() if got.shape == want.shape else None
        raise ExerciseFailed(
            f"{label} the block's output is {name_of(got.dtype)}, the reference's "
            f"{name_of(want.dtype)}" + (f"; they differ by up to {off:.3g}." if off else ".")
        )
    for index, (a, b) in enumerate(zip(mine["grads"], reference["grads"], strict=True)):
        if not torch.allclose(a, b, rtol=1e-3, atol=1e-6):
            raise ExerciseFailed(
                f"{label} gradient {index} differs from the reference by up to "
                f"{(a - b).abs().max():.3g}."
            )


register("labs.checkpoint_autocast", observe_checkpointed, compare_checkpointed)


# ---- Lab 2: a custom op that autocast never casts ------------------------------------------------
def compare_fused_op(mine: dict, reference: dict, seed: int) -> None:
    if reference["error"]:
        raise ExerciseFailed(reference["error"])
    if mine["error"]:
        said = what_happened(mine["error"])
        who = "your function" if said.startswith("returned") else "building or calling your op"
        raise ExerciseFailed(f"{who} {said}")
    by_name = f"called by its name, torch.ops.{mine['name']}, inside torch.autocast,"
    places = (
        ("autocast", "inside torch.autocast"),
        ("plain", "outside autocast"),
        ("by name", by_name),
    )
    for label, where in places:
        got, want = mine[label], reference[label]
        if got["received"] != want["received"]:
            raise ExerciseFailed(
                f"{where} the kernel received inputs in {got['received'] or 'nothing'}; the "
                f"reference's received {want['received']}."
            )
        if got["output"].dtype != want["output"].dtype:
            raise ExerciseFailed(
                f"{where} the op returned {got['output'].dtype}, expected {want['output'].dtype}."
            )
        if not torch.allclose(got["output"].float(), want["output"].float(), atol=1e-2):
            raise ExerciseFailed(f"{where} the op's values differ from the reference.")
    if reference["autocast_kernel"] and not mine["autocast_kernel"]:
        raise ExerciseFailed(
            f"the op torch.ops.{mine['name']} has no kernel for the AutocastCPU dispatch key "
            "(torch._C._dispatch_has_kernel_for_dispatch_key); the reference's has one, so its "
            "kernel receives the autocast dtype in compiled and exported code too."
        )


register("labs.custom_op_autocast", run_fused_op, compare_fused_op)


# ---- Lab 3: a running bf16 loss sum that stops growing -------------------------------------------
LOSS_CASES = {  # label: the losses a case hands the learner's function
    "a long run's losses": lab_losses,
    f"a loss settled at {PLATEAU}": plateau_losses,
    f"a loss settled between 1 and {PLATEAU}": alternating_losses,
    f"a loss settled a third of the way from 1 to {PLATEAU}": thirds_losses,
}


def observe_mean_loss(fn, seed: int) -> dict:
    return {label: _observe_mean_loss(fn, make(seed)) for label, make in LOSS_CASES.items()}


def _observe_mean_loss(fn, losses: list) -> dict:
    observed = {"steps": len(losses), "error": None, "exact": float(sum(float(x) for x in losses))}
    observed["exact"] /= len(losses)
    try:
        result = fn(losses)
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed["type"] = "float" if isinstance(result, float) else type(result).__name__
    observed["value"] = float(result) if isinstance(result, (float, int, torch.Tensor)) else None
    return observed


def compare_mean_loss(mine: dict, reference: dict, seed: int) -> None:
    for label, want in reference.items():
        got = mine[label]
        if got["error"]:
            raise ExerciseFailed(f"On {label}, your function {what_happened(got['error'])}")
        if got["type"] != "float":
            raise ExerciseFailed(
                f"return a Python float (what a logger records), not a {got['type']}."
            )
        exact, value = want["exact"], got["value"]
        if abs(value - exact) > TOLERANCE * abs(exact):
            raise ExerciseFailed(
                f"On {label}, over {want['steps']} steps the mean loss is {exact:.6f}; yours is "
                f"{value:.6f}, {abs(value - exact) / abs(exact):.2g} off relative to it (the "
                f"check allows {TOLERANCE:g}){_representable(value)}."
            )


# Relative: far below bf16's 2^-8 rounding; above what float32 loses here (its sums of these bf16
# losses are exact, a running mean m += (x - m) / n in float32 is 2.2e-6 off at worst).
TOLERANCE = 1e-5


def _representable(value: float) -> str:
    """The learner's number's significant bits, where they are few enough for a 16-bit format."""
    if not math.isfinite(value) or value == 0:
        return ""
    odd = Fraction(abs(value)).numerator
    while odd % 2 == 0:
        odd //= 2
    bits = odd.bit_length()
    if bits > 11 or bits == 1:  # a power of two: its one bit says nothing of the sum's precision
        return ""
    return f"; yours has {bits} significant bits (bfloat16 keeps 8, float16 11, float32 24)"


register("labs.bf16_loss_sum", observe_mean_loss, compare_mean_loss)


# ---- Lab 4: autocast entered in one thread, the forward run in another ---------------------------
def compare_workers(mine: dict, reference: dict, seed: int) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"your function {what_happened(mine['error'])}")
    if mine["in_caller_thread"]:
        raise ExerciseFailed(
            f"{mine['in_caller_thread']} forward(s) ran in the calling thread; the reference "
            "runs every forward in a worker thread."
        )
    if mine["param_dtypes"] != reference["param_dtypes"]:
        raise ExerciseFailed(
            f"the model's weights are now {mine['param_dtypes']}, the reference's "
            f"{reference['param_dtypes']}."
        )
    changed = mine["param_changes"]
    if changed != reference["param_changes"]:
        raise ExerciseFailed(
            f"the model's weights changed value during your function: {', '.join(changed)} "
            f"differ from what they were by up to {max(changed.values()):.3g}; the reference "
            "leaves every weight as it was."
        )
    if len(mine["outputs"]) != len(reference["outputs"]):
        raise ExerciseFailed(
            f"{len(mine['outputs'])} outputs for {reference['count']} batches; "
            "return one per batch."
        )
    for index, (a, b) in enumerate(zip(mine["outputs"], reference["outputs"], strict=True)):
        if a.dtype != b.dtype:
            raise ExerciseFailed(f"output {index} is {a.dtype}, the reference's {b.dtype}.")
        if a.shape != b.shape:
            raise ExerciseFailed(
                f"output {index} has shape {tuple(a.shape)}, the reference's {tuple(b.shape)}."
            )
        if not torch.equal(a, b):
            gap = (a.float() - b.float()).abs().max().item()
            same = [
                j
                for j, r in enumerate(reference["outputs"])
                if r.shape == a.shape and torch.equal(a, r)
            ]
            also = f"; it equals the reference's output {same[0]}" if same else ""
            raise ExerciseFailed(
                f"output {index} differs from the reference's output {index} by up to "
                f"{gap:.3g}{also}."
            )
    if mine["autocast"] != reference["autocast"]:  # a bf16 copy of the model, autocast off
        raise ExerciseFailed(
            f"the outputs are the reference's, but the model's forwards ran with CPU autocast "
            f"{' and '.join(mine['autocast'])} in their threads; the reference's with autocast "
            f"{' and '.join(reference['autocast'])}."
        )


register("labs.thread_autocast", run_in_workers, compare_workers)


# ---- Lab 5 (transfer): a pool that carries whatever autocast state its caller has --------------
register("labs.autocast_pool", observe_pool, compare_pool)
