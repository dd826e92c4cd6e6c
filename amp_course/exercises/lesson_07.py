"""Lesson 07 exercise: FSDP2's mixed-precision policy and the loss scaler for each AMP dtype."""

from __future__ import annotations

import torch

from ..device import dtype_name
from . import ExerciseFailed, exercise
from .solutions.lesson_07 import fsdp_precision

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
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


def _effective(policy: dict) -> tuple[str, str]:
    """What FSDP2 really does with fp32 parameters: the gather dtype and the reduction dtype.

    param_dtype None (or fp32) means no cast; reduce_dtype None means "as param_dtype".
    """
    gather = policy["param_dtype"] or "fp32"
    return gather, policy["reduce_dtype"] or gather


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
        gather, reduce = _effective(got["policy"])
        want_gather, want_reduce = _effective(want["policy"])
        if gather != want_gather:
            raise ExerciseFailed(
                f"{where}: FSDP2 would gather the weights in {gather}; with {name} training "
                f"set param_dtype so they are cast to {want_gather} (None: no cast) and the "
                "layers compute, and the all-gather moves, in the autocast dtype."
            )
        if reduce != want_reduce:
            raise ExerciseFailed(
                f"{where}: the gradients would be reduced in {reduce}; set reduce_dtype="
                "torch.float32: a sum over many ranks in a 16-bit dtype loses precision."
            )
        for field in ("output_dtype", "cast_forward_inputs"):
            if got["policy"][field] != want["policy"][field]:
                raise ExerciseFailed(
                    f"{where}: leave {field} at its default ({want['policy'][field]}); the "
                    "lesson's policy sets param_dtype and reduce_dtype only."
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


@exercise("07.fsdp_precision", solution=fsdp_precision)
def check_fsdp_precision(fn):
    compare(observe(fn, 0), observe(fsdp_precision, 0), 0)
