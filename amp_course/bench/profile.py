"""Where a ViT training step's time goes, per precision mode: torch.profiler over the bench's own
step, with the GPU time split into matrix multiplications, attention and everything else, and the
share of the step in which the GPU runs no kernel at all (launch overhead, Python, the optimizer's
host side).

    python -m amp_course.bench.profile --variants fp32,bf16,bf16+compile+fused --out reports/...

It answers the question the bench's MFU column raises: when a step reaches a small fraction of the
peak, is the GPU busy with non-matmul kernels (element-wise work, layer norms, the optimizer), or
idle, waiting for the host?
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from .. import data as _data
from .. import models
from ..device import pick_device
from .trainer import Trainer, flags
from .variant import Variant

# Kernel names by family, matched in lower case. cuBLAS/CUTLASS GEMMs on Hopper appear as
# nvjet_*, sm90_xmma_*, cutlass*gemm*; SDPA's kernels as flash_* / fmha_* / *attention*.
MATMUL_MARKERS = ("gemm", "nvjet", "xmma", "cutlass", "matmul", "cublas")
ATTENTION_MARKERS = ("flash", "fmha", "attention", "attn")


# On a CPU the profiler records ATen operators, not kernels: these do the matrix products.
CPU_MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul")


def kernel_family(name: str) -> str:
    lowered = name.lower()
    if any(marker in lowered for marker in ATTENTION_MARKERS):
        return "attention"
    if any(marker in lowered for marker in MATMUL_MARKERS):
        return "matmul"
    return "other"


def cpu_op_family(name: str) -> str:
    """The family of a CPU ATen operator: attention, matmul (convolutions too) or other."""
    lowered = name.lower()
    if any(marker in lowered for marker in ATTENTION_MARKERS):
        return "attention"
    if name in CPU_MATMUL_OPS or "conv" in lowered:
        return "matmul"
    return "other"


def _cpu_families(prof, steps: int, profiled_step_s: float) -> dict[str, float]:
    """Seconds per step by family of the ATen operators' own CPU time, and the rest of the step.

    Self times do not overlap (a parent's excludes its children's), so they add up; what the
    step took beyond them ran outside ATen operators: Python, the dispatcher, autograd's engine,
    the optimizer's bookkeeping, and the profiler's own cost.
    """
    families: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        if event.key.startswith("aten::"):
            families[cpu_op_family(event.key)] += event.self_cpu_time_total / 1e6 / steps
    families["outside operators"] = max(0.0, profiled_step_s - sum(families.values()))
    return dict(families)


def split(result: dict) -> dict[str, float]:
    """One profiled step's seconds by part, adding up to the step: the families and idle time.

    On a GPU the parts are the kernels' families and the time no kernel ran (against the
    unprofiled step time); on a CPU the operators' families and the time outside them.
    """
    if result["kernel_s"] is None:
        return dict(result["cpu_families_s"])
    idle = max(0.0, result["step_s"] - result["kernel_s"])
    return {**result["families_s"], "GPU idle": idle}


def profile_step(
    variant: Variant,
    device,
    *,
    preset="b16",
    batch=64,
    steps=10,
    warmup=5,
    **overrides,
) -> dict:
    """Profile ``steps`` training steps of ViT ``preset`` in ``variant`` (a matrix cell,
    ``Variant.parse("bf16+compile+fused")``) after ``warmup`` steps.

    Returns the step time without the profiler, the kernels' total time per step by family, the
    GPU's idle share of the step (None on a CPU, which runs no kernels), and the top kernels.
    """
    device = torch.device(device)
    model = models.build_vit(preset, **overrides)
    images, labels = _data.synthetic_images(
        batch,
        image_size=model.image_size,
        channels=model.conv_proj.in_channels,
        num_classes=model.num_classes,
        device=device,
    )
    batches = itertools.repeat((images, labels))
    step = Trainer(device, lambda kind: model).step(variant, batches)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    with flags(variant):
        for _ in range(warmup):  # compiles, cuBLAS heuristics, the allocator's pools
            step()
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        step_s = (time.perf_counter() - start) / steps
        activities = [ProfilerActivity.CPU] + (
            [ProfilerActivity.CUDA] if device.type == "cuda" else []
        )
        # Kineto, torch.profiler's C++ tracer, writes its own lines to the process's stderr (a
        # "profiler_start"/"profiler_stop" pair, and on a CUDA build without a GPU an ERROR that
        # it found none), which a notebook shows under the cell. It reads KINETO_LOG_LEVEL when
        # it starts tracing; 9 is above its every level. A level the user set is kept.
        os.environ.setdefault("KINETO_LOG_LEVEL", "9")
        start = time.perf_counter()
        with profile(activities=activities) as prof:
            for _ in range(steps):
                step()
            sync()
        profiled_step_s = (time.perf_counter() - start) / steps

    # Device-side events are kernels, copies and memsets, plus user annotations (the optimizer's
    # "Optimizer.step#AdamW.step" range) that span kernels already counted: those are left out.
    device_events = [
        event
        for event in prof.events()
        if event.device_type == torch.autograd.DeviceType.CUDA
        and not getattr(event, "is_user_annotation", False)
        and not event.name.startswith(("Optimizer.", "ProfilerStep"))
    ]
    kernels: dict[str, float] = defaultdict(float)
    for event in device_events:
        kernels[event.name] += event.time_range.elapsed_us() / 1e6 / steps
    families: dict[str, float] = defaultdict(float)
    for name, seconds in kernels.items():
        families[kernel_family(name)] += seconds
    busy = sum(kernels.values())
    top = sorted(kernels.items(), key=lambda item: -item[1])[:12]
    return {
        "label": variant.label,
        "preset": preset,
        "batch": batch,
        "step_s": step_s,
        "kernel_s": busy if kernels else None,
        "families_s": dict(families),
        "gpu_idle_share": max(0.0, 1 - busy / step_s) if kernels else None,
        "kernel_launches_per_step": len(device_events) / steps,
        "top_kernels": [{"name": name[:120], "seconds": s} for name, s in top],
        "profiled_step_s": profiled_step_s,
        "cpu_families_s": None if kernels else _cpu_families(prof, steps, profiled_step_s),
    }


def format_profile(result: dict) -> str:
    """A short Markdown section for one profiled variant."""
    ms = result["step_s"] * 1e3
    lines = [f"### {result['label']} (ViT-{result['preset']}, batch {result['batch']})", ""]
    if result["kernel_s"] is None:
        parts = ", ".join(f"{name} {s * 1e3:.2f} ms" for name, s in split(result).items())
        lines.append(f"step {ms:.2f} ms; no device kernels (CPU run); profiled step: {parts}")
        return "\n".join(lines) + "\n"
    lines.append(
        f"kernels {result['kernel_s'] * 1e3:.2f} ms per step "
        f"({result['kernel_launches_per_step']:.0f} launches); a short unprofiled loop took "
        f"{ms:.2f} ms a step, so the GPU ran no kernel for {result['gpu_idle_share']:.0%} of it "
        "(one loop, no repeats: the bench's medians are the step times to quote)"
    )
    shares = ", ".join(
        f"{family} {seconds * 1e3:.2f} ms ({seconds / result['step_s']:.0%})"
        for family, seconds in sorted(result["families_s"].items(), key=lambda kv: -kv[1])
    )
    lines += [f"by family: {shares}", "", "| kernel | ms per step |", "|---|---|"]
    lines += [f"| `{k['name'][:80]}` | {k['seconds'] * 1e3:.3f} |" for k in result["top_kernels"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m amp_course.bench.profile", description=__doc__)
    parser.add_argument("--variants", default="fp32,bf16,bf16+compile+fused")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--preset", default="b16")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None, help="folder for profile.json/.md")
    args = parser.parse_args(argv)
    try:
        variants = [Variant.parse(label) for label in args.variants.split(",")]
    except ValueError as error:
        parser.error(str(error))
    device = pick_device(args.device)
    results = [
        profile_step(variant, device, preset=args.preset, batch=args.batch, steps=args.steps)
        for variant in variants
    ]
    text = "\n".join(format_profile(r) for r in results)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "profile.json").write_text(json.dumps(results, indent=2) + "\n")
        (args.out / "profile.md").write_text(text)
    return 0


def load(path: Path) -> list[dict]:
    """A profile.json's results, each with its variant's ``label``. Files written before the
    bench named variants by a label hold it under "mode": this is where they are read (their one
    migration, as ``rows.Row.from_dict`` is bench.json's)."""
    results = json.loads(Path(path).read_text())
    return [{"label": r.get("label", r.get("mode")), **r} for r in results]


if __name__ == "__main__":
    raise SystemExit(main())
