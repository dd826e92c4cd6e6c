"""A CUDA GPU for the CPU suite, as strict as torch.cuda: each query runs torch's own Python up to
the device index torch computes from its argument, and only the answer (what the driver would
say) comes from here. An argument that torch.cuda refuses on a GPU is refused here the same way:
``set_per_process_memory_fraction(f, torch.device("cuda"))`` raises torch's ValueError, a CPU
device raises, an index past the GPUs raises ``AssertionError("Invalid device id")``.

A hand-written ``lambda *a: value`` accepts anything; on 2026-11-27 such stand-ins let lessons 00,
08, 10 and every T4-rehearsed lesson pass here and crash on an H200.

Each card is a row of ``ac.gpus`` (its name, compute capability, memory and SM count). Its memory
counters move with ``allocate`` and ``release`` as torch's caching allocator reports them
(allocated, reserved, peaks, under torch's key names in ``memory_stats``), an allocation past the
per-process cap raises torch's OutOfMemoryError, ``reset_peak_memory_stats`` resets the peaks,
and ``is_bf16_supported`` is torch's own, answering for the card's capability.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.cuda.memory

from amp_course import gpus

GIB = 2**30
# torch's caching allocator: what memory_stats reports (torch/cuda/memory.py's docstring).
POOLS = ("all", "large_pool", "small_pool")
METRICS = ("current", "peak", "allocated", "freed")
BYTE_STATS = ("allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes")
BYTE_STATS += ("inactive_split_bytes",)
COUNT_STATS = ("allocation", "active", "segment", "inactive_split")
OVERSIZE_STATS = ("oversize_allocations", "oversize_segments")  # no pools
EVENTS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc")
EVENTS += ("num_device_free", "num_oom_rejections")
SMALL_POOL_BELOW = 2**20  # allocations under 1 MB go to the small pool


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


class _Stat:
    """One of the allocator's statistics: its current value, peak, total added and removed."""

    def __init__(self):
        self.current = self.peak = self.allocated = self.freed = 0

    def add(self, amount: int) -> None:
        self.current += amount
        self.allocated += amount
        self.peak = max(self.peak, self.current)

    def remove(self, amount: int) -> None:
        self.current -= amount
        self.freed += amount


class FakeGpu:
    """One or more CUDA GPUs, each the ``gpu`` row of ``ac.gpus`` (``name``, ``capability`` and
    ``total`` memory may differ from it), answering torch.cuda's queries. ``allocate`` and
    ``release`` move the memory counters, as tensors would; ``allocated`` bytes are held and
    ``reserved`` cached from the start, and ``free`` is what the card has free then (other
    processes hold the rest). The per-process fraction is an attribute a test may change;
    ``calls`` records (query, device index)."""

    def __init__(
        self,
        monkeypatch,
        gpu: str = "H100 SXM",
        *,
        name: str | None = None,
        capability: tuple[int, int] | None = None,
        total: int | None = None,
        free: int | None = None,
        allocated: int = 0,
        reserved: int = 0,
        fraction: float = 1.0,
        count: int = 1,
    ):
        row = gpus.GPUS[gpu]
        self.name = row.device_name if name is None else name
        self.capability = row.capability if capability is None else capability
        self.total = row.memory_gb * GIB if total is None else total  # NVIDIA's GB, as GiB
        self.sms, self.count, self.fraction, self.current = row.sms, count, fraction, 0
        self.stats = {(stat, pool): _Stat() for stat in BYTE_STATS + COUNT_STATS for pool in POOLS}
        self.stats.update({(stat, None): _Stat() for stat in OVERSIZE_STATS})
        self.events = dict.fromkeys(EVENTS, 0)
        reserved = max(reserved, allocated)
        # What other processes hold: the card's memory that is neither free nor reserved here.
        self.others = 0 if free is None else self.total - reserved - free
        if self.others < 0:
            raise ValueError(f"{free} bytes free and {reserved} reserved: more than the card has")
        self.calls: list[tuple[str, int]] = []
        self._monkeypatch, self._answering = monkeypatch, False

        def device_index(device, optional=False, allow_cpu=False):
            # torch's own rule decides (it raises for what a GPU would refuse); inside a query
            # the stand-in answers, we answer from here.
            index = _TORCH_INDEX(device, optional, allow_cpu)
            if self._answering:
                raise _Reached(index)
            return index

        for namespace in _NAMESPACES:
            monkeypatch.setattr(namespace, "_get_device_index", device_index, raising=False)
        plain = {
            "is_available": lambda: True,
            "is_initialized": lambda: True,
            "_lazy_init": lambda: None,
            "device_count": lambda: self.count,
            "current_device": lambda: self.current,
            "empty_cache": self.empty_cache,
            "manual_seed_all": self._seed,
            # torch's is_bf16_supported answers from the capability, then, counting emulation,
            # by making a bf16 tensor on the GPU, which works on every GPU torch runs on.
            "_check_bf16_tensor_supported": lambda device: True,
        }
        for attr, fake in plain.items():
            for namespace in _NAMESPACES:
                if hasattr(namespace, attr):
                    monkeypatch.setattr(namespace, attr, fake)
        answers = {
            "get_device_properties": self._properties,
            "memory_stats": self._memory_stats,
            "mem_get_info": lambda index, *a, **k: (self.free, self.total),
            "set_per_process_memory_fraction": self._set_fraction,
            "get_per_process_memory_fraction": lambda index, *a, **k: self.fraction,
            "reset_peak_memory_stats": self._reset_peaks,
            "synchronize": lambda index, *a, **k: None,
            "set_device": self._set_device,
        }
        assert set(answers) == set(_ANSWERED)
        for attr, answer in answers.items():
            self._answer(attr, answer)
        if allocated:
            self._held = self.allocate(allocated)  # what earlier cells hold
        if reserved > allocated:
            self.release(self.allocate(reserved - allocated))  # cached: reserved, not allocated

    @property
    def allocated(self) -> int:
        return self.stats["allocated_bytes", "all"].current

    @property
    def peak(self) -> int:
        return self.stats["allocated_bytes", "all"].peak

    @property
    def reserved(self) -> int:
        return self.stats["reserved_bytes", "all"].current

    @property
    def free(self) -> int:
        return self.total - self.others - self.reserved

    def allocate(self, nbytes: int) -> tuple[int, str]:
        """Hold ``nbytes`` as a tensor would; returns the handle ``release`` takes. Past the
        per-process cap or the card's free memory: torch's OutOfMemoryError."""
        pool = "small_pool" if nbytes < SMALL_POOL_BELOW else "large_pool"
        # A cached block that is large enough is reused; otherwise a new segment is reserved.
        new_segment = 0 if self._cached(pool) >= nbytes else nbytes
        cap = min(int(self.total * self.fraction), self.total - self.others)
        if new_segment and self.reserved + new_segment > cap:
            if self.reserved > self.allocated:  # torch frees its cached blocks, then retries
                self.events["num_alloc_retries"] += 1
                self.empty_cache()
                return self.allocate(nbytes)
            self.events["num_ooms"] += 1
            raise torch.OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {nbytes / GIB:.2f} GiB. GPU "
                f"{self.current} has a total capacity of {self.total / GIB:.2f} GiB of which "
                f"{max(0, cap - self.reserved) / GIB:.2f} GiB is free."
            )
        for where in ("all", pool):
            for stat in ("allocated_bytes", "active_bytes", "requested_bytes"):
                self.stats[stat, where].add(nbytes)
            for stat in ("allocation", "active"):
                self.stats[stat, where].add(1)
            if new_segment:
                self.stats["reserved_bytes", where].add(new_segment)
                self.stats["segment", where].add(1)
        self.events["num_device_alloc"] += bool(new_segment)
        return nbytes, pool

    def release(self, handle: tuple[int, str]) -> None:
        """Free what ``allocate`` held: the allocator keeps it reserved (cached)."""
        nbytes, pool = handle
        for where in ("all", pool):
            for stat in ("allocated_bytes", "active_bytes", "requested_bytes"):
                self.stats[stat, where].remove(nbytes)
            for stat in ("allocation", "active"):
                self.stats[stat, where].remove(1)

    def empty_cache(self) -> None:
        """torch.cuda.empty_cache: the cached memory goes back to the card."""
        for pool in ("large_pool", "small_pool"):
            unused = self._cached(pool)
            segments = self.stats["segment", pool].current - self.stats["allocation", pool].current
            for where in ("all", pool):
                self.stats["reserved_bytes", where].remove(unused)
                self.stats["segment", where].remove(max(0, segments))
            self.events["num_device_free"] += max(0, segments)

    def _cached(self, pool: str) -> int:
        """Bytes the allocator reserved in ``pool`` that no tensor holds."""
        return (
            self.stats["reserved_bytes", pool].current - self.stats["allocated_bytes", pool].current
        )

    def _answer(self, attr: str, answer) -> None:
        real = _TORCH[attr]

        def fake(*args, **kwargs):
            self._answering = True
            try:
                real(*args, **kwargs)
            except _Reached as reached:
                self._answering = False
                if not 0 <= reached.index < self.count:
                    raise AssertionError("Invalid device id") from None
                self.calls.append((attr, reached.index))
                return answer(reached.index, *args, **kwargs)
            finally:
                self._answering = False
            raise AssertionError(f"torch.cuda.{attr} reached no device index in the stand-in")

        for namespace in _NAMESPACES:
            if hasattr(namespace, attr):
                self._monkeypatch.setattr(namespace, attr, fake)

    def _properties(self, index, *args, **kwargs):
        major, minor = self.capability
        known = {} if self.sms is None else {"multi_processor_count": self.sms}
        return SimpleNamespace(
            name=self.name, major=major, minor=minor, total_memory=self.total, **known
        )

    def _memory_stats(self, index, *args, **kwargs):
        stats = dict(self.events)
        for (stat, pool), value in self.stats.items():
            prefix = stat if pool is None else f"{stat}.{pool}"
            for metric in METRICS:
                stats[f"{prefix}.{metric}"] = getattr(value, metric)
        return dict(sorted(stats.items()))

    def _reset_peaks(self, index, *args, **kwargs):
        for value in self.stats.values():
            value.peak = value.current

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
