"""Lesson 07 exercises: FSDP2's mixed-precision policy for the root of a run without autocast, and
the loss scaler for each AMP dtype and strategy."""

from __future__ import annotations

import torch

from .. import precisions
from ..display import kind_of
from . import ExerciseFailed, register
from .answers import scaler_built, scaler_record
from .calling import call_noting_warnings

DTYPES = {name: precisions.get(name).dtype for name in ("fp16", "bf16", "fp32")}
SEED0_ORDER = ["bf16", "fp16", "fp32"]


def _order(seed: int) -> list[str]:
    if seed == 0:
        return SEED0_ORDER
    generator = torch.Generator().manual_seed(seed)
    names = list(DTYPES)
    every = [names[int(i)] for i in torch.randperm(len(names), generator=generator)]
    more = [names[int(i)] for i in torch.randint(0, len(names), (3,), generator=generator)]
    return every + more  # every dtype once, in an order of the seed's, then three drawn


def _dtype(value) -> str | None:
    if value is None:
        return None
    return precisions.name_of(value) if isinstance(value, torch.dtype) else repr(value)


def _scaler_kind(scaler) -> str:
    """'sharded' (FSDP1's ShardedGradScaler), 'plain' (torch.amp.GradScaler), or the type's name."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    if isinstance(scaler, ShardedGradScaler):
        return "sharded"
    return "plain" if isinstance(scaler, torch.amp.GradScaler) else kind_of(scaler)


KINDS = {"sharded": "a ShardedGradScaler", "plain": "a torch.amp.GradScaler (not a sharded one)"}
# Where the reference's scaler is disabled (not fp16) its kind is not checked: the message says so.
EITHER_DISABLED = "a disabled scaler, of either kind (torch.amp.GradScaler or ShardedGradScaler)"
# Cases on a CUDA device, which a machine without one builds too (its scaler warns and disables
# itself, the reference's alike): a device written into the answer ("cpu") shows there.
CUDA_CASES = [("ddp", "fp16", "cuda"), ("fsdp1", "fp16", torch.device("cuda"))]


def _describe(result, warned: list[str]) -> dict:
    """The policy's and the scaler's settings that matter, as plain data."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return {"shape": kind_of(result)}
    policy, scaler = result
    described = {"shape": "pair", "policy": None, "scaler": None}
    if isinstance(policy, MixedPrecisionPolicy):
        described["policy"] = {
            "param_dtype": _dtype(policy.param_dtype),
            "reduce_dtype": _dtype(policy.reduce_dtype),
            "output_dtype": _dtype(policy.output_dtype),
            "cast_forward_inputs": bool(policy.cast_forward_inputs),
        }
    else:
        described["policy_type"] = kind_of(policy)
    described["scaler_kind"] = _scaler_kind(scaler)
    if isinstance(scaler, torch.amp.GradScaler):
        described["scaler"] = scaler_record(scaler, warned)
    return described


def observe(fn, seed: int) -> dict:
    """Ask ``fn`` for the policy and scaler of each dtype of ``seed`` on the CPU, then of fp16 on a
    CUDA device."""
    rows = []
    devices = [torch.device("cpu")] * len(_order(seed)) + [torch.device("cuda")]
    for name, device in zip([*_order(seed), "fp16"], devices, strict=True):
        result, error, warned = call_noting_warnings(fn, DTYPES[name], device)
        row = {"error": error} if error else {**_describe(result, warned), "error": None}
        rows.append({"dtype": name, "given": repr(device), **row})
    return {"rows": rows}


def _effective(policy: dict) -> tuple[str, str, str]:
    """What FSDP2 really does with fp32 parameters and fp32 inputs, outside autocast: the gather
    (compute) dtype, the reduction dtype, and the dtype of the root's outputs.

    param_dtype None (or fp32) means no cast; reduce_dtype None means "as param_dtype";
    output_dtype None means the outputs keep the dtype the layers computed in.
    """
    gather = policy["param_dtype"] or "fp32"
    return gather, policy["reduce_dtype"] or gather, policy["output_dtype"] or gather


def compare(mine: dict, reference: dict, seed: int) -> None:
    """Raise ExerciseFailed, in plain words, at the first dtype where ``mine`` differs."""
    for got, want in zip(mine["rows"], reference["rows"], strict=True):
        name = got["dtype"]
        where = f"fsdp_precision({DTYPES[name]}, {got['given']})"
        if got["error"]:
            raise ExerciseFailed(f"{where} raised {got['error']}.")
        if got["shape"] != "pair":
            raise ExerciseFailed(
                f"{where} returned {got['shape']}; the reference returns a pair (policy, scaler)."
            )
        if got["policy"] is None:
            raise ExerciseFailed(
                f"{where}: the policy is {got['policy_type']}; the reference's is a "
                "torch.distributed.fsdp.MixedPrecisionPolicy."
            )
        gather, reduce, output = _effective(got["policy"])
        want_gather, want_reduce, want_output = _effective(want["policy"])
        if gather != want_gather:
            raise ExerciseFailed(
                f"{where}: FSDP2 would gather the weights, and the layers compute, in {gather}; "
                f"the reference's in {want_gather}."
            )
        if reduce != want_reduce:
            raise ExerciseFailed(
                f"{where}: the gradients would be reduced in {reduce}, the reference's in "
                f"{want_reduce}."
            )
        if output != want_output:
            raise ExerciseFailed(
                f"{where}: the root's forward would return its outputs (the logits the loss "
                f"reads) in {output}, the reference's in {want_output}."
            )
        casts = got["policy"]["cast_forward_inputs"]
        if want_gather != "fp32" and casts != want["policy"]["cast_forward_inputs"]:
            raise ExerciseFailed(
                f"{where}: with cast_forward_inputs={casts} the root's fp32 inputs would reach "
                f"its {gather} weights uncast; the reference's policy casts them."
            )
        kind, want_kind = got["scaler_kind"], want["scaler_kind"]
        differs = None if kind not in KINDS else scaler_built(got["scaler"], want["scaler"])
        if differs:
            raise ExerciseFailed(f"{where}: {differs}")
        # fp16's scaler is enabled, also where a machine without a GPU disabled the CUDA one
        # (the reference's alike): its kind counts there too.
        meant = want["scaler"]["enabled"] or name == "fp16"
        if kind != want_kind and (kind not in KINDS or meant):
            state = "enabled" if want["scaler"]["enabled"] else "disabled"
            if meant and not want["scaler"]["enabled"]:
                state = "for fp16 (disabled here only because this machine has no GPU)"
            wanted = f"{KINDS[want_kind]}, {state}" if meant else EITHER_DISABLED
            raise ExerciseFailed(
                f"{where}: the scaler is {KINDS.get(kind, kind)}; the reference's is {wanted}."
            )


register("07.fsdp_precision", observe, compare)


# ---- Exercise 2: which loss scaler for which way of spreading the model ----------------------
STRATEGIES = ("ddp", "fsdp1", "fsdp2")


def _scaler_cases(seed: int) -> list[tuple[str, str, torch.device | str]]:
    """(strategy, dtype name, device): every pair on the CPU, in an order (and for seeds > 0 with
    a repeat) set by seed, then the CUDA cases."""
    pairs = [(s, d) for s in STRATEGIES for d in DTYPES]
    if seed > 0:
        generator = torch.Generator().manual_seed(seed)
        order = torch.randperm(len(pairs), generator=generator).tolist()
        pairs = [pairs[i] for i in order] + [("fsdp1", "fp16")]
    # A torch.device or its name, both at every seed (the notebook's check included).
    cpu = [torch.device("cpu") if (i + seed) % 2 == 0 else "cpu" for i in range(len(pairs))]
    return [(s, d, device) for (s, d), device in zip(pairs, cpu, strict=True)] + CUDA_CASES


def observe_scalers(fn, seed: int) -> dict:
    """Ask ``fn(strategy, amp_dtype, device)`` for each case's scaler; describe it."""
    rows = []
    for strategy, name, device in _scaler_cases(seed):
        scaler, error, warned = call_noting_warnings(fn, strategy, DTYPES[name], device)
        row = {"strategy": strategy, "dtype": name, "given": repr(device)}
        row["error"] = error and error[:300]
        if not error:
            row["kind"] = _scaler_kind(scaler)
            if row["kind"] in KINDS:
                row.update(scaler_record(scaler, warned))
        rows.append(row)
    return {"rows": rows}


def compare_scalers(mine: dict, reference: dict, seed: int) -> None:
    for got, want in zip(mine["rows"], reference["rows"], strict=True):
        strategy, name = want["strategy"], want["dtype"]
        where = f"scaler_for({strategy!r}, {DTYPES[name]}, {want['given']})"
        if got["error"]:
            raise ExerciseFailed(f"{where} raised {got['error']}.")
        if got["kind"] not in KINDS:
            meant = want["enabled"] or name == "fp16"
            state = "enabled" if want["enabled"] else "disabled"
            wanted = f"{KINDS[want['kind']]}, {state}" if meant else EITHER_DISABLED
            raise ExerciseFailed(f"{where} returned {got['kind']}; the reference returns {wanted}.")
        differs = scaler_built(got, want)
        if differs:
            raise ExerciseFailed(f"{where}: {differs}")
        if (want["enabled"] or name == "fp16") and got["kind"] != want["kind"]:
            raise ExerciseFailed(
                f"{where}: the scaler is {KINDS[got['kind']]}; the reference's is "
                f"{KINDS[want['kind']]}."
            )


register("07.scaler_for", observe_scalers, compare_scalers)
