"""amp-course: helpers for an interactive, tested course on mixed precision training in PyTorch.

Notebooks do ``import amp_course as ac`` and call helpers by module, e.g. ``ac.timing.measure``,
so a reader sees where each one lives. Importing does no work beyond importing torch.
``amp_course.dist_train`` (the torchrun script), ``grading`` and ``gpu_run`` are imported on demand.
"""

from . import (
    autocast_trace, bench, data, debug, device, exercises, formats, inspector, lesson, memory,
    models, quiz, scaling, stats, timing, training,
)

__all__ = [
    "autocast_trace", "bench", "data", "debug", "device", "exercises", "formats", "inspector",
    "lesson", "memory", "models", "quiz", "scaling", "stats", "timing", "training",
]
__version__ = "0.1.0"
