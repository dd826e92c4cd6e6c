"""One row per measured variant, for every workload and the ladder alike: what bench.json
stores (``to_dict``) and what every table, plot and results line renders from (``from_dict``).

A row holds what was measured (every timed run's seconds, bytes, FLOPs, the peaks it is held
against); what is derived from them (the median and quartiles, TFLOP/s, MFU, images/s, ratios) is
computed here once, as torch.utils.benchmark's ``Measurement`` derives its median. Rows written by
older versions load through one migration, ``from_dict`` (``OLD_KEYS``: the label was "mode", a
ladder row's also "rung"; no run times: the figures they stored), documented in docs/gpu-run.md."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

from .. import precisions
from ..flops import mfu
from ..timing import quartiles_of
from .variant import Variant

# Keys of rows written before this type (the matrix's dicts and the ladder's rows): their names now.
OLD_KEYS = {
    "batch_size": "batch",
    "peak_tflops": "dense_peak_tflops",
    "fraction_of_ceiling": "mfu_of_matmul",
    "matmul_ceiling_tflops": "matmul_peak_tflops",
    "tflops": "achieved_tflops",
    "fraction_of_peak": "mfu",
    "memory_error": "memory_note",
    "rung": "label",
    "mode": "label",
}
# The variant's keys in bench.json (its label is the row's).
VARIANT_KEYS = ("label", "precision", "compile", "fused", "attention", "model", "batch")
# Figures bench.json holds for its readers, derived again from the measured ones on loading.
DERIVED = ("images_per_s", "epoch_s", "achieved_tflops", "mfu", "mfu_of_matmul")


@dataclass(frozen=True)
class Row:
    """What ``variant`` measured on ``workload``; ``skipped`` says why nothing was.

    Figures a workload does not measure stay None, and so do the figures derived from them.
    """

    workload: str  # "matmul", "mnist_cnn", "vit_b16", "vit_l16", "max_batch" or "ladder"
    variant: Variant  # its batch is the row's (None: a matmul, a batch search)
    size: int | None = None  # n of an n x n matmul
    median_s: float | None = None  # the step time (derived from times_s where the row has them)
    p25_s: float | None = None
    p75_s: float | None = None
    iqr_s: float | None = None
    runs: int | None = None
    steps_per_epoch: int | None = None  # MNIST: steps in one pass over its training digits
    flops_per_step: float | None = None  # for a matmul: its 2 n^3 FLOPs
    dense_peak_tflops: float | None = None  # the published dense peak of the precision
    matmul_peak_tflops: float | None = None  # the best matmul TFLOP/s this run measured
    peak_memory_bytes: int | None = None
    memory_note: str | None = None  # why peak_memory_bytes is None for a row that ran
    note: str | None = None  # where what the row measured differs from what its mode says
    max_batch: int | None = None  # the largest batch that fit (the max_batch search)
    limit: int | None = None  # where that search stops
    skipped: str | None = None
    # The measurement: every timed run's seconds, as torch.utils.benchmark's Measurement keeps
    # them. median_s, the quartiles, iqr_s and runs are derived from them; a row written before
    # rows kept their runs (no times_s) keeps the figures it stored.
    times_s: tuple[float, ...] | None = None

    def __post_init__(self):
        if self.times_s is None:
            return
        times = tuple(float(t) for t in self.times_s)
        p25, median, p75 = quartiles_of(times)
        derived = dict(times_s=times, median_s=median, p25_s=p25, p75_s=p75, iqr_s=p75 - p25)
        for name, value in {**derived, "runs": len(times)}.items():
            object.__setattr__(self, name, value)  # a frozen row: its figures follow its runs

    @property
    def label(self) -> str:
        """The variant's label: the first column of every table."""
        return self.variant.label

    @property
    def batch(self) -> int | None:
        return self.variant.batch

    @property
    def timed(self) -> bool:
        """Whether the row holds a step time."""
        return self.median_s is not None

    @property
    def images_per_s(self) -> float | None:
        if self.batch is None or self.median_s is None:
            return None
        return self.batch / self.median_s

    @property
    def epoch_s(self) -> float | None:
        """An MNIST epoch at this step time."""
        if self.steps_per_epoch is None or self.median_s is None:
            return None
        return self.median_s * self.steps_per_epoch

    @property
    def achieved_tflops(self) -> float | None:
        if self.flops_per_step is None or self.median_s is None:
            return None
        return self.flops_per_step / self.median_s / 1e12

    @property
    def mfu(self) -> float | None:
        """The share of the published dense peak the step reached (``flops.mfu``)."""
        return self._utilisation(self.dense_peak_tflops)

    @property
    def mfu_of_matmul(self) -> float | None:
        """The share of this run's measured matmul peak the step reached."""
        return self._utilisation(self.matmul_peak_tflops)

    def _utilisation(self, peak: float | None) -> float | None:
        if not peak or self.flops_per_step is None or self.median_s is None:
            return None
        return mfu(self.flops_per_step, self.median_s, peak)

    @property
    def peak_memory_gib(self) -> float | None:
        return None if self.peak_memory_bytes is None else self.peak_memory_bytes / 2**30

    def time_ratio(self, baseline: Row) -> float:
        """This row's step time over ``baseline``'s."""
        return self.median_s / baseline.median_s

    def speedup_over(self, baseline: Row) -> float:
        """How many times faster this row's step is than ``baseline``'s (its time / this one's)."""
        return baseline.median_s / self.median_s

    def memory_ratio(self, baseline: Row) -> float:
        """This row's peak memory over ``baseline``'s."""
        return self.peak_memory_bytes / baseline.peak_memory_bytes

    def to_dict(self) -> dict:
        """The row as bench.json stores it: the variant's keys, the measured figures and the
        derived ones (for readers of the file); a key is absent, not None."""
        c = self.variant
        names = (c.label, c.precision.name, c.compile, c.fused, c.attention, c.model, c.batch)
        data = {"workload": self.workload, **dict(zip(VARIANT_KEYS, names, strict=True))}
        data |= {f.name: getattr(self, f.name) for f in fields(self)[2:]}
        data |= {key: getattr(self, key) for key in DERIVED}
        return {key: value for key, value in data.items() if value is not None}

    @classmethod
    def from_dict(cls, data: dict) -> Row:
        """A row from bench.json, this type's or an older writer's (``OLD_KEYS``); the derived
        figures it holds are derived again."""
        # An old ladder row holds its label twice ("rung" and "mode"): the mode's is kept.
        data = {OLD_KEYS.get(k, k): v for k, v in data.items() if k != "rung" or "mode" not in data}
        _measured_from_derived(data)
        label, compile_mode = data["label"], data.get("compile")
        if isinstance(compile_mode, bool):  # an old matrix row's flag
            compile_mode = "default" if compile_mode else None
        if "compile" not in data and "+compile" in label:
            compile_mode = "default"
        variant = Variant(
            label,
            precisions.get(data["precision"]),
            compile_mode,
            data.get("fused", "+fused" in label),
            data.get("attention"),
            data.get("model", "course"),
            data.get("batch"),
        )
        names = {f.name for f in fields(cls)} - {"workload", "variant"}
        row = cls(data["workload"], variant, **{k: v for k, v in data.items() if k in names})
        # A row written before rows had a memory_note holds the allocator's peak for CUDA-graph
        # steps: a figure far below what they use, never to be shown.
        note = variant.memory_note
        if note and not row.skipped:
            row = replace(row, peak_memory_bytes=None, memory_note=note)
        return row


def _measured_from_derived(data: dict) -> None:
    """Fill in what an older writer's row measured but stored only as a rate or a share of a peak
    (TFLOP/s without the FLOPs, MFU without the peak), so that its figures derive as stored."""
    tflops, seconds = data.get("achieved_tflops"), data.get("median_s")
    if tflops and seconds and data.get("flops_per_step") is None:
        data["flops_per_step"] = tflops * 1e12 * seconds
    for share, peak in (("mfu", "dense_peak_tflops"), ("mfu_of_matmul", "matmul_peak_tflops")):
        if tflops and data.get(share) and data.get(peak) is None:
            data[peak] = tflops / data[share]


def timing_fields(stats: dict) -> dict:
    """The Row fields of a ``timing.summarise`` dict: its raw run times (the row derives the rest;
    its mean is left out)."""
    return {"times_s": stats["times_s"]}


def load(report: dict | str | Path, workload: str) -> list[Row]:
    """The rows of ``workload`` in a bench report (the dict, or its bench.json's path)."""
    if not isinstance(report, dict):
        report = json.loads(Path(report).read_text())
    return [Row.from_dict(row) for row in report["results"].get(workload, [])]


def matmul_peaks(rows: list[Row]) -> dict[str, float]:
    """The course's one matmul peak: per precision, the best TFLOP/s among the square matmuls a
    run timed, here its ``matmul`` rows, each ``a @ b`` (a ladder run without them, and the
    roofline, time one size with ``flops.measure_matmul_flops``, the best of its layouts)."""
    peaks: dict[str, float] = {}
    for row in rows:
        if row.workload == "matmul" and row.achieved_tflops is not None:
            name = row.variant.precision.name
            peaks[name] = max(peaks.get(name, 0.0), row.achieved_tflops)
    return peaks
