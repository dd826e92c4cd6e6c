"""Modern stack: the checks of the learner's fixes (their setup: ``labs.modern_stack``).

A dtype mix compiled code accepts and eager refuses, TF32 flags read through the legacy API, a
scheduler and an EMA stepping on skipped steps, a custom autograd.Function written with
setup_context, Adam on fp16 weights, and a float8 scale for an all-zero tensor. Each lab observes
what the kit's ``run_*`` function records for the learner's code; ``compare`` names the first
difference from the reference fix (``solutions/labs_modern_stack.py``) that matters. Lab 6's
check is ``fp8_scale``.
"""

from __future__ import annotations

import torch

from ...labs.fp8_scale import run_fp8
from ...labs.modern_stack import (
    ADAM_LR,
    ADAM_STEPS,
    run_adam,
    run_class_means,
    run_ema,
    run_mm,
    run_tf32,
)
from .. import ExerciseFailed, fail_on_error, register
from ..answers import compare_params
from ..labs_more_failures import (
    CASE_DTYPES,
    _compare_values,
    _first_non_finite,
    _tensor_like,
    _where,
)
from .fp8_scale import compare_fp8


# ---- Lab 1: a dtype mix that compiled code accepts and eager refuses ----------------------------
def compare_class_means(mine: dict, reference: dict, seed: int) -> None:
    for case, want in reference.items():
        got, label = mine[case], f"In the case '{case}' (features {case.split()[0]}),"
        fail_on_error(got["error"], f"{label} your function, run eagerly,")
        what, tensor = f"{label} the class means you return", f"{label} the tensor of class means"
        _tensor_like(got["out"], want["out"], tensor)
        bad = _first_non_finite(got["out"])
        if bad:
            raise ExerciseFailed(
                f"{what} hold {bad[1]} at {_where(bad[0])} (class {bad[0][0]}); the reference's "
                "are finite."
            )
        _compare_values(got["out"], want["out"], torch.float32, tensor)


register("labs.compiled_dtype_mix", run_class_means, compare_class_means)


# ---- Lab 2: the legacy TF32 switches and the fp32_precision API ---------------------------------
TF32_OPS = {"matmul": "fp32 matmuls", "conv": "cuDNN convolutions"}


def _on(value) -> str:
    return "on" if value else "off"


def compare_tf32(mine: list, reference: list, seed: int) -> None:
    if len(mine) != len(reference):
        raise ExerciseFailed(f"{len(mine)} cases ran; the reference ran {len(reference)}.")
    for got, want in zip(mine, reference, strict=True):
        label = f"After {'; '.join(want['setters'])}" if want["setters"] else "With the defaults"
        fail_on_error(got["error"], f"{label}, your function")
        state = got["state"]
        if not isinstance(state, dict) or sorted(state) != sorted(TF32_OPS):
            raise ExerciseFailed(
                f"{label}, your function returned {state!r}; the reference returns a dict with "
                f"the keys {sorted(TF32_OPS)}."
            )
        for key, ops in TF32_OPS.items():
            if not isinstance(state[key], bool):  # 'none' or a tensor would read as "on" below
                raise ExerciseFailed(
                    f"{label}, your function returns {state[key]!r}, a "
                    f"{type(state[key]).__name__}, for {ops}; the reference a bool."
                )
            if state[key] is not want["state"][key]:
                raise ExerciseFailed(
                    f"{label}, your function returns {state[key]!r} (TF32 {_on(state[key])}) "
                    f"for {ops}; the reference {want['state'][key]!r} (TF32 "
                    f"{_on(want['state'][key])})."
                )


register("labs.tf32_api_mix", run_tf32, compare_tf32)


# ---- Lab 3: a scheduler and an EMA around steps the scaler skips --------------------------------
def _batch(reference: dict, index: int) -> str:
    records = reference["records"]
    before = records[index - 1]["steps"] if index else 0
    kind = "skipped" if records[index]["steps"] == before else "taken"
    return f"batch {index} (its step {kind} by the reference's scaler)"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def compare_ema(mine: dict, reference: dict, seed: int) -> None:
    fail_on_error(mine["error"], "your loop")
    got, want = mine["records"], reference["records"]
    if len(got) != len(want):
        raise ExerciseFailed(f"your loop went through {len(got)} of the {len(want)} batches.")
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        where = f"after {_batch(reference, index)}"
        if g["steps"] != w["steps"]:
            raise ExerciseFailed(
                f"{where}, the optimizer had stepped {_times(g['steps'])}; in the reference "
                f"{_times(w['steps'])}."
            )
        if (g["scheduler_steps"], g["ema_count"]) != (w["scheduler_steps"], w["ema_count"]):
            raise ExerciseFailed(
                f"{where}, the scheduler had stepped {_times(g['scheduler_steps'])} and the EMA "
                f"had averaged {_times(g['ema_count'])}; in the reference the scheduler "
                f"{_times(w['scheduler_steps'])} and the EMA {_times(w['ema_count'])} (the "
                f"optimizer had stepped {_times(g['steps'])} in both)."
            )
        if abs(g["lr"] - w["lr"]) > 1e-9 * w["lr"]:
            raise ExerciseFailed(
                f"{where}, the learning rate is {g['lr']:.6g}; the reference's {w['lr']:.6g}."
            )
    # The counts matched after every batch; the weights are compared once, after the last one.
    last = f"after {_batch(reference, len(want) - 1)}, the last,"
    compare_params(mine["model"], reference["model"], f"{last} the model's weights")
    compare_params(mine["ema"], reference["ema"], f"{last} the EMA's weights")


register("labs.ema_skipped_steps", run_ema, compare_ema)


# ---- Lab 4: a custom autograd.Function written with setup_context -------------------------------
def compare_mm(mine: dict, reference: dict, seed: int) -> None:
    for case, want in reference.items():
        got, label, dtype = mine[case], f"In the case '{case}',", CASE_DTYPES[case]
        where = {
            "forward": "your function",
            "backward": "the backward through your function"
            + (", which runs after the autocast region of its forward has ended," if dtype else ""),
        }
        fail_on_error(got["error"], f"{label} {where[got['stage']]}")
        if want["custom_function"] and not got["custom_function"]:
            raise ExerciseFailed(
                f"{label} your output's autograd graph holds no custom autograd.Function (its "
                f"grad_fn is {got['grad_fn']}, none below it); the reference's output comes "
                f"from one, {want['grad_fn']}, with its backward written by hand."
            )
        _tensor_like(got["out"], want["out"], f"{label} your output")
        _compare_values(got["out"], want["out"], dtype, f"{label} your output")
        builtin = got.get("builtin_product_nodes") or []
        if builtin and not want["builtin_product_nodes"]:
            raise ExerciseFailed(
                f"{label} the backward ran matrix products in {' and '.join(builtin)}, torch's "
                "own backward of an op in your output's graph; the reference's all ran in the "
                "backward written by hand in its custom autograd.Function."
            )
        ran, should = got.get("backward_dtypes"), want["backward_dtypes"]
        if ran != should:
            raise ExerciseFailed(
                f"{label} the backward through your function ran its matrix products in "
                f"{' and '.join(ran or ['no matrix product'])}; the reference's in "
                f"{' and '.join(should)}."
            )
        for name in ("a", "b"):
            what = f"{label} the gradient of {name}"
            if got[f"grad_{name}"] is None:
                raise ExerciseFailed(f"{what} is None; the reference's is a tensor.")
            _tensor_like(got[f"grad_{name}"], want[f"grad_{name}"], what)
            _compare_values(got[f"grad_{name}"], want[f"grad_{name}"], dtype, what)


register("labs.setup_context_autocast", run_mm, compare_mm)


# ---- Lab 5: Adam on fp16 parameters -------------------------------------------------------------
# Compared element by element, as the update (the change from the starting weights): each value's
# update against the reference's, in units of the learning rate. Adam moves a value by about lr a
# step whatever its gradient's size, so right fixes (fp32, or autocast in bf16 or fp16) move most
# values within half a step of the reference; where a gradient is near zero its sign can differ
# under rounding, and such values land a step or more away. The learning rate is a fine-tuning
# one (ADAM_LR, 2e-5): below half bf16's spacing at most of the first layer's weights and near
# fp16's, so weights kept in bf16 or fp16 lose or distort their updates. Over 30 seeds, bf16
# autocast puts at most 6% of a parameter's values more than half a step off (fp32 weights, or
# fp16 for serving with half fp16's spacing allowed on top); twice or Adam's default learning
# rate, gradients never cleared, weights kept in bf16 or fp16, or a layer left out of the
# optimizer put far more than the 25% allowed off (tests/test_exercises_lesson_labs_modern.py).
ADAM_STEP_TOLERANCE = 0.5  # in units of the learning rate
ADAM_OFF_SHARE = 0.25  # the share of a parameter's values allowed beyond it


def compare_adam(mine: dict, reference: dict, seed: int) -> None:
    fail_on_error(mine["error"], "your training function")
    if mine["fetched"] != reference["fetched"]:
        numbers = ", ".join(str(i + 1) for i in mine["fetched"])
        which = f"batches {numbers} of the" if numbers else "none of the"
        raise ExerciseFailed(
            f"your training function fetched {which} {ADAM_STEPS} batches it was given; the "
            "reference trains on each of them once."
        )
    after = f"after {ADAM_STEPS} steps"
    _compare_adam_settings(mine["optimizers"], reference["optimizers"])
    if mine["names"] != reference["names"]:
        raise ExerciseFailed(
            f"the model you return has the parameters {mine['names']}; the reference's "
            f"{reference['names']}."
        )
    served = ("float32", "float16")  # the lab fine-tunes for serving in fp16; fp32 is kept too
    for name, dtype in zip(mine["names"], mine["dtypes"], strict=True):
        if dtype not in served:
            raise ExerciseFailed(
                f"{after}, the model you return holds {name} in {dtype}; the reference's in "
                f"{reference['dtypes'][mine['names'].index(name)]} (a model served in "
                f"{' or '.join(served)})."
            )
    for name, got, want in zip(mine["names"], mine["params"], reference["params"], strict=True):
        _tensor_like(got, want, f"{after}, {name}")
        bad = ~torch.isfinite(got)
        if bad.any():
            index = tuple(int(i) for i in bad.nonzero()[0])
            raise ExerciseFailed(
                f"{after}, {int(bad.sum())} of the {got.numel()} values of {name} are NaN or "
                f"inf, the first at {_where(index)} ({got[index].item()}); the reference's are "
                "finite."
            )

    far = ADAM_STEP_TOLERANCE * ADAM_LR
    for name, got, want, start, dtype in zip(
        mine["names"],
        mine["params"],
        reference["params"],
        reference["initial"],
        mine["dtypes"],
        strict=True,
    ):
        gap = (got - want).abs()  # the difference of the two updates: both start at `start`
        # Weights returned in fp16 for serving are rounded once more: half fp16's spacing at each
        # value (6e-5 from 0.125 up, beyond half of this learning rate) is allowed on top.
        rounding = _half_fp16_spacing(want) if dtype == "float16" else torch.zeros_like(want)
        off = gap > far + rounding
        if off.float().mean().item() > ADAM_OFF_SHARE:
            index = tuple(int(i) for i in torch.unravel_index(gap.argmax(), got.shape))
            allowed = " plus half fp16's spacing there" if dtype == "float16" else ""
            raise ExerciseFailed(
                f"{after}, {int(off.sum())} of the {got.numel()} values of {name} end more than "
                f"{far:g} (half the learning rate){allowed} from the reference's; the check allows "
                f"{ADAM_OFF_SHARE:.0%} of them. The largest difference: {name} at "
                f"{_where(index)} started at {start[index].item():.5g} and ends at "
                f"{got[index].item():.5g} in yours, {want[index].item():.5g} in the reference's."
            )


def _compare_adam_settings(mine: list[dict], reference: list[dict]) -> None:
    """The settings that change Adam's update, of each torch optimizer that stepped, against the
    reference's Adam (an update written by hand records none, and its weights are compared)."""
    (want,) = reference
    for got in mine:
        differ = [key for key in want if key != "class" and got.get(key) != want[key]]
        if differ:
            yours = ", ".join(
                f"{key}={got[key]!r}" if key in got else f"{key}=(none)" for key in differ
            )
            theirs = ", ".join(f"{key}={want[key]!r}" for key in differ)
            raise ExerciseFailed(
                f"your {got['class']} stepped with {yours}; the reference's {want['class']} with "
                f"{theirs} (the learning rate given, Adam's defaults otherwise)."
            )


def _half_fp16_spacing(values: torch.Tensor) -> torch.Tensor:
    """Half the gap between neighbouring fp16 numbers at each of ``values``: at most the rounding
    of a cast to fp16 (10 mantissa bits; subnormals are 2^-24 apart)."""
    _, exponent = torch.frexp(values.float())  # |v| in [2^(e-1), 2^e): spacing 2^(e-1-10)
    exponent = torch.where(values == 0, -24, (exponent - 11).clamp(min=-24))
    return torch.exp2(exponent.float()) / 2


register("labs.adam_fp16_eps", run_adam, compare_adam)


register("labs.fp8_zero_scale", run_fp8, compare_fp8)
