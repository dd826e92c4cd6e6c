"""Attention kernels: which backend scaled_dot_product_attention picks, and what each one costs."""

from __future__ import annotations

import contextlib
import re
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from . import emulation
from .autocast_trace import DtypeRecorder
from .memory import step_peak_memory
from .precision import AmpRecipe
from .timing import measure

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


def sdpa_context(backend: str | None):
    """SDPA restricted to one kernel (a key of BACKENDS); None: no restriction, whatever the
    global flags allow (a T4 rehearsal's, for one)."""
    return contextlib.nullcontext() if backend is None else sdpa_kernel(BACKENDS[backend])


# The aten op each fused backend runs; the math backend has none: it decomposes into
# matmuls and a softmax.
KERNEL_NAMES = {
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_flash_attention_for_cpu": "flash (CPU kernel)",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_cudnn_attention": "cudnn",
}

# When no allowed kernel can run, CUDA's selection code (sdp_utils.cpp) warns under these
# headings why each fused kernel was refused, then raises "No available kernel".
REFUSAL_HEADINGS = {
    "Memory efficient kernel not used because:": "efficient",
    "Flash attention kernel not used because:": "flash",
    "cuDNN attention kernel not used because:": "cudnn",
}
_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")


@dataclass
class KernelRun:
    """What one attention call ran: the kernel's name, the dtype it computed in, or why none ran."""

    backend: str  # the backends allowed: "default" or one of BACKENDS
    dtype: torch.dtype  # the dtype of q, k, v given
    kernel: str | None = None  # "flash", "efficient", "cudnn", "flash (CPU kernel)" or "math"
    compute_dtype: torch.dtype | None = None
    error: str | None = None  # the whole error message, on one line
    reasons: list[str] = field(default_factory=list)  # why the backend refused (CUDA's warnings)


def refusal_reasons(messages: list[str], backend: str) -> list[str]:
    """The reasons PyTorch's warnings give for refusing ``backend`` (from the heading on)."""
    reasons, current = [], None
    for message in messages:
        text = _TRIGGERED.sub("", message).strip()
        if text in REFUSAL_HEADINGS:
            current = REFUSAL_HEADINGS[text]
        elif current == backend and text:
            reasons.append(text)
    return reasons


def attention_inputs(batch, heads, tokens, head_dim, *, device, dtype=torch.float32, seed=0):
    """Random q, k, v shaped (batch, heads, tokens, head_dim), the same values for every dtype."""
    generator = torch.Generator().manual_seed(seed)
    shape = (batch, heads, tokens, head_dim)
    return tuple(torch.randn(shape, generator=generator).to(device, dtype) for _ in range(3))


def emulated_refusal(backend: str, device) -> str | None:
    """Why a rehearsed GPU (``AMP_COURSE_EMULATE``) would refuse ``backend``, or None.

    Restricting SDPA to one kernel switches that kernel on whatever the global flags say, so a
    T4 rehearsal on an H100 would run flash attention, which a T4 does not have: refuse it here.
    """
    profile = emulation.active()
    if profile is None or torch.device(device).type != "cuda" or profile.fused_attention:
        return None
    if backend not in ("flash", "cudnn"):
        return None
    major, minor = profile.capability
    return (
        f"{backend} attention needs compute capability 8.0 or newer; this run rehearses a "
        f"{profile.name} (sm_{major}{minor}), which has no such kernel"
    )


def run_attention(q, k, v, backend: str = "default", autocast_dtype=None) -> KernelRun:
    """Call scaled_dot_product_attention with only ``backend`` allowed ("default": whatever the
    global flags allow); record what ran."""
    run = KernelRun(backend, q.dtype)
    refusal = emulated_refusal(backend, q.device)
    if refusal is not None:
        run.error, run.reasons = refusal, [refusal]
        return run
    recorder = DtypeRecorder()
    recipe = AmpRecipe(q.device, autocast_dtype)
    # A backend that cannot run warns why (on CUDA) before the error: keep both.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_context(None if backend == "default" else backend), recorder:
                with recipe.autocast():
                    F.scaled_dot_product_attention(q, k, v)
        except RuntimeError as error:
            run.error = " ".join(str(error).split())
            run.reasons = refusal_reasons([str(w.message) for w in caught], backend)
            return run
    fused = [row for row in recorder.rows if row.op in KERNEL_NAMES]
    if fused:
        run.kernel, run.compute_dtype = KERNEL_NAMES[fused[0].op], fused[0].input_dtypes[0]
    else:
        matmuls = [row for row in recorder.rows if row.op in ("bmm", "baddbmm", "matmul")]
        run.kernel = "math"
        run.compute_dtype = matmuls[0].input_dtypes[0] if matmuls else None
    return run


def cost(q, k, v, backend: str, *, repeats: int = 7) -> tuple[float, int]:
    """Median seconds and peak CUDA bytes of a forward and backward through one backend.

    The peak is measured from a clean state (``step_peak_memory``) and counts what the step
    needs: its own copies of q, k, v, the output, the gradients of q, k, v and the kernel's
    workspace; nothing that the caller or earlier cells hold.
    """

    refusal = emulated_refusal(backend, q.device)
    if refusal is not None:
        raise RuntimeError(refusal)

    def make_step():
        inputs = [t.detach().clone().requires_grad_() for t in (q, k, v)]

        def step():
            with sdpa_context(backend):
                output = F.scaled_dot_product_attention(*inputs)
            torch.autograd.grad(output.sum(), inputs)  # the gradients, freed on return

        return step

    seconds = measure(make_step(), device=q.device, warmup=3, repeats=repeats).median
    return seconds, step_peak_memory(make_step, q.device)
