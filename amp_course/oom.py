"""An out-of-memory error in a lesson, shown as what to change: the setting to lower, the memory
this process may use, and how to go on. ``ac.lesson.start`` registers it in the lesson's kernel."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from . import emulation
from .device_index import cuda_index
from .memory import OutOfMemoryError, process_memory_fraction


def memory_limits(device: torch.device | str) -> tuple[int, int] | None:
    """(bytes this process may allocate, the GPU's total bytes) on a CUDA ``device``, else None."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    total = torch.cuda.get_device_properties(cuda_index(device)).total_memory
    return int(total * process_memory_fraction(device)), total


def message(
    error: BaseException,
    size_settings: Sequence[str] = (),
    limits: tuple[int, int] | None = None,
    emulated: emulation.GpuProfile | None = None,
) -> list[str]:
    """The lines a learner sees instead of the traceback of an out-of-memory ``error``."""
    # CUDA says "CUDA out of memory. Tried to allocate 2.00 GiB." and goes on for several lines.
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    first = ". ".join(text.split(". ")[:2]).rstrip(".")
    lines = [f"{type(error).__name__}: {first}." if first else type(error).__name__]
    if limits is not None:
        allowed, total = limits
        where = f"{allowed / 2**30:.1f} GiB"
        if emulated is not None:
            where += f" (the {emulated.name} emulation's cap; this GPU has {total / 2**30:.1f} GiB)"
        elif allowed < total:
            where += f" of this GPU's {total / 2**30:.1f} GiB (a per-process cap is set)"
        lines.append(f"The lesson ran out of GPU memory: this process may use {where}.")
    else:
        lines.append("The lesson ran out of GPU memory.")
    if size_settings:
        names = " or ".join(size_settings)
        what = f"Lower {names} in the parameters cell"
    else:
        what = "Lower the batch size (or the model size) in the parameters cell"
    lines.append(
        f"{what}, or set SMOKE = True for the tiny sizes, then run the lesson again from the "
        "parameters cell down (Kernel > Restart frees what earlier cells still hold)."
    )
    return lines


def register(size_settings: Sequence[str] = (), device: torch.device | str = "cuda") -> bool:
    """Show ``message`` for every out-of-memory error in this IPython kernel from now on; False
    outside IPython. The cell still fails (Run All and papermill stop there), without the long
    traceback."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    names = tuple(size_settings)

    def handler(shell, etype, value, tb, tb_offset=None):
        lines = message(value, names, memory_limits(device), emulation.active())
        shell._showtraceback(etype, value, lines)  # the error output of the cell, as IPython shows
        return lines

    shell.set_custom_exc((OutOfMemoryError,), handler)
    return True
