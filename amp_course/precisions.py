"""The course's one table of precisions: fp32, tf32, fp16 and bf16, what each is called, what it
stores, whether autocast and a GradScaler run, which GPUs have tensor cores for it and which CPU
flags give it a native path. ``device``, ``emulation``, ``recipe``, ``bench``, ``capstone``,
the inspector, the command line and the lessons read it; nothing else spells these facts.

This module sits below every other one but ``ac.gpus`` (which GPUs have tensor cores for each
format). It does not import
torch at module level either: the command line builds its help from ``NAMES`` without paying for
torch; ``Precision.dtype`` imports it when asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gpus import tensor_cores_from


@dataclass(frozen=True)
class Precision:
    """One way of training: its names, its storage dtype, and what runs with it."""

    name: str  # short name: tables, headers, ``--precisions``
    spellings: tuple[str, ...]  # other names a learner may type for it
    storage: str  # the torch dtype tensors are stored and autocast computes in, e.g. "float16"
    autocast: bool  # autocast on (a 16-bit dtype); fp32 and tf32 train with autocast off
    grad_scaler: bool  # a GradScaler runs: only fp16, whose range is too narrow for gradients
    # Compute capability of the first NVIDIA GPUs with tensor cores for it (``ac.gpus``); None:
    # plain fp32 needs none.
    min_capability: tuple[int, int] | None
    tf32_matmuls: bool  # float32 matmuls and convolutions may round their inputs to TF32
    # CPU flags (as /proc/cpuinfo names them) of which any one gives torch a native path for it:
    # native bf16 dot products (AVX512-BF16, AMX-BF16); for fp16, what torch's oneDNN fp16 kernels
    # need ("fp16 path needs the cpu support avx_ne_convert or avx512_fp16",
    # mkldnn_fp16_device_check in torch's sources).
    cpu_flags: frozenset[str] = frozenset()

    @property
    def dtype(self):
        """The torch dtype: ``torch.float16`` for fp16, ``torch.float32`` for fp32 and tf32."""
        import torch

        return getattr(torch, self.storage)

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this precision answers to, its short name first."""
        return (self.name, *self.spellings)

    @property
    def label(self) -> str:
        """The name of the training recipe: "fp16 + GradScaler", "bf16"."""
        return self.name + (" + GradScaler" if self.grad_scaler else "")


FP32 = Precision(
    "fp32",
    ("float32", "float"),
    storage="float32",
    autocast=False,
    grad_scaler=False,
    min_capability=None,
    tf32_matmuls=False,
)
TF32 = Precision(
    "tf32",
    (),
    storage="float32",
    autocast=False,
    grad_scaler=False,
    min_capability=tensor_cores_from("tf32"),
    tf32_matmuls=True,
)
FP16 = Precision(
    "fp16",
    ("float16", "half"),
    storage="float16",
    autocast=True,
    grad_scaler=True,
    min_capability=tensor_cores_from("fp16"),
    tf32_matmuls=False,
    cpu_flags=frozenset({"avx512_fp16", "avx_ne_convert"}),
)
BF16 = Precision(
    "bf16",
    ("bfloat16",),
    storage="bfloat16",
    autocast=True,
    grad_scaler=False,
    min_capability=tensor_cores_from("bf16"),
    tf32_matmuls=False,
    cpu_flags=frozenset({"avx512_bf16", "amx_bf16"}),
)

PRECISIONS = {p.name: p for p in (FP32, TF32, FP16, BF16)}
NAMES = tuple(PRECISIONS)  # ("fp32", "tf32", "fp16", "bf16")
# One precision per storage dtype: what a model trains in, the autocast dtype's choices. TF32 is
# fp32 storage with a matmul setting, so the dtype float32 is fp32.
BY_STORAGE = {p.storage: p for p in (FP32, FP16, BF16)}


def name_of(dtype) -> str:
    """A dtype's short name for tables and messages: ``torch.bfloat16`` -> ``"bf16"``; a dtype that
    is no row's storage (float64, float8) by torch's own name."""
    key = str(dtype).removeprefix("torch.")
    row = BY_STORAGE.get(key)
    return row.name if row else key


def get(name) -> Precision:
    """The course's one parser of precisions: the row a learner's name stands for ("bf16",
    "bfloat16", "torch.bfloat16", "tf32"...), a torch dtype's row (float32 is fp32, not tf32), or
    ``name`` itself when it is a row already."""
    if isinstance(name, Precision):
        return name
    key = str(name).strip().lower().removeprefix("torch.")
    for precision in PRECISIONS.values():
        if key in precision.names:
            return precision
    spellings = ", ".join(n for p in PRECISIONS.values() for n in p.names)
    raise ValueError(f"Unknown precision {str(name)!r}. Valid choices: {spellings}.")
