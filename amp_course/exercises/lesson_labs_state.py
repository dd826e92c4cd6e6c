"""Labs beyond autocast, part 1: where autocast's state does not reach (a recompute, a thread),
and a pool that carries it (lab 5, a transfer).

Each lab is three pieces: ``observe`` runs a function (the learner's or the reference) on inputs
derived from a seed and returns plain data, ``compare`` raises ExerciseFailed on the first
difference that matters, and the reference fix. The check is
``compare(observe(answer, 0), observe(solution, 0), 0)``. Every lab runs on the CPU with bf16
autocast, so its symptom shows on any machine.
"""

from __future__ import annotations

import threading

import torch
from torch import nn

from ..device import dtype_name
from ..memory import saved_tensor_bytes
from . import ExerciseFailed, register
from .answers import error_text
from .autocast_labkit import AMP_DTYPE, DEVICE_TYPE, lab_block, seeded


# ---- Lab 1: a checkpoint whose recompute runs outside autocast -----------------------------------
class _Applied(nn.Module):
    """``fn(block, x)`` as a module, so ac.memory can measure what it keeps for backward."""

    def __init__(self, fn, block):
        super().__init__()
        self.fn, self.block = fn, block

    def forward(self, x):
        return self.fn(self.block, x)


def observe_checkpointed(fn, seed: int) -> dict:
    """Run ``fn(block, x)`` under bf16 autocast, backward outside it; record the Linears' dtypes."""
    generator = seeded(seed)
    width = 32 if seed == 0 else 16 * int(torch.randint(1, 4, (), generator=generator))
    block = lab_block(seed, width)
    x = torch.randn(8, width, generator=generator, requires_grad=True)
    phase = ["forward"]
    dtypes = {"forward": [], "backward": []}
    for layer in (block[0], block[2]):
        layer.register_forward_hook(lambda m, a, out: dtypes[phase[0]].append(str(out.dtype)))
    observed = {"error": None}
    try:
        applied = _Applied(fn, block)
        saved = saved_tensor_bytes(applied, x, device=DEVICE_TYPE, autocast_dtype=AMP_DTYPE)
        with torch.autocast(DEVICE_TYPE, dtype=AMP_DTYPE):
            out = fn(block, x)
        phase[0] = "backward"
        out.float().square().mean().backward()
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed.update(
        output=out.detach(),
        dtypes=dtypes,
        saved_bytes=saved.activations,
        grads=[x.grad.clone(), *(p.grad.clone() for p in block.parameters())],
    )
    return observed


def compare_checkpointed(mine: dict, reference: dict, seed: int) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"your function raised {mine['error']}")
    if not mine["dtypes"]["backward"]:
        raise ExerciseFailed(
            f"nothing was recomputed in backward: the forward kept {mine['saved_bytes']} bytes "
            f"for backward, the checkpointed reference {reference['saved_bytes']}. Checkpoint "
            "the block so that backward runs it again."
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
            f"{reference['saved_bytes']}: keep only the block's input."
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


register("labs.checkpoint_autocast", observe_checkpointed, compare_checkpointed)


# ---- Lab 4: autocast entered in one thread, the forward run in another ---------------------------


def observe_workers(fn, seed: int) -> dict:
    """Call fn(model, batches); record the outputs and the threads the forwards ran in."""
    generator = seeded(seed)
    count = 4 if seed == 0 else int(torch.randint(2, 7, (), generator=generator))
    model = lab_block(seed)
    batches = [torch.randn(4, 32, generator=generator) for _ in range(count)]
    caller = threading.get_ident()
    threads = []
    model.register_forward_pre_hook(lambda m, a: threads.append(threading.get_ident()))
    observed = {"error": None, "count": count}
    try:
        outputs = list(fn(model, batches))
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed["outputs"] = [o.detach() for o in outputs]
    observed["in_caller_thread"] = sum(t == caller for t in threads)
    observed["param_dtypes"] = sorted({str(p.dtype) for p in model.parameters()})
    return observed


def compare_workers(mine: dict, reference: dict, seed: int) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"your function raised {mine['error']}")
    if mine["in_caller_thread"]:
        raise ExerciseFailed(
            f"{mine['in_caller_thread']} forward(s) ran in the calling thread; keep the "
            "forward in the worker threads and fix the autocast state there."
        )
    if mine["param_dtypes"] != reference["param_dtypes"]:
        raise ExerciseFailed(
            f"the model's weights are now {mine['param_dtypes']}; keep them float32 and let "
            "autocast cast per op."
        )
    if len(mine["outputs"]) != len(reference["outputs"]):
        raise ExerciseFailed(
            f"{len(mine['outputs'])} outputs for {reference['count']} batches; "
            "return one per batch."
        )
    for index, (a, b) in enumerate(zip(mine["outputs"], reference["outputs"], strict=True)):
        if a.dtype != b.dtype:
            raise ExerciseFailed(
                f"output {index} is {a.dtype}, expected {b.dtype}: the worker ran without "
                "the bf16 autocast the caller entered (autocast state is thread-local)."
            )
        if not torch.equal(a, b):
            raise ExerciseFailed(f"output {index} differs from the reference (order kept?).")


register("labs.thread_autocast", observe_workers, compare_workers)


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

        try:
            with torch.autocast(DEVICE_TYPE, dtype=dtype, enabled=enabled):
                results = list(fn(work, items))
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed["error"] = f"{case}: {error_text(error)}"
            return observed
        observed["cases"][case] = {
            "outputs": [r.detach() if isinstance(r, torch.Tensor) else None for r in results],
            "calls": len(threads),
            "in_caller_thread": sum(t == caller for t in threads),
        }
    return observed


def _dtype_hint(case: str, got_dtype: torch.dtype, wanted_dtype: torch.dtype) -> str:
    got, wanted = dtype_name(got_dtype), dtype_name(wanted_dtype)
    if wanted_dtype == torch.float32:
        return (
            f"the caller had autocast off, but the calls ran in {got}: enter autocast in the "
            "worker with the caller's enabled flag, not always on."
        )
    if got_dtype == torch.float32:
        return (
            f"{case} the calls ran in fp32: the worker thread never entered autocast. Its state "
            "is thread-local: read it in the calling thread (inside a worker you read the "
            "worker's own, default state) and enter it around each call."
        )
    return (
        f"{case} the calls ran in {got}, not {wanted}: the worker entered autocast with a fixed "
        "or default dtype; carry the caller's dtype too."
    )


def compare_pool(mine: dict, reference: dict, seed: int) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"your function raised {mine['error']}")
    count = reference["count"]
    for case, want in reference["cases"].items():
        got = mine["cases"][case]
        if got["calls"] != count:
            raise ExerciseFailed(
                f"{case} fn was called {got['calls']} times for {count} items; call it once per "
                "item."
            )
        if got["in_caller_thread"]:
            raise ExerciseFailed(
                f"{case} {got['in_caller_thread']} call(s) ran in the calling thread; run every "
                "call in a worker thread of the pool."
            )
        if len(got["outputs"]) != count:
            raise ExerciseFailed(
                f"{case} you returned {len(got['outputs'])} results for {count} items."
            )
        for index, (a, b) in enumerate(zip(got["outputs"], want["outputs"], strict=True)):
            if a is None:
                raise ExerciseFailed(f"{case} result {index} is not what fn returned.")
            if a.dtype != b.dtype:
                raise ExerciseFailed(_dtype_hint(case, a.dtype, b.dtype))
            if not torch.equal(a, b):
                raise ExerciseFailed(
                    f"{case} result {index} differs from fn(items[{index}]) under the caller's "
                    "state (results in the items' order?)."
                )


register("labs.autocast_pool", observe_pool, compare_pool)
