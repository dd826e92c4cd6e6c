"""Lesson 07 exercises: FSDP2's mixed-precision policy for the root of a run without autocast, and
the loss scaler for each AMP dtype and strategy."""

from __future__ import annotations

import torch

from ..device import dtype_name, parse_dtype
from . import ExerciseFailed, register

DTYPES = {name: parse_dtype(name) for name in ("fp16", "bf16", "fp32")}
SEED0_ORDER = ["bf16", "fp16", "fp32"]


def _order(seed: int) -> list[str]:
    if seed == 0:
        return SEED0_ORDER
    generator = torch.Generator().manual_seed(seed)
    names = list(DTYPES)
    return [names[int(i)] for i in torch.randint(0, len(names), (6,), generator=generator)]


def _dtype(value) -> str | None:
    if value is None:
        return None
    return dtype_name(value) if isinstance(value, torch.dtype) else repr(value)


def _describe(result) -> dict:
    """The policy's and the scaler's settings that matter, as plain data."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return {"shape": type(result).__name__}
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
        described["policy_type"] = type(policy).__name__
    if isinstance(scaler, torch.amp.GradScaler):
        described["scaler"] = {
            "enabled": bool(scaler.is_enabled()),
            "device": str(getattr(scaler, "_device", "")),
        }
    else:
        described["scaler_type"] = type(scaler).__name__
    return described


def observe(fn, seed: int) -> dict:
    """Ask ``fn`` for the policy and scaler of each dtype of ``seed``, on the CPU."""
    rows = []
    for name in _order(seed):
        try:
            row = _describe(fn(DTYPES[name], torch.device("cpu")))
            row["error"] = None
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            row = {"error": f"{type(error).__name__}: {error}"}
        rows.append({"dtype": name, **row})
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
        where = f"fsdp_precision({DTYPES[name]}, device)"
        if got["error"]:
            raise ExerciseFailed(f"{where} raised {got['error']}.")
        if got["shape"] != "pair":
            raise ExerciseFailed(f"{where} returned a {got['shape']}; return (policy, scaler).")
        if got["policy"] is None:
            raise ExerciseFailed(
                f"{where}: the policy is a {got['policy_type']}; build it with "
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
                f"its {gather} weights uncast, and with no autocast the first layer fails on "
                "the mismatch; the reference's policy casts them."
            )
        if got["scaler"] is None:
            raise ExerciseFailed(
                f"{where}: the scaler is a {got['scaler_type']}; return a torch.amp.GradScaler, "
                "enabled or not, so the loop keeps one code path."
            )
        if got["scaler"]["enabled"] != want["scaler"]["enabled"]:
            raise ExerciseFailed(
                f"{where}: the scaler is {'enabled' if got['scaler']['enabled'] else 'disabled'}; "
                + (
                    "fp16 needs loss scaling, so enable it for fp16 (and build it for "
                    "device.type: a 'cuda' scaler disables itself on a machine without a GPU)."
                    if want["scaler"]["enabled"]
                    else f"{name} has fp32's exponent range, so disable it (enabled=False)."
                )
            )
        if got["scaler"]["device"] != want["scaler"]["device"]:
            raise ExerciseFailed(
                f"{where}: the scaler is built for {got['scaler']['device']!r}; build it for "
                f"device.type ({want['scaler']['device']!r})."
            )


register("07.fsdp_precision", observe, compare)


# ---- Exercise 2: which loss scaler for which way of spreading the model ----------------------
STRATEGIES = ("ddp", "fsdp1", "fsdp2")


def _scaler_cases(seed: int) -> list[tuple[str, str]]:
    """(strategy, dtype name): every pair, in an order (and for seeds > 0 a repeat) set by seed."""
    pairs = [(s, d) for s in STRATEGIES for d in DTYPES]
    if seed == 0:
        return pairs
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(pairs), generator=generator).tolist()
    return [pairs[i] for i in order] + [("fsdp1", "fp16")]


def observe_scalers(fn, seed: int) -> dict:
    """Ask ``fn(strategy, amp_dtype, device)`` for each pair's scaler, on the CPU; describe it."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    rows = []
    for strategy, name in _scaler_cases(seed):
        device = torch.device("cpu") if seed % 2 == 0 else "cpu"  # a torch.device or its name
        row = {"strategy": strategy, "dtype": name, "error": None}
        try:
            scaler = fn(strategy, DTYPES[name], device)
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            row["error"] = f"{type(error).__name__}: {error}"[:300]
            rows.append(row)
            continue
        row["kind"] = (
            "sharded"
            if isinstance(scaler, ShardedGradScaler)
            else "plain"
            if isinstance(scaler, torch.amp.GradScaler)
            else type(scaler).__name__
        )
        if row["kind"] in ("sharded", "plain"):
            row["enabled"] = bool(scaler.is_enabled())
            row["device"] = str(getattr(scaler, "_device", ""))
        rows.append(row)
    return {"rows": rows}


WHY_SHARDED = (
    "FSDP1 gives each rank plain tensors holding its own shard, so a plain GradScaler would see "
    "only that shard's infs and ranks could disagree on a skip: "
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler all-reduces the flag"
)
WHY_PLAIN = {
    "ddp": "DDP all-reduces the gradients before scaler.step, so every rank finds the same infs",
    "fsdp2": "FSDP2's gradients are DTensor shards, whose inf check all-reduces the flag itself",
}


def compare_scalers(mine: dict, reference: dict, seed: int) -> None:
    for got, want in zip(mine["rows"], reference["rows"], strict=True):
        strategy, name = want["strategy"], want["dtype"]
        where = f"scaler_for({strategy!r}, {DTYPES[name]}, device)"
        if got["error"]:
            raise ExerciseFailed(f"{where} raised {got['error']}.")
        if got["kind"] not in ("sharded", "plain"):
            raise ExerciseFailed(
                f"{where} returned a {got['kind']}; return a torch.amp.GradScaler (or a "
                "ShardedGradScaler, which is one), enabled or not, so the loop keeps one code path."
            )
        if got["enabled"] != want["enabled"]:
            raise ExerciseFailed(
                f"{where}: the scaler is {'enabled' if got['enabled'] else 'disabled'}; "
                + (
                    "fp16 needs loss scaling on every strategy."
                    if want["enabled"]
                    else f"{name} needs no loss scaling (enabled=False), whatever the strategy."
                )
            )
        if want["enabled"] and got["kind"] != want["kind"]:
            raise ExerciseFailed(
                f"{where}: "
                + (
                    f"{WHY_SHARDED}."
                    if want["kind"] == "sharded"
                    else f"{WHY_PLAIN[strategy]}: the plain torch.amp.GradScaler is the one to use."
                )
            )
        if got["device"] != want["device"]:
            raise ExerciseFailed(
                f"{where}: the scaler is built for {got['device']!r}; build it for device.type "
                f"({want['device']!r})."
            )


register("07.scaler_for", observe_scalers, compare_scalers)
