"""A CUDA GPU for the CPU suite, as strict as torch.cuda: each query runs torch's own Python up to
the device index torch computes from its argument, and only the answer (what the driver would
say) comes from here. An argument that torch.cuda refuses on a GPU is refused here the same way:
``set_per_process_memory_fraction(f, torch.device("cuda"))`` raises torch's ValueError, a CPU
device raises, an index past the GPUs raises ``AssertionError("Invalid device id")``.

A hand-written ``lambda *a: value`` accepts anything; on 2026-11-27 such stand-ins let lessons 00,
08, 10 and every T4-rehearsed lesson pass here and crash on an H200.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.cuda.memory

GIB = 2**30


class _Reached(Exception):
    """torch's own code got as far as the device index; the stand-in answers from here."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


# torch.cuda's queries that take a device, and where torch looks them up (its memory module calls
# memory_stats by its own global name, so the stand-in goes into both namespaces).
_NAMESPACES = (torch.cuda, torch.cuda.memory)
_ANSWERED = (
    "get_device_properties",
    "memory_stats",
    "mem_get_info",
    "set_per_process_memory_fraction",
    "get_per_process_memory_fraction",
    "reset_peak_memory_stats",
    "synchronize",
    "set_device",
)
# torch's own functions, kept before any test replaces them: a second FakeGpu in one test wraps
# these, not the first one's stand-ins.
_TORCH = {attr: getattr(torch.cuda, attr) for attr in _ANSWERED}
_TORCH_INDEX = torch.cuda._utils._get_device_index


class FakeGpu:
    """One or more CUDA GPUs answering torch.cuda's queries; memory counters and the per-process
    fraction are attributes a test may change, ``calls`` records (query, device index)."""

    def __init__(
        self,
        monkeypatch,
        *,
        name: str = "NVIDIA H100 80GB HBM3",
        capability: tuple[int, int] = (9, 0),
        total: int = 80 * GIB,
        free: int | None = None,
        allocated: int = 0,
        peak: int = 0,
        reserved: int = 0,
        fraction: float = 1.0,
        count: int = 1,
    ):
        self.name, self.capability, self.total, self.count = name, capability, total, count
        self.free = total - reserved if free is None else free
        self.allocated, self.peak, self.reserved, self.fraction = (
            allocated,
            peak,
            reserved,
            fraction,
        )
        self.current = 0
        self.calls: list[tuple[str, int]] = []
        self._monkeypatch = monkeypatch

        def device_index(device, optional=False, allow_cpu=False):
            # torch's own rule decides (it raises for what a GPU would refuse), then we answer.
            raise _Reached(_TORCH_INDEX(device, optional, allow_cpu))

        for namespace in _NAMESPACES:
            monkeypatch.setattr(namespace, "_get_device_index", device_index, raising=False)
        plain = {
            "is_available": lambda: True,
            "is_initialized": lambda: True,
            "_lazy_init": lambda: None,
            "device_count": lambda: self.count,
            "current_device": lambda: self.current,
            "empty_cache": lambda: None,
            "manual_seed_all": self._seed,
            "is_bf16_supported": lambda including_emulation=True: True,  # as on a T4, by emulation
        }
        for attr, fake in plain.items():
            for namespace in _NAMESPACES:
                if hasattr(namespace, attr):
                    monkeypatch.setattr(namespace, attr, fake)
        answers = {
            "get_device_properties": self._properties,
            "memory_stats": self._stats,
            "mem_get_info": lambda index, *a, **k: (self.free, self.total),
            "set_per_process_memory_fraction": self._set_fraction,
            "get_per_process_memory_fraction": lambda index, *a, **k: self.fraction,
            "reset_peak_memory_stats": lambda index, *a, **k: None,
            "synchronize": lambda index, *a, **k: None,
            "set_device": self._set_device,
        }
        assert set(answers) == set(_ANSWERED)
        for attr, answer in answers.items():
            self._answer(attr, answer)

    def _answer(self, attr: str, answer) -> None:
        real = _TORCH[attr]

        def fake(*args, **kwargs):
            try:
                real(*args, **kwargs)
            except _Reached as reached:
                if not 0 <= reached.index < self.count:
                    raise AssertionError("Invalid device id") from None
                self.calls.append((attr, reached.index))
                return answer(reached.index, *args, **kwargs)
            raise AssertionError(f"torch.cuda.{attr} reached no device index in the stand-in")

        for namespace in _NAMESPACES:
            if hasattr(namespace, attr):
                self._monkeypatch.setattr(namespace, attr, fake)

    def _properties(self, index, *args, **kwargs):
        major, minor = self.capability
        return SimpleNamespace(
            name=self.name,
            major=major,
            minor=minor,
            total_memory=self.total,
            multi_processor_count=132,
        )

    def _stats(self, index, *args, **kwargs):
        return {
            "allocated_bytes.all.current": self.allocated,
            "allocated_bytes.all.peak": self.peak,
            "reserved_bytes.all.current": self.reserved,
            "reserved_bytes.all.peak": max(self.reserved, self.peak),
        }

    def _set_fraction(self, index, fraction, *args, **kwargs):
        # What torch checks after the device index (torch/cuda/memory.py).
        if not isinstance(fraction, float):
            raise TypeError("Invalid type for fraction argument, must be `float`")
        if fraction < 0 or fraction > 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
        self.fraction = fraction

    def _set_device(self, index, *args, **kwargs):
        self.current = index

    @staticmethod
    def _seed(seed) -> None:
        int(seed)  # torch.cuda.manual_seed_all takes an int
