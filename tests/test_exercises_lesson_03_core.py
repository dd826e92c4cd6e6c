"""Lesson 03's first exercise, the core of a dynamic loss scaler: the reference agrees with the
kernels GradScaler runs, right cores written differently pass, and the cores a learner gets wrong
fail at every seed with a message that says what differs from PyTorch's, never the fix."""

import re

import pytest
import torch

from amp_course import exercises
from amp_course.exercises.lesson_03 import core
from amp_course.exercises.solutions.lesson_03 import ScalerCore

NAME = "03.scaler_core"
SEEDS = (0, 12345, 987654321)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_seed_meets_the_cases_that_decide(seed):
    """A backoff after a clean step (the count restarts), growth, and growth that would reach
    inf, at every seed: the answers below that miss one of them fail at every seed."""
    cases = core.core_cases(seed)
    restarts = 0
    for init, growth, backoff, interval, flags, _ in cases:
        after = core.torch_updates(init, growth, backoff, interval, flags)
        trackers = [0] + [tracker for _, tracker in after]
        restarts += any(flag and trackers[i] > 0 for i, flag in enumerate(flags))
    assert restarts  # an overflow while the count stands above 0
    assert any(init == 2.0**127 for init, *_ in cases)


def test_the_kernels_agree_with_the_lessons_rules():
    """torch._amp_update_scale_: backoff and restart on inf, growth at the interval-th clean step,
    and never to inf; the unscaling kernel multiplies by 1/scale rounded to float32."""
    assert core.torch_updates(8.0, 2.0, 0.5, 2, (False, False, True, False)) == [
        (8.0, 1),
        (16.0, 0),
        (8.0, 0),
        (8.0, 1),
    ]
    assert core.torch_updates(2.0**127, 2.0, 0.5, 1, (False,)) == [(2.0**127, 0)]
    assert core.torch_unscale("an inf in the second tensor")["found_inf"] is True


@pytest.mark.parametrize("seed", SEEDS)
def test_the_reference_passes(seed):
    assert exercises.verdict(NAME, ScalerCore, seed) == ("passed", "")


class _Divides(ScalerCore):
    def unscale_grads(self, grads):
        found = any(not torch.isfinite(g).all().item() for g in grads)
        for g in grads:
            g.div_(self.scale_value)
        return found


class _Float64Scale(ScalerCore):
    """Python floats for the scale, never rounded to float32: close to PyTorch's, but between two
    float32 numbers after a factor that is not a power of two."""

    def __init__(self, init_scale, growth_factor, backoff_factor, growth_interval):
        super().__init__(init_scale, growth_factor, backoff_factor, growth_interval)
        self.scale_value = float(init_scale)

    def update(self, found_inf):
        if found_inf:
            self.scale_value *= self.backoff_factor
            self.good_steps = 0
            return
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            grown = self.scale_value * self.growth_factor
            if grown <= torch.finfo(torch.float32).max:
                self.scale_value = grown
            self.good_steps = 0


class _Float32Tensor(ScalerCore):
    """The scale in a float32 tensor: each update rounds to float32, the factor too (the kernel
    multiplies in float64), an ulp or two from PyTorch's scale a step."""

    def __init__(self, init_scale, growth_factor, backoff_factor, growth_interval):
        super().__init__(init_scale, growth_factor, backoff_factor, growth_interval)
        self.scale_value = torch.tensor(init_scale, dtype=torch.float32)

    def update(self, found_inf):
        if found_inf:
            self.scale_value = self.scale_value * self.backoff_factor
            self.good_steps = 0
            return
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            grown = self.scale_value * self.growth_factor
            if torch.isfinite(grown):
                self.scale_value = grown
            self.good_steps = 0


class _TorchKernel(ScalerCore):
    def unscale_grads(self, grads):
        found = torch.zeros(())
        inverse = torch.tensor(1 / self.scale_value)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inverse)
        return found  # a tensor flag


class _IntFlag(ScalerCore):
    """The flag as 0 or 1, which the scaler reads as False or True."""

    def unscale_grads(self, grads):
        return int(super().unscale_grads(grads))


class _FloatFlag(ScalerCore):
    """The kernel's float flag read with .item(): 0.0 or 1.0."""

    def unscale_grads(self, grads):
        return float(super().unscale_grads(grads))


class _NumpyFlag(ScalerCore):
    """np.any's flag, a numpy.bool_: it failed every seed with "returned np.False_ (a bool), not a
    bool" (a test learner's)."""

    def unscale_grads(self, grads):
        import numpy as np

        return np.any(np.array([super().unscale_grads(grads)]))


@pytest.mark.parametrize(
    "right", [_Divides, _Float32Tensor, _TorchKernel, _IntFlag, _FloatFlag, _NumpyFlag]
)
@pytest.mark.parametrize("seed", SEEDS)
def test_right_cores_written_differently_pass(right, seed):
    assert exercises.verdict(NAME, right, seed) == ("passed", "")


class _NoInfCheck(ScalerCore):
    def unscale_grads(self, grads):
        super().unscale_grads(grads)
        return False


class _FirstTensorOnly(ScalerCore):
    def unscale_grads(self, grads):
        found = not torch.isfinite(grads[0]).all().item()
        for g in grads:
            g.mul_(1 / self.scale_value)
        return found


class _MultipliesByTheScale(ScalerCore):
    def unscale_grads(self, grads):
        found = any(not torch.isfinite(g).all().item() for g in grads)
        for g in grads:
            g.mul_(self.scale_value)
        return found


class _LossUnscaled(ScalerCore):
    def scale(self, loss):
        return loss


def _fp32(x: float) -> float:
    return torch.tensor(x, dtype=torch.float32).item()


class _ListItemsReplaced(ScalerCore):
    """Divides into new tensors put back in the list: the tensors handed in keep the scale."""

    def unscale_grads(self, grads):
        found = any(not torch.isfinite(g).all().item() for g in grads)
        for index, g in enumerate(grads):
            grads[index] = g / self.scale_value
        return found


class _Fp16Scale(ScalerCore):
    """The scale multiplied in as an fp16 tensor: 65536 is inf there."""

    def scale(self, loss):
        return loss * torch.tensor(self.scale_value, dtype=torch.float16)


class _ScaledAsFloat(ScalerCore):
    """A number, which backward() cannot be called on (a test learner's; the lesson's next cell
    then raised AttributeError)."""

    def scale(self, loss):
        return loss.item() * self.scale_value


class _ScaledInPlace(ScalerCore):
    def scale(self, loss):
        return loss.mul_(self.scale_value)


class _ScaledDetached(ScalerCore):
    def scale(self, loss):
        return torch.tensor(loss.item() * self.scale_value)


class _ScaleKeptElsewhere(ScalerCore):
    """PyTorch's scale kept in a tensor of its own: scale() is right, scale_value never moves."""

    def _held(self):
        if not hasattr(self, "_s"):
            self._s = torch.tensor(self.scale_value, dtype=torch.float32)
        return self._s

    def scale(self, loss):
        return loss * self._held()

    def unscale_grads(self, grads):
        found = any(not torch.isfinite(g).all() for g in grads)
        for g in grads:
            g.div_(self._held())
        return found

    def update(self, found_inf):
        held = self._held()
        if found_inf:
            held.mul_(self.backoff_factor)
            self.good_steps = 0
            return
        self.good_steps += 1
        if self.good_steps == self.growth_interval:
            grown = held * self.growth_factor
            if torch.isfinite(grown):
                held.copy_(grown)
            self.good_steps = 0


class _CheckedAfterUnscaling(ScalerCore):
    def unscale_grads(self, grads):
        for g in grads:
            g.div_(self.scale_value)
        return any(not torch.isfinite(g).all() for g in grads)


class _StringFlag(ScalerCore):
    def unscale_grads(self, grads):
        return str(super().unscale_grads(grads))


def _update(grow_when, reset_on_inf=True, guard=True, grow_on_inf=False, clamp=False, floor=0.0):
    """A core whose update rounds to float32 as GradScaler does, with its rule changed."""

    class Core(ScalerCore):
        def update(self, found_inf):
            if found_inf and not grow_on_inf:
                self.scale_value = max(_fp32(self.scale_value * self.backoff_factor), floor)
                self.good_steps = 0 if reset_on_inf else self.good_steps
                return
            self.good_steps += 1
            if grow_when(self.good_steps, self.growth_interval):
                grown = _fp32(self.scale_value * self.growth_factor)
                if clamp:  # float32's largest number where growth would overflow
                    grown = min(grown, torch.finfo(torch.float32).max)
                if not guard or grown <= torch.finfo(torch.float32).max:
                    self.scale_value = grown
                if grow_when is not _every_interval:
                    self.good_steps = 0

    return Core


def _rounded_at(kind):
    """A core that rounds its scale to float32 at a growth only, or at a backoff only."""

    class Core(ScalerCore):
        def update(self, found_inf):
            previous = self.scale_value
            super().update(found_inf)
            if self.scale_value != previous and (self.scale_value > previous) != (kind == "growth"):
                factor = self.growth_factor if self.scale_value > previous else self.backoff_factor
                self.scale_value = previous * factor  # this kind left in Python's float64

    return Core


def _every_interval(count, interval):
    return count % interval == 0  # grows on time, but the count never restarts


WRONG = [
    ("no inf check", _NoInfCheck, "returned False; PyTorch's unscaling finds inf/NaN: True"),
    ("the first tensor only", _FirstTensorOnly, "on an inf in the second tensor returned False"),
    ("multiplied by the scale", _MultipliesByTheScale, "PyTorch's unscaling leaves"),
    (
        "the loss left unscaled",
        _LossUnscaled,
        "scale_value is 65536.0, as PyTorch's update gives, but scale(1.5) returns 1.5; 65536.0 x "
        "1.5 is 98304.0 in float32.",
    ),
    ("the scale never rounded to float32", _Float64Scale, "which is not a float32 number"),
    (
        "the count not restarted on an overflow",
        _update(lambda n, i: n == i, reset_on_inf=False),
        "a growth tracker of 0",
    ),
    ("growth one step late", _update(lambda n, i: n > i), "and good_steps is 3; PyTorch's update"),
    ("the count never restarts", _update(_every_interval), "and a growth tracker of 0"),
    ("growth to inf", _update(lambda n, i: n == i, guard=False), "scale_value is inf and"),
    (
        "growth clamped to float32's largest number",
        _update(lambda n, i: n == i, clamp=True),
        "scale_value is 3.4028234663852886e+38 and good_steps is 0; PyTorch's update "
        "(torch._amp_update_scale_, what GradScaler.update runs) gives a scale of "
        "1.7014118346046923e+38",
    ),
    ("a flag that is a string", _StringFlag, "returned 'False' (a str), not a bool; PyTorch's"),
    # Both passed every seed (a test learner's): scale_value was read for messages only, and
    # every unscaling ran at a scale of 1000, where checking before or after agrees.
    (
        "the scale kept elsewhere",
        _ScaleKeptElsewhere,
        "scale(1.5) applies 131072.0, PyTorch's scale, but scale_value is 65536.0: update() sets "
        "the new S in scale_value",
    ),
    (
        "checked after unscaling",
        _CheckedAfterUnscaling,
        "unscale_grads at a scale of 0.5 on a finite gradient that overflows once unscaled "
        "returned True; PyTorch's unscaling finds inf/NaN: False.",
    ),
    ("new tensors in the list", _ListItemsReplaced, "in the tensors handed in) is 401.638 after"),
    (
        "the scale in fp16",
        _Fp16Scale,
        "scale_value is 65536.0, as PyTorch's update gives, but scale(1.5) returns inf; 65536.0 x "
        "1.5 is 98304.0 in float32.",
    ),
    (
        "the loss scaled as a Python float",
        _ScaledAsFloat,
        "scale(loss) returns a float, not a tensor; GradScaler.scale returns the loss times the "
        "scale as a new tensor in the loss's graph",
    ),
    (
        "the loss scaled in place",
        _ScaledInPlace,
        "scale(loss) changes the loss handed in, 1.5 before the call, to 98304.0;",
    ),
    ("the loss scaled off the graph", _ScaledDetached, "outside the loss's graph (no grad_fn)"),
    ("an overflow counted as clean", _update(lambda n, i: n == i, grow_on_inf=True), "inf]"),
    # Megatron's min_scale and DeepSpeed's min_loss_scale: it passed 25 seeds of 30 (a test
    # learner's) while only unscaling ran at a scale below 1.
    (
        "a scale floored at 1",
        _update(lambda n, i: n == i, floor=1.0),
        "(a scale that falls below 1), after 2 update() call(s), found_inf for the steps: [inf, "
        "inf]: scale_value is 1.0 and good_steps is 0; PyTorch's update",
    ),
    # Seed 0's backoffs (from 1000: 1100 x 0.3) were float32 numbers, so rounding at a growth
    # only passed there, and at a backoff only passed 25 grader seeds of 200.
    ("rounded at a growth only", _rounded_at("growth"), "which is not a float32 number"),
    ("rounded at a backoff only", _rounded_at("backoff"), "which is not a float32 number"),
]
# Words that would name a fix; a message says what differs from PyTorch's.
GUESSES = re.compile(r"should|forgot|instead|you need|try |reset|restart|isfinite|guard", re.I)


@pytest.mark.parametrize("seed", range(1, 41))
def test_a_scale_rounded_at_one_kind_of_update_only_fails_at_every_seed(seed):
    for kind in ("growth", "backoff"):
        assert exercises.verdict(NAME, _rounded_at(kind), seed)[0] == "failed", kind


@pytest.mark.parametrize("label, wrong, says", WRONG, ids=[label for label, *_ in WRONG])
def test_wrong_cores_fail_at_every_seed_saying_what_differs(label, wrong, says):
    verdicts = [exercises.verdict(NAME, wrong, seed) for seed in SEEDS]
    assert all(status == "failed" for status, _ in verdicts), verdicts
    message = verdicts[0][1]
    assert says in message, message
    assert not GUESSES.search(message), message


def test_the_blank_is_not_done():
    class Blank(ScalerCore):
        def scale(self, loss):
            raise NotImplementedError

        def unscale_grads(self, grads):
            raise NotImplementedError

        def update(self, found_inf):
            raise NotImplementedError

    assert exercises.verdict(NAME, Blank)[0] == "not done"
