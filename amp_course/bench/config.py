"""The bench's vocabulary: precisions, workloads, modes, the configurations that one trainer
steps (a mode plus options: the matrix's cells and the ladder's rungs), sizes, and when a
configuration cannot run."""

from __future__ import annotations

import functools
import importlib
import sys
from dataclasses import dataclass, field, replace

import torch

from .. import emulation, gpus, precisions
from ..attention import emulated_refusal
from ..device import parse_dtype
from ..precision import AmpRecipe
from . import timm_vit
from .rows import CUDA_GRAPH_MODES, Row

PRECISIONS = precisions.NAMES  # tf32: fp32 with TF32 matmuls (CUDA, sm_80+)
WORKLOADS = ("matmul", "mnist_cnn", "vit_b16", "vit_l16", "max_batch", "ladder")
# The default run: the precision matrix. The MFU ladder (lesson 10) runs when named.
MATRIX_WORKLOADS = WORKLOADS[:-1]
MNIST_TRAIN_SIZE = 60_000  # an epoch of the MNIST tutorial's CNN is one pass over these digits


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
    def autocast_dtype(self) -> torch.dtype:
        """The dtype the mode computes in: float32 for fp32 and tf32 (autocast off)."""
        return parse_dtype(self.precision)

    def recipe(self, device: torch.device | str) -> AmpRecipe:
        return AmpRecipe(device, self.autocast_dtype)


@dataclass
class BenchConfig:
    """What to run and at which sizes; ``smoke()`` and ``full()`` give the two standard sizes."""

    precisions: tuple[str, ...] = PRECISIONS
    workloads: tuple[str, ...] = MATRIX_WORKLOADS
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
    ladder_rungs: tuple[str, ...] | None = None  # the ladder's rungs to run (None: all)
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
        # Both together: the fastest recipe a learner would use (compiled model, fused AdamW).
        both = self.compile and self.fused
        modes += [Mode(p, compile=True, fused=True) for p in self.precisions if both]
        return modes


@dataclass(frozen=True)
class Configuration:
    """What the trainer builds and steps: a precision mode plus options.

    The matrix's configurations are its modes (``Configuration.of``); a ladder rung adds a
    torch.compile mode (the CUDA-graph ones too), an attention kernel, a batch or timm's model.
    """

    name: str  # the mode's name ("bf16+compile+fused") or the rung's ("+ CUDA graphs")
    precision: str
    compile: str | None = None  # a torch.compile mode ("default", "reduce-overhead"); None: eager
    fused: bool = False  # fused AdamW (one kernel for every parameter's update)
    attention: str | None = None  # an SDPA backend ("flash", "efficient", "cudnn", "math")
    model: str = "course"  # "course" (the course's model) or "timm" (timm's ViT)
    batch: int | None = None  # None: the workload's batches decide

    @classmethod
    def of(cls, mode: Mode, **options) -> Configuration:
        """The configuration of a matrix ``mode`` (compiled: torch.compile's default mode)."""
        compile_mode = "default" if mode.compile else None
        return cls(mode.name, mode.precision, compile_mode, mode.fused, **options)

    @property
    def mode(self) -> Mode:
        return Mode(self.precision, self.compile is not None, self.fused)

    def row(self, workload: str, **values) -> Row:
        """This configuration's ``Row`` of ``workload`` with ``values`` (they may set the batch)."""
        names = dict(mode=self.name, precision=self.precision, compile=self.compile)
        options = dict(fused=self.fused, attention=self.attention, model=self.model)
        return Row(workload, **{**names, **options, "batch": self.batch, **values})


def skip_reason(
    configuration: Configuration | Mode, device: torch.device, smoke: bool = False
) -> str | None:
    """Why ``configuration`` (or a matrix mode) cannot run on ``device`` (None: it can).

    ``smoke``: a smoke run that compiles unasked (the ladder's): compiling on a CPU takes
    minutes, so it is left out there. The matrix compiles only when asked (``--compile``).
    Never raises.
    """
    config = configuration
    if isinstance(config, Mode):
        config = Configuration.of(config)
    device = torch.device(device)
    cuda = device.type == "cuda"
    if config.model == "timm" and timm_vit.unavailable():
        return timm_vit.unavailable()
    if config.precision == "tf32":
        if not cuda:
            return "TF32 is a CUDA tensor-core mode; a CPU has none"
        if not gpus.has_tensor_cores(emulation.capability(device), "tf32"):  # a rehearsed T4's
            first = gpus.format_capability(gpus.tensor_cores_from("tf32"))
            return f"TF32 needs compute capability >= {first} (Ampere or later)"
    if config.compile in CUDA_GRAPH_MODES and not cuda:
        return "CUDA graphs need a CUDA GPU"
    if config.compile and not cuda and smoke:
        return "smoke mode on a CPU: compiling takes minutes here (full mode runs it)"
    if config.compile:
        try:
            dynamo = importlib.import_module("torch._dynamo")
            if not dynamo.is_dynamo_supported():
                return f"torch.compile is not supported on Python {sys.version.split()[0]} here"
        except Exception as error:  # noqa: BLE001 - any import failure means "not available"
            return f"torch.compile unavailable: {error}"
    if config.attention in ("efficient", "cudnn") and not cuda:
        return f"the {config.attention} attention kernel is CUDA only"
    dtype = config.mode.autocast_dtype
    if config.attention and emulated_refusal(config.attention, device, dtype):
        profile = emulation.active()
        some = profile.attention_dtypes(config.attention)  # for other dtypes: say which
        kernel = f"{config.attention} attention kernel" + (f" for {dtype}" if some else "")
        return f"the emulated {profile.name} has no {kernel}"
    if config.fused:
        return fused_adamw_unavailable(device)
    return None


@functools.lru_cache(maxsize=8)
def fused_adamw_unavailable(device: torch.device) -> str | None:
    """Why fused AdamW cannot run on ``device``, or None (probed once per device)."""
    try:
        probe = torch.nn.Parameter(torch.zeros(2, device=device))
        probe.grad = torch.zeros_like(probe)
        torch.optim.AdamW([probe], fused=True).step()
    except Exception as error:  # noqa: BLE001 - an unsupported fused kernel raises many types
        return f"fused AdamW unavailable on {device.type}: {error}"
    return None
