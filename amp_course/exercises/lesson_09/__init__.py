"""Lesson 09 exercises: checkpointing every k-th block, FP8 with delayed and row-wise scaling."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...checkpointing import encoder_blocks
from ...memory import saved_tensor_bytes
from ...models import build_vit
from ...recipe import AmpRecipe
from .. import ExerciseFailed, register
from ..answers import error_text
from .fp8 import (
    compare_to_float8,
    compare_to_float8_rowwise,
    observe_to_float8,
    observe_to_float8_rowwise,
)

# ---- 09.checkpoint_every: checkpoint every k-th encoder block ------------------------------------

# (encoder blocks, k) of the learner's check cell: none is the lesson's "every second block".
# In (7, 3) the last block is a multiple of k: blocks 0, 3 and 6, where a loop that stops one
# block early (range(0, depth - 1, k)) or counts every k + 1 misses one.
CHECKPOINT_CASES = [(5, 3), (6, 4), (2, 3), (7, 3)]
# One of these joins each grader seed's drawn cases, for the same reason.
LAST_BLOCK_CASES = [(7, 3), (5, 2), (7, 2), (9, 4)]
# And one of these, where k is larger than the depth (the text promises one): block 0 alone. The
# draw above missed it at about one seed in seven, and an answer that skipped it passed there.
OVER_DEPTH_CASES = [(2, 3), (3, 5), (4, 6), (1, 4)]
REENTRANT_NODE = "CheckpointFunctionBackward"  # the reentrant checkpoint's autograd.Function
# And at every seed this case under fp16 autocast, after the bf16 ones: a recompute that enters
# bf16 autocast of its own, not the forward's state, matches a bf16 forward (a hand-written
# checkpoint that did so passed every seed while every case ran under bf16).
FP16_CASE = (3, 2)


def checkpoint_cases(seed: int) -> list[tuple[int, int]]:
    """The (encoder blocks, k) the check tries at ``seed``: CHECKPOINT_CASES at 0, else three
    drawn, one of LAST_BLOCK_CASES and one of OVER_DEPTH_CASES."""
    if seed == 0:
        return list(CHECKPOINT_CASES)
    generator = torch.Generator().manual_seed(seed)
    drawn = [tuple(case) for case in torch.randint(1, 7, (3, 2), generator=generator).tolist()]
    last, over = (
        table[int(torch.randint(len(table), (1,), generator=generator))]
        for table in (LAST_BLOCK_CASES, OVER_DEPTH_CASES)
    )
    return [*drawn, last, over]


def observe_checkpoint_every(fn, seed: int) -> list[dict]:
    """Tiny ViTs (``checkpoint_cases``, then FP16_CASE under fp16 autocast): what fn's model
    recomputes, keeps and computes."""
    cases = checkpoint_cases(seed)
    observed = [_observe_checkpointing(fn, d, k, seed + i) for i, (d, k) in enumerate(cases)]
    return [*observed, _observe_checkpointing(fn, *FP16_CASE, seed + len(cases), "fp16")]


def _observe_checkpointing(fn, depth: int, k: int, seed: int, precision: str = "bf16") -> dict:
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = build_vit("tiny", num_layers=depth)
    images = torch.randn(4, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (4,), generator=generator)
    blocks = list(encoder_blocks(model))
    named = list(model.named_parameters())  # named as given, before any wrapping
    names, params = [n for n, _ in named], [p for _, p in named]
    calls = [[] for _ in blocks]  # per forward of each block: its first MLP layer's output dtype
    for index, block in enumerate(blocks):
        block.mlp[0].register_forward_hook(
            lambda module, args, out, i=index: calls[i].append(str(out.dtype))
        )
    observed = {"depth": depth, "k": k, "precision": precision, "error": None}
    recipe = AmpRecipe("cpu", precision)
    try:
        returned = fn(model, k)
        observed["returned"] = "None" if returned is None else type(returned).__name__
        model = model if returned is None else returned
        activations = saved_tensor_bytes(model, images, recipe=recipe)
        for block_calls in calls:
            block_calls.clear()
        with recipe.autocast():
            loss = F.cross_entropy(model(images), labels)
        observed["reentrant"] = _count_nodes(loss.grad_fn, REENTRANT_NODE)
        loss.backward()
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed["activation_bytes"] = activations.activations
    observed["calls"] = calls
    observed["grads"] = [None if p.grad is None else p.grad.clone() for p in params]
    observed["param_names"] = list(names)
    return observed


def _count_nodes(root, name: str) -> int:
    """How many nodes of the autograd graph under ``root`` are of the backward class ``name``."""
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(next_node for next_node, _ in node.next_functions)
    return sum(type(node).__name__ == name for node in seen)


def compare_checkpoint_every(mine: list[dict], reference: list[dict], seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        where = f"with k={want['k']} on a {want['depth']}-block ViT"
        _compare_checkpointing(got, want, where + _under(want))


def _under(observed: dict) -> str:
    """' under fp16 autocast' for a case not under bf16, the check's usual precision."""
    precision = observed["precision"]
    return "" if precision == "bf16" else f" under {precision} autocast"


def _compare_checkpointing(mine: dict, reference: dict, where: str) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"{where} your code raised {mine['error']}")
    if mine["returned"] == "None":
        raise ExerciseFailed(
            f"{where} checkpoint_every returned None; the reference returns the model it was "
            "given, changed in place."
        )
    wanted = [i for i, c in enumerate(reference["calls"]) if len(c) > 1]
    got = [i for i, c in enumerate(mine["calls"]) if len(c) > 1]
    if got != wanted:
        raise ExerciseFailed(
            f"{where}, blocks {got} were recomputed in backward; the reference recomputes blocks "
            f"{wanted} (every k-th block, starting with block 0)."
        )
    if mine["reentrant"]:
        raise ExerciseFailed(
            f"{where} the autograd graph holds {mine['reentrant']} {REENTRANT_NODE} node(s), the "
            "reentrant checkpoint's (torch.utils.checkpoint with use_reentrant=True, or without "
            "use_reentrant where torch defaults to it); the non-reentrant checkpoint leaves none."
        )
    for index in wanted:
        forward, recompute = mine["calls"][index][0], mine["calls"][index][1]
        if recompute != forward:
            raise ExerciseFailed(
                f"{where} block {index} ran in {forward} in the forward but was recomputed in "
                f"{recompute}: the recompute lost the forward's autocast state."
            )
    for index, (calls, wanted_calls) in enumerate(
        zip(mine["calls"], reference["calls"], strict=True)
    ):
        if calls[:1] != wanted_calls[:1]:
            raise ExerciseFailed(
                f"{where} block {index}'s first MLP layer returned "
                f"{calls[0] if calls else 'nothing'} in the forward; the reference's "
                f"{wanted_calls[0]} (the forward under {reference['precision']} autocast)."
            )
    if mine["activation_bytes"] != reference["activation_bytes"]:
        raise ExerciseFailed(
            f"{where} the forward kept {mine['activation_bytes']} bytes for backward, the "
            f"reference {reference['activation_bytes']}."
        )
    names = reference["param_names"]
    for index, (a, b) in enumerate(zip(mine["grads"], reference["grads"], strict=True)):
        if a is None:
            raise ExerciseFailed(
                f"{where} parameter {index} ({names[index]}) of the model the check passed got no "
                "gradient; the reference changes that model in place and returns it."
            )
        if not torch.allclose(a, b, rtol=1e-3, atol=1e-5):
            raise ExerciseFailed(
                f"{where} the gradient of {names[index]} (parameter {index}) differs from the "
                f"reference's by up to {(a - b).abs().max().item():.3g} (largest there "
                f"{b.abs().max().item():.3g}; tolerance 1e-5 + 1e-3 x |value|)."
            )


register("09.checkpoint_every", observe_checkpoint_every, compare_checkpoint_every)


# ---- 09.to_float8 and 09.to_float8_rowwise: delayed and row-wise FP8 scaling (fp8.py) ---------
register("09.to_float8", observe_to_float8, compare_to_float8)
register("09.to_float8_rowwise", observe_to_float8_rowwise, compare_to_float8_rowwise)
