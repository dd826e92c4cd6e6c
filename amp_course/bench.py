"""Benchmark: precision modes (fp32, TF32, fp16, bf16; optionally compiled or fused) x workloads.

Measuring (``run``), the result (a plain dict, saved as JSON) and presenting (``format_report``,
``plot_report``) are separate, as in ``ac.timing``. Modes are timed round-robin, so drift in
machine load or clocks hits every mode alike, and each mode sets its precision flags on entry
and restores them on exit.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import importlib
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from torch.utils import benchmark
from torch.utils.flop_counter import FlopCounterMode

from . import data as _data
from . import models, precision, timing
from .device import cpu_name
from .memory import peak_cuda_memory
from .training import autocast, make_scaler

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
WORKLOADS = ("matmul", "mnist_cnn", "vit_b16", "vit_l16", "max_batch")
AUTOCAST_DTYPES = {"fp32": None, "tf32": None, "fp16": torch.float16, "bf16": torch.bfloat16}
MATMUL_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}
MNIST_TRAIN_SIZE = 60_000  # an epoch of the MNIST tutorial's CNN is one pass over these digits

# Dense (no sparsity) peak TFLOP/s from NVIDIA's datasheets, keyed by a piece of the GPU's name.
# H200 has the H100 SXM's compute; the T4 has no TF32 or bf16 tensor cores.
PEAK_TFLOPS = {
    "H100 PCIe": {"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0},
    "H100": {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
    "H200": {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4},
    "A100": {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0},
    "T4": {"fp32": 8.1, "fp16": 65.0},
}

OutOfMemoryError = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


@dataclass(frozen=True)
class Mode:
    """One cell of the matrix: a precision, optionally with torch.compile or fused AdamW."""

    precision: str
    compile: bool = False
    fused: bool = False

    @property
    def name(self) -> str:
        suffix = ("+compile" if self.compile else "") + ("+fused" if self.fused else "")
        return self.precision + suffix

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        return AUTOCAST_DTYPES[self.precision]


@dataclass
class BenchConfig:
    """What to run and at which sizes; ``smoke()`` and ``full()`` give the two standard sizes."""

    precisions: tuple[str, ...] = PRECISIONS
    workloads: tuple[str, ...] = WORKLOADS
    compile: bool = False  # add a torch.compile variant of every precision
    fused: bool = False  # add a fused-AdamW variant of every precision
    rounds: int = 3  # round-robin passes over the modes (A/B interleaving)
    min_run_time: float = 0.5  # seconds of timed calls per mode per round
    matmul_sizes: tuple[int, ...] = (1024, 2048, 4095, 4096, 8192)  # 4095: not a multiple of 8
    mnist_batch_size: int = 128
    mnist_batches: int = 32  # distinct batches cycled through by the timed steps
    mnist_width_divisor: int = 1  # 1: the scenario's CNN
    vit_batch_size: dict = field(default_factory=lambda: {"b16": 64, "l16": 32})
    vit_overrides: dict = field(default_factory=dict)  # preset -> build_vit overrides
    max_batch_limit: int = 4096  # the search for the largest batch stops here
    threads: int | None = None  # CPU threads for the run (None: leave torch's setting)
    smoke: bool = False

    @classmethod
    def full(cls, **changes) -> BenchConfig:
        return replace(cls(), **changes)

    @classmethod
    def smoke_config(cls, **changes) -> BenchConfig:
        """Tiny sizes for a CPU: the whole matrix in seconds, nothing meant as a speed figure.

        One thread: at these sizes extra threads only add hand-off overhead, and on a shared
        machine they fight other processes for cores (steps then take 10x longer and vary).
        """
        tiny = dict(image_size=32, patch_size=16, num_heads=2, hidden_dim=32, mlp_dim=64)
        base = cls(
            rounds=2,
            min_run_time=0.02,
            matmul_sizes=(64, 128),
            mnist_batch_size=8,
            mnist_batches=4,
            mnist_width_divisor=32,
            vit_batch_size={"b16": 2, "l16": 2},
            vit_overrides={"b16": {**tiny, "num_layers": 1}, "l16": {**tiny, "num_layers": 2}},
            max_batch_limit=64,
            threads=1,
            smoke=True,
        )
        return replace(base, **changes)

    def validate(self) -> None:
        """Clear errors for unknown names and impossible sizes."""
        for name in self.precisions:
            if name not in PRECISIONS:
                raise ValueError(
                    f"Unknown precision {name!r}. Valid choices: {', '.join(PRECISIONS)}."
                )
        for name in self.workloads:
            if name not in WORKLOADS:
                raise ValueError(
                    f"Unknown workload {name!r}. Valid choices: {', '.join(WORKLOADS)}."
                )
        if self.rounds < 1 or self.min_run_time <= 0:
            raise ValueError("rounds must be >= 1 and min_run_time > 0.")
        if any(n < 1 for n in self.matmul_sizes):
            raise ValueError(f"matmul sizes must be positive, got {self.matmul_sizes}.")

    def modes(self) -> list[Mode]:
        modes = [Mode(p) for p in self.precisions]
        modes += [Mode(p, compile=True) for p in self.precisions if self.compile]
        modes += [Mode(p, fused=True) for p in self.precisions if self.fused]
        return modes


class SimulatedQueue:
    """A stand-in for a GPU's asynchronous stream, so a CPU can show why timers must synchronise.

    ``launch(seconds)`` queues that much work and returns at once, as a CUDA kernel launch does;
    ``synchronize()`` blocks until the queued work would have finished. Inside ``as_cuda()``,
    ``torch.cuda.synchronize`` is this queue's, so code written for a GPU can be timed here.
    """

    def __init__(self):
        self.busy_until = time.perf_counter()

    def launch(self, seconds: float) -> None:
        self.busy_until = max(self.busy_until, time.perf_counter()) + seconds

    def synchronize(self, device=None) -> None:
        delay = self.busy_until - time.perf_counter()
        if delay > 0:
            time.sleep(delay)

    @contextlib.contextmanager
    def as_cuda(self) -> Iterator[SimulatedQueue]:
        from unittest import mock

        with mock.patch("torch.cuda.synchronize", self.synchronize):
            yield self


def peak_tflops(device_name: str, precision: str) -> float | None:
    """The published dense peak of this GPU for ``precision``; None when unknown (or a CPU)."""
    for key in sorted(PEAK_TFLOPS, key=len, reverse=True):  # "H100 PCIe" before "H100"
        if key.lower() in device_name.lower():
            return PEAK_TFLOPS[key].get(precision)
    return None


def mfu(flops_per_step: float, step_seconds: float, peak: float) -> float:
    """Model FLOP utilisation: achieved FLOP/s over the peak (``peak`` in TFLOP/s), a fraction."""
    if step_seconds <= 0 or peak <= 0:
        raise ValueError(
            f"step time and peak must be positive, got {step_seconds} s, {peak} TFLOP/s."
        )
    return flops_per_step / step_seconds / (peak * 1e12)


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's with its instruction set."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU {cpu_name()} ({torch.backends.cpu.get_cpu_capability()})"


def skip_reason(mode: Mode, device: torch.device) -> str | None:
    """Why ``mode`` cannot run on ``device`` (None: it can). Never raises."""
    if mode.precision == "tf32":
        if device.type != "cuda":
            return "TF32 is a CUDA tensor-core mode; a CPU has none"
        if torch.cuda.get_device_capability(device) < (8, 0):
            return "TF32 needs compute capability >= 8.0 (Ampere or later)"
    if mode.compile:
        try:
            dynamo = importlib.import_module("torch._dynamo")
            if not dynamo.is_dynamo_supported():
                return f"torch.compile is not supported on Python {sys.version.split()[0]} here"
        except Exception as error:  # noqa: BLE001 - any import failure means "not available"
            return f"torch.compile unavailable: {error}"
    if mode.fused:
        try:
            probe = torch.nn.Parameter(torch.zeros(2, device=device))
            probe.grad = torch.zeros_like(probe)
            torch.optim.AdamW([probe], fused=True).step()
        except Exception as error:  # noqa: BLE001 - an unsupported fused kernel raises many types
            return f"fused AdamW unavailable on {device.type}: {error}"
    return None


def interleaved(
    fns: dict[str, Callable[[], object]],
    modes: dict[str, Mode],
    *,
    device,
    rounds: int,
    min_run_time: float,
    label: str = "",
) -> tuple[dict, dict]:
    """Time each ``fns[name]`` round-robin under its mode's flags; a mode that fails is dropped.

    Returns ({name: merged Measurement}, {name: reason it failed}).
    """
    runs: dict[str, list[benchmark.Measurement]] = {name: [] for name in fns}
    failed: dict[str, str] = {}
    for round_index in range(rounds):
        for name, fn in fns.items():
            if name in failed:
                continue
            try:
                with precision.tf32(modes[name].precision == "tf32"):
                    runs[name].append(
                        timing.measure(
                            fn,
                            device=device,
                            warmup=3 if round_index == 0 else 1,
                            min_run_time=min_run_time,
                            repeats=3,
                            label=label,
                            description=name,
                        )
                    )
            except Exception as error:  # noqa: BLE001 - report the mode as skipped, never crash
                failed[name] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    merged = {
        name: benchmark.Measurement.merge(ms)[0]
        for name, ms in runs.items()
        if ms and name not in failed
    }
    return merged, failed


def count_step_flops(
    build: Callable[[], torch.nn.Module], input_shape: tuple[int, ...], num_classes: int
) -> tuple[int, int]:
    """(forward, forward+backward) FLOPs of one training step, counted on the meta device.

    FlopCounterMode counts matmuls, convolutions and attention; on meta tensors nothing is
    computed, so even ViT-L/16 is counted in seconds on a CPU.
    """
    with torch.device("meta"):
        model = build()
        inputs = torch.empty(input_shape)
        targets = torch.zeros(input_shape[0], dtype=torch.long)
    with FlopCounterMode(display=False) as counter:
        model(inputs)
    forward = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        loss = torch.nn.functional.cross_entropy(model(inputs), targets % num_classes)
        loss.backward()
    return forward, counter.get_total_flops()


def _row(workload: str, mode: Mode, **values) -> dict:
    return {"workload": workload, "mode": mode.name, "precision": mode.precision, **values}


def _skipped(workload: str, mode: Mode, reason: str) -> dict:
    return _row(workload, mode, skipped=reason)


def _stats(measurement: benchmark.Measurement) -> dict:
    return {
        "median_s": measurement.median,
        "iqr_s": measurement.iqr,
        "runs": len(measurement.times),
    }


def bench_matmul(
    modes: list[Mode], config: BenchConfig, device: torch.device, name: str
) -> list[dict]:
    """Square matmul throughput per precision and size, against the published peak."""
    base = [m for m in modes if not (m.compile or m.fused)]  # compile/fused do not change a matmul
    rows = []
    for size in config.matmul_sizes:
        fns, by_name = {}, {}
        for mode in base:
            dtype = MATMUL_DTYPES[mode.precision]
            a = torch.randn(size, size, device=device, dtype=dtype)
            b = torch.randn(size, size, device=device, dtype=dtype)
            fns[mode.name] = lambda a=a, b=b: torch.mm(a, b)
            by_name[mode.name] = mode
        measured, failed = interleaved(
            fns,
            by_name,
            device=device,
            rounds=config.rounds,
            min_run_time=config.min_run_time,
            label=f"matmul {size}",
        )
        for mode in base:
            if mode.name in failed:
                rows.append(_row("matmul", mode, size=size, skipped=failed[mode.name]))
                continue
            stats = _stats(measured[mode.name])
            tflops = 2 * size**3 / stats["median_s"] / 1e12
            peak = peak_tflops(name, mode.precision)
            rows.append(
                _row(
                    "matmul",
                    mode,
                    size=size,
                    **stats,
                    tflops=tflops,
                    peak_tflops=peak,
                    fraction_of_peak=tflops / peak if peak else None,
                )
            )
    return rows


def _train_step(model, optimizer, scaler, mode: Mode, device, batches: Iterator):
    """One AMP training step over the next preloaded batch (data loading stays outside)."""

    def step():
        inputs, targets = next(batches)
        with autocast(device, mode.autocast_dtype):
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    return step


class _Trainer:
    """A model shared by every mode, one compiled wrapper and one AdamW per fused flag.

    Sharing keeps the memory of a 12-mode matrix at one model's; each mode keeps its own scaler.
    """

    def __init__(self, model: torch.nn.Module, device):
        self.model = model.to(device)
        self.device = device
        self._compiled = None
        self.optimizers: dict[bool, torch.optim.Optimizer] = {}

    def step_fn(self, mode: Mode, batches: Iterator):
        if mode.compile and self._compiled is None:
            self._compiled = torch.compile(self.model)
        model = self._compiled if mode.compile else self.model
        if mode.fused not in self.optimizers:
            self.optimizers[mode.fused] = torch.optim.AdamW(
                self.model.parameters(), lr=1e-4, fused=mode.fused or None
            )
        scaler = make_scaler(self.device, mode.autocast_dtype)
        return _train_step(model, self.optimizers[mode.fused], scaler, mode, self.device, batches)

    def clear_state(self) -> None:
        """Drop every optimizer's state and the gradients, so a memory figure holds one mode's."""
        for optimizer in self.optimizers.values():
            optimizer.state.clear()
        self.model.zero_grad(set_to_none=True)
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def _time_training(
    workload: str,
    trainer: _Trainer,
    modes: list[Mode],
    config: BenchConfig,
    device,
    make_batches: Callable[[], Iterator],
) -> tuple[dict, dict]:
    fns = {m.name: trainer.step_fn(m, make_batches()) for m in modes}
    return interleaved(
        fns,
        {m.name: m for m in modes},
        device=device,
        rounds=config.rounds,
        min_run_time=config.min_run_time,
        label=workload,
    )


def _peak_memory(trainer: _Trainer, mode: Mode, device, make_batches) -> int | None:
    """Peak CUDA bytes of one step of ``mode`` after a warm-up step created its optimizer state."""
    if device.type != "cuda":
        return None
    trainer.clear_state()
    step = trainer.step_fn(mode, make_batches())
    with precision.tf32(mode.precision == "tf32"):
        step()
        return peak_cuda_memory(step, device)


def bench_mnist_cnn(
    modes: list[Mode],
    config: BenchConfig,
    device: torch.device,
    name: str,
    mnist: _data.MnistData | None = None,
) -> list[dict]:
    """The MNIST tutorial's CNN: time per step on preloaded real digits, and per epoch."""
    batch = config.mnist_batch_size
    loader, _ = _data.mnist_loaders(batch, num_train=batch * config.mnist_batches, data=mnist)
    preloaded = [(x.to(device), y.to(device)) for x, y in loader]  # loading stays untimed

    def make_batches():
        return itertools.cycle(preloaded)

    trainer = _Trainer(models.MnistCNN(width_divisor=config.mnist_width_divisor), device)
    measured, failed = _time_training("mnist_cnn", trainer, modes, config, device, make_batches)
    steps_per_epoch = math.ceil(MNIST_TRAIN_SIZE / batch)
    rows = []
    for mode in modes:
        if mode.name in failed:
            rows.append(_skipped("mnist_cnn", mode, failed[mode.name]))
            continue
        stats = _stats(measured[mode.name])
        rows.append(
            _row(
                "mnist_cnn",
                mode,
                batch_size=batch,
                **stats,
                images_per_s=batch / stats["median_s"],
                epoch_s=stats["median_s"] * steps_per_epoch,
                steps_per_epoch=steps_per_epoch,
            )
        )
    return rows


def bench_vit(
    preset: str,
    modes: list[Mode],
    config: BenchConfig,
    device: torch.device,
    name: str,
    ceilings: dict[str, float],
) -> list[dict]:
    """A ViT training step on synthetic images: time, images/s, peak memory and MFU."""
    workload = f"vit_{preset}"
    overrides = config.vit_overrides.get(preset, {})
    batch = config.vit_batch_size[preset]

    def build():
        return models.build_vit(preset, **overrides)

    model = build()
    size, classes = model.image_size, model.num_classes
    _, flops_per_image = count_step_flops(build, (1, 3, size, size), classes)
    images, labels = _data.synthetic_images(
        batch, image_size=size, num_classes=classes, device=device
    )

    def make_batches():
        return itertools.repeat((images, labels))

    trainer = _Trainer(model, device)
    measured, failed = _time_training(workload, trainer, modes, config, device, make_batches)
    rows = []
    for mode in modes:
        if mode.name in failed:
            rows.append(_skipped(workload, mode, failed[mode.name]))
            continue
        stats = _stats(measured[mode.name])
        flops = flops_per_image * batch
        peak = peak_tflops(name, mode.precision)
        ceiling = ceilings.get(mode.precision)
        try:
            memory = _peak_memory(trainer, mode, device, make_batches)
        except Exception as error:  # noqa: BLE001 - a memory figure is optional
            memory = None
            stats["memory_error"] = f"{type(error).__name__}: {error}"[:200]
        rows.append(
            _row(
                workload,
                mode,
                batch_size=batch,
                **stats,
                images_per_s=batch / stats["median_s"],
                flops_per_step=flops,
                achieved_tflops=flops / stats["median_s"] / 1e12,
                peak_tflops=peak,
                mfu=mfu(flops, stats["median_s"], peak) if peak else None,
                matmul_ceiling_tflops=ceiling,
                fraction_of_ceiling=(
                    flops / stats["median_s"] / 1e12 / ceiling if ceiling else None
                ),
                peak_memory_bytes=memory,
                config={"preset": preset, **overrides},
            )
        )
    return rows


def largest_batch(try_batch: Callable[[int], None], limit: int, multiple: int = 8) -> int:
    """The largest multiple of ``multiple`` (up to ``limit``) for which ``try_batch`` fits.

    ``try_batch(n)`` runs a step at batch ``n`` and raises OutOfMemoryError when it does not fit;
    we double until it fails, then bisect. Returns 0 when even ``multiple`` does not fit.
    """

    def fits(n: int) -> bool:
        try:
            try_batch(n)
            return True
        except OutOfMemoryError:
            return False
        finally:
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    good, bad = 0, None
    n = multiple
    while n <= limit:
        if not fits(n):
            bad = n
            break
        good, n = n, n * 2
    if bad is None:  # every doubling fitted: try the largest multiple within the limit
        top = limit // multiple * multiple
        if top <= good:
            return good
        if fits(top):
            return top
        bad = top  # the maximum lies between the last doubling and the limit: bisect below
    while bad - good > multiple:  # bisect in steps of ``multiple``
        middle = (good + bad) // 2 // multiple * multiple
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good


def bench_max_batch(
    modes: list[Mode], config: BenchConfig, device: torch.device, name: str
) -> list[dict]:
    """The largest ViT-B/16 training batch that fits per precision (GPU only)."""
    base = [m for m in modes if not (m.compile or m.fused)]  # recompiling per size is too slow
    if device.type != "cuda":
        return [
            _skipped("max_batch", m, "GPU only: a CPU swaps instead of failing cleanly")
            for m in base
        ]
    overrides = config.vit_overrides.get("b16", {})
    trainer = _Trainer(models.build_vit("b16", **overrides), device)
    size = trainer.model.image_size
    rows = []
    for mode in base:

        def try_batch(n, mode=mode):
            trainer.clear_state()
            images, labels = _data.synthetic_images(n, image_size=size, device=device)
            with precision.tf32(mode.precision == "tf32"):
                trainer.step_fn(mode, itertools.repeat((images, labels)))()

        try:
            best = largest_batch(try_batch, config.max_batch_limit)
        except Exception as error:  # noqa: BLE001
            rows.append(_skipped("max_batch", mode, f"{type(error).__name__}: {error}"[:200]))
            continue
        rows.append(
            _row(
                "max_batch",
                mode,
                model="vit_b16",
                max_batch=best,
                limit=config.max_batch_limit,
                hit_limit=best >= config.max_batch_limit,
            )
        )
    trainer.clear_state()
    return rows


def versions() -> dict:
    """Versions a reader needs to compare two reports."""
    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    try:
        import torchvision

        info["torchvision"] = torchvision.__version__
    except ImportError:
        info["torchvision"] = None
    return info


def run(
    config: BenchConfig | None = None,
    device: torch.device | str = "cpu",
    progress: Callable[[str], None] | None = print,
    mnist=None,
) -> dict:
    """Run the matrix; returns the report as a JSON-ready dict (see ``format_report``)."""
    config = config or BenchConfig.full()
    config.validate()
    device = torch.device(device)
    say = progress or (lambda _: None)
    report = {
        "device": device_name(device),
        "device_type": device.type,
        "capability": list(torch.cuda.get_device_capability(device))
        if device.type == "cuda"
        else None,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "versions": versions(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "smoke": config.smoke,
        "config": asdict(config),
        "modes": [],
        "results": {w: [] for w in WORKLOADS},
        "seconds": {},
    }
    runnable, skipped = [], []
    for mode in config.modes():
        reason = skip_reason(mode, device)
        report["modes"].append({"name": mode.name, "available": reason is None, "reason": reason})
        if reason is None:
            runnable.append(mode)
        else:
            skipped.append((mode, reason))
            say(f"skip {mode.name}: {reason}")
    saved_threads = torch.get_num_threads()
    if config.threads:
        torch.set_num_threads(config.threads)
    report["threads"] = torch.get_num_threads()
    try:
        _run_workloads(report, config, device, runnable, skipped, mnist, say)
    finally:
        torch.set_num_threads(saved_threads)
    return report


def _run_workloads(report, config, device, runnable, skipped, mnist, say) -> None:
    name, ceilings = report["device"], {}
    for workload in config.workloads:
        say(f"{workload}: {', '.join(m.name for m in runnable)}")
        start = time.perf_counter()
        if workload == "matmul":
            rows = bench_matmul(runnable, config, device, name)
            for row in rows:
                if "tflops" in row:
                    best = ceilings.get(row["precision"], 0)
                    ceilings[row["precision"]] = max(best, row["tflops"])
        elif workload == "mnist_cnn":
            rows = bench_mnist_cnn(runnable, config, device, name, mnist)
        elif workload in ("vit_b16", "vit_l16"):
            preset = workload.removeprefix("vit_")
            rows = bench_vit(preset, runnable, config, device, name, ceilings)
        else:
            rows = bench_max_batch(runnable, config, device, name)
        for mode, reason in skipped:
            if workload in ("mnist_cnn", "vit_b16", "vit_l16") or not (mode.compile or mode.fused):
                rows.append(_skipped(workload, mode, reason))
        report["results"][workload] = rows
        report["seconds"][workload] = time.perf_counter() - start
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_report(report: dict) -> str:
    """The report as fixed-width text tables, one per workload."""
    lines = [
        f"amp-course bench on {report['device']} ({report['date']}; torch "
        f"{report['versions']['torch']}{'; smoke sizes' if report['smoke'] else ''})"
    ]
    columns = {
        "matmul": [
            ("size", "size", "d"),
            ("median", "median_s", "time"),
            ("TFLOP/s", "tflops", ".3g"),
            ("peak", "peak_tflops", ".4g"),
            ("of peak", "fraction_of_peak", ".1%"),
        ],
        "mnist_cnn": [
            ("batch", "batch_size", "d"),
            ("step", "median_s", "time"),
            ("img/s", "images_per_s", ".4g"),
            ("epoch (s)", "epoch_s", ".3g"),
        ],
        "vit": [
            ("batch", "batch_size", "d"),
            ("step", "median_s", "time"),
            ("img/s", "images_per_s", ".4g"),
            ("TFLOP/s", "achieved_tflops", ".3g"),
            ("MFU", "mfu", ".1%"),
            ("of matmul", "fraction_of_ceiling", ".1%"),
            ("peak GiB", "peak_memory_gib", ".2f"),
        ],
        "max_batch": [("max batch", "max_batch", "d"), ("limit", "limit", "d")],
    }
    for workload, rows in report["results"].items():
        if not rows:
            continue
        cols = columns["vit" if workload.startswith("vit_") else workload]
        lines += [
            "",
            f"== {workload} ==",
            f"{'mode':<16}" + "".join(f"{title:>11}" for title, _, _ in cols),
        ]
        for row in rows:
            if "skipped" in row:
                lines.append(f"{row['mode']:<16} skipped: {row['skipped']}")
                continue
            row = dict(row)
            if row.get("peak_memory_bytes") is not None:
                row["peak_memory_gib"] = row["peak_memory_bytes"] / 2**30
            cells = []
            for _, key, spec in cols:
                value = row.get(key)
                text = (
                    timing.format_time(value)
                    if spec == "time" and value is not None
                    else _fmt(value, spec if spec != "time" else "")
                )
                cells.append(f"{text:>11}")
            lines.append(f"{row['mode']:<16}" + "".join(cells))
    return "\n".join(lines)


def plot_report(report: dict, path: str | Path | None = None):
    """Four panels: matmul TFLOP/s by size, MNIST epoch time, ViT images/s, largest batch."""
    import matplotlib.pyplot as plt

    results = report["results"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    ax = axes[0, 0]
    done = [r for r in results["matmul"] if "tflops" in r]
    for mode in dict.fromkeys(r["mode"] for r in done):
        rows = [r for r in done if r["mode"] == mode]
        (line,) = ax.plot([r["size"] for r in rows], [r["tflops"] for r in rows], "o-", label=mode)
        if rows[0]["peak_tflops"]:
            ax.axhline(rows[0]["peak_tflops"], ls="--", lw=0.8, color=line.get_color())
    sizes = sorted({r["size"] for r in done})
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="n (n x n matmul)",
        ylabel="TFLOP/s",
        title="matmul throughput (dashed: published peak)",
    )
    if done:
        ax.set_xticks(sizes, [str(n) for n in sizes], minor=False)
        ax.minorticks_off()
        ax.legend(fontsize=8)

    def bars(ax, rows, key, title, ylabel):
        rows = [r for r in rows if r.get(key) is not None]
        ax.bar(range(len(rows)), [r[key] for r in rows])
        ax.set_xticks(
            range(len(rows)), [r["mode"] for r in rows], rotation=30, ha="right", fontsize=8
        )
        ax.set(title=title, ylabel=ylabel)
        if not rows:
            ax.set_yticks([])
            ax.text(0.5, 0.5, "not run here", ha="center", va="center", transform=ax.transAxes)

    bars(axes[0, 1], results["mnist_cnn"], "epoch_s", "MNIST CNN: seconds per epoch", "s")
    vit_rows = [
        {**r, "mode": f"{r['workload'].removeprefix('vit_')} {r['mode']}"}
        for w in ("vit_b16", "vit_l16")
        for r in results[w]
    ]
    bars(axes[1, 0], vit_rows, "images_per_s", "ViT training step", "images/s")
    bars(
        axes[1, 1], results["max_batch"], "max_batch", "largest ViT-B/16 batch that fits", "images"
    )
    note = " (smoke sizes: not speed figures)" if report["smoke"] else ""
    fig.suptitle(f"{report['device']}{note}", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def write_report(report: dict, out_dir: str | Path) -> dict[str, Path]:
    """Write bench.json, bench.txt and bench.png under ``out_dir``; returns their paths."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "bench.json", "table": out / "bench.txt", "plot": out / "bench.png"}
    paths["json"].write_text(json.dumps(report, indent=1) + "\n")
    paths["table"].write_text(format_report(report) + "\n")
    plt.close(plot_report(report, paths["plot"]))
    return paths


def slug(name: str) -> str:
    """A folder name for a device: ``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"``."""
    return "-".join("".join(c if c.isalnum() else " " for c in name.lower()).split())
