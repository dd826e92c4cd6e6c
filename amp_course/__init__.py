"""amp-course: helpers for an interactive, tested course on mixed precision training in PyTorch.

Notebooks do ``import amp_course as ac`` and call helpers by module, e.g. ``ac.timing.measure``,
so a reader sees where each one lives. Importing does no work: each module below is imported the
first time it is used (``ac.quiz`` imports ``amp_course.quiz``), so a kernel that only needs the
quiz does not pay for torchvision. ``amp_course.dist_train`` (the torchrun script),
and the course's tooling (``amp_course.tooling``) are imported by name where needed.
"""

import importlib
import logging

# torch.utils.benchmark and flop_counter import torch.utils.cpp_extension, which logs a warning
# about a missing CUDA toolkit on every CPU-only machine: noise in a lesson, so keep it quiet.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)

__all__ = [
    "attention",
    "autocast_trace",
    "bench",
    "block_formats",
    "capstone",
    "checkpointing",
    "cpu",
    "data",
    "debug",
    "device",
    "display",
    "emulation",
    "env_vars",
    "exercises",
    "flops",
    "formats",
    "fp8_recipes",
    "gpu_runs",
    "gpus",
    "inspector",
    "lesson",
    "memory",
    "models",
    "nvfp4_training",
    "op_costs",
    "optim_states",
    "paths",
    "precisions",
    "quiz",
    "recipe",
    "roofline",
    "scaling",
    "simulated_queue",
    "stats",
    "step_account",
    "timing",
    "torchao_support",
    "training",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in __all__:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
