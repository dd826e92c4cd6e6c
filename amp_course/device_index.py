"""The one way the course names a CUDA device to torch.cuda: by its index.

torch.cuda's queries differ in what they accept: ``mem_get_info`` and ``get_device_properties``
take ``torch.device("cuda")``, but ``set_per_process_memory_fraction``,
``get_per_process_memory_fraction`` and ``set_device`` refuse a device without an index
(``ValueError: Expected a torch.device with a specified index``). Every call site that hands
torch.cuda a device to query or set passes ``cuda_index(device)``, which every one of them
accepts. ``torch.cuda.synchronize(device)`` keeps the device as given: torch accepts any CUDA
device there, and ``ac.simulated_queue.SimulatedQueue`` stands in for it on a CPU, which has no
current CUDA device to look up. Below every other module: it imports nothing of the course.
"""

from __future__ import annotations

import torch


def cuda_index(device: torch.device | str | int | None = None) -> int:
    """The index of CUDA ``device``: its own, else the current device's (``"cuda"``, None)."""
    if isinstance(device, int):
        return device
    device = torch.device("cuda" if device is None else device)
    if device.type != "cuda":
        raise ValueError(f"{device} is not a CUDA device; torch.cuda's queries need one.")
    return device.index if device.index is not None else torch.cuda.current_device()
