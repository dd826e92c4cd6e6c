import math
import time

import pytest

from amp_course import exercises, timing
from amp_course.exercises import ExerciseFailed, lesson_05


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda f, s, p: 100 * f / s / (p * 1e12), "fraction"),
        (lambda f, s, p: f / s / p, "1e12"),
        (lambda f, s, p: f * s / (p * 1e12), "expected"),
    ],
)
def test_mfu_wrong_answers_fail(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check("05.mfu", wrong)


def _no_sync(fn, device, warmup=3, iters=10):
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


def _no_warmup(fn, device, warmup=3, iters=10):
    start = time.perf_counter()
    for _ in range(warmup + iters):
        fn()
    timing.synchronize(device)
    return (time.perf_counter() - start) / iters


def _sync_only_at_end_with_first_call(fn, device, warmup=3, iters=10):
    timing.synchronize(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    timing.synchronize(device)
    return (time.perf_counter() - start) / iters


def _sync_only_when_cuda_is_available(fn, device, warmup=3, iters=10):
    import torch

    for _ in range(warmup):
        fn()
    if torch.cuda.is_available():  # False on the check's simulated GPU: it never waits
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / iters


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_timer_failure_names_the_allowed_synchronisation():
    allowed = r"only sees torch\.cuda\.synchronize\(device\).*is_available"
    with pytest.raises(ExerciseFailed, match=allowed):
        exercises.check("05.timer", _sync_only_when_cuda_is_available)


def _no_divide(fn, device, warmup=3, iters=10):
    for _ in range(warmup):
        fn()
    timing.synchronize(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    timing.synchronize(device)
    return time.perf_counter() - start  # the total, not per call


def _no_sync_after_warmup(fn, device, warmup=3, iters=10):
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    timing.synchronize(device)
    return (time.perf_counter() - start) / iters


def _another_clock(fn, device, warmup=3, iters=10):
    for _ in range(warmup):
        fn()
    timing.synchronize(device)
    start = time.monotonic()
    for _ in range(iters):
        fn()
    timing.synchronize(device)
    return (time.monotonic() - start) / iters


def _on_a_loaded_machine(fn, device, warmup=3, iters=10):
    """The reference, on a machine so busy that every call takes far longer than the GPU work."""

    def slow():
        time.sleep(0.01)  # the Python side of each step waits on other processes
        fn()

    for _ in range(warmup):
        slow()
    timing.synchronize(device)
    start = time.perf_counter()
    for _ in range(iters):
        slow()
    timing.synchronize(device)
    return (time.perf_counter() - start) / iters


def test_a_correct_timer_passes_on_a_loaded_machine():
    # The check's simulated GPU keeps its own time: the host's delays are not GPU time.
    assert exercises.check("05.timer", _on_a_loaded_machine)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_no_sync, "before the work finished"),
        (_no_warmup, "queued before the clock started"),
        (_no_sync_after_warmup, "Synchronise after the warm-up"),
        (_sync_only_at_end_with_first_call, "run 12 times"),
        (_no_divide, "exactly iters = 10 times too much.*divide by iters"),
        (_another_clock, r"never called time\.perf_counter"),
    ],
)
def test_timer_wrong_answers_fail(wrong, message):
    with pytest.raises(ExerciseFailed, match=message) as failure:
        exercises.check("05.timer", wrong)
    if wrong is _no_divide:
        assert "first call" not in str(failure.value)


# ---- Will it fit? -----------------------------------------------------------------------------
def _batch(state=16, copies=2, halve=False, floor=math.floor, clamp=True):
    def largest_batch(num_params, fp32_bytes, ratio, memory, amp):
        fixed = num_params * (state + (copies if amp else 0))
        per_sample = fp32_bytes * ((0.5 if halve else ratio) if amp else 1)
        batch = floor((memory - fixed) / per_sample)
        return max(0, batch) if clamp else batch

    return largest_batch


def test_largest_batch_own_formula_passes():
    assert exercises.check("05.largest_batch", _batch())


def test_largest_batch_cases_include_one_where_amp_fits_fewer():
    reference = exercises.solution("05.largest_batch")
    cases = lesson_05.fit_cases(0)
    assert any(reference(*c, True) < reference(*c, False) for c in cases)  # weights dominate
    assert any(reference(*c, True) > reference(*c, False) for c in cases)  # activations do
    assert any(reference(*c, True) == reference(*c, False) == 0 for c in cases)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_batch(copies=0), "16-bit weight copies"),
        (_batch(state=8), "16 bytes per parameter"),
        (_batch(halve=True), "measured ratio, not by half"),
        (_batch(floor=lambda x: x), "round down|return an int"),
        (_batch(clamp=False), "when nothing fits, return 0"),
    ],
)
def test_largest_batch_mistakes_are_diagnosed(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check("05.largest_batch", wrong)
