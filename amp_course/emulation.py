"""Rehearse a smaller GPU on a bigger one: a Colab T4 on an H100 (``AMP_COURSE_EMULATE=t4``).

The rehearsal is the rehearsed GPU's row of ``ac.gpus`` applied. What a lesson can observe through
settings is emulated: the memory the process may allocate
(``torch.cuda.set_per_process_memory_fraction``), the compute capability the course's rules read
(a T4's 7.5: fp16 with a GradScaler, no bf16 tensor cores), TF32 (a T4 has no TF32 tensor cores:
off, and kept off) and the attention kernels: a kernel that takes no dtype on the rehearsed GPU
is switched off (flash and cuDNN on a T4), and ``ac.attention`` refuses the dtypes a kernel does
not take there (memory-efficient attention in bf16 on a T4). Speed is not: the bigger GPU's tensor
cores still run, so an emulated run's timings are not a T4's, and code that forces bf16 still runs
it at the bigger GPU's speed (a real T4 runs bf16 too, slowly). ``ac.lesson.start`` applies the
emulation in every lesson kernel; ``amp-course gpu --emulate t4`` sets the variable for the
kernels it starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from . import gpus
from .device_index import cuda_index
from .env_vars import EMULATE

ENV = EMULATE


@dataclass(frozen=True)
class GpuProfile:
    """A GPU the course can rehearse: its row of ``ac.gpus`` and the memory a process may use."""

    key: str
    gpu: gpus.Gpu
    memory_bytes: int  # what the process may allocate

    @property
    def name(self) -> str:
        return self.gpu.device_name

    @property
    def capability(self) -> gpus.Capability:
        return self.gpu.capability

    @property
    def tf32(self) -> bool:
        """TF32 tensor cores: TF32 may be on."""
        return self.gpu.has_tensor_cores("tf32")

    def attention_dtypes(self, kernel: str) -> tuple[str, ...]:
        """The input dtypes SDPA's ``kernel`` takes on this GPU (none: switched off)."""
        return gpus.attention_dtypes(kernel, self.capability)

    def describe(self) -> str:
        """One line: what this emulation changes, and what it cannot."""
        amp = "bf16 and fp16" if self.gpu.has_tensor_cores("bf16") else "fp16 (no bf16)"
        kernels = []
        for kernel, label in (("flash", "flash"), ("cudnn", "cuDNN"), ("efficient", "efficient")):
            dtypes = self.attention_dtypes(kernel)
            kernels.append(f"{label} {' and '.join(dtypes) if dtypes else 'off'}")
        return (
            f"emulating a {self.name} (sm_{self.capability[0]}{self.capability[1]}) on this GPU: "
            f"memory capped at {self.memory_bytes / 2**30:.1f} GiB, {amp} for AMP, "
            f"TF32 {'allowed' if self.tf32 else 'off'}, attention kernels: {', '.join(kernels)}; "
            f"timings are this GPU's, not a {self.name}'s"
        )


# A T4 has 16 GB (its row of ac.gpus); Colab shows about 15 GB to a process.
PROFILES = {"t4": GpuProfile("t4", gpus.GPUS["T4"], 15 * 2**30)}
# How torch switches each SDPA kernel on or off for the whole process.
KERNEL_SWITCHES = {
    "flash": "enable_flash_sdp",
    "cudnn": "enable_cudnn_sdp",
    "efficient": "enable_mem_efficient_sdp",
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
    """Cap the process's memory on ``device`` and switch off the attention kernels that take no
    dtype on ``profile``'s GPU; returns the memory fraction set. TF32 is held off by
    ``ac.recipe``; ``ac.attention`` refuses the dtypes a kernel left on does not take."""
    index = cuda_index(device)
    total = torch.cuda.get_device_properties(index).total_memory
    fraction = min(1.0, profile.memory_bytes / total)
    torch.cuda.set_per_process_memory_fraction(fraction, index)
    for kernel, switch in KERNEL_SWITCHES.items():
        if not profile.attention_dtypes(kernel):
            getattr(torch.backends.cuda, switch)(False)
    return fraction
