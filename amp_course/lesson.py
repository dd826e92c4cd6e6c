"""Lesson settings: turn a notebook's parameters cell into a device, dtype, sizes mode and seed."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import numpy as np
import torch

from .device import describe_hardware, dtype_name, parse_dtype, pick_autocast_dtype, pick_device
from .device import use_grad_scaler as _use_grad_scaler

SMOKE_ENV = "AMP_COURSE_SMOKE"

# The first code cell of every notebook, verbatim (tests/test_repository.py keeps them equal).
# It must run before the package is importable, so it cannot call into it. In Colab (or when
# AMP_COURSE_SIMULATE_COLAB=1, which the tests use) it clones the course from AMP_COURSE_SOURCE
# and installs it; in a checkout it puts the repository first on sys.path.
SETUP_CELL = """# Setup: the same cell works locally and in Colab.
import os, subprocess, sys
from pathlib import Path

IN_COLAB = "google.colab" in sys.modules or os.environ.get("AMP_COURSE_SIMULATE_COLAB") == "1"
if IN_COLAB and not Path("amp-course").exists():
    source = os.environ.get("AMP_COURSE_SOURCE", "https://github.com/amp-course/amp-course")
    subprocess.run(["git", "clone", "--depth", "1", source, "amp-course"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", "amp-course"], check=True)
if IN_COLAB:
    sys.path.insert(0, str(Path("amp-course").resolve()))
elif Path("../amp_course").is_dir():  # a checkout opened without `make course`
    sys.path.insert(0, str(Path("..").resolve()))

import amp_course as ac"""


@dataclass
class LessonSettings:
    """What a lesson runs with, derived from its parameters cell."""

    smoke: bool
    device: torch.device
    autocast_dtype: torch.dtype
    use_grad_scaler: bool
    seed: int
    hardware: str

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def header(self) -> str:
        """The line a lesson prints under its title: mode, device, dtype, versions."""
        mode = "smoke (tiny sizes)" if self.smoke else "full"
        scaler = "with GradScaler" if self.use_grad_scaler else "no GradScaler needed"
        return (
            f"Mode: {mode} | device: {self.hardware} | AMP dtype: "
            f"{dtype_name(self.autocast_dtype)} ({scaler}) | seed {self.seed}"
        )


def resolve_smoke(smoke: bool | None, device: torch.device) -> bool:
    """None means: smoke when $AMP_COURSE_SMOKE is 1/true, or when running on a CPU."""
    if smoke is not None:
        return bool(smoke)
    env = os.environ.get(SMOKE_ENV, "").strip().lower()
    if env in ("1", "true", "yes"):
        return True
    if env in ("0", "false", "no"):
        return False
    return device.type != "cuda"


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def start(
    smoke: bool | None = None,
    device: str = "auto",
    seed: int = 0,
    autocast_dtype: str = "auto",
    verbose: bool = True,
) -> LessonSettings:
    """Derive a lesson's settings from its parameters, seed everything and print the header."""
    torch_device = pick_device(device)
    if str(autocast_dtype).lower() == "auto":
        dtype = pick_autocast_dtype(torch_device)
    else:
        dtype = parse_dtype(autocast_dtype)
    settings = LessonSettings(
        smoke=resolve_smoke(smoke, torch_device),
        device=torch_device,
        autocast_dtype=dtype,
        use_grad_scaler=_use_grad_scaler(dtype),
        seed=int(seed),
        hardware=describe_hardware(torch_device),
    )
    seed_everything(settings.seed)
    if verbose:
        print(settings.header())
    return settings
