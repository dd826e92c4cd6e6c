"""The MFU ladder: one ViT-B/16 training step in the device's AMP dtype, made faster rung by rung
(fused AdamW, torch.compile, CUDA graphs, max-autotune, a larger batch, another attention kernel),
with the course's lean ViT-B/16 (``models.build_vit(lean=True)``) and timm's under the same
settings timed in the same round-robin.

Each rung is a ``variant.Variant`` (a precision plus options), stepped by the bench's
one ``trainer.Trainer`` and skipped by its one ``skip_reason``; it gives a ``rows.Row``, the row
every bench workload gives: step time, images/s, MFU against the published dense peak and against
this run's measured matmul peak, and peak memory (``trainer.peak_memory``; not for rungs run from
CUDA graphs: ``Variant.memory_note`` says why). ``amp-course bench --workloads ladder`` saves
them in ``results["ladder"]`` of bench.json; ``ladder_report`` renders tables and charts from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from .. import models, precisions, timing
from ..device import device_name, pick_precision
from ..display import error_line
from ..flops import count_step_flops, measure_matmul_flops
from ..gpus import peak_tflops
from ..memory import OutOfMemoryError
from .rows import Row, timing_fields
from .timm_vit import build_timm_vit
from .trainer import Trainer, flags, model_image_size, recompile_limit_line, time_steps
from .variant import CUDA_GRAPH_MODES, GRAPH_MEMORY_NOTE, Variant, skip_reason

__all__ = ["CUDA_GRAPH_MODES", "GRAPH_MEMORY_NOTE", "LadderConfig", "run"]


@dataclass
class LadderConfig:
    """The ladder's sizes; ``smoke()`` shrinks the ViT for a CPU (say so wherever it is shown)."""

    precision: precisions.Precision = precisions.BF16  # a row; a name given is read into one
    batch: int = 64
    big_batch: int = 256
    vit_overrides: dict = field(default_factory=dict)  # build_vit("b16", **overrides)
    timm: bool = True  # time timm's ViT beside the course's eager and compiled rungs
    lean: bool = True  # and the lean ViT (the course's with timm's attention path) beside them
    rungs: tuple[str, ...] | None = None  # names to run; None: all
    rounds: int = 3
    min_run_time: float = 0.5
    # Untimed calls before timing, after each rung's own warm step (``_warm``): a compiled step's
    # caches and CUDA graphs settle over a few. Smoke's ladder shows mechanics, not figures: 1.
    warmup: int = 3
    matmul_size: int = 8192  # the square matmul whose FLOP/s is the measured peak
    matmul_peak_tflops: float | None = None  # a peak measured already (None: measure it)
    smoke: bool = False

    @classmethod
    def smoke_config(cls, **changes) -> LadderConfig:
        tiny = dict(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64)
        base = cls(
            batch=8,
            big_batch=32,
            vit_overrides={**tiny, "mlp_dim": 128},
            rounds=2,
            min_run_time=0.02,
            warmup=1,
            matmul_size=256,
            smoke=True,
        )
        return replace(base, **changes)

    def __post_init__(self):
        self.precision = precisions.get(self.precision)

    @classmethod
    def from_bench(cls, config, device, matmul_peaks: dict[str, float]) -> LadderConfig:
        """The ladder's sizes for a bench run (``amp-course bench --workloads ladder``), in the
        device's AMP precision, against the matmul peak the run measured for it, if any."""
        make = cls.smoke_config if config.smoke else cls
        precision = pick_precision(device, warn=False)
        return make(
            precision=precision,
            rounds=config.rounds,
            min_run_time=config.min_run_time,
            rungs=config.ladder_rungs,
            matmul_peak_tflops=matmul_peaks.get(precision.name),
        )

    def changes(self) -> list[tuple[str, dict]]:
        """Each rung's name and what it changes in the rung it builds on."""
        return [
            ("eager", {}),
            ("+ fused AdamW", {"fused": True}),
            ("+ torch.compile", {"compile": "default"}),
            ("+ CUDA graphs", {"compile": "reduce-overhead"}),
            ("+ max-autotune", {"compile": "max-autotune"}),
            (f"+ batch {self.big_batch}", {"batch": self.big_batch}),
            ("+ flash attention", {"attention": "flash"}),
        ]

    def check_rungs(self) -> None:
        """A clear error for a chosen rung that is none of the ladder's (before anything runs)."""
        names = [name for name, _ in self.changes()]
        twins = {f"{model}: {n}" for model in ("lean", "timm") for n in TIMM_TWINS}
        unknown = set(self.rungs or ()) - set(names) - twins
        if unknown:
            raise ValueError(f"Unknown rung(s) {sorted(unknown)}. Valid: {', '.join(names)}.")

    def rungs_for(self, device: torch.device) -> list[tuple[Variant, str | None]]:
        """Every chosen rung with why it cannot run here (None: it can).

        Each rung adds its change to the last chosen rung that can run, so on a CPU, where
        nothing is compiled, "+ batch N" is the eager step with fused AdamW at the larger batch.
        """
        device = torch.device(device)
        self.check_rungs()
        current, chosen = Variant("eager", self.precision, batch=self.batch), []
        for name, change in self.changes():
            rung = replace(current, label=name, **change)
            reason = skip_reason(rung, device, self.smoke)
            if self.rungs is None or name in self.rungs:
                current = current if reason else rung
                chosen.append((rung, reason))
        originals = [pair for pair in chosen if pair[0].label in TIMM_TWINS]
        for model in [m for m, wanted in (("lean", self.lean), ("timm", self.timm)) if wanted]:
            for rung, reason in originals:
                twin = replace(rung, label=f"{model}: {rung.label}", model=model)
                if self.rungs is None or twin.label in self.rungs:
                    chosen.append((twin, reason or skip_reason(twin, device, self.smoke)))
        return chosen


# The rungs timed with the lean ViT and timm's too: eager, and compiled with fused AdamW.
TIMM_TWINS = ("eager", "+ torch.compile")


def build(config: LadderConfig):
    """The ladder's ``Trainer.build``: a ViT-B/16 of ``kind`` ("course", "lean" or "timm") shaped
    by ``vit_overrides``."""

    def build_kind(kind: str) -> torch.nn.Module:
        if kind == "timm":
            return build_timm_vit("b16", **config.vit_overrides)
        return models.build_vit("b16", lean=kind == "lean", **config.vit_overrides)

    return build_kind


def _flops_per_image(build, size: int) -> int:
    return count_step_flops(build, (1, 3, size, size), 1000)[1]


def run(config: LadderConfig, device, progress=print) -> list[Row]:
    """Build every rung, warm each up (compiling), measure its peak memory, then time them all
    round-robin, so drift in clocks or load hits every rung alike."""
    device = torch.device(device)
    say = progress or (lambda _: None)
    trainer = Trainer(device, build(config))
    matmul = config.matmul_peak_tflops
    if matmul is None:
        matmul = measure_matmul_flops(device, config.precision, config.matmul_size) / 1e12
    dense = peak_tflops(device_name(device), config.precision.name)
    rows, steps, flops = {}, {}, {}
    for rung, reason in config.rungs_for(device):
        row = Row(
            "ladder", rung, dense_peak_tflops=dense, matmul_peak_tflops=matmul, skipped=reason
        )
        row = replace(row, note=None if reason else autotune_note(rung, device))
        rows[rung.label] = row
        if reason:
            say(f"skip {rung.label}: {reason}")
            continue
        say(f"warm up {rung.label}")
        try:
            steps[rung] = _warm(trainer, rung)
            if rung.model not in flops:
                model = trainer.model(rung.model)
                flops[rung.model] = _flops_per_image(
                    lambda kind=rung.model: trainer.build(kind), model_image_size(model)
                )
            memory = trainer.peak_memory(rung, steps[rung])
            rows[rung.label] = replace(row, peak_memory_bytes=memory, memory_note=rung.memory_note)
        except Exception as error:  # noqa: BLE001 - one rung failing must not stop the ladder
            rows[rung.label] = replace(row, skipped=_failure(error, rung.batch))
            steps.pop(rung, None)
            trainer.clear_state()  # what the failed step left (gradients, optimizer state)
    measured, failed = time_steps(
        steps, device, config.rounds, config.min_run_time, "ladder", warmup=config.warmup
    )
    for name, row in rows.items():
        if name in failed:  # failed while timed: round_robin's "ErrorType: message"
            out_of_memory = failed[name].startswith(f"{OutOfMemoryError.__name__}:")
            skipped = f"out of memory at batch {row.batch}" if out_of_memory else failed[name]
            skipped = recompile_limit_line(failed[name]) or skipped
            rows[name] = replace(row, skipped=skipped)
        if name in measured:
            per_step = flops[row.variant.model] * row.batch
            stats = timing_fields(timing.summarise(measured[name]))
            rows[name] = replace(rows[name], **stats, flops_per_step=per_step)
    return list(rows.values())


def _failure(error: Exception, batch: int) -> str:
    """Why a rung failed, in one line; running out of memory names the batch, and a rung that
    would have run eager says so."""
    if isinstance(error, OutOfMemoryError):
        return f"out of memory at batch {batch}"
    return recompile_limit_line(error) or error_line(error)


# Inductor autotunes GEMM kernels (max-autotune's Triton templates) only on a GPU with at least
# this many SMs ("min_sms ... # 3080" in torch/_inductor/utils.py, is_big_gpu); below it the
# matmuls stay cuBLAS's and the rung measures the rest of max-autotune.
AUTOTUNE_MIN_SMS = 68


def autotune_note(rung: Variant, device: torch.device) -> str | None:
    """What a max-autotune rung measured on a GPU too small for inductor's GEMM autotuning."""
    if rung.compile != "max-autotune" or torch.device(device).type != "cuda":
        return None
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    if sms >= AUTOTUNE_MIN_SMS:
        return None
    return (
        f"matmuls not autotuned: inductor autotunes GEMM kernels only on GPUs with at least "
        f"{AUTOTUNE_MIN_SMS} SMs (torch._inductor.utils.is_big_gpu), this one has {sms}"
    )


def _warm(trainer: Trainer, rung: Variant):
    step = trainer.step(rung)
    # Compiling happens on the first call; CUDA graphs are recorded on a later one.
    with flags(rung):
        for _ in range(3 if rung.compile else 1):
            step()
    return step
