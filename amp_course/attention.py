"""Attention kernels: which backend scaled_dot_product_attention picks, and what each one costs."""

from __future__ import annotations

import contextlib
import re
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from . import emulation, gpus, precisions
from .autocast_trace import DtypeRecorder
from .memory import step_peak_memory
from .recipe import AmpRecipe
from .timing import measure

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


def sdpa_context(backend: str | list[str] | None):
    """SDPA restricted to one kernel (a key of BACKENDS) or to a list of them; None: no
    restriction, whatever the global flags allow."""
    if backend is None:
        return contextlib.nullcontext()
    names = [backend] if isinstance(backend, str) else backend
    return sdpa_kernel([BACKENDS[name] for name in names])


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
    """What one attention call ran: the kernel's name, the dtype its matmuls took as inputs (a fused
    kernel's inputs; how it accumulates is the kernel's own), or why none ran."""

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


def emulated_refusal(backend: str, device, dtype: torch.dtype) -> str | None:
    """Why a rehearsed GPU (``AMP_COURSE_EMULATE``) would refuse ``backend`` for ``dtype``
    inputs, by its row of ``ac.gpus``; None where it takes them (or nothing is rehearsed).

    Restricting SDPA to one kernel switches that kernel on whatever the global flags say, and
    a T4 rehearsal leaves the memory-efficient kernel on for the fp32 and fp16 a T4 runs in it:
    an H100 rehearsing a T4 would run flash attention, or memory-efficient attention in bf16,
    which a T4 does not. Refuse them here.
    """
    profile = emulation.active()
    if profile is None or torch.device(device).type != "cuda" or backend not in gpus.ATTENTION:
        return None
    name, rules = precisions.get(dtype).name, gpus.ATTENTION[backend]
    taken = profile.attention_dtypes(backend)
    if name in taken:
        return None
    if not taken:
        first = gpus.format_capability(min(rule.first for rule in rules.values()))
        needs = f"needs compute capability {first} or newer"
    elif name not in rules:
        needs = f"takes {' and '.join(rules)} inputs only"
    else:
        needs = f"takes {name} from compute capability {gpus.format_capability(rules[name].first)}"
    major, minor = profile.capability
    rehearsed = f"this run rehearses a {profile.name} (sm_{major}{minor})"
    where = f"it takes {' and '.join(taken)} only" if taken else "it has no such kernel"
    return f"{backend} attention {needs}; {rehearsed}, where {where}"


def emulated_kernels(device, dtype: torch.dtype) -> list[str] | None:
    """The kernels SDPA may choose from for ``dtype`` inputs on a rehearsed GPU; None where
    nothing is rehearsed (whatever the global flags allow)."""
    if emulation.active() is None or torch.device(device).type != "cuda":
        return None
    return [b for b in BACKENDS if emulated_refusal(b, device, dtype) is None]


def run_attention(q, k, v, backend: str = "default", recipe: AmpRecipe | None = None) -> KernelRun:
    """Call scaled_dot_product_attention with only ``backend`` allowed ("default": whatever the
    global flags allow), under ``recipe``'s autocast if given; record what ran."""
    run = KernelRun(backend, q.dtype)
    recipe = recipe or AmpRecipe(q.device)  # none: plain fp32, no autocast
    reaching = recipe.autocast_dtype if recipe.enabled else q.dtype  # what SDPA is given
    if backend == "default":
        allowed = emulated_kernels(q.device, reaching)
    else:
        allowed, refusal = backend, emulated_refusal(backend, q.device, reaching)
        if refusal is not None:
            run.error, run.reasons = refusal, [refusal]
            return run
    recorder = DtypeRecorder()
    # A backend that cannot run warns why (on CUDA) before the error: keep both.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_context(allowed), recorder:
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

    refusal = emulated_refusal(backend, q.device, q.dtype)
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
