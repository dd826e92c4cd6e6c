import time

import torch

from amp_course import timing


def test_measure_reports_median_and_spread_of_a_known_sleep():
    m = timing.measure(lambda: time.sleep(0.01), warmup=1, min_run_time=0.1)
    s = timing.summarise(m)
    assert 0.009 < s["median_s"] < 0.03
    assert s["iqr_s"] >= 0 and s["runs"] == 7


def test_measure_agrees_with_torch_benchmark_on_a_matmul():
    a = torch.randn(512, 512)
    reference_timer = torch.utils.benchmark.Timer("a @ a", globals={"a": a},
                                                  num_threads=torch.get_num_threads())
    # Interleave the two methods so a change in machine load hits both alike.
    ours, reference = [], []
    for _ in range(3):
        ours.append(timing.measure(lambda: a @ a, min_run_time=0.2).median)
        reference.append(reference_timer.blocked_autorange(min_run_time=0.2).median)
    ours, reference = sorted(ours)[1], sorted(reference)[1]
    assert abs(ours - reference) / reference < 0.10


def test_format_time():
    assert timing.format_time(0.0123) == "12.3 ms"
    assert timing.format_time(2.5) == "2.5 s"
    assert timing.format_time(3e-6) == "3 µs"


def test_compare_table_names_each_measurement():
    a = torch.randn(64, 64)
    ms = [timing.measure(lambda: a @ a, min_run_time=0.05, label="mm", description=d)
          for d in ("first", "second")]
    table = timing.compare_table(ms)
    assert "first" in table and "second" in table
