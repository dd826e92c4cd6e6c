"""Lesson settings: turn a notebook's parameters cell into a device, a precision (read once, into
the ``AmpRecipe`` every later cell asks), a sizes mode and a seed, and set up the lesson's kernel
(an emulated GPU's limits, a readable out-of-memory error)."""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from . import cpu, emulation, env_vars, gpus, oom, precisions
from .device import (
    DeviceFallbackWarning,
    describe_hardware,
    pick_device,
    pick_precision,
)
from .recipe import AmpRecipe, set_tf32, tf32_enabled

SMOKE_ENV = env_vars.SMOKE

# The first code cell of every notebook, verbatim (tests/test_repository.py keeps them equal).
# It must run before the package is importable, so it cannot call into it. In Colab (or when
# env_vars.SIMULATE_COLAB=1, which the tests use) it clones the course from env_vars.SOURCE and
# installs it; in a checkout it puts the repository first on sys.path.
SETUP_CELL = f"""# Setup: the same cell works locally and in Colab.
import os, subprocess, sys
from pathlib import Path

IN_COLAB = "google.colab" in sys.modules or os.environ.get("{env_vars.SIMULATE_COLAB}") == "1"
if IN_COLAB and not Path("amp-course").exists():
    source = os.environ.get("{env_vars.SOURCE}", "https://github.com/amp-course/amp-course")
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
    recipe: AmpRecipe  # the device and the precision: autocast's dtype, a GradScaler
    seed: int
    hardware: str
    tf32: dict[str, bool] | None = None  # TF32 for matmuls and convolutions at start (CUDA only)
    emulated: emulation.GpuProfile | None = None  # the GPU rehearsed on this one, if any
    rehearsed_cpu: cpu.Rehearsal | None = None  # the kind of CPU rehearsed on this one, if any
    # What the choice of device and dtype had to say (no GPU, bf16 emulated on this CPU...): lines
    # of the header, where a learner reads them, not a warning's traceback on stderr.
    notes: tuple[str, ...] = ()

    @property
    def device(self) -> torch.device:
        return self.recipe.device

    @property
    def precision(self) -> precisions.Precision:
        """The precision the lesson runs in: a row of ``ac.precisions``."""
        return self.recipe.precision

    @property
    def autocast_dtype(self) -> torch.dtype:
        return self.recipe.autocast_dtype

    @property
    def use_grad_scaler(self) -> bool:
        return self.recipe.needs_scaler

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    @property
    def capability(self) -> tuple[int, int] | None:
        """The compute capability the course's rules use (the emulated GPU's); None on a CPU."""
        return emulation.capability(self.device) if self.on_gpu else None

    def header(self) -> str:
        """What a lesson prints under its title: mode, device, dtype, TF32, seed, emulation."""
        mode = "smoke (tiny sizes)" if self.smoke else "full"
        scaler = "with GradScaler" if self.use_grad_scaler else "no GradScaler needed"
        line = f"Mode: {mode} | device: {self.hardware} | AMP dtype: {self.recipe.name} ({scaler})"
        if self.tf32 is not None:
            state = {True: "on", False: "off"}
            line += (
                f" | TF32 at start: matmul {state[self.tf32['matmul']]}, "
                f"cuDNN conv {state[self.tf32['conv']]}"
            )
        line += f" | seed {self.seed}"
        if self.emulated is not None:
            line += f"\nRehearsal: {self.emulated.describe()}."
        if self.rehearsed_cpu is not None and not self.on_gpu:
            line += f"\nRehearsal: {self.rehearsed_cpu.describe()}."
        line += "".join(f"\nNote: {note}" for note in self.notes)
        return line


def resolve_smoke(smoke: bool | None, device: torch.device) -> bool:
    """The course's one smoke rule: ``smoke`` when given, else ``env_vars.SMOKE`` when set, else
    smoke on any device but a GPU. The lesson's settings, ``ac.data`` and the CLI all ask it."""
    if isinstance(smoke, str):  # papermill -p SMOKE false passes the text 'false'
        said = env_vars.yes_no(smoke)
        need = "True (tiny sizes), False (full sizes) or None (smoke on any device but a GPU)"
        require(said is not None, "SMOKE", smoke, need)
        return said
    if smoke is not None:
        return bool(smoke)
    forced = env_vars.flag(SMOKE_ENV)
    return (device.type != "cuda") if forced is None else forced


def require(ok: bool, setting: str, value, need: str) -> None:
    """Refuse a lesson's parameter that the lesson cannot run with, naming it and what it needs
    (``SETTING=value: need``), before any cell spends time on it."""
    if not ok:
        raise ValueError(f"{setting}={value!r}: {need}")


def _whole_seed(seed) -> int:
    """``seed`` as an int: a whole number, or text that spells one (papermill -p SEED 7)."""
    try:
        whole = int(seed)
    except (TypeError, ValueError):
        whole = None
    ok = not isinstance(seed, bool) and whole is not None
    require(ok and (isinstance(seed, str) or whole == seed), "SEED", seed, "a whole number")
    return whole


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA); a seed that is not a whole number is refused
    as the lesson's SEED is (NumPy's own error named a cast rule)."""
    seed = _whole_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rehearse(device: torch.device) -> emulation.GpuProfile | None:
    """The GPU ``AMP_COURSE_EMULATE`` rehearses, applied to this process on a CUDA ``device``:
    its memory cap and attention kernels, and TF32 off (cuDNN convolutions default to TF32; a T4
    has none). None where nothing is rehearsed. A lesson's start applies it, and so does each
    torchrun rank that lesson 07 launches (``dist_train.setup``)."""
    profile = emulation.active() if torch.device(device).type == "cuda" else None
    if profile is not None:
        emulation.apply(profile, device)
        set_tf32(False)
    return profile


def _choose(device: str, autocast_dtype: str):
    """The device, the GPU it rehearses (if any) and the precision a lesson asks for; each
    fallback or caveat is a DeviceFallbackWarning, which ``start`` turns into a header note."""
    torch_device = pick_device(device)
    profile = rehearse(torch_device)
    if str(autocast_dtype).lower() == "auto":
        return torch_device, profile, pick_precision(torch_device)
    chosen = precisions.get(autocast_dtype)
    # Every lesson compares AMP with fp32: an AMP_DTYPE of fp32 leaves nothing to compare.
    need = "'auto', 'bf16' or 'fp16' (it turns autocast off, and the lesson compares AMP with fp32)"
    require(chosen.autocast, "AMP_DTYPE", autocast_dtype, need)
    if chosen is precisions.BF16 and torch_device.type == "cuda":
        capability = emulation.capability(torch_device)  # the rehearsed GPU's, else this one's
        if not gpus.has_tensor_cores(capability, "bf16"):
            if profile is not None:
                which, here = f"a {profile.name}", ", while this GPU runs it at full speed here"
            else:
                major, minor = capability
                which, here = f"this GPU (sm_{major}{minor})", "; its AMP is fp16 with GradScaler"
            warnings.warn(
                f"AMP dtype bf16 was asked for: {which} has no bf16 tensor cores (it runs bf16 "
                f"emulated, and slowly){here}.",
                DeviceFallbackWarning,
                stacklevel=2,
            )
    return torch_device, profile, chosen


def start(
    smoke: bool | None = None,
    device: str = "auto",
    seed: int = 0,
    autocast_dtype: str = "auto",
    verbose: bool = True,
    *,
    size_settings: tuple[str, ...] = (),
) -> LessonSettings:
    """Derive a lesson's settings from its parameters, seed everything and print the header.

    On a GPU, ``$AMP_COURSE_EMULATE`` (``ac.emulation``) makes the kernel a smaller GPU's
    rehearsal, and an out-of-memory error in any later cell is shown as a message naming
    ``size_settings`` (the parameters that set the lesson's batch or model sizes).
    """
    cpu.separate_inductor_cache()  # before the lesson's first torch.compile
    with warnings.catch_warnings(record=True) as caught:  # the notes, said in the header
        warnings.simplefilter("always", DeviceFallbackWarning)
        torch_device, profile, chosen = _choose(device, autocast_dtype)
    notes = []
    for caught_warning in caught:
        if issubclass(caught_warning.category, DeviceFallbackWarning):
            notes.append(str(caught_warning.message))
        else:  # anything else is not the course's to rephrase
            warnings.warn_explicit(
                caught_warning.message,
                caught_warning.category,
                caught_warning.filename,
                caught_warning.lineno,
            )
    on_gpu = torch_device.type == "cuda"
    settings = LessonSettings(
        smoke=resolve_smoke(smoke, torch_device),
        recipe=AmpRecipe(torch_device, chosen),
        seed=_whole_seed(seed),
        hardware=describe_hardware(torch_device),
        tf32=tf32_enabled() if on_gpu else None,
        emulated=profile,
        rehearsed_cpu=cpu.active_rehearsal(),
        notes=tuple(notes),
    )
    seed_everything(settings.seed)
    if on_gpu:
        oom.register(size_settings, torch_device)
    if verbose:
        print(settings.header())
    return settings
