"""Lesson 03's scaler core (the package's ``__init__`` registers the check): ``scale``,
``unscale_grads`` (the inf check and the division) and ``update`` of a dynamic loss scaler, each
held to the kernel ``torch.amp.GradScaler`` runs for it: ``torch._amp_update_scale_`` for the
update, ``torch._amp_foreach_non_finite_check_and_unscale_`` for unscaling."""

from __future__ import annotations

import math

import numpy
import torch

from ...display import kind_of, shown
from .. import ExerciseFailed, call_answer, fail_on_error
from ..answers import paired

# (init_scale, growth_factor, backoff_factor, growth_interval, found_inf after each step, what)
F, T = False, True
CORE_CASES = [
    (2.0**16, 2.0, 0.5, 3, (F, F, F, F, T, F, F, F, F, F, T, F), "the defaults' factors"),
    (2.0**16, 1.1, 0.3, 2, (F, F, F, T, T, F, F, F, F, F), "factors that are not powers of two"),
    (2.0**127, 2.0, 0.5, 1, (F, F, T, F, F), "a scale at float32's largest power of two"),
    # Down to 1/4 and back: a scale floored at 1 (Megatron's min_scale, DeepSpeed's
    # min_loss_scale; GradScaler has none) passed the seeds whose runs never went below 1.
    (2.0, 2.0, 0.5, 2, (T, T, T, F, F, F, T, F), "a scale that falls below 1"),
]
FACTORS = [(2.0, 0.5), (1.5, 0.3), (3.0, 0.7), (4.0, 0.25), (1.1, 0.9)]  # growth, backoff
# Factors whose products are not float32 numbers (the second run's): a scale kept unrounded
# between updates then differs from GradScaler's float32 one. None is a short binary fraction
# (1.5 times a scale is often exact), so a growth rounds as a backoff does.
UNEVEN = [(1.1, 0.3), (1.3, 0.7), (1.1, 0.9)]
LOSS = 1.5  # the loss scale() is given: not a power of two


def core_cases(seed: int) -> list[tuple]:
    """Seed 0: CORE_CASES. Other seeds: two random runs of flags, the near-max case and the one
    below 1."""
    if seed == 0:
        return list(CORE_CASES)
    generator = torch.Generator().manual_seed(seed)
    drawn = []
    for index in range(2):
        factors = FACTORS if index == 0 else UNEVEN
        growth, backoff = factors[int(torch.randint(len(factors), (), generator=generator))]
        interval = int(torch.randint(1 + (index == 0), 5, (), generator=generator))
        steps = int(torch.randint(8, 16, (), generator=generator))
        init = float(2 ** int(torch.randint(4, 20, (), generator=generator)))
        flags = [bool(b) for b in (torch.rand(steps, generator=generator) < 0.25).tolist()]
        if index == 0:  # an overflow after a clean step: the growth count must restart there
            flags[:2] = [False, True]
        else:  # overflows, so the uneven backoff factor is applied, then a growth; drawn
            # until float32 rounds a product of each kind (a scale rounded after one kind only
            # passed 25 seeds of 200)
            drawn_flags = flags
            for _ in range(50):  # once or twice, in practice
                backoffs = int(torch.randint(1, 4, (), generator=generator))
                at = int(torch.randint(steps - interval - backoffs + 1, (), generator=generator))
                flags = [*drawn_flags]
                flags[at : at + backoffs + interval] = [True] * backoffs + [False] * interval
                if _rounds_both(init, growth, backoff, interval, flags):
                    break
        drawn.append(
            (
                init,
                growth,
                backoff,
                interval,
                tuple(flags),
                f"a run with growth_interval={interval}",
            )
        )
    return [*drawn, *CORE_CASES[-2:]]


def _rounds_both(init, growth, backoff, interval, flags) -> bool:
    """Whether GradScaler's float32 scale differs from the exact product at a growth and at a
    backoff of this run (where a scale kept in Python floats would differ from it)."""
    after = [scale for scale, _ in torch_updates(init, growth, backoff, interval, flags)]
    rounded = {
        growth if scale > previous else backoff
        for previous, scale in zip([init, *after[:-1]], after, strict=True)
        if scale != previous and scale != previous * (growth if scale > previous else backoff)
    }
    return rounded == {growth, backoff}


def torch_updates(init, growth, backoff, interval, flags) -> list[tuple[float, int]]:
    """(scale, growth tracker) after each update, from the kernel GradScaler.update runs."""
    scale, tracker = torch.tensor(init, dtype=torch.float32), torch.zeros((), dtype=torch.int32)
    found, after = torch.zeros(()), []
    for flag in flags:
        found.fill_(float(flag))
        torch._amp_update_scale_(scale, tracker, found, growth, backoff, interval)
        after.append((scale.item(), int(tracker.item())))
    return after


def _grads(case: str, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed + 3)
    grads = [torch.randn(5, 3, generator=generator) * 500, torch.randn(7, generator=generator)]
    if case == "an inf in the second tensor":
        grads[1][4] = float("inf")
    if case == "a NaN in the first tensor":
        grads[0][2, 1] = float("nan")
    if case == OVERFLOWS_ONCE_UNSCALED:
        grads[0][1, 2] = 3e38  # finite as handed in; 6e38 is past float32's largest once unscaled
    return grads


UNSCALE_SCALE = 1000.0  # not a power of two: 1/scale is rounded, as GradScaler rounds it
# A scale below 1 (after many overflows in a row) and a gradient that is finite as handed in: rule
# 2 checks before it unscales, so this finds no inf (a check after unscaling passed every seed
# while every case had a scale of 1000).
OVERFLOWS_ONCE_UNSCALED = "a finite gradient that overflows once unscaled"
UNSCALE_CASES = {  # case: the scale the core is built with
    "finite gradients": UNSCALE_SCALE,
    "an inf in the second tensor": UNSCALE_SCALE,
    "a NaN in the first tensor": UNSCALE_SCALE,
    OVERFLOWS_ONCE_UNSCALED: 0.5,
}


def torch_unscale(case: str, seed: int = 0) -> dict:
    """What GradScaler's unscaling kernel makes of ``case``'s gradients at the case's scale."""
    grads, found = _grads(case, seed), torch.zeros(())
    inverse = torch.tensor(UNSCALE_CASES[case], dtype=torch.float64).reciprocal().float()
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inverse)
    return {"found_inf": bool(found.item()), "grads": [g.tolist() for g in grads]}


def observe_core(core_class, seed: int) -> dict:
    """The learner's class on every case: scale(LOSS) and the growth count after each update,
    unscale_grads on each set of gradients; PyTorch's answers beside them."""
    updates = []
    for init, growth, backoff, interval, flags, what in core_cases(seed):
        core, error = call_answer(core_class, init, growth, backoff, interval)
        seen, problem = [], None
        for flag in flags if error is None else ():
            _, error = call_answer(core.update, flag)
            if error is not None:
                break
            loss = torch.tensor(1.0, requires_grad=True) * LOSS  # in a graph, as a step's loss
            scaled, error = call_answer(core.scale, loss)
            if error is not None:
                break
            problem = problem or _scale_problem(scaled, loss)
            if isinstance(scaled, torch.Tensor):
                scaled = scaled.detach()
            raw = float(scaled) if isinstance(scaled, (torch.Tensor, float)) else None
            seen.append((raw, getattr(core, "good_steps", None), _held(core)))
        updates.append(
            {
                "case": [init, growth, backoff, interval, list(flags), what],
                "error": error,
                "scale_problem": problem,
                "seen": seen,
                "torch": torch_updates(init, growth, backoff, interval, flags),
            }
        )
    unscaled = []
    for case, scale in UNSCALE_CASES.items():
        core, error = call_answer(core_class, scale, 2.0, 0.5, 2000)
        grads = _grads(case, seed)
        given = list(grads)  # the tensors handed in: the list itself may be changed
        found = None
        if error is None:
            found, error = call_answer(core.unscale_grads, grads)
        grads = given
        if isinstance(found, torch.Tensor) and found.numel() == 1:
            found = bool(found)  # a tensor flag, as GradScaler keeps its own
        elif isinstance(found, numpy.bool_):
            found = bool(found)  # np.any's flag: numpy's bool, which equals Python's
        elif type(found) in (int, float) and found in (0, 1):
            found = bool(found)  # 0 or 1 (found.item() of a float flag: 0.0) means False or True
        unscaled.append(
            {
                "case": case,
                "error": error,
                "found_inf": found if isinstance(found, bool) else shown(found, 40),
                "grads": [g.tolist() for g in grads],
                "torch": torch_unscale(case, seed),
            }
        )
    return {"updates": updates, "unscaled": unscaled}


def _scale_problem(scaled, loss: torch.Tensor) -> str | None:
    """What ``scale(loss)`` does that GradScaler.scale does not (None: nothing): a training step
    calls backward() on what it returns, and uses the loss after it."""
    now = loss.detach().item()
    if now != LOSS:
        return f"changes the loss handed in, {LOSS} before the call, to {now!r}"
    if not isinstance(scaled, torch.Tensor):
        return f"returns {kind_of(scaled)}, not a tensor"
    if scaled.grad_fn is None:
        return "returns a tensor outside the loss's graph (no grad_fn)"
    return None


def _held(core) -> float | None:
    """The scale the core holds (``scale_value``, set by the given constructor), as a float."""
    held = getattr(core, "scale_value", None)
    try:
        return float(held)
    except (TypeError, ValueError, RuntimeError):
        return None


def _float32(value: float) -> float:
    return torch.tensor(value, dtype=torch.float32).item()


def _close(a: float, b: float) -> bool:
    """Equal up to rounding: the factors applied in float32 (a float32 tensor times 0.7) round
    where PyTorch's kernel multiplies in float64 and rounds the product once, an ulp or two a
    step; a wrong rule is off by a factor."""
    if a != a or b != b or abs(a) == float("inf") or abs(b) == float("inf"):
        return a == b
    return abs(a - b) <= 2.0**-16 * abs(b)


def _flat(grads: list) -> torch.Tensor:
    return torch.cat([torch.tensor(g, dtype=torch.float32).flatten() for g in grads])


def compare_core(mine: dict, reference: dict, seed: int) -> None:
    for run, ref in paired(mine["updates"], reference["updates"], "case", "class"):
        init, growth, backoff, interval, flags, what = ref["case"]
        made = f"ScalerCore({init:g}, {growth:g}, {backoff:g}, {interval})"
        fail_on_error(run["error"], f"{made} ({what}), or its update() or scale(),")
        if run.get("scale_problem"):
            raise ExerciseFailed(
                f"{made} ({what}): scale(loss) {run['scale_problem']}; GradScaler.scale returns "
                "the loss times the scale as a new tensor in the loss's graph, so that backward() "
                "on it reaches the weights, and leaves the loss as it is."
            )
        for step, ((raw, count, held), (want, tracker)) in enumerate(
            zip(run["seen"], ref["torch"], strict=True)
        ):
            scale = None if raw is None else raw / LOSS  # the scale scale(LOSS) applied
            given = ", ".join("inf" if f else "finite" for f in flags[: step + 1])
            after = (
                f"{made} ({what}), after {step + 1} update() call(s), found_inf for the steps: "
                f"[{given}]:"
            )
            if scale is None or not _close(scale, want) or count != tracker:
                if held is not None and _close(held, want) and count == tracker:
                    # The update is PyTorch's; what scale() returns is not the loss times it.
                    product = _float32(held * LOSS)
                    raise ExerciseFailed(
                        f"{after} scale_value is {held!r}, as PyTorch's update gives, but "
                        f"scale({LOSS}) returns {'no number' if raw is None else repr(raw)}; "
                        f"{held!r} x {LOSS} is "
                        + ("inf" if math.isinf(product) else repr(product))
                        + " in float32."
                    )
                mine = f"scale_value is {held!r}" if held is not None else "it has no scale_value"
                raise ExerciseFailed(
                    f"{after} {mine} and good_steps is {count!r}; PyTorch's update "
                    "(torch._amp_update_scale_, what GradScaler.update runs) gives a scale of "
                    f"{want!r} and a growth tracker of {tracker}."
                )
            if held is None or not _close(held, want):  # scale() is right, the S held is not
                raise ExerciseFailed(
                    f"{after} scale({LOSS}) applies {scale!r}, PyTorch's scale, but "
                    + (f"scale_value is {held!r}" if held is not None else "it has no scale_value")
                    + ": update() sets the new S in scale_value, which the lesson's LossScaler "
                    "reads (get_scale, state_dict)."
                )
            # Within one rounding of PyTorch's, but between two float32 numbers: GradScaler's
            # scale is a float32 tensor, so after a factor that is not a power of two it differs.
            if held is not None and held == held and _float32(held) != held:
                raise ExerciseFailed(
                    f"{after} scale_value is {held!r}, which is not a float32 number (the nearest "
                    f"float32 is {_float32(held)!r}); PyTorch's update keeps the scale in a "
                    f"float32 tensor: {want!r}."
                )
    for run, ref in paired(mine["unscaled"], reference["unscaled"], "case", "class"):
        what = f"unscale_grads at a scale of {UNSCALE_CASES[ref['case']]:g} on {ref['case']}"
        fail_on_error(run["error"], what)
        theirs = ref["torch"]
        if run["found_inf"] is not theirs["found_inf"]:
            found = run["found_inf"]  # a bool, or the repr of anything else
            returned = f"{found}" if isinstance(found, bool) else f"{found}, not a bool"
            raise ExerciseFailed(
                f"{what} returned {returned}; PyTorch's unscaling finds "
                f"inf/NaN: {theirs['found_inf']}."
            )
        got = torch.tensor([v for g in run["grads"] for v in torch.tensor(g).flatten().tolist()])
        want = torch.tensor(
            [v for g in theirs["grads"] for v in torch.tensor(g).flatten().tolist()]
        )
        same = torch.isclose(got, want, rtol=1e-6, atol=0, equal_nan=True)
        if not same.all():
            index = int((~same).nonzero()[0])
            raise ExerciseFailed(
                f"{what}: element {index} of the gradients (in order, tensor after tensor, in "
                f"the tensors handed in) is "
                f"{got[index].item():.7g} after it; PyTorch's unscaling leaves "
                f"{want[index].item():.7g}."
            )
