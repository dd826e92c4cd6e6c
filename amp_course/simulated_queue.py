"""A stand-in for a GPU's asynchronous stream (``SimulatedQueue``), so a CPU can show why a timer
must synchronise, and the wall clocks of ``time`` as they were before any queue replaced them."""

from __future__ import annotations

import contextlib
import threading
import time
import timeit
from collections.abc import Callable, Iterator

# The wall clocks of ``time``, kept when this module loads (before any queue replaces them): what a
# thread other than a virtual queue's reader reads inside as_cuda(), and what a check looks for
# among the names an answer bound to a clock (``from time import perf_counter``).
REAL_CLOCKS = {
    name: getattr(time, name)
    for name in ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns")
}


class SimulatedQueue:
    """A stand-in for a GPU's asynchronous stream, so a CPU can show why timers must synchronise.

    ``launch(seconds)`` queues that much work and returns at once, as a CUDA kernel launch does;
    ``synchronize()`` blocks until the queued work would have finished. Inside ``as_cuda()``,
    ``torch.cuda.synchronize`` and ``torch.accelerator.synchronize`` are this queue's and both
    ``is_available()`` say True, so code written for a GPU (torch.utils.benchmark's timer too)
    can be timed here.

    ``virtual=True`` runs on the queue's own clock instead of the machine's: inside ``as_cuda()``
    every wall clock of ``time`` (``WALL_CLOCKS``, and ``timeit.default_timer``) reads it, and it
    moves only when ``synchronize`` waits for queued work. Nothing sleeps, and what a timer
    reports is exact whatever the machine's load. Only the thread that entered ``as_cuda()`` reads
    the queue's clock: another thread (a Jupyter kernel's event loop reads ``time.monotonic``
    while a cell runs) keeps the real one, and its readings are neither counted nor the timer's.
    """

    WALL_CLOCKS = tuple(REAL_CLOCKS)

    def __init__(self, virtual: bool = False):
        self.virtual = virtual
        self._now = 0.0
        self.clock_reads = 0  # time.perf_counter() calls inside as_cuda() (virtual queues)
        self.busy_until = self.now()
        self._reader = threading.get_ident()  # the thread whose clock reads are the queue's

    def now(self) -> float:
        return self._now if self.virtual else time.perf_counter()

    def launch(self, seconds: float) -> None:
        self.busy_until = max(self.busy_until, self.now()) + seconds

    def synchronize(self, device=None) -> None:
        if self.virtual:
            self._now = max(self._now, self.busy_until)
            return
        delay = self.busy_until - time.perf_counter()
        if delay > 0:
            time.sleep(delay)

    def _read_clock(self) -> float:
        self.clock_reads += 1
        return self.now()

    def _read_clock_ns(self) -> int:
        return round(self._read_clock() * 1e9)

    def clocks(self) -> dict[str, Callable[[], float]]:
        """What each of ``time``'s wall clocks reads inside ``as_cuda()`` (virtual queues): the
        queue's clock in the thread that entered it, the real clock in any other."""
        return {n: self._clock(n) for n in self.WALL_CLOCKS}

    def _clock(self, name: str) -> Callable[[], float]:
        real = REAL_CLOCKS[name]
        queued = self._read_clock_ns if name.endswith("_ns") else self._read_clock

        def clock():
            return queued() if threading.get_ident() == self._reader else real()

        return clock

    @contextlib.contextmanager
    def as_cuda(self) -> Iterator[SimulatedQueue]:
        from unittest import mock

        patches = {
            "torch.cuda.synchronize": self.synchronize,
            "torch.accelerator.synchronize": self.synchronize,
            "torch.cuda.is_available": lambda: True,
            "torch.accelerator.is_available": lambda: True,
        }
        defaults = {}
        self._reader = threading.get_ident()
        if self.virtual:
            patches |= {f"time.{name}": clock for name, clock in self.clocks().items()}
            timer = patches["timeit.default_timer"] = self._clock("perf_counter")
            # timeit.timeit, repeat and Timer took timeit.default_timer as a default argument when
            # the module loaded: the real clock, which only saw the launches, unless replaced.
            for function in (timeit.timeit, timeit.repeat, timeit.Timer.__init__):
                defaults[function] = tuple(
                    timer if d is timeit.default_timer else d for d in function.__defaults__
                )
        with contextlib.ExitStack() as stack:
            for target, replacement in patches.items():
                stack.enter_context(mock.patch(target, replacement))
            for function, replaced in defaults.items():
                stack.enter_context(mock.patch.object(function, "__defaults__", replaced))
            yield self
