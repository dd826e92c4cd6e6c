"""Memory measured on a CUDA GPU: clean-state peaks, what is still free, batches that fit."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..device_index import cuda_index

OutOfMemoryError = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def _clear_cuda(device: torch.device) -> None:
    """Free what Python no longer references and return cached blocks, so a peak starts clean."""
    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()


def peak_cuda_memory(
    fn: Callable[[], object], device: torch.device | str = "cuda", *, count_held: bool = False
) -> int:
    """Peak bytes ``fn()`` adds on ``device`` over what was allocated before it ran (CUDA only).

    Measured from a clean state: garbage is collected, the cache emptied and the peak reset
    first, and what is already allocated (tensors that earlier cells still hold) is subtracted,
    so the figure is ``fn``'s own working set whatever ran before. What ``fn`` should be charged
    for, it must build itself: for a whole training step use ``step_peak_memory``.
    ``count_held=True`` keeps what was allocated before in the figure: for a process that holds
    nothing but the step's own model and optimizer (the benchmark).
    """
    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError("peak_cuda_memory needs a CUDA device; on CPU use training_memory().")
    _clear_cuda(device)
    index = cuda_index(device)
    baseline = torch.cuda.memory_allocated(index)
    torch.cuda.reset_peak_memory_stats(index)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(index) - (0 if count_held else baseline)


def step_peak_memory(
    make_step: Callable[[], Callable[[], object]],
    device: torch.device | str = "cuda",
    warmup: int = 1,
) -> int:
    """Peak bytes of one training step, everything it needs included, from a clean state.

    ``make_step()`` builds the model, optimizer and batch and returns the step (a function of
    no arguments). The figure counts weights, gradients, optimizer state, activations and
    workspace of that one step, and nothing that earlier cells hold: ``warmup`` steps first
    create the optimizer's state, then the peak of one more step is read (CUDA only).
    """

    def build_and_run() -> None:
        step = make_step()
        for _ in range(warmup):
            step()
        torch.cuda.synchronize(device)
        # The build's transient peak is not the step's.
        torch.cuda.reset_peak_memory_stats(cuda_index(device))
        step()

    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError("step_peak_memory needs a CUDA device; on CPU use training_memory().")
    peak = peak_cuda_memory(build_and_run, device)
    _clear_cuda(device)  # the step's model and optimizer are gone with build_and_run's frame
    return peak


def process_memory_fraction(device: torch.device | str | int = "cuda") -> float:
    """The share of ``device``'s memory this process may allocate
    (``torch.cuda.set_per_process_memory_fraction``; 1.0 on a torch too old to report it)."""
    get_fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    return get_fraction(cuda_index(device)) if get_fraction is not None else 1.0


def usable_cuda_bytes(device: torch.device | str = "cuda") -> int:
    """Bytes this process may still allocate on ``device``.

    The smaller of what the GPU has free and what the process's memory cap leaves
    (``torch.cuda.set_per_process_memory_fraction``, which the course's T4 emulation sets:
    ``mem_get_info`` alone would report the whole card), counting the allocator's cached but
    unused blocks as free.
    """
    index = cuda_index(device)
    free, total = torch.cuda.mem_get_info(index)
    reserved = torch.cuda.memory_reserved(index)
    cached = reserved - torch.cuda.memory_allocated(index)
    capped = int(total * process_memory_fraction(index)) - reserved
    return max(0, min(free, capped) + cached)


@dataclass
class BatchChoice:
    """A batch size picked to fit the memory at hand, and the sentence that says why."""

    batch_size: int
    reason: str


def fit_batch(
    wanted: int,
    bytes_per_sample: int,
    fixed_bytes: int,
    available_bytes: int,
    *,
    multiple: int = 8,
    headroom: float = 0.85,
    setting: str = "BATCH_SIZE",
) -> BatchChoice:
    """The largest batch up to ``wanted`` whose step fits in ``available_bytes``.

    ``fixed_bytes`` (weights, gradients, optimizer state) are paid once, ``bytes_per_sample``
    (activations) per sample; only ``headroom`` of the memory is planned for, the rest is left to
    the allocator's fragmentation and kernels' workspace. The batch is a multiple of ``multiple``
    when it has to shrink, and never below 1. Raises ``MemoryError`` naming ``setting`` when not
    even one sample fits, ``ValueError`` when the sizes given cannot be a step's (a measurement
    that went wrong: a per-sample size that is not positive, negative fixed bytes).
    """
    gib = 2**30
    if wanted < 1:
        raise ValueError(f"{setting}={wanted}: a batch holds at least one sample.")
    if bytes_per_sample <= 0 or fixed_bytes < 0:
        raise ValueError(
            f"Cannot plan {setting} from {bytes_per_sample / 2**20:.1f} MiB per sample and "
            f"{fixed_bytes / gib:.2f} GiB fixed: a step's memory grows with its batch and its "
            "fixed part is not negative, so the measurement behind these sizes went wrong (a "
            "first measurement that also paid one-time allocations, or noise). Measure again, or "
            f"set {setting} by hand in the parameters cell."
        )
    budget = available_bytes * headroom - fixed_bytes
    if budget < bytes_per_sample:
        raise MemoryError(
            f"Not even one sample fits: the step needs {fixed_bytes / gib:.2f} GiB of weights, "
            f"gradients and optimizer state plus {bytes_per_sample / gib:.3f} GiB per sample, and "
            f"{available_bytes / gib:.1f} GiB are available. Use a smaller model or set "
            f"{setting} lower in the parameters cell."
        )
    fits = int(budget // bytes_per_sample)
    if fits >= wanted:
        return BatchChoice(
            wanted, f"{setting}={wanted} fits in {available_bytes / gib:.1f} GiB available."
        )
    batch = fits // multiple * multiple if fits >= multiple else fits  # fits >= 1 here
    return BatchChoice(
        batch,
        f"{setting}={wanted} would need about "
        f"{(fixed_bytes + wanted * bytes_per_sample) / gib:.1f} GiB, more than the "
        f"{available_bytes / gib:.1f} GiB available here, so this run uses batch {batch}.",
    )


def largest_batch(try_batch: Callable[[int], None], limit: int, multiple: int = 8) -> int:
    """The largest multiple of ``multiple`` (up to ``limit``) for which ``try_batch`` fits.

    ``try_batch(n)`` runs a step at batch ``n`` and raises OutOfMemoryError when it does not fit;
    we double until it fails, then bisect. Returns 0 when even ``multiple`` does not fit.
    """

    def fits(n: int) -> bool:
        try:
            try_batch(n)
            return True
        except OutOfMemoryError:
            return False
        finally:
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    good, bad = 0, None
    n = multiple
    while n <= limit:
        if not fits(n):
            bad = n
            break
        good, n = n, n * 2
    if bad is None:  # every doubling fitted: try the largest multiple within the limit
        top = limit // multiple * multiple
        if top <= good:
            return good
        if fits(top):
            return top
        bad = top  # the maximum lies between the last doubling and the limit: bisect below
    while bad - good > multiple:  # bisect in steps of ``multiple``
        middle = (good + bad) // 2 // multiple * multiple
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good
