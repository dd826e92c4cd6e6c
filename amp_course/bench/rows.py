"""One row per measured configuration, for every workload and the ladder alike: what bench.json
stores (``to_dict``) and what every table, plot and results line renders from (``from_dict``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # torch.compile modes that use CUDA graphs
GRAPH_MEMORY_NOTE = (
    "not measured: CUDA graphs run from a private memory pool "
    "that the allocator's peak does not see"
)
# Keys of rows written before this type (the matrix's dicts and the ladder's rows): their names now.
OLD_KEYS = {
    "batch_size": "batch",
    "peak_tflops": "dense_peak_tflops",
    "fraction_of_ceiling": "mfu_of_matmul",
    "matmul_ceiling_tflops": "matmul_peak_tflops",
    "tflops": "achieved_tflops",
    "fraction_of_peak": "mfu",
    "memory_error": "memory_note",
    "rung": "mode",
}


@dataclass(frozen=True)
class Row:
    """What one configuration measured (seconds, bytes, TFLOP/s); ``skipped`` says why not.

    A configuration is a mode (a precision, torch.compile, fused AdamW) plus options: an
    attention kernel, the model, the batch. Figures a workload does not measure stay None.
    """

    workload: str  # "matmul", "mnist_cnn", "vit_b16", "vit_l16", "max_batch" or "ladder"
    mode: str  # the mode's name ("bf16+compile+fused") or the ladder rung's ("+ CUDA graphs")
    precision: str
    compile: str | None = None  # a torch.compile mode ("default", "reduce-overhead"); None: eager
    fused: bool = False  # fused AdamW
    attention: str | None = None  # an SDPA backend ("flash", "efficient", "cudnn", "math")
    model: str = "course"  # "course" (the course's models), "lean" (build_vit(lean=True)), "timm"
    batch: int | None = None
    size: int | None = None  # n of an n x n matmul
    median_s: float | None = None  # the step time (``timing.summarise``'s figures, in seconds)
    p25_s: float | None = None
    p75_s: float | None = None
    iqr_s: float | None = None
    runs: int | None = None
    images_per_s: float | None = None
    epoch_s: float | None = None  # an MNIST epoch at this step time
    steps_per_epoch: int | None = None
    flops_per_step: float | None = None  # for a matmul: its 2 n^3 FLOPs
    achieved_tflops: float | None = None
    dense_peak_tflops: float | None = None  # the published dense peak of the precision
    mfu: float | None = None  # achieved / dense peak
    matmul_peak_tflops: float | None = None  # the best matmul FLOP/s this run measured
    mfu_of_matmul: float | None = None  # achieved / measured matmul peak
    peak_memory_bytes: int | None = None
    memory_note: str | None = None  # why peak_memory_bytes is None for a row that ran
    note: str | None = None  # where what the row measured differs from what its mode says
    max_batch: int | None = None  # the largest batch that fit (the max_batch search)
    limit: int | None = None  # where that search stops
    skipped: str | None = None

    @property
    def timed(self) -> bool:
        """Whether the row holds a step time."""
        return self.median_s is not None

    def to_dict(self) -> dict:
        """The row as bench.json stores it: the figures it has (a key is absent, not None)."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, data: dict) -> Row:
        """A row from bench.json, this type's or an older writer's (``OLD_KEYS``)."""
        # An old ladder row holds its rung twice ("rung" and "mode"): the mode's is kept.
        data = {OLD_KEYS.get(k, k): v for k, v in data.items() if k != "rung" or "mode" not in data}
        names = {f.name for f in fields(cls)}
        if isinstance(data.get("compile"), bool):  # an old matrix row's flag
            data["compile"] = "default" if data["compile"] else None
        if "compile" not in data and "+compile" in data.get("mode", ""):
            data["compile"] = "default"
        if "fused" not in data and "+fused" in data.get("mode", ""):
            data["fused"] = True
        row = cls(**{k: v for k, v in data.items() if k in names})
        # A row written before rows had a memory_note holds the allocator's peak for CUDA-graph
        # steps: a figure far below what they use, never to be shown.
        note = memory_note(row)
        if note and not row.skipped:
            row = replace(row, peak_memory_bytes=None, memory_note=note)
        return row


def timing_fields(stats: dict) -> dict:
    """The Row fields of a ``timing.summarise`` dict (its mean is left out)."""
    return {key: stats[key] for key in ("median_s", "p25_s", "p75_s", "iqr_s", "runs")}


def memory_note(row) -> str | None:
    """Why a step (a Row or a Configuration) gets no peak memory; None: it gets one."""
    # A replayed CUDA graph allocates nothing through the caching allocator: its activations live
    # in the graphs' private pool, which cudagraph trees share among every graph recorded so far
    # (earlier rungs' too), so neither the allocator's peak nor the pool's size is this step's.
    return GRAPH_MEMORY_NOTE if row.compile in CUDA_GRAPH_MODES else None


def load(report: dict | str | Path, workload: str) -> list[Row]:
    """The rows of ``workload`` in a bench report (the dict, or its bench.json's path)."""
    if not isinstance(report, dict):
        report = json.loads(Path(report).read_text())
    return [Row.from_dict(row) for row in report["results"].get(workload, [])]
