"""Device and dtype choice: which device to train on and which autocast dtype suits it."""

from __future__ import annotations

import os
import platform
import warnings
from functools import lru_cache

import torch

DEVICE_NAMES = ("auto", "cpu", "cuda")

# Every spelling a learner might type, mapped to the torch dtype it means.
# "tf32" is not a storage dtype: it is fp32 with TF32 matmuls, so it maps to float32.
DTYPE_ALIASES = {
    "fp32": torch.float32,
    "float32": torch.float32,
    "float": torch.float32,
    "tf32": torch.float32,
    "fp16": torch.float16,
    "float16": torch.float16,
    "half": torch.float16,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
}

# bf16 tensor cores arrived with Ampere (compute capability 8.0).
BF16_MIN_CAPABILITY = (8, 0)


class DeviceFallbackWarning(UserWarning):
    """A requested device or dtype is not available here, and the course uses another."""


def pick_device(name: str = "auto") -> torch.device:
    """Return the torch device for ``"auto"``, ``"cpu"`` or ``"cuda"``.

    Warns and falls back to the CPU where the device asked for is not there.
    """
    key = str(name).strip().lower()
    if key.startswith("cuda:"):
        key, index = "cuda", key.split(":", 1)[1]
    else:
        index = None
    if key not in DEVICE_NAMES:
        raise ValueError(f"Unknown device {name!r}. Valid choices: {', '.join(DEVICE_NAMES)}.")
    if key == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", int(index)) if index is not None else torch.device("cuda")
    if key == "cuda":
        warnings.warn(
            "DEVICE='cuda' was requested but no CUDA GPU is visible "
            "(torch.cuda.is_available() is False). Falling back to DEVICE='cpu': "
            "the lesson runs, but GPU-only figures are explained instead of measured.",
            DeviceFallbackWarning,
            stacklevel=2,
        )
    return torch.device("cpu")


def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    """Turn ``"bf16"``, ``"float16"``, ``torch.float32``... into a torch dtype.

    An unknown name raises an error that lists the valid ones.
    """
    if isinstance(name, torch.dtype):
        if name in DTYPE_ALIASES.values():
            return name
        raise ValueError(f"Unsupported dtype {name}. Valid choices: {', '.join(DTYPE_ALIASES)}.")
    key = str(name).strip().lower().removeprefix("torch.")
    if key not in DTYPE_ALIASES:
        raise ValueError(f"Unknown dtype name {name!r}. Valid choices: {', '.join(DTYPE_ALIASES)}.")
    return DTYPE_ALIASES[key]


def dtype_name(dtype: torch.dtype) -> str:
    """Short name of a dtype for tables: ``torch.bfloat16`` -> ``"bf16"``."""
    return {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}.get(
        dtype, str(dtype).removeprefix("torch.")
    )


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags Linux reports (empty where /proc/cpuinfo is absent)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


@lru_cache(maxsize=1)
def cpu_name() -> str:
    """The CPU model name Linux reports (e.g. ``"AMD EPYC 7B13"``), else the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_has_fast_bf16(flags: frozenset[str] | None = None) -> bool:
    """True when the CPU has native bf16 arithmetic (AVX512-BF16 or AMX), or is Apple silicon."""
    flags = cpu_flags() if flags is None else flags
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        return True
    return bool({"avx512_bf16", "amx_bf16"} & flags)


def pick_autocast_dtype(device: torch.device | str, *, warn: bool = True) -> torch.dtype:
    """The autocast dtype for this hardware: bf16 on CUDA >= 8.0 and on CPU, fp16 on older GPUs."""
    device = torch.device(device)
    if device.type == "cuda":
        # torch.cuda.is_bf16_supported() says True on a T4 because bf16 is emulated there;
        # only compute capability >= 8.0 has bf16 tensor cores, so decide by capability.
        capability = torch.cuda.get_device_capability(device)
        return torch.bfloat16 if capability >= BF16_MIN_CAPABILITY else torch.float16
    if device.type == "cpu":
        if warn and not cpu_has_fast_bf16():
            warnings.warn(
                "This CPU has neither AVX512-BF16 nor AMX, so bf16 autocast is emulated and "
                "may be slower than fp32 here. The lessons still run; speed figures will show it.",
                DeviceFallbackWarning,
                stacklevel=2,
            )
        return torch.bfloat16
    raise ValueError(f"No autocast dtype rule for device type {device.type!r}.")


def use_grad_scaler(autocast_dtype: torch.dtype) -> bool:
    """Only fp16 needs loss scaling; bf16 and fp32 have fp32's exponent range."""
    return autocast_dtype == torch.float16


def describe_hardware(device: torch.device | str) -> str:
    """One line naming the device, its precision support and the versions, for notebook headers."""
    device = torch.device(device)
    versions = f"torch {torch.__version__}"
    try:
        import torchvision

        versions += f", torchvision {torchvision.__version__}"
    except ImportError:
        pass
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        major, minor = torch.cuda.get_device_capability(device)
        mem_gib = torch.cuda.get_device_properties(device).total_memory / 2**30
        dtype = dtype_name(pick_autocast_dtype(device))
        return f"{name} (sm_{major}{minor}, {mem_gib:.0f} GiB), autocast {dtype}; {versions}"
    cpu = cpu_name()
    bf16 = "native bf16 (AVX512-BF16/AMX)" if cpu_has_fast_bf16() else "no native bf16"
    threads = torch.get_num_threads()
    return f"CPU {cpu}, {os.cpu_count()} cores ({threads} torch threads), {bf16}; {versions}"
