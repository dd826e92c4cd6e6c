"""What lessons 00 and 05's memory checks share: the headroom rule they grade by, and a drawn case
that fills a GPU's usable memory to the byte (where "fits" is "<=", and "<" gives one too few)."""

from __future__ import annotations

import inspect

from ..memory import gpus_needed

MIB, GIB = 2**20, 2**30
# The headroom rule of ac.memory.gpus_needed, which lessons 00 and 05 follow: keep 10% of every
# GPU free for the allocator and workspace.
USABLE = inspect.signature(gpus_needed).parameters["usable_fraction"].default


def exactly_full(pick, per_param: int, amp: bool, most_images: int):
    """(parameters, activation bytes per image, images, GiB) where the state of ``per_param``
    bytes per parameter (2 more under ``amp``) and that many images fill the usable memory to the
    byte (exact in floats at 40 and 80 GiB: 0.9 x GiB is whole), drawn with ``pick(low, high)``
    until one does."""
    per_param, gpu_gib = per_param + (2 if amp else 0), [40, 80][pick(0, 1)]
    while True:
        images, activation = pick(1, most_images), pick(10, 320) * MIB
        state = round(USABLE * gpu_gib * GIB) - images * activation
        if state > 0 and state % per_param == 0:
            return state // per_param, activation, images, gpu_gib
