"""The autocast pool lab's check (lab 5 of labs_beyond_autocast, a transfer; the package's
``__init__`` registers it): ``map_in_workers(fn, items)`` called under bf16 and fp16 autocast and
outside it; what each call computed in, in which thread, and in what order."""

from __future__ import annotations

import threading
import time
from concurrent.futures import thread as futures_thread

import torch

from ...display import shown
from ...labs.beyond_autocast import DEVICE_TYPE, lab_block, seeded
from ...precisions import name_of
from .. import ExerciseFailed
from ..answers import error_text

# How long the first item's fn waits for the second item's to start (in a pool of one worker it
# never does).
START_WAIT_S = 0.05
HANDOVER_S = 0.03  # what the second item's thread has, after its fn returned, to finish its future
# The caller's CPU autocast state in each case: (enabled, dtype).
CALLER_STATES = {
    "under bf16 autocast": (True, torch.bfloat16),
    "under fp16 autocast": (True, torch.float16),
    "outside autocast": (False, torch.bfloat16),
}


def observe_pool(fn, seed: int) -> dict:
    """Call fn(work, items) under each caller state; record what each call computed in, where."""
    generator = seeded(seed)
    count = 3 if seed == 0 else int(torch.randint(2, 6, (), generator=generator))
    block = lab_block(seed)
    items = [torch.randn(4, 32, generator=generator) for _ in range(count)]
    caller = threading.get_ident()
    observed = {"count": count, "error": None, "cases": {}}
    for case, (enabled, dtype) in CALLER_STATES.items():
        threads, pooled = [], []
        started, finished = threading.Event(), threading.Event()  # the second item's

        def work(x, threads=threads, pooled=pooled, started=started, finished=finished):
            threads.append(threading.get_ident())
            pooled.append(_in_a_pool(threading.current_thread()))
            second = count > 1 and x is items[1]
            if second:
                started.set()
            result = block(x)
            if second:
                finished.set()
            # In a pool that runs the second item beside the first, the first returns after it
            # (and after its thread has handed its result to its future): results gathered as
            # they complete come back out of order at every run, not at some runs only (they
            # passed 1 to 3 seeds in 40). A pool of one worker waits START_WAIT_S.
            elif count > 1 and x is items[0] and pooled[-1] and started.wait(START_WAIT_S):
                finished.wait(1.0)
                time.sleep(HANDOVER_S)
            return result

        try:  # read after the caller's region has ended, as a caller may use what came back
            with torch.autocast(DEVICE_TYPE, dtype=dtype, enabled=enabled):
                returned = fn(work, items)
            results = list(returned) if hasattr(type(returned), "__iter__") else None
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed["error"] = f"called {case}, map_in_workers raised {error_text(error)}"
            return observed
        if results is None:  # say what came back, not list()'s TypeError
            observed["error"] = (
                f"called {case}, map_in_workers returned {shown(returned, 60)}; the reference "
                f"returns a list of {count} results."
            )
            return observed
        observed["cases"][case] = {
            "outputs": [
                r.detach() if isinstance(r, torch.Tensor) else repr(r)[:60] for r in results
            ],
            "calls": len(threads),
            "in_caller_thread": sum(t == caller for t in threads),
            "outside_a_pool": pooled.count(False),
        }
    return observed


def _in_a_pool(thread: threading.Thread) -> bool:
    """Whether ``thread`` is a worker of a concurrent.futures.ThreadPoolExecutor: it runs that
    module's worker loop (a thread keeps its target while it runs; the default names say the same
    where a Python keeps it elsewhere)."""
    target = getattr(thread, "_target", None)
    if target is not None:
        return target is getattr(futures_thread, "_worker", None)
    return thread.name.startswith("ThreadPoolExecutor")


def _dtypes(outputs: list) -> str:
    names = sorted({name_of(o.dtype) for o in outputs if isinstance(o, torch.Tensor)})
    return "/".join(names) or "no tensor"


def _dtypes_by_caller(mine: dict, reference: dict) -> str:
    """The results' dtypes under each caller state, the learner's against the reference's."""
    return "; ".join(
        f"{case}, {_dtypes(mine['cases'][case]['outputs'])} (the reference's "
        f"{_dtypes(want['outputs'])})"
        for case, want in reference["cases"].items()
    )


def compare_pool(mine: dict, reference: dict, seed: int) -> None:
    """Name the first caller state and result where ``mine`` differs from the reference's."""
    if mine["error"]:
        raise ExerciseFailed(mine["error"])
    count = reference["count"]
    for case, want in reference["cases"].items():
        got, called = mine["cases"][case], f"called {case},"
        if got["calls"] != count:
            raise ExerciseFailed(
                f"{called} fn ran {_times(got['calls'])} for the {count} items; in the reference "
                f"{_times(count)}, once per item."
            )
        if got["in_caller_thread"]:
            raise ExerciseFailed(
                f"{called} {got['in_caller_thread']} of fn's {count} calls ran in the calling "
                "thread; in the reference none did: all ran in the pool's worker threads."
            )
        if got["outside_a_pool"]:
            raise ExerciseFailed(
                f"{called} {got['outside_a_pool']} of fn's {count} calls ran in threads that "
                "belong to no concurrent.futures.ThreadPoolExecutor; in the reference none did."
            )
        if len(got["outputs"]) != count:
            raise ExerciseFailed(
                f"{called} map_in_workers returned {len(got['outputs'])} results for {count} "
                f"items; the reference returns {count}."
            )
        for index, (a, b) in enumerate(zip(got["outputs"], want["outputs"], strict=True)):
            shown = f"a {name_of(b.dtype)} tensor of shape {tuple(b.shape)}"
            if not isinstance(a, torch.Tensor) or a.shape != b.shape:
                what = (
                    a if not isinstance(a, torch.Tensor) else f"a tensor of shape {tuple(a.shape)}"
                )
                raise ExerciseFailed(
                    f"{called} result {index} is {what}; the reference's is {shown}."
                )
            if a.dtype != b.dtype:
                raise ExerciseFailed(
                    f"{called} result {index} is {name_of(a.dtype)}, the reference's "
                    f"{name_of(b.dtype)}. The results' dtypes by the caller's state: "
                    f"{_dtypes_by_caller(mine, reference)}."
                )
            if not torch.equal(a, b):
                same = [j for j, c in enumerate(want["outputs"]) if torch.equal(a, c)]
                raise ExerciseFailed(
                    f"{called} result {index} differs from the reference's result {index}, "
                    f"fn(items[{index}]), by up to {(a.float() - b.float()).abs().max():.3g}"
                    + (f"; it equals the reference's result {same[0]}." if same else ".")
                )


def _times(count: int) -> str:
    return f"{count} time" if count == 1 else f"{count} times"
