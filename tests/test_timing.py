import statistics
import time
from unittest import mock

import pytest
import torch

from amp_course import timing


def test_measure_reports_median_and_spread_of_a_known_sleep():
    m = timing.measure(lambda: time.sleep(0.01), warmup=1, min_run_time=0.1)
    s = timing.summarise(m)
    assert 0.009 < s["median_s"] < 0.03
    assert s["iqr_s"] >= 0 and s["runs"] == 7


def test_measure_agrees_with_torch_benchmark_on_a_matmul():
    a = torch.randn(512, 512)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a shared machine, threads fighting for cores add noise
    try:
        reference_timer = torch.utils.benchmark.Timer("a @ a", globals={"a": a}, num_threads=1)
        ours, reference = [], []

        def run_ours():
            ours.extend(timing.measure(lambda: a @ a, warmup=1, min_run_time=0.06, repeats=3).times)

        def run_reference():
            a @ a  # the same one-call warm-up measure does
            reference.extend(reference_timer.timeit(2).median for _ in range(3))

        # Short rounds, alternating which method goes first, so changes in machine load and
        # cache state hit both alike; compare the medians of all the blocks.
        for round_index in range(11):
            for run in (run_ours, run_reference)[:: 1 if round_index % 2 else -1]:
                run()
    finally:
        torch.set_num_threads(threads)
    ratio = statistics.median(ours) / statistics.median(reference)
    assert abs(ratio - 1) < 0.05, ratio


def test_format_time():
    assert timing.format_time(0.0123) == "12.3 ms"
    assert timing.format_time(2.5) == "2.5 s"
    assert timing.format_time(3e-6) == "3 µs"


def test_compare_table_names_each_measurement():
    a = torch.randn(64, 64)
    ms = [
        timing.measure(lambda: a @ a, min_run_time=0.05, label="mm", description=d)
        for d in ("first", "second")
    ]
    table = timing.compare_table(ms)
    assert "first" in table and "second" in table


def test_measure_synchronises_a_cuda_device():
    with mock.patch("torch.cuda.synchronize") as sync:
        timing.measure(lambda: None, device="cuda", warmup=1, min_run_time=0.01, repeats=2)
    assert sync.call_count >= 3  # after warm-up and at every clock reading
    assert all(call.args[0] == torch.device("cuda") for call in sync.call_args_list)


def test_an_unsynchronised_timer_lies_and_measure_does_not():
    queue = timing.SimulatedQueue()

    def step():  # returns at once; its 3 ms of work runs "on the GPU"
        queue.launch(0.003)

    with queue.as_cuda():
        start = time.perf_counter()
        for _ in range(10):
            step()
        naive = (time.perf_counter() - start) / 10
        queue.synchronize()
        measured = timing.measure(step, device="cuda", warmup=1, min_run_time=0.06, repeats=3)
    assert naive < 0.001
    assert measured.median == pytest.approx(0.003, rel=0.3)
