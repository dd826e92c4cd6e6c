"""The capstone's experiment: which modes a device compares, the batch that fits, the training
length that fits the time budget, and the sentences that read its measurements."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import emulation, gpus, memory, precisions
from .device import pick_precision
from .models import count_parameters
from .recipe import AmpRecipe
from .stats import PairedDifference, fixed_cost
from .timing import Comparison

# The three ways of training the capstone compares, one per training dtype of ``ac.precisions``
# ("fp32", "fp16 + GradScaler", "bf16"), each its row (what ``AmpRecipe`` is made from).
MODES = {p.label: p for p in precisions.BY_STORAGE.values()}


def modes_for(device: torch.device | str) -> tuple[dict[str, precisions.Precision], str]:
    """The modes ``device`` compares, and a sentence saying which, and why any is left out.

    A GPU without bf16 tensor cores (``ac.gpus``: a T4) would only emulate
    bf16: its runs would say nothing about bf16 training, so they are left out there. A CPU
    runs all three (CPU autocast has both 16-bit dtypes).
    """
    device = torch.device(device)
    if device.type == "cuda" and pick_precision(device, warn=False).dtype != torch.bfloat16:
        major, minor = emulation.capability(device)  # a rehearsed T4's under emulation
        first = gpus.format_capability(gpus.tensor_cores_from("bf16"))
        modes = {k: v for k, v in MODES.items() if v is not precisions.BF16}
        return modes, (
            f"This GPU (compute capability {major}.{minor}) has no bf16 tensor cores (they "
            f"start at {first}), so bf16 is left out: fp32 against fp16 + GradScaler."
        )
    return dict(MODES), "Modes compared: " + ", ".join(MODES) + "."


def choose_batch(
    build: Callable[[], torch.nn.Module],
    wanted: int,
    device: torch.device | str,
    input_shape: tuple[int, ...] = (1, 1, 28, 28),
) -> memory.BatchChoice:
    """The batch every mode trains with: ``wanted``, or the largest that fits this GPU in fp32.

    fp32 keeps the most activations, so a batch that fits it fits every mode, and all modes
    train on the same batches (the comparison is paired). The weights, gradients and AdamW state
    (16 bytes a parameter) are paid once; the activations one digit saves are counted on the
    device (``ac.memory.count_saved_bytes``). A CPU has no memory to fit.
    """
    device = torch.device(device)
    if device.type != "cuda":
        # The batch itself, not BATCH_SIZE=: smoke mode asks for its own, not the setting's.
        return memory.BatchChoice(wanted, f"batch {wanted} (a CPU: no GPU memory to fit).")
    with torch.device("meta"):
        num_params = count_parameters(build())
    fixed = memory.training_memory(num_params, activation_bytes=0).total
    fp32 = AmpRecipe(device)  # the hungriest mode
    per_sample = memory.count_saved_bytes(build, input_shape, recipe=fp32).activations
    available = memory.usable_cuda_bytes(device)
    return memory.fit_batch(wanted, per_sample, fixed, available, setting="BATCH_SIZE")


@dataclass
class TrainingPlan:
    """How many optimizer steps each run trains, and why."""

    steps: int
    designed_steps: int
    steps_per_epoch: int
    seconds: float  # the planned time of every run's steps, from the measured step times
    reason: str

    @property
    def epochs(self) -> float:
        return self.steps / self.steps_per_epoch

    @property
    def shortened(self) -> bool:
        return self.steps < self.designed_steps


def plan_training(
    step_seconds: dict[str, float],
    num_seeds: int,
    designed_steps: int,
    steps_per_epoch: int,
    budget_s: float,
) -> TrainingPlan:
    """Train the designed number of steps per run, or as many as fit in ``budget_s``.

    ``step_seconds`` holds one measured step time per mode; every seed trains every mode, so
    a step of the experiment costs their sum, ``num_seeds`` times over.
    """
    if steps_per_epoch < 1:
        raise ValueError(
            f"The training set holds less than one batch (steps_per_epoch={steps_per_epoch}): "
            "set BATCH_SIZE lower."
        )
    per_step = num_seeds * sum(step_seconds.values())
    designed_s = designed_steps * per_step
    runs = f"{num_seeds} seeds x {len(step_seconds)} modes"
    if designed_s <= budget_s:
        return TrainingPlan(
            designed_steps,
            designed_steps,
            steps_per_epoch,
            designed_s,
            f"{designed_steps} steps per run ({designed_steps / steps_per_epoch:.2f} epochs), "
            f"about {designed_s:.0f} s of steps for {runs} at the measured step times, within "
            f"TRAIN_BUDGET_S={budget_s:g}.",
        )
    steps = max(1, math.floor(budget_s / per_step))
    return TrainingPlan(
        steps,
        designed_steps,
        steps_per_epoch,
        steps * per_step,
        f"The designed {designed_steps} steps per run would take about {designed_s:.0f} s for "
        f"{runs} at this device's step times, more than TRAIN_BUDGET_S={budget_s:g}: each run "
        f"trains {steps} steps ({steps / steps_per_epoch:.2f} epochs) instead, so accuracies are "
        "lower and the comparison weaker than designed. Raise TRAIN_BUDGET_S to train the "
        "designed length.",
    )


def scaling_sentence(
    model: str, small_s: float, large_s: float, factor: int, device_type: str
) -> str:
    """What a step's time does when the batch grows ``factor`` times, read from two timings.

    The two timings split the step as time = fixed + per_sample x batch (``stats.fixed_cost``).
    The sentence gives the fixed part's share of each step, and says which part holds most of the
    small batch's step, the one the modes are compared at.
    """
    growth = large_s / small_s
    fixed = fixed_cost(small_s, large_s, factor)
    cost = (
        "launching its kernels: the step is launch-bound"
        if device_type == "cuda"
        else "the framework's and Python's overhead per operation"
    )
    said = f"{model}: {factor}x the batch took {growth:.2f}x the time."
    if large_s <= small_s:  # no work per image to split off: the shares would be the clamp's
        return (
            f"{said} The larger batch was no slower: within these timings' noise the whole step "
            f"is a fixed cost ({cost}), which faster arithmetic cannot shorten."
        )
    if fixed == 0.0:
        return f"{said} No fixed cost shows: the step's time grows with the work."
    split = (
        f" Split as a fixed cost per step plus work per image, the fixed cost ({cost}) is "
        f"{fixed / small_s:.0%} of the small batch's step and {fixed / large_s:.0%} of the large "
        "one's"
    )
    if fixed / small_s > 0.5:
        return f"{said}{split}: at the small batch faster arithmetic cannot shorten it much."
    return f"{said}{split}: even at the small batch most of the step is work that grows with it."


def speed_sentence(mode: str, speed: Comparison) -> str:
    """A mode's step time against fp32's: the ratio, and the verdict of ``ac.timing.compare``.

    ``speed`` is ``ac.timing.compare(fp32_timing, mode_timing)``: a ratio inside the spread of
    the runs ranks nothing, however far from 1 it is.
    """
    took = f"{mode} took {speed.ratio:.2f}x the fp32 step time"
    if speed.verdict == "faster":
        return f"{took} ({1 / speed.ratio:.1f}x faster, outside the spread of the runs)"
    if speed.verdict == "slower":
        return f"{took} (slower than fp32, outside the spread of the runs)"
    return f"{took} (not distinguishable from fp32's: the runs' middle halves overlap)"


def interval_bounds_note(low: float, high: float) -> str | None:
    """A note when a t interval of an accuracy runs past 0 or 1, where no accuracy can be."""
    if 0 <= low and high <= 1:
        return None
    return (
        f"The interval [{low:.3f}, {high:.3f}] runs past the range an accuracy can take (0 to 1): "
        "a t interval is symmetric around the mean and knows nothing of that range. It says that "
        "these few runs pin the mean down hardly at all; more seeds (and steps) narrow it."
    )


def paired_verdict(name: str, paired: PairedDifference, margin: float, unit: str = "") -> str:
    """The sentence a paired comparison supports, read from its interval and the ``margin``."""
    n = len(paired.differences)
    interval = (
        f"{name}: mean difference {paired.mean:+.3g}{unit}, {paired.confidence:.0%} interval "
        f"[{paired.low:+.3g}, {paired.high:+.3g}]{unit} over {n} paired seeds"
    )
    if paired.high - paired.low <= 1e-9 * max(1.0, abs(paired.mean)):  # no spread between seeds
        same = paired.mean
        return (
            f"{interval}: every seed gave the same difference ({same:+.3g}{unit}), so the "
            "interval has no width. A t interval measures the spread between seeds, and here "
            "there is none: these runs agree seed for seed, which says nothing of how far the "
            "modes could differ. More seeds, and runs long enough to part, give an interval that "
            "can say it."
        )
    if paired.within(margin):
        zero = "includes 0" if paired.includes_zero else "excludes 0"
        return (
            f"{interval}: it {zero} and lies inside +-{margin:g}{unit}, so at these settings "
            "any difference is smaller than the margin: equivalent, for the purpose that margin "
            "describes."
        )
    if paired.includes_zero:
        return (
            f"{interval}: it includes 0, so no difference is detectable, but it reaches beyond "
            f"+-{margin:g}{unit}: these seeds cannot rule out a difference that large. More "
            "seeds narrow the interval."
        )
    side = "lower" if paired.high < 0 else "higher"
    return (
        f"{interval}: it excludes 0 and reaches beyond +-{margin:g}{unit}: this mode scored "
        f"{side} than the reference at these settings, a difference the seeds detect."
    )
