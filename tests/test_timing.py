import contextlib
import statistics
import time
from unittest import mock

import pytest
import torch

from amp_course import simulated_queue, timing


def test_measure_reports_median_and_spread_of_a_known_sleep():
    slept = []  # what each call timed itself: the reference, hit by the machine's load alike

    def nap():
        start = time.perf_counter()
        time.sleep(0.01)
        slept.append(time.perf_counter() - start)

    s = timing.summarise(timing.measure(nap, warmup=1, min_run_time=0.1))
    assert s["iqr_s"] >= 0 and s["runs"] == 7
    assert s["median_s"] >= 0.01  # a sleep lasts at least as long as asked
    # Every call does the same; torch's Timer adds untimed warm-up calls of its own.
    assert s["median_s"] == pytest.approx(statistics.median(slept), rel=0.2)


def test_measure_agrees_with_torch_benchmark_on_a_matmul():
    """measure against torch.utils.benchmark's Timer on the same matmul, both reading the thread's
    CPU time: on a loaded machine other processes then take wall time from neither."""
    a = torch.randn(512, 512)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the matmul runs in this thread, whose CPU time the clocks read
    try:
        reference_timer = torch.utils.benchmark.Timer(
            "a @ a", globals={"a": a}, num_threads=1, timer=time.thread_time
        )
        ours, reference = [], []

        def run_ours():
            with mock.patch("time.perf_counter", time.thread_time):  # measure's clock
                ours.extend(
                    timing.measure(lambda: a @ a, warmup=1, min_run_time=0.06, repeats=3).times
                )

        def run_reference():
            a @ a  # the same one-call warm-up measure does
            reference.extend(reference_timer.timeit(2).median for _ in range(3))

        # Short rounds, alternating which method goes first, so changes in cache state hit both
        # alike; compare the medians of all the blocks.
        for round_index in range(11):
            for run in (run_ours, run_reference)[:: 1 if round_index % 2 else -1]:
                run()
    finally:
        torch.set_num_threads(threads)
    # A bug (calls miscounted, warm-up timed, the clock read twice per call) is off by a factor.
    ratio = statistics.median(ours) / statistics.median(reference)
    assert 0.75 < ratio < 1.33, ratio


def test_format_time():
    assert timing.format_time(0.0123) == "12.3 ms"
    assert timing.format_time(2.5) == "2.5 s"
    assert timing.format_time(3e-6) == "3 µs"


def test_measure_synchronises_a_cuda_device():
    with mock.patch("torch.cuda.synchronize") as sync:
        timing.measure(lambda: None, device="cuda", warmup=1, min_run_time=0.01, repeats=2)
    assert sync.call_count >= 3  # after warm-up and at every clock reading
    assert all(call.args[0] == torch.device("cuda") for call in sync.call_args_list)


def test_an_unsynchronised_timer_lies_and_measure_does_not():
    queue = simulated_queue.SimulatedQueue(
        virtual=True
    )  # its own clock: exact whatever the machine's load

    def step():  # returns at once; its 3 ms of work runs "on the GPU"
        queue.launch(0.003)

    with queue.as_cuda():
        start = time.perf_counter()
        for _ in range(10):
            step()
        naive = (time.perf_counter() - start) / 10
        queue.synchronize()
        measured = timing.measure(step, device="cuda", warmup=1, min_run_time=0.06, repeats=3)
    # Synchronised clock readings wait for all queued work, so each call counts its 3 ms, once;
    # the naive timer saw only the launches, which take no time on the queue's clock.
    assert measured.median == pytest.approx(0.003) and len(measured.times) == 3
    assert naive == 0


def test_round_robin_drops_a_function_that_fails_and_keeps_the_others():
    entered = {"steady": 0, "flaky": 0}

    @contextlib.contextmanager
    def per_measurement(name):  # what the benchmark uses to set a mode's precision flags
        entered[name] += 1
        yield

    def flaky():  # works in the first round, then breaks (as an out-of-memory error would)
        if entered["flaky"] >= 2:
            raise RuntimeError("kernel failed\nsecond line of the error")

    measured, failed = timing.round_robin(
        {"steady": lambda: None, "flaky": flaky},
        device="cpu",
        rounds=3,
        min_run_time=0.003,
        context=per_measurement,
    )
    assert set(measured) == {"steady"} and len(measured["steady"].times) == 9  # 3 rounds x 3
    assert failed == {"flaky": "RuntimeError: kernel failed"}  # its first round is dropped too
    assert entered == {"steady": 3, "flaky": 2}  # once failed, it is not run again


def test_round_robin_reports_a_failure_without_a_message():
    """A bare ``assert`` deep in a compiler raises an error with no message: still one line."""

    def broken():
        raise AssertionError

    measured, failed = timing.round_robin(
        {"steady": lambda: None, "broken": broken}, device="cpu", rounds=1, min_run_time=0.003
    )
    assert set(measured) == {"steady"} and failed == {"broken": "AssertionError: "}


def _runs(*seconds):
    spec = torch.utils.benchmark.utils.common.TaskSpec("fn()", "pass")
    return torch.utils.benchmark.Measurement(1, list(seconds), spec)


def test_compare_ranks_only_outside_the_spread():
    base = _runs(1.0, 1.1, 1.2, 1.3, 1.4)
    faster = timing.compare(base, _runs(0.5, 0.55, 0.6, 0.65, 0.7), ("fp32", "bf16"))
    assert faster.verdict == "faster" and faster.ratio == pytest.approx(0.6 / 1.2)
    assert "bf16 is faster than fp32" in faster.sentence() and "0.50x" in faster.sentence()
    close = timing.compare(base, _runs(1.05, 1.15, 1.2, 1.25, 1.35))
    assert close.verdict == "indistinguishable" and "not distinguishable" in close.sentence()
    slower = timing.compare(timing.summarise(base), timing.summarise(_runs(2, 2.1, 2.2, 2.3, 2.4)))
    assert slower.verdict == "slower" and slower.distinguishable


def test_summarise_reports_the_quartiles():
    s = timing.summarise(_runs(1.0, 2.0, 3.0, 4.0, 5.0))
    assert (s["p25_s"], s["median_s"], s["p75_s"]) == (2.0, 3.0, 4.0) and s["iqr_s"] == 2.0


def test_fake_times_replace_the_measured_ones_but_still_call_the_function(monkeypatch):
    monkeypatch.setenv(timing.FAKE_TIMES_ENV, "fp32=2e-3, bf16=1e-3")
    calls = []
    m = timing.measure(lambda: calls.append(1), warmup=2, description="bf16", repeats=4)
    assert m.times == [1e-3] * 4 and len(calls) == 1
    measured, _ = timing.round_robin(
        {"fp32": lambda: None, "fp16": lambda: None}, device="cpu", rounds=2, min_run_time=0.002
    )
    assert measured["fp32"].median == 2e-3 and measured["fp16"].median < 1e-3  # fp16: real


def test_a_slow_function_is_timed_one_call_per_run_without_extra_calls():
    """A step that fills a run by itself (bf16 emulated on a CPU) costs warm-up + repeats calls,
    the call that sized the runs timed as the first: torch's Timer.timeit would add two untimed
    calls to every run."""
    queue = simulated_queue.SimulatedQueue(virtual=True)
    calls = []

    def step():  # 50 ms of queued work: more than min_run_time / repeats
        calls.append(1)
        queue.launch(0.05)

    with queue.as_cuda():
        measured = timing.measure(step, device="cuda", warmup=2, min_run_time=0.03, repeats=3)
    assert len(calls) == 2 + 3
    assert measured.times == pytest.approx([0.05] * 3)


def test_round_robin_takes_the_warmup_and_repeats_asked_for():
    calls = {"a": 0, "b": 0}
    queue = simulated_queue.SimulatedQueue(virtual=True)

    def step(name):
        def run():
            calls[name] += 1
            queue.launch(0.05)

        return run

    with queue.as_cuda():
        measured, failed = timing.round_robin(
            {"a": step("a"), "b": step("b")},
            device="cuda",
            rounds=3,
            min_run_time=0.01,
            warmup=1,
            repeats=1,
        )
    assert not failed and len(measured["a"].times) == len(measured["b"].times) == 3
    assert calls == {"a": 3 * (1 + 1), "b": 6}  # per round: a warm-up, then the timed run
    calls.update(a=0, b=0)
    with queue.as_cuda():  # warm already (a slow step just trained): no untimed call at all
        measured, _ = timing.round_robin(
            {"a": step("a"), "b": step("b")},
            device="cuda",
            rounds=3,
            min_run_time=0.01,
            warmup=0,
            repeats=1,
        )
    assert calls == {"a": 3, "b": 3} and len(measured["a"].times) == 3


def test_a_virtual_queue_is_every_wall_clock_and_a_cuda_device_inside_as_cuda():
    import timeit

    real = {name: getattr(time, name) for name in simulated_queue.SimulatedQueue.WALL_CLOCKS}
    has_cuda = torch.cuda.is_available()
    queue = simulated_queue.SimulatedQueue(virtual=True)
    with queue.as_cuda():
        assert torch.cuda.is_available() and torch.accelerator.is_available()
        queue.launch(0.25)
        torch.accelerator.synchronize()  # waits for the queue, as torch.cuda.synchronize does
        assert time.perf_counter() == time.monotonic() == time.time() == timeit.default_timer()
        assert time.perf_counter() == 0.25 and time.perf_counter_ns() == 250_000_000
        assert time.monotonic_ns() == time.time_ns() == 250_000_000
    assert {name: getattr(time, name) for name in real} == real
    assert timeit.default_timer is time.perf_counter and torch.cuda.is_available() == has_cuda


@pytest.mark.parametrize(
    "other, verdict",
    [
        ((0.5, 0.55, 0.6, 0.65, 0.7), "faster"),  # every run below the baseline's
        ((1.5, 1.6, 1.7, 1.8, 1.9), "slower"),
        ((1.0, 1.1, 1.2, 1.3, 1.4), "indistinguishable"),  # the same runs
        ((0.9, 1.0, 1.1, 1.3, 1.5), "indistinguishable"),  # medians apart, quartiles overlap
        ((0.6, 0.8, 0.9, 1.1, 1.2), "indistinguishable"),  # its 75th percentile = base's 25th
        ((1.31, 1.32, 1.33, 1.34, 1.35), "slower"),  # 11% apart, tight: told apart
        ((1.16, 1.17, 1.18, 1.19, 1.6), "indistinguishable"),  # 2% apart: inside the spread
    ],
)
def test_the_one_verdict_rule_is_interquartile_overlap(other, verdict):
    """Faster or slower only where the middle halves of the runs do not overlap; any ratio,
    however far from 1, inside the spread ranks nothing, and no fixed +-x% margin decides."""
    base = _runs(1.0, 1.1, 1.2, 1.3, 1.4)  # quartiles 1.1 and 1.3
    speed = timing.compare(base, _runs(*other), ("fp32", "bf16"))
    assert speed.verdict == verdict, (speed, timing.quartiles(_runs(*other)))
    assert speed.ratio == pytest.approx(torch.tensor(other).median().item() / 1.2)
    assert ("not distinguishable" in speed.sentence()) == (verdict == "indistinguishable")
