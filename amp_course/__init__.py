"""amp-course: helpers for an interactive, tested course on mixed precision training in PyTorch.

Notebooks do ``import amp_course as ac`` and call helpers by module, e.g. ``ac.timing.measure``,
so a reader sees where each one lives. Importing does no work beyond importing torch.
"""

from . import data, debug, device, exercises, formats, lesson, memory, models, stats, timing, training

__all__ = ["data", "debug", "device", "exercises", "formats", "lesson", "memory", "models", "stats", "timing", "training"]
__version__ = "0.1.0"
