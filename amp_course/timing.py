"""Timing: warmed-up, synchronised measurements with median and spread, built on
torch.utils.benchmark.

Measuring (``measure``, and ``round_robin`` for several functions interleaved), the result
(torch's ``Measurement``; ``Comparison`` of two of them) and presenting (``summarise``,
``format_time``, ``Comparison.sentence``) are kept apart, as torch.utils.benchmark does.
``ac.simulated_queue`` stands in for a GPU's asynchronous stream, so a CPU can show why a timer
must synchronise.

Tests make a lesson's timings come out either way with ``$AMP_COURSE_FAKE_TIMES``
(``"fp32=1e-3,bf16=5e-4"``): a measurement whose ``description`` is named there still calls its
function once, then reports that many seconds per call for every run (no spread).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
from torch.utils import benchmark
from torch.utils.benchmark.utils.common import TaskSpec

from .display import error_line
from .env_vars import FAKE_TIMES

FAKE_TIMES_ENV = FAKE_TIMES


def fake_seconds(description: str) -> float | None:
    """Seconds per call ``$AMP_COURSE_FAKE_TIMES`` sets for measurements named ``description``."""
    for item in os.environ.get(FAKE_TIMES_ENV, "").split(","):
        name, _, value = item.partition("=")
        if description and name.strip() == description and value.strip():
            return float(value)
    return None


def synchronize(device: torch.device | str) -> None:
    """Wait for queued GPU work; a no-op on CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    fn: Callable[[], object],
    *,
    device: torch.device | str = "cpu",
    warmup: int = 3,
    min_run_time: float = 0.2,
    repeats: int = 7,
    label: str = "",
    sub_label: str = "",
    description: str = "",
) -> benchmark.Measurement:
    """Time ``fn()`` after ``warmup`` untimed calls; returns a Measurement (median, IQR, all runs).

    Every clock reading first synchronises ``device`` (CUDA kernels run asynchronously: a timer
    that does not wait for them measures only the launch), so queued kernels are counted; we pass
    this clock to torch.utils.benchmark.Timer explicitly rather than rely on its default, which
    synchronises the current accelerator whenever one is available, not ``device``. The explicit
    warm-up pays for allocation, kernel selection and (with torch.compile) compilation before
    timing starts. We take
    ``repeats`` runs of a fixed number of calls (sized so all runs together last about
    ``min_run_time``) and merge them, so the spread is always measured: ``blocked_autorange``
    can return a single block for slow functions. A function whose one call fills a run is timed
    one call per run, by the same clock, the call that sized the runs being the first:
    ``Timer.timeit`` would add two untimed warm-up calls to every run, tripling what a slow step
    (bf16 emulated on a CPU) costs to time.
    """
    faked = fake_seconds(description)
    for _ in range(1 if faked is not None else warmup):
        fn()
    synchronize(device)
    names = dict(label=label, sub_label=sub_label, description=description)
    threads = torch.get_num_threads()
    spec = TaskSpec("fn()", "pass", num_threads=threads, **names)
    if faked is not None:
        return benchmark.Measurement(1, [faked] * repeats, spec)

    def clock() -> float:
        synchronize(device)
        return time.perf_counter()

    def one_call() -> float:
        start = clock()
        fn()
        return clock() - start

    probe = one_call()
    number = max(1, int(min_run_time / repeats / max(probe, 1e-9)))
    if number == 1:  # the probe, a warm call timed by the same clock, is the first run
        return benchmark.Measurement(1, [probe, *(one_call() for _ in range(repeats - 1))], spec)
    timer = benchmark.Timer("fn()", globals={"fn": fn}, num_threads=threads, timer=clock, **names)
    runs = [timer.timeit(number) for _ in range(repeats)]
    return benchmark.Measurement.merge(runs)[0]


def round_robin(
    fns: dict[str, Callable[[], object]],
    *,
    device,
    rounds: int,
    min_run_time: float,
    label: str = "",
    context: Callable[[str], AbstractContextManager] | None = None,
    warmup: int = 3,
    repeats: int = 3,
) -> tuple[dict[str, benchmark.Measurement], dict[str, str]]:
    """Time each ``fns[name]`` round-robin (A/B interleaved); a function that raises is dropped.

    Each round measures every function once (``repeats`` runs, after ``warmup`` untimed calls in
    the first round and one in later rounds, none with ``warmup=0``: functions too slow to call
    untimed, already warm), so drift in machine load or clocks hits them all
    alike; ``context(name)``, when given, is entered around each measurement (e.g. a mode's
    precision flags). Returns ({name: merged Measurement}, {name: why it failed}).
    """
    runs: dict[str, list[benchmark.Measurement]] = {name: [] for name in fns}
    failed: dict[str, str] = {}
    for round_index in range(rounds):
        for name, fn in fns.items():
            if name in failed:
                continue
            try:
                with context(name) if context else contextlib.nullcontext():
                    runs[name].append(
                        measure(
                            fn,
                            device=device,
                            warmup=warmup if round_index == 0 else min(warmup, 1),
                            min_run_time=min_run_time,
                            repeats=repeats,
                            label=label,
                            description=name,
                        )
                    )
            except Exception as error:  # noqa: BLE001 - report the function as failed, never crash
                failed[name] = error_line(error)
    merged = {
        name: benchmark.Measurement.merge(ms)[0]
        for name, ms in runs.items()
        if ms and name not in failed
    }
    return merged, failed


def quartiles(result: benchmark.Measurement | dict) -> tuple[float, float, float]:
    """(25th percentile, median, 75th percentile) of a Measurement's runs or of ``summarise``."""
    if isinstance(result, dict):
        return result["p25_s"], result["median_s"], result["p75_s"]
    return quartiles_of(result.times)


def quartiles_of(times) -> tuple[float, float, float]:
    """The same three of raw run times, computed as a ``Measurement`` computes its own."""
    at = torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)
    p25, median, p75 = torch.tensor(sorted(times), dtype=torch.float64).quantile(at).tolist()
    return p25, median, p75


def summarise(measurement: benchmark.Measurement) -> dict:
    """Median, quartiles, IQR, mean, run count and the raw run times of a Measurement, in seconds,
    as a plain dict."""
    p25, median, p75 = quartiles(measurement)
    return {
        "median_s": median,
        "p25_s": p25,
        "p75_s": p75,
        "iqr_s": measurement.iqr,
        "mean_s": measurement.mean,
        "runs": len(measurement.times),
        "times_s": tuple(measurement.times),
    }


@dataclass(frozen=True)
class Comparison:
    """How ``other`` compares with ``baseline``: their ratio, and whether the runs tell them apart.

    Two timings are told apart only when their interquartile ranges (the middle half of each one's
    runs) do not overlap; a ratio inside the noise ranks nothing.
    """

    baseline: str
    other: str
    ratio: float  # other's median time / baseline's
    distinguishable: bool

    @property
    def verdict(self) -> str:
        """ "faster", "slower" or "indistinguishable": ``other`` against ``baseline``."""
        if not self.distinguishable:
            return "indistinguishable"
        return "faster" if self.ratio < 1 else "slower"

    def sentence(self) -> str:
        """The comparison in words, with the ratio."""
        ratio = f"{self.other} takes {self.ratio:.2f}x the {self.baseline} time"
        if not self.distinguishable:
            return (
                f"{self.other} and {self.baseline} are not distinguishable here: {ratio}, "
                "within the spread of the runs (their interquartile ranges overlap)"
            )
        return (
            f"{self.other} is {self.verdict} than {self.baseline} here: {ratio}, outside the "
            "spread of the runs (their interquartile ranges do not overlap)"
        )


def compare(baseline, other, names: tuple[str, str] = ("baseline", "other")) -> Comparison:
    """Compare two timings (Measurements or ``summarise`` dicts) by median and quartiles."""
    low_b, median_b, high_b = quartiles(baseline)
    low_o, median_o, high_o = quartiles(other)
    apart = high_o < low_b or low_o > high_b
    return Comparison(names[0], names[1], median_o / median_b, apart)


def format_time(seconds: float) -> str:
    """``0.0123`` -> ``"12.3 ms"``."""
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= factor:
            return f"{seconds / factor:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_cell(value, spec: str) -> str:
    """A measured value in a table: ``"-"`` when missing, ``format_time`` for the spec ``"time"``,
    else ``format(value, spec)``."""
    if value is None:
        return "-"
    return format_time(value) if spec == "time" else format(value, spec)
