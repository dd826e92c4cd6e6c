"""Labs beyond autocast: the checks of the learner's fixes (their setup: ``labs.beyond_autocast``).

Where autocast's state does not reach (a recompute, a thread), what it does not cover (a custom
op, a bf16 running sum), and a pool that carries it (lab 5, a transfer). Most labs observe what
the kit's ``run_*`` function records for the learner's code; ``compare`` names the first
difference from the reference fix (``solutions/labs_beyond_autocast.py``) that matters.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction

import torch

from ..device import dtype_name
from ..labs.beyond_autocast import (
    DEVICE_TYPE,
    lab_block,
    lab_losses,
    run_checkpointed,
    run_fused_op,
    run_in_workers,
    seeded,
)
from . import ExerciseFailed, register
from .answers import error_text


# ---- Lab 1: a checkpoint whose recompute runs outside autocast -----------------------------------
def compare_checkpointed(mine: dict, reference: dict, seed: int) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"your function raised {mine['error']}")
    if not mine["dtypes"]["backward"]:
        raise ExerciseFailed(
            f"nothing was recomputed in backward: the forward kept {mine['saved_bytes']} bytes "
            f"for backward, the checkpointed reference {reference['saved_bytes']}."
        )
    forward, recompute = mine["dtypes"]["forward"], mine["dtypes"]["backward"]
    if set(recompute) != set(forward):
        raise ExerciseFailed(
            f"the forward ran the block's Linear layers in {sorted(set(forward))}, the "
            f"recompute in backward in {sorted(set(recompute))}: the recompute ran outside "
            "the forward's autocast state."
        )
    if mine["saved_bytes"] > reference["saved_bytes"]:
        raise ExerciseFailed(
            f"the forward kept {mine['saved_bytes']} bytes for backward, the reference "
            f"{reference['saved_bytes']} (the block's input only)."
        )
    if mine["output"].dtype != reference["output"].dtype or not torch.equal(
        mine["output"], reference["output"]
    ):
        raise ExerciseFailed("the block's output differs from running it under autocast.")
    for index, (a, b) in enumerate(zip(mine["grads"], reference["grads"], strict=True)):
        if not torch.allclose(a, b, rtol=1e-3, atol=1e-6):
            raise ExerciseFailed(
                f"gradient {index} differs from the reference by up to {(a - b).abs().max():.3g}."
            )


register("labs.checkpoint_autocast", run_checkpointed, compare_checkpointed)


# ---- Lab 2: a custom op that autocast never casts ------------------------------------------------
def compare_fused_op(mine: dict, reference: dict, seed: int) -> None:
    if reference["error"]:
        raise ExerciseFailed(reference["error"])
    if mine["error"]:
        raise ExerciseFailed(f"building or calling your op raised {mine['error']}")
    for label, where in (("autocast", "inside torch.autocast"), ("plain", "outside autocast")):
        got, want = mine[label], reference[label]
        if got["received"] != want["received"]:
            raise ExerciseFailed(
                f"{where} the kernel received inputs in {got['received'] or 'nothing'}; it "
                f"should receive {want['received']}."
            )
        if got["output"].dtype != want["output"].dtype:
            raise ExerciseFailed(
                f"{where} the op returned {got['output'].dtype}, expected {want['output'].dtype}."
            )
        if not torch.allclose(got["output"].float(), want["output"].float(), atol=1e-2):
            raise ExerciseFailed(f"{where} the op's values differ from the reference.")


register("labs.custom_op_autocast", run_fused_op, compare_fused_op)


# ---- Lab 3: a running bf16 loss sum that stops growing -------------------------------------------
def observe_mean_loss(fn, seed: int) -> dict:
    losses = lab_losses(seed)
    observed = {"steps": len(losses), "error": None, "exact": float(sum(float(x) for x in losses))}
    observed["exact"] /= len(losses)
    try:
        result = fn(losses)
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed["type"] = "float" if isinstance(result, float) else type(result).__name__
    observed["value"] = float(result) if isinstance(result, (float, int, torch.Tensor)) else None
    return observed


def compare_mean_loss(mine: dict, reference: dict, seed: int) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"your function raised {mine['error']}")
    if mine["type"] != "float":
        raise ExerciseFailed(
            f"return a Python float (what a logger records), not a {mine['type']}."
        )
    exact, value = reference["exact"], mine["value"]
    if abs(value - exact) > TOLERANCE * abs(exact):
        raise ExerciseFailed(
            f"over {reference['steps']} steps the mean loss is {exact:.6f}; yours is "
            f"{value:.6f}, {abs(value - exact) / abs(exact):.2g} off relative to it (the check "
            f"allows {TOLERANCE:g}){_representable(value)}."
        )


TOLERANCE = 1e-4  # relative: far below bf16's 2^-8 rounding, far above float32's


def _representable(value: float) -> str:
    """The learner's number's significant bits, where they are few enough for a 16-bit format."""
    if not math.isfinite(value) or value == 0:
        return ""
    odd = Fraction(abs(value)).numerator
    while odd % 2 == 0:
        odd //= 2
    bits = odd.bit_length()
    if bits > 11:
        return ""
    return f"; yours has {bits} significant bits (bfloat16 keeps 8, float16 11, float32 24)"


register("labs.bf16_loss_sum", observe_mean_loss, compare_mean_loss)


# ---- Lab 4: autocast entered in one thread, the forward run in another ---------------------------
def compare_workers(mine: dict, reference: dict, seed: int) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"your function raised {mine['error']}")
    if mine["in_caller_thread"]:
        raise ExerciseFailed(
            f"{mine['in_caller_thread']} forward(s) ran in the calling thread; the reference "
            "runs every forward in a worker thread."
        )
    if mine["param_dtypes"] != reference["param_dtypes"]:
        raise ExerciseFailed(
            f"the model's weights are now {mine['param_dtypes']}, the reference's "
            f"{reference['param_dtypes']}."
        )
    if len(mine["outputs"]) != len(reference["outputs"]):
        raise ExerciseFailed(
            f"{len(mine['outputs'])} outputs for {reference['count']} batches; "
            "return one per batch."
        )
    for index, (a, b) in enumerate(zip(mine["outputs"], reference["outputs"], strict=True)):
        if a.dtype != b.dtype:
            raise ExerciseFailed(f"output {index} is {a.dtype}, the reference's {b.dtype}.")
        if a.shape != b.shape:
            raise ExerciseFailed(
                f"output {index} has shape {tuple(a.shape)}, the reference's {tuple(b.shape)}."
            )
        if not torch.equal(a, b):
            gap = (a.float() - b.float()).abs().max().item()
            same = [
                j
                for j, r in enumerate(reference["outputs"])
                if r.shape == a.shape and torch.equal(a, r)
            ]
            also = f"; it equals the reference's output {same[0]}" if same else ""
            raise ExerciseFailed(
                f"output {index} differs from the reference's output {index} by up to "
                f"{gap:.3g}{also}."
            )


register("labs.thread_autocast", run_in_workers, compare_workers)


# ---- Lab 5 (transfer): a pool that carries whatever autocast state its caller has --------------

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
        threads = []

        def work(x, threads=threads):
            threads.append(threading.get_ident())
            return block(x)

        try:  # a lazy result (a generator) runs inside the caller's state too
            with torch.autocast(DEVICE_TYPE, dtype=dtype, enabled=enabled):
                returned = fn(work, items)
                results = list(returned) if hasattr(type(returned), "__iter__") else None
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed["error"] = f"called {case}, map_in_workers raised {error_text(error)}"
            return observed
        if results is None:  # say what came back, not list()'s TypeError
            observed["error"] = (
                f"called {case}, map_in_workers returned {repr(returned)[:60]}; the reference "
                f"returns a list of {count} results."
            )
            return observed
        observed["cases"][case] = {
            "outputs": [
                r.detach() if isinstance(r, torch.Tensor) else repr(r)[:60] for r in results
            ],
            "calls": len(threads),
            "in_caller_thread": sum(t == caller for t in threads),
        }
    return observed


def _dtypes(outputs: list) -> str:
    names = sorted({dtype_name(o.dtype) for o in outputs if isinstance(o, torch.Tensor)})
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
        if len(got["outputs"]) != count:
            raise ExerciseFailed(
                f"{called} map_in_workers returned {len(got['outputs'])} results for {count} "
                f"items; the reference returns {count}."
            )
        for index, (a, b) in enumerate(zip(got["outputs"], want["outputs"], strict=True)):
            shown = f"a {dtype_name(b.dtype)} tensor of shape {tuple(b.shape)}"
            if not isinstance(a, torch.Tensor) or a.shape != b.shape:
                what = (
                    a if not isinstance(a, torch.Tensor) else f"a tensor of shape {tuple(a.shape)}"
                )
                raise ExerciseFailed(
                    f"{called} result {index} is {what}; the reference's is {shown}."
                )
            if a.dtype != b.dtype:
                raise ExerciseFailed(
                    f"{called} result {index} is {dtype_name(a.dtype)}, the reference's "
                    f"{dtype_name(b.dtype)}. The results' dtypes by the caller's state: "
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


register("labs.autocast_pool", observe_pool, compare_pool)
