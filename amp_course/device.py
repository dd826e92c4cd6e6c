"""Device choice: which device to train on and which precision (a row of ``ac.precisions``) suits
it, the machine record and the header's hardware line. What autocast and a GradScaler do with a
precision is ``ac.recipe``'s; what this CPU has, ``ac.cpu``'s; dtypes and their names, the rows'."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import re
import warnings

import torch

from . import cpu, emulation, gpus, precisions
from .device_index import cuda_index

DEVICE_NAMES = ("auto", "cpu", "cuda")


class DeviceFallbackWarning(UserWarning):
    """A requested device or dtype is not available here, and the course uses another."""


def pick_device(name: str = "auto") -> torch.device:
    """The torch device for ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Without a CUDA GPU, ``"cuda"`` and ``"cuda:N"`` warn and fall back to the CPU (the lessons
    still run); with one, ``"cuda:N"`` must name a GPU this machine has.
    """
    key = str(name).strip().lower()
    index = None
    if key.startswith("cuda:"):
        key, number = "cuda", key.removeprefix("cuda:")
        if not number.isdigit():
            key = name  # not a GPU number: refused below with the valid choices
        else:
            index = int(number)
    if key not in DEVICE_NAMES:
        raise ValueError(
            f"Unknown device {name!r}. Valid choices: {', '.join(DEVICE_NAMES)} or cuda:N."
        )
    if key == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        if index is None:
            return torch.device("cuda")
        count = torch.cuda.device_count()
        if index >= count:
            raise ValueError(
                f"DEVICE={name!r} but this machine has {count} CUDA GPU(s), cuda:0 to "
                f"cuda:{count - 1}."
            )
        return torch.device("cuda", index)
    if key == "cuda":
        warnings.warn(
            f"DEVICE={name!r} was requested but no CUDA GPU is visible "
            "(torch.cuda.is_available() is False). Falling back to DEVICE='cpu': "
            "the lesson runs, but GPU-only figures are explained instead of measured.",
            DeviceFallbackWarning,
            stacklevel=2,
        )
    return torch.device("cpu")


def recommended_precision(
    capability: tuple[int, int] | None, *, cpu_bf16=None
) -> precisions.Precision:
    """The course's one rule for what to train in: a row of ``ac.precisions``.

    A GPU, given its compute capability: bf16 where it has bf16 tensor cores (``ac.gpus``), fp16
    with a GradScaler where it has none. A CPU (``capability=None``): bf16 only where it was
    measured faster than fp32 there: ``cpu_bf16`` is ``ac.timing.compare(fp32_timing,
    bf16_timing)`` of a training step on that CPU, and only a "faster" verdict (outside the
    spread of the runs) gives bf16.
    Unmeasured, or slower, or within the noise: float32 (autocast off). Native bf16 (the flags)
    explains a speed-up but does not promise one: the course's CPUs with AVX512-BF16 or AMX
    measured bf16 slower than fp32 for its small models.
    """
    if capability is not None:
        return precisions.BF16 if gpus.has_tensor_cores(capability, "bf16") else precisions.FP16
    faster = cpu_bf16 is not None and cpu_bf16.verdict == "faster"
    return precisions.BF16 if faster else precisions.FP32


def pick_precision(device: torch.device | str, *, warn: bool = True) -> precisions.Precision:
    """The 16-bit precision autocast uses on this hardware: by compute capability on CUDA, bf16
    on CPU.

    On a CPU the lessons run bf16 autocast to show what it does, whatever
    ``recommended_precision`` says to train in there (which takes a measurement); without native
    bf16 this warns that it is emulated.
    """
    device = torch.device(device)
    if device.type == "cuda":
        # torch.cuda.is_bf16_supported() says True on a T4 because bf16 is emulated there;
        # decide by bf16 tensor cores, which ac.gpus gives by capability (the rehearsed GPU's
        # under ac.emulation).
        return recommended_precision(emulation.capability(device))
    if device.type == "cpu":
        if warn and not cpu.has_native(precisions.BF16):
            warnings.warn(
                "bf16 autocast runs emulated on this CPU: it has no AVX512-BF16 or AMX that "
                "torch may use here (ac.cpu.describe). "
                "The lessons still run it to show what it does; lesson 05 measures what it costs "
                "on this CPU, and only a measured speed-up makes bf16 the dtype to train in.",
                DeviceFallbackWarning,
                stacklevel=2,
            )
        return precisions.BF16
    raise ValueError(f"No autocast dtype rule for device type {device.type!r}.")


def device_name(device: torch.device | str) -> str:
    """The GPU's name, or ``CPU <processor> (<instruction set torch uses>)``."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(cuda_index(device))
    return f"CPU {cpu.name()} ({torch.backends.cpu.get_cpu_capability()})"


def device_slug(name: str) -> str:
    """A folder name for a device: ``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def versions() -> dict[str, str | int | None]:
    """Python, torch, torchvision, CUDA and cuDNN versions: what a reader needs to compare runs."""
    # The installed distribution's version: importing torchvision to ask it would cost a lesson
    # that builds no torchvision model more than a second (it imports torch._dynamo).
    try:
        vision = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        vision = None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": vision,
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
    }


def machine_record(device: torch.device | str) -> dict:
    """Where a result was measured: the device, its capability and memory, versions and date."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    memory = torch.cuda.get_device_properties(cuda_index(device)).total_memory if cuda else None
    return {
        "device": device_name(device),
        "device_type": device.type,
        "capability": list(torch.cuda.get_device_capability(cuda_index(device))) if cuda else None,
        "memory_gib": round(memory / 2**30, 1) if cuda else None,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "versions": versions(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def describe_hardware(device: torch.device | str) -> str:
    """One line naming the device, its precision support and the versions, for notebook headers."""
    device = torch.device(device)
    record = machine_record(device)
    found = record["versions"]
    software = f"torch {found['torch']}"
    if found["torchvision"]:
        software += f", torchvision {found['torchvision']}"
    if device.type == "cuda":
        major, minor = record["capability"]
        # What the GPU supports, not what a lesson runs: a lesson may choose fp16 on a bf16 GPU.
        bf16 = recommended_precision((major, minor)) is precisions.BF16
        support = "bf16 and fp16" if bf16 else "fp16, no bf16"
        return (
            f"{record['device']} (sm_{major}{minor}, {record['memory_gib']:.0f} GiB, {support}); "
            f"{software}"
        )
    cores, threads = os.cpu_count(), torch.get_num_threads()
    return (
        f"{record['device']}, {_count(cores, 'core')} ({_count(threads, 'torch thread')}), "
        f"{cpu.describe()}; {software}"
    )


def _count(number: int | None, noun: str) -> str:
    """``1 core``, ``2 cores``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
