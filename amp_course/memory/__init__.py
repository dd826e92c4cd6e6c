"""Memory: where training memory goes (an account that works on any device, and counts what a
CUDA GPU keeps for backward on any machine: ``fake_cuda``), what a CUDA GPU measures (clean-state
peaks, free memory, batches that fit), and a step's memory over time (``timeline``)."""

from . import fake_cuda, timeline
from .account import (
    OPTIMIZER_STATE_BYTES,
    BlockActivations,
    MemoryBreakdown,
    SavedBytes,
    count_saved_bytes,
    gpus_needed,
    saved_tensor_bytes,
    saved_tensor_bytes_without_data,
    training_memory,
)
from .fake_cuda import DEFAULT_GPU
from .measure import (
    BatchChoice,
    OutOfMemoryError,
    fit_batch,
    largest_batch,
    peak_cuda_memory,
    process_memory_fraction,
    step_peak_memory,
    usable_cuda_bytes,
)

__all__ = [
    "DEFAULT_GPU",
    "OPTIMIZER_STATE_BYTES",
    "BatchChoice",
    "BlockActivations",
    "MemoryBreakdown",
    "OutOfMemoryError",
    "SavedBytes",
    "count_saved_bytes",
    "fake_cuda",
    "fit_batch",
    "gpus_needed",
    "largest_batch",
    "peak_cuda_memory",
    "process_memory_fraction",
    "saved_tensor_bytes",
    "saved_tensor_bytes_without_data",
    "step_peak_memory",
    "timeline",
    "training_memory",
    "usable_cuda_bytes",
]
