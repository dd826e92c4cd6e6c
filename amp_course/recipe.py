"""The AMP recipe a step runs with (its precision is a row of ``ac.precisions``), and TF32 for
float32 CUDA math.

``AmpRecipe`` decides mixed precision once, as nanoGPT's ``ptdtype``, ``ctx`` and
``scaler = GradScaler(enabled=(dtype == 'float16'))`` do: which autocast dtype, whether autocast is
on, whether a GradScaler runs, and the recipe's name. Everything else asks it.

TF32: torch 2.9 added per-backend settings (``torch.backends.cuda.matmul.fp32_precision``,
``torch.backends.cudnn.conv.fp32_precision``) next to the legacy ``allow_tf32`` flags, and the
two must not be mixed: once the new settings are written, the legacy getters raise "you have used
mix of the legacy and new APIs" (see the TF32 section of PyTorch's CUDA semantics notes). This
module uses the new API wherever torch has it and the legacy flags only on older torch, and it
never reads a legacy getter on a torch that has the new API, so it works after code that used
either. Every lesson and the benchmark switch TF32 through it. While a GPU without TF32 is
emulated (``ac.emulation``), TF32 stays off whatever is asked, as the hardware would keep it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from . import precisions
from .emulation import tf32_allowed


@dataclass(frozen=True, init=False)
class AmpRecipe:
    """Mixed precision on ``device`` in ``precision``: a row of ``ac.precisions``, or what
    ``precisions.get`` reads (a name such as "bf16", a torch dtype), read once here.

    fp32 (or None) is plain fp32 training: autocast off and no loss scaling, through the same
    code, so a loop written once runs fp32, bf16 and fp16.
    """

    device: torch.device
    precision: precisions.Precision

    def __init__(
        self,
        device: torch.device | str,
        precision: precisions.Precision | torch.dtype | str | None = None,
    ):
        if not isinstance(precision, precisions.Precision):
            precision = precisions.FP32 if precision is None else precisions.get(precision)
        object.__setattr__(self, "device", torch.device(device))
        object.__setattr__(self, "precision", precision)

    @property
    def autocast_dtype(self) -> torch.dtype:
        """The dtype autocast computes in (float32 for fp32 and tf32, with autocast off)."""
        return self.precision.dtype

    @property
    def enabled(self) -> bool:
        """Autocast is on for a 16-bit dtype; float32 means no autocast."""
        return self.precision.autocast

    @property
    def needs_scaler(self) -> bool:
        """Only fp16 needs loss scaling; bf16 and fp32 have fp32's exponent range."""
        return self.precision.grad_scaler

    @property
    def name(self) -> str:
        """The precision's short name: "fp32", "tf32", "fp16" or "bf16"."""
        return self.precision.name

    def autocast(self) -> torch.autocast:
        """``torch.autocast`` for the device, disabled (plain fp32) when autocast is off."""
        dtype = self.precision.dtype if self.enabled else None
        return torch.autocast(self.device.type, dtype=dtype, enabled=self.enabled)

    def scaler(self, **kwargs) -> torch.amp.GradScaler:
        """A new ``torch.amp.GradScaler``, enabled only for fp16; elsewhere every call on it is a
        no-op. ``kwargs`` go to the GradScaler (``init_scale``, ``growth_interval``...)."""
        return torch.amp.GradScaler(self.device.type, enabled=self.needs_scaler, **kwargs)


# Feature test, not a version test: the per-backend settings are there or they are not.
NEW_API = hasattr(torch.backends.cuda.matmul, "fp32_precision") and all(
    hasattr(backend, name)
    for backend, name in ((torch.backends.cudnn, "conv"), (torch.backends.mkldnn, "matmul"))
)


def api_name() -> str:
    """The settings this torch is switched with: "fp32_precision" or "allow_tf32"."""
    return "fp32_precision" if NEW_API else "allow_tf32"


def _resolved(*levels: str) -> str:
    """A new-API value with "none" ("ask the parent") resolved up the chain of ``levels``."""
    for value in levels:
        if value != "none":
            return value
    return "ieee"


def tf32_enabled() -> dict[str, bool]:
    """Whether float32 CUDA matmuls and cuDNN convolutions may use TF32 now.

    Read through the API this torch is switched with, so it never raises, whichever API earlier
    code used.
    """
    if not NEW_API:
        return {
            "matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "conv": bool(torch.backends.cudnn.allow_tf32),
        }
    generic, cuda_all = torch.backends.fp32_precision, torch.backends.cudnn.fp32_precision
    matmul = _resolved(torch.backends.cuda.matmul.fp32_precision, cuda_all, generic)
    conv = _resolved(torch.backends.cudnn.conv.fp32_precision, cuda_all, generic)
    return {"matmul": matmul == "tf32", "conv": conv == "tf32"}


def set_tf32(enabled: bool) -> None:
    """Let float32 CUDA matmuls and cuDNN convolutions use TF32 (or strict IEEE fp32) from now on.

    On the new API the matmul setting is written with ``torch.set_float32_matmul_precision``,
    which keeps the matmul getters of both APIs in agreement: torch's own compiler still reads the
    legacy one (pytorch/pytorch#166387). That call also writes the CPU (oneDNN) matmul setting,
    which is put back.
    """
    enabled = enabled and tf32_allowed()
    if not NEW_API:
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled
        return
    mkldnn = torch.backends.mkldnn.matmul
    cpu = mkldnn.fp32_precision
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    mkldnn.fp32_precision = cpu
    torch.backends.cudnn.conv.fp32_precision = "tf32" if enabled else "ieee"


@contextlib.contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """Inside the block, float32 CUDA matmuls and cuDNN convolutions use TF32 (or strict IEEE fp32).

    Both settings are put back afterwards, also when the block raises.
    """
    if not NEW_API:
        saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        try:
            set_tf32(enabled)
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
        return
    matmul, mkldnn = torch.backends.cuda.matmul, torch.backends.mkldnn.matmul
    saved = (matmul.fp32_precision, mkldnn.fp32_precision, torch.backends.cudnn.conv.fp32_precision)
    # The set_float32_matmul_precision level that agrees with the saved per-backend values.
    cpu_all, generic = torch.backends.mkldnn.fp32_precision, torch.backends.fp32_precision
    cpu = _resolved(mkldnn.fp32_precision, cpu_all, generic)
    level = "medium" if cpu == "bf16" else "high" if tf32_enabled()["matmul"] else "highest"
    try:
        set_tf32(enabled)
        yield
    finally:
        # set_float32_matmul_precision also wrote the CPU (oneDNN) matmul setting: put back the
        # exact per-backend values, with the matmul level that agrees with them.
        torch.set_float32_matmul_precision(level)
        matmul.fp32_precision, mkldnn.fp32_precision = saved[:2]
        torch.backends.cudnn.conv.fp32_precision = saved[2]
