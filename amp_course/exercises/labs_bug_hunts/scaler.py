"""The bug hunts' labs 3 and 6 (the package's ``__init__`` registers them): the scaler a learner
builds for each autocast dtype, and the (model, optimizer, scaler) a learner prepares instead of a
.half() model."""

from __future__ import annotations

import torch

from ...display import kind_of, shown
from ...labs.bug_hunts import DEVICE, lab_batches, lab_model, poisoned_for, train_steps
from .. import ExerciseFailed, call_answer, fail_on_error
from ..answers import compare_params, scaler_built, scaler_record
from ..calling import call_noting_warnings

# ---- Lab 3: a GradScaler with bf16 ---------------------------------------------------------------
SCALER_CASES = [
    (torch.float16, True),
    (torch.bfloat16, False),
    (torch.float32, False),
    (None, False),
]


def observe_scaler(make_scaler, seed: int) -> dict:
    """What ``make_scaler(device, dtype)`` returns for each autocast dtype (order set by seed) on
    the labs' CPU, then for fp16 on a CUDA device: a scaler is built for one on any machine (the
    reference's warns and disables itself without a GPU), and an answer that builds every scaler
    for "cpu", the notebook's device, passed while the check asked for the CPU only."""
    order = list(range(len(SCALER_CASES)))
    if seed:
        order = torch.randperm(len(order), generator=torch.Generator().manual_seed(seed)).tolist()
    device = DEVICE if seed % 2 == 0 else DEVICE.type  # a torch.device or its name
    cuda = "cuda" if seed % 2 == 0 else torch.device("cuda")
    calls = [(device, SCALER_CASES[index][0]) for index in order] + [(cuda, torch.float16)]
    cases = []
    for given, dtype in calls:
        scaler, error, warned = call_noting_warnings(make_scaler, given, dtype)
        record = {"dtype": str(dtype), "given": repr(given), "error": error}
        record["type"] = type(scaler).__name__
        if isinstance(scaler, torch.amp.GradScaler):
            record.update(scaler_record(scaler, warned), scale=scaler.get_scale())
        cases.append(record)
    loss = torch.tensor(1.5)
    scaler, error = call_answer(make_scaler, device, torch.bfloat16)
    scaled, error = (None, error) if error else call_answer(lambda: scaler.scale(loss))
    returned = f"raised {error}" if error else "the loss itself" if scaled is loss else None
    returned = returned or f"another object, {shown(scaled)}"
    return {"cases": cases, "device": repr(device), "loss": repr(loss), "bf16_scale": returned}


def _scaler_state(record: dict) -> str:
    if "enabled" not in record:
        return "None" if record["type"] == "NoneType" else f"a {record['type']}"
    state = "an enabled" if record["enabled"] else "a disabled"
    return f"{state} GradScaler (get_scale() {record['scale']:g})"


def compare_scaler(mine, reference, seed: int) -> None:
    """Name the first dtype whose scaler differs from the reference's, and how."""
    for got, want in zip(mine["cases"], reference["cases"], strict=True):
        call = f"make_scaler({want['given']}, {want['dtype']})"
        fail_on_error(got["error"], call)
        # Where the devices differ (scaler_built: not between two disabled scalers, which do the
        # same whatever their device); the enabled states are told below, with their scales.
        differs = "device" in got and got["device"] != want["device"] and scaler_built(got, want)
        if differs:
            raise ExerciseFailed(f"{call}: {differs}")
        state, wanted = _scaler_state(got), _scaler_state(want)
        if state != wanted:
            raise ExerciseFailed(f"{call} returned {state}; the reference returns {wanted}.")
    if mine["bf16_scale"] != reference["bf16_scale"]:
        raise ExerciseFailed(
            f"with make_scaler({reference['device']}, torch.bfloat16), scaler.scale(loss) for "
            f"loss = {reference['loss']} returned {mine['bf16_scale']}; the reference's returns "
            f"{reference['bf16_scale']}."
        )


# ---- Lab 6: a .half() model ----------------------------------------------------------------------
SCALER_SETTINGS = ("scale", "growth_factor", "backoff_factor", "growth_interval")


def observe_prepare(prepare, seed: int) -> dict:
    device = DEVICE if seed % 2 == 0 else "cpu"
    result, error, warned = call_noting_warnings(prepare, lab_model(seed), device)
    # A list of the three is the same answer as the tuple the text writes.
    if error is not None or not (isinstance(result, tuple | list) and len(result) == 3):
        sequence = isinstance(result, tuple | list)
        kinds = ", ".join(type(item).__name__ for item in result) if sequence else ""
        returned = f"a {type(result).__name__} ({kinds})" if kinds else kind_of(result)
        return {"error": error, "triple": False, "returned": returned}
    model, optimizer, scaler = result
    is_scaler = isinstance(scaler, torch.amp.GradScaler)
    record = {
        "error": None,
        "triple": True,
        "dtypes": sorted({str(p.dtype) for p in model.parameters()}),
        "scaler_type": type(scaler).__name__,
        "scaler": scaler_record(scaler, warned) if is_scaler else None,
    }
    if is_scaler and scaler.is_enabled():  # its settings before training: SCALER_KWARGS, or others
        state = scaler.state_dict()
        record["scaler_settings"] = {key: float(state[key]) for key in SCALER_SETTINGS}
    _, record["train_error"] = call_answer(
        train_steps, model, optimizer, scaler, lab_batches(poisoned_for(seed), seed)
    )
    record["params"] = [p.detach().float().clone() for p in model.parameters()]
    return record


def compare_prepare(mine, reference, seed: int) -> None:
    fail_on_error(mine["error"], "prepare(model, device)")
    if not mine["triple"]:
        raise ExerciseFailed(
            f"prepare(model, device) returned {mine['returned']}; the reference returns "
            "(model, optimizer, scaler)."
        )
    if mine["dtypes"] != reference["dtypes"]:
        raise ExerciseFailed(
            f"after prepare() the model's parameters are {mine['dtypes']}, the reference's "
            f"{reference['dtypes']}."
        )
    if mine["scaler"] is None:
        raise ExerciseFailed(
            f"the scaler prepare() returned is a {mine['scaler_type']}; the reference's is an "
            "enabled torch.amp.GradScaler."
        )
    differs = scaler_built(mine["scaler"], reference["scaler"])
    if differs:
        raise ExerciseFailed(f"of what prepare() returned, {differs}")
    for key, value in reference["scaler_settings"].items():
        if mine["scaler_settings"][key] != value:
            raise ExerciseFailed(
                f"your GradScaler has {key}={mine['scaler_settings'][key]:g}; the broken "
                f"prepare()'s, and the reference's, {value:g}."
            )
    if mine["train_error"] is not None:
        raise ExerciseFailed(
            f"training with your (model, optimizer, scaler) raised {mine['train_error']}."
        )
    compare_params(
        mine["params"],
        reference["params"],
        "after training with your (model, optimizer, scaler) on the lab's batches, the weights "
        "differ from the reference's",
    )
