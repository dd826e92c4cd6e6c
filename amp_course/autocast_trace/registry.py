"""Ask the installed torch's dispatcher which ops autocast registers: the truth the lists follow.

Autocast is a dispatch key per device (``AutocastCPU``, ``AutocastCUDA``...): an op autocasts on a
device exactly when it has a kernel for that key. Every torch build registers its CUDA autocast
kernels whether or not a GPU is present, so a CPU-only machine can ask. The answers use private
``torch._C`` functions; where a build lacks them they are None, and callers say so.
"""

from __future__ import annotations

from functools import cache

import torch

from .op_lists import AUTOCAST_OPS

DISPATCH_KEYS = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA"}


def _dispatcher():
    """(all op names, has-kernel test), or None where this torch cannot answer."""
    names = getattr(torch._C, "_dispatch_get_all_op_names", None)
    has_kernel = getattr(torch._C, "_dispatch_has_kernel_for_dispatch_key", None)
    return None if names is None or has_kernel is None else (names(), has_kernel)


@cache
def registered_ops(device_type: str) -> frozenset[str] | None:
    """Every aten op (without its overload) with an autocast kernel for ``device_type`` here.

    None where this torch's dispatcher cannot be asked.
    """
    found = _dispatcher()
    if found is None:
        return None
    names, has_kernel = found
    key = DISPATCH_KEYS[device_type]
    return frozenset(
        name.removeprefix("aten::").partition(".")[0]
        for name in names
        if name.startswith("aten::") and has_kernel(name, key)
    )


def autocast_keys(op: str) -> list[str] | None:
    """The devices (of ``DISPATCH_KEYS``) whose autocast registers ``op`` in this torch.

    ``autocast_keys("scaled_dot_product_attention")`` is ``["cpu", "cuda"]`` in torch 2.14;
    None where the dispatcher cannot be asked.
    """
    answers = {device: registered_ops(device) for device in DISPATCH_KEYS}
    if any(ops is None for ops in answers.values()):
        return None
    return [device for device, ops in answers.items() if op in ops]


def drift_from_lists(device_type: str) -> dict[str, list[str]] | None:
    """How this torch's registrations differ from the course's lists (torch 2.14's) on a device.

    ``{"registered, not listed": [...], "listed, not registered": [...]}``, both empty when this
    torch autocasts exactly the listed ops; None where the dispatcher cannot be asked.
    """
    registered = registered_ops(device_type)
    if registered is None:
        return None
    listed = set().union(*AUTOCAST_OPS[device_type].values())
    return {
        "registered, not listed": sorted(registered - listed),
        "listed, not registered": sorted(listed - registered),
    }
