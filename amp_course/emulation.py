"""Rehearse a smaller GPU on a bigger one: a Colab T4 on an H100 (``AMP_COURSE_EMULATE=t4``).

What a lesson can observe through settings is emulated: the memory the process may allocate
(``torch.cuda.set_per_process_memory_fraction``), the compute capability the course's dtype rule
reads (7.5: fp16 with a GradScaler, no bf16 tensor cores), TF32 (Turing has none: off, and kept off)
and the attention kernels (flash and cuDNN attention need compute capability 8.0: off). Speed is
not: the bigger GPU's tensor cores still run, so an emulated run's timings are not a T4's, and code
that forces bf16 still runs it at the bigger GPU's speed (a real T4 runs bf16 too, slowly).
``ac.lesson.start`` applies the emulation in every lesson kernel; ``amp-course gpu --emulate t4``
sets the variable for the kernels it starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from .device_index import cuda_index
from .env_vars import EMULATE
from .precisions import BF16_MIN_CAPABILITY

ENV = EMULATE


@dataclass(frozen=True)
class GpuProfile:
    """A GPU the course can rehearse: what its settings allow."""

    key: str
    name: str
    capability: tuple[int, int]
    memory_bytes: int  # what the process may allocate
    tf32: bool  # TF32 tensor cores (compute capability 8.0 and later)
    fused_attention: bool  # flash and cuDNN attention kernels (compute capability 8.0 and later)

    def describe(self) -> str:
        """One line: what this emulation changes, and what it cannot."""
        return (
            f"emulating a {self.name} (sm_{self.capability[0]}{self.capability[1]}) on this GPU: "
            f"memory capped at {self.memory_bytes / 2**30:.1f} GiB, "
            f"{'bf16 and fp16' if self.capability >= BF16_MIN_CAPABILITY else 'fp16 (no bf16)'} "
            "for AMP, "
            f"TF32 {'allowed' if self.tf32 else 'off'}, flash and cuDNN attention "
            f"{'allowed' if self.fused_attention else 'off'}; timings are this GPU's, not a "
            f"{self.name}'s"
        )


# A T4 has 16 GB (NVIDIA's datasheet); Colab shows about 15 GB to a process.
PROFILES = {
    "t4": GpuProfile("t4", "Tesla T4", (7, 5), 15 * 2**30, tf32=False, fused_attention=False),
}


def active() -> GpuProfile | None:
    """The profile ``$AMP_COURSE_EMULATE`` names, or None; an unknown name is refused."""
    key = os.environ.get(ENV, "").strip().lower()
    if not key:
        return None
    if key not in PROFILES:
        raise ValueError(
            f"{ENV}={key!r} names no GPU the course can emulate; choose from {', '.join(PROFILES)}."
        )
    return PROFILES[key]


def capability(device: torch.device | str) -> tuple[int, int]:
    """The compute capability the course's rules read for a CUDA ``device``: the emulated GPU's
    under emulation, else the device's own."""
    profile = active()
    if profile is not None:
        return profile.capability
    return tuple(torch.cuda.get_device_capability(cuda_index(device)))


def tf32_allowed() -> bool:
    """False while a GPU without TF32 is emulated: TF32 stays off even where code asks for it."""
    profile = active()
    return profile is None or profile.tf32


def apply(profile: GpuProfile, device: torch.device | str) -> float:
    """Cap the process's memory on ``device`` and switch off the attention kernels ``profile``
    lacks; returns the memory fraction set. TF32 is held off by ``ac.precision``."""
    index = cuda_index(device)
    total = torch.cuda.get_device_properties(index).total_memory
    fraction = min(1.0, profile.memory_bytes / total)
    torch.cuda.set_per_process_memory_fraction(fraction, index)
    if not profile.fused_attention:
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_cudnn_sdp(False)
    return fraction
