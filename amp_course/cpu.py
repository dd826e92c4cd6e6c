"""This CPU as the course sees it: its name, the flags Linux reports, which of them torch's kernels
may use, and so whether bf16 and fp16 autocast have a native path here; and the rehearsal of a
CPU without native bf16 on one that has it.

torch reads two dispatch caps from the environment when it starts: ``ATEN_CPU_CAPABILITY`` (the
vector width of ATen's own kernels) and oneDNN's ``ONEDNN_MAX_CPU_ISA`` (older name
``DNNL_MAX_CPU_ISA``: the newest instructions its matmuls and convolutions may use). The bf16
dot products (AVX512-BF16, AMX-BF16) and the fp16 paths are oneDNN's, so a cap below them makes
bf16 autocast emulated on a CPU that has them, and ``has_native`` says so. A rehearsal
(``REHEARSALS``) is a set of such caps, with a torch.compile cache of its own, as a cap set by hand
gets (``separate_inductor_cache``): ``amp-course rehearse-cpu avx2 -- COMMAND`` runs a command with
them; ``make test REHEARSE_CPU=avx2`` and ``amp-course smoke-bench --rehearse-cpu avx2`` use it.
Like the T4 rehearsal on a GPU (``ac.emulation``), it changes what runs, not the speed of the
machine: a rehearsed run takes this CPU's clock, caches and memory with it.

Tests make a lesson see another CPU with ``$AMP_COURSE_FAKE_CPU_FLAGS`` (flags as /proc/cpuinfo
lists them, space- or comma-separated): ``flags`` returns those instead of this CPU's.
"""

from __future__ import annotations

import getpass
import os
import platform
import re
import tempfile
from collections.abc import MutableMapping
from dataclasses import dataclass
from functools import lru_cache

from . import precisions
from .env_vars import FAKE_CPU_FLAGS

ONEDNN_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")  # oneDNN reads the first set
ATEN_CAP_VARIABLE = "ATEN_CPU_CAPABILITY"
INDUCTOR_CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"

# Which of the native-path flags of ``ac.precisions`` each oneDNN cap leaves oneDNN free to use,
# from oneDNN's ISA definitions (src/cpu/x64/cpu_isa_traits.hpp): avx512_core_bf16 adds the bf16
# dot products; avx10_1_512 (alias avx512_core_fp16) adds fp16 on top of them; avx10_1_512_amx
# (avx512_core_amx) adds AMX-BF16; avx2_vnni_2 is the AVX2 line's AVX-NE-CONVERT. A cap not
# listed (ALL, DEFAULT, a newer ISA) restricts none of them.
_BF16 = "avx512_bf16"
_FP16 = "avx512_fp16"
_AMX = "amx_bf16"
ONEDNN_CAPS: dict[str, frozenset[str]] = {
    **{cap: frozenset() for cap in ("SSE41", "AVX", "AVX2", "AVX2_VNNI")},
    **{cap: frozenset() for cap in ("AVX512_MIC", "AVX512_MIC_4OPS")},
    **{cap: frozenset() for cap in ("AVX512_CORE", "AVX512_CORE_VNNI")},
    "AVX2_VNNI_2": frozenset({"avx_ne_convert"}),
    "AVX512_CORE_BF16": frozenset({_BF16}),
    "AVX512_CORE_FP16": frozenset({_BF16, _FP16}),
    "AVX10_1_512": frozenset({_BF16, _FP16}),
    "AVX512_CORE_AMX": frozenset({_BF16, _FP16, _AMX}),
    "AVX10_1_512_AMX": frozenset({_BF16, _FP16, _AMX}),
    "AVX512_CORE_AMX_FP16": frozenset({_BF16, _FP16, _AMX}),
    "AVX10_1_512_AMX_FP16": frozenset({_BF16, _FP16, _AMX}),
}
# The oneDNN caps below AVX-512: under one of them (and ATen's AVX2) no kernel uses avx512f.
_AVX2_OR_BELOW = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2"})
# The flags whose use a oneDNN cap governs: every native-path flag of the table of precisions.
_CAPPED = frozenset().union(*(p.cpu_flags for p in precisions.PRECISIONS.values()))


@dataclass(frozen=True)
class Rehearsal:
    """A kind of CPU to rehearse on this one: the caps that make torch dispatch as it would."""

    key: str
    kind: str  # what a reader calls such a CPU
    caps: dict[str, str]  # torch's cap variables, read when torch starts

    def environment(self) -> dict[str, str]:
        """The caps, and the torch.compile cache of their ATen capability (``inductor_cache``)."""
        return {**self.caps, INDUCTOR_CACHE_VARIABLE: inductor_cache(self.caps[ATEN_CAP_VARIABLE])}

    def describe(self) -> str:
        """One line: what the rehearsal changes, and what it cannot."""
        caps = ", ".join(f"{name}={value}" for name, value in self.caps.items())
        return (
            f"rehearsing {self.kind} ({caps}): torch's kernels dispatch as there, so bf16 "
            "autocast is emulated; the times are still this machine's clock, caches and memory"
        )


REHEARSALS = {
    "avx2": Rehearsal(
        "avx2",
        "a CPU without native bf16 (AVX2 only: most x86 laptops and desktops, AMD before Zen 4)",
        {ATEN_CAP_VARIABLE: "avx2", ONEDNN_CAP_VARIABLES[0]: "AVX2"},
    ),
}


def rehearsal_environment(key: str | None) -> dict[str, str]:
    """The environment variables of rehearsal ``key`` (None: no rehearsal, none to set); an
    unknown key names the valid ones."""
    if key is None:
        return {}
    try:
        return REHEARSALS[key].environment()
    except KeyError:
        raise ValueError(
            f"Unknown CPU rehearsal {key!r}. Valid choices: {', '.join(REHEARSALS)}."
        ) from None


def inductor_cache(capability: str) -> str:
    """The torch.compile cache of processes whose ATen kernels are capped at ``capability``.
    inductor's cache does not key its entries by ATEN_CPU_CAPABILITY, and a kernel compiled under
    the AVX2 cap, reused by an uncapped process, aborts it ("free(): invalid pointer": torch
    2.14.1, labs_modern_stack's compiled class means, seen here)."""
    user = getpass.getuser() or "user"
    name = re.sub(r"[^a-z0-9_]", "_", capability.strip().lower())
    return os.path.join(tempfile.gettempdir(), f"torchinductor_{user}_rehearsing_{name}")


def separate_inductor_cache(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Point a process whose ATen kernels are capped by hand (``ATEN_CPU_CAPABILITY`` set, no
    ``TORCHINDUCTOR_CACHE_DIR``) at its cap's cache before it compiles anything, as a rehearsal
    does; return that folder, or None where nothing was set. ``lesson.start``, the ``amp-course``
    command and the tests call it; inductor reads the variable at its first compile."""
    capability = environ.get(ATEN_CAP_VARIABLE, "").strip()
    if not capability or environ.get(INDUCTOR_CACHE_VARIABLE):
        return None
    environ[INDUCTOR_CACHE_VARIABLE] = folder = inductor_cache(capability)
    return folder


def active_rehearsal() -> Rehearsal | None:
    """The rehearsal whose caps this process's environment holds, if any."""
    for rehearsal in REHEARSALS.values():
        if all(_value(name) == value.upper() for name, value in rehearsal.caps.items()):
            return rehearsal
    return None


def _value(name: str) -> str:
    return os.environ.get(name, "").strip().upper()


def onednn_cap() -> str | None:
    """oneDNN's ISA cap from the environment (upper case), None when unset."""
    for name in ONEDNN_CAP_VARIABLES:
        if _value(name):
            return _value(name)
    return None


def flags() -> frozenset[str]:
    """The CPU feature flags Linux reports (empty where /proc/cpuinfo is absent).

    ``$AMP_COURSE_FAKE_CPU_FLAGS``, when set, replaces them (tests fake another CPU with it).
    """
    fake = os.environ.get(FAKE_CPU_FLAGS)
    if fake is not None:
        return frozenset(fake.replace(",", " ").split())
    return _proc_flags()


@lru_cache(maxsize=1)
def _proc_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def usable_flags() -> frozenset[str]:
    """This CPU's flags less those torch is kept from using: the native-path flags above
    oneDNN's cap, and ``avx512f`` where both ATen's kernels (``ATEN_CPU_CAPABILITY``) and oneDNN
    are capped at AVX2 or below, as a rehearsal sets them."""
    found, cap = flags(), onednn_cap()
    if cap in _AVX2_OR_BELOW:  # and ATen's own cap, which torch read when it started
        import torch  # only here: the command line reads this module without torch

        if torch.backends.cpu.get_cpu_capability() in ("AVX2", "DEFAULT"):
            found = found - {"avx512f"}
    if cap not in ONEDNN_CAPS:
        return found
    return found - (_CAPPED - ONEDNN_CAPS[cap])


@lru_cache(maxsize=1)
def name() -> str:
    """The CPU model name Linux reports (e.g. ``"AMD EPYC 7B13"``), else the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def apple_silicon() -> bool:
    """A Mac with Apple silicon (not a faked CPU): the course reads no flags there."""
    faked = os.environ.get(FAKE_CPU_FLAGS) is not None
    return not faked and platform.system() == "Darwin" and platform.machine() == "arm64"


def has_native(
    dtype: precisions.Precision | object, cpu_flags: frozenset[str] | None = None
) -> bool:
    """True when the CPU has a native path for ``dtype``: one of its flags in ``ac.precisions``.

    bf16: native bf16 arithmetic (AVX512-BF16 or AMX-BF16); fp16: torch's oneDNN fp16 kernels
    (AVX512-FP16 or AVX-NE-CONVERT); fp32 needs none. Given ``cpu_flags`` (as /proc/cpuinfo lists
    them), decides by them alone; without, by the flags of this CPU that torch may use here
    (``usable_flags``: a oneDNN cap or a rehearsal turns them off). Apple silicon counts as
    without: the course knows native paths by x86 flags alone and measures the rest (lesson 05).
    """
    precision = precisions.get(dtype)
    if not precision.cpu_flags:
        return True
    return bool(precision.cpu_flags & (usable_flags() if cpu_flags is None else cpu_flags))


def describe() -> str:
    """What the lesson header says of this CPU's 16-bit paths, and of a rehearsal or a Mac."""
    native = "native bf16 (AVX512-BF16/AMX)" if has_native(precisions.BF16) else "no native bf16"
    if not has_native(precisions.BF16) and precisions.BF16.cpu_flags & flags():
        native += f" (oneDNN capped at {onednn_cap()})"
    if apple_silicon():
        native = (
            "Apple silicon with PyTorch's CPU build: bf16 counted as emulated (the course knows "
            "native bf16 by x86 flags only; lesson 05 measures it here); the GPU lessons speak of "
            "NVIDIA CUDA GPUs, and no lesson uses this Mac's GPU (MPS)"
        )
    return native
