"""What the bench measures: a ``Variant`` (a precision plus options under a label: the matrix's
cells and the ladder's rungs alike), the one the trainer steps and a row records, and when one
cannot run. The label is the one word for what names a variant: a row's ``label``, the first
column of every table (titled "mode" in the matrix's tables and "rung" in the ladder's)."""

from __future__ import annotations

import functools
import importlib
import sys
from dataclasses import dataclass

import torch

from .. import emulation, gpus, precisions
from ..device_index import cuda_index
from ..recipe import AmpRecipe
from . import timm_vit

CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # torch.compile modes that use CUDA graphs
GRAPH_MEMORY_NOTE = (
    "not measured: CUDA graphs run from a private memory pool "
    "that the allocator's peak does not see"
)


@dataclass(frozen=True)
class Variant:
    """A precision (a row of ``ac.precisions``) plus options, under a label.

    The matrix's cells are ``Variant.matrix``'s ("bf16+compile+fused"); a ladder rung adds
    a torch.compile mode (the CUDA-graph ones too), an attention kernel, a batch or another model.
    """

    label: str  # the matrix cell's ("bf16+compile+fused") or the rung's ("+ CUDA graphs")
    precision: precisions.Precision
    compile: str | None = None  # a torch.compile mode ("default", "reduce-overhead"); None: eager
    fused: bool = False  # fused AdamW (one kernel for every parameter's update)
    attention: str | None = None  # an SDPA backend ("flash", "efficient", "cudnn", "math")
    model: str = "course"  # what the trainer builds: "course", "lean" (lean=True) or "timm"
    batch: int | None = None  # None: the workload's batches decide

    @classmethod
    def matrix(cls, precision, compile: bool = False, fused: bool = False) -> Variant:
        """A cell of the matrix: ``precision`` (a row, or a name ``precisions.get`` reads),
        compiled in torch.compile's default mode and with fused AdamW where asked."""
        precision = precisions.get(precision)
        label = precision.name + ("+compile" if compile else "") + ("+fused" if fused else "")
        return cls(label, precision, "default" if compile else None, fused)

    @classmethod
    def parse(cls, label: str) -> Variant:
        """``"bf16+compile+fused"`` -> that matrix cell; ValueError naming the valid parts."""
        precision, *options = label.split("+")
        if precision not in precisions.NAMES or not set(options) <= {"compile", "fused"}:
            raise ValueError(
                f"Unknown variant {label!r}: a precision ({', '.join(precisions.NAMES)}), "
                "optionally followed by +compile and/or +fused."
            )
        return cls.matrix(precision, compile="compile" in options, fused="fused" in options)

    @property
    def plain(self) -> bool:
        """Eager and with the usual AdamW: the cells a matmul or a batch search runs (neither
        torch.compile nor fused AdamW changes a matmul; recompiling per batch takes too long)."""
        return not (self.compile or self.fused)

    @property
    def memory_note(self) -> str | None:
        """Why a step of this variant gets no peak memory; None: it gets one."""
        # A replayed CUDA graph allocates nothing through the caching allocator: its activations
        # live in the graphs' private pool, which cudagraph trees share among every graph recorded
        # so far (earlier rungs' too), so neither the allocator's peak nor the pool's size is this
        # step's.
        return GRAPH_MEMORY_NOTE if self.compile in CUDA_GRAPH_MODES else None

    def recipe(self, device: torch.device | str) -> AmpRecipe:
        """The AMP recipe of the precision on ``device``."""
        return AmpRecipe(device, self.precision)


def skip_reason(configuration: Variant, device: torch.device, smoke: bool = False) -> str | None:
    """Why ``configuration`` cannot run on ``device`` (None: it can).

    ``smoke``: a smoke run that compiles unasked (the ladder's): compiling on a CPU takes
    minutes, so it is left out there. The matrix compiles only when asked (``--compile``).
    Never raises.
    """
    config = configuration
    device = torch.device(device)
    cuda = device.type == "cuda"
    if config.model == "timm" and timm_vit.unavailable():
        return timm_vit.unavailable()
    if config.precision.tf32_matmuls:
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
    dtype = config.precision.dtype if config.precision.autocast else torch.float32
    if config.attention in gpus.ATTENTION and cuda:
        refusal = _attention_refusal(config.attention, device, dtype)
        if refusal:
            return refusal
    if config.fused:
        return fused_adamw_unavailable(device)
    return None


def _attention_refusal(kernel: str, device: torch.device, dtype: torch.dtype) -> str | None:
    """Why the GPU, or the one rehearsed on it, has no SDPA ``kernel`` for ``dtype`` inputs, by
    its compute capability and the rules of ``ac.gpus`` (a T4 has no flash attention: restricted
    to it, SDPA would fail with "No available kernel" after the rung's compile); None where it
    has one, or where the GPU cannot be asked."""
    profile = emulation.active()
    try:
        capability = tuple(emulation.capability(device))
        if profile is not None:
            gpu = f"the emulated {profile.name}"
        else:
            major, minor = capability
            gpu = f"this {torch.cuda.get_device_name(cuda_index(device))} (sm_{major}{minor})"
    except Exception:  # noqa: BLE001 - no answer from the GPU: let the rung try
        return None
    if gpus.attention_takes(kernel, precisions.get(dtype).name, capability):
        return None
    some = gpus.attention_dtypes(kernel, capability)  # for other dtypes: say which
    return f"{gpu} has no {kernel} attention kernel" + (f" for {dtype}" if some else "")


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
