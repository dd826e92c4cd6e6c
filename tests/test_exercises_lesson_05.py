import time

import pytest

from amp_course import exercises, timing
from amp_course.exercises import ExerciseFailed


def test_mfu_solution_passes():
    assert exercises.check("05.mfu", exercises.solution("05.mfu"))


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


def test_timer_solution_passes():
    assert exercises.check("05.timer", exercises.solution("05.timer"))


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


@pytest.mark.parametrize(
    "wrong, message",
    [
        (_no_sync, "before the work finished"),
        (_no_warmup, "leaked"),
        (_sync_only_at_end_with_first_call, "run 12 times"),
    ],
)
def test_timer_wrong_answers_fail(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check("05.timer", wrong)
