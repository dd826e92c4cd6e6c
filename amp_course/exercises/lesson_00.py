"""Lesson 00 exercises: how many data-parallel GPUs a training job needs, and how large a batch one
GPU holds for other optimizers, from the bytes of a step."""

from __future__ import annotations

import math

import torch

from ..display import shown
from ..memory import OPTIMIZER_STATE_BYTES, gpus_needed, training_memory
from . import ExerciseFailed, call_answer, fail_on_error, register
from .answers import as_number, as_whole
from .memory_cases import GIB, MIB, USABLE, exactly_full

# The cases a learner's check cell (seed 0) runs: (parameters, activation bytes per image,
# global batch, GiB per GPU, AMP). The messages below name them.
SEED0_CASES = [
    (1_000_000_000, 150 * MIB, 1024, 24, False),
    (1_500_000_000, 150 * MIB, 1024, 40, True),
    (25_000_000, 20 * MIB, 256, 24, False),  # fits on one GPU
    (5_000_000_000, 10 * MIB, 1024, 80, True),  # the static state alone overflows one GPU
    # A share that is not rounded up passes the two cases below: 46 / 5 = 9.2 images of 100 MiB
    # fit in 921.6 MiB, but a GPU holds ceil(46 / 5) = 10; so 6 GPUs, not 5 (and 10, not 9).
    (0, 100 * MIB, 46, 1, False),
    (600_000_000, 200 * MIB, 200, 16, True),
    # 9 images of 100 MiB fit in 921.6 MiB and 45 = 5 x 9: 5 GPUs, where batch // 9 + 1 says 6.
    (0, 100 * MIB, 45, 1, False),
    # 338 MiB of room beside the state holds one image of 288 MiB, not two: one image per GPU,
    # 71 GPUs for 71 images (a search that stops short of the global batch says None).
    (461_000_000, 288 * MIB, 71, 8, False),
    # 16 GPUs are full to the byte: 65.5 GiB of state and 8 images of 512 MiB make the 72 GiB
    # usable (a test of fitting with < asks for more GPUs).
    (4_563_402_752, 512 * MIB, 128, 80, False),
]


def _picker(seed: int):
    """``pick(low, high)``: a random integer in [low, high] from ``seed``'s own generator."""
    generator = torch.Generator().manual_seed(seed)
    return lambda low, high: int(torch.randint(low, high + 1, (1,), generator=generator))


def _static(num_params: int, amp: bool) -> int:
    """fp32 weights, gradients and AdamW's two moments, and autocast's copies under AMP."""
    return (16 + (2 if amp else 0)) * num_params


def _unrounded(num_params, activation, batch, gpu_gib, amp) -> int | None:
    """The fewest GPUs if a GPU could hold a fraction of an image (global batch / GPUs)."""
    room = USABLE * gpu_gib * GIB - _static(num_params, amp)
    gpus = math.ceil(activation * batch / room) if room > 0 else batch + 1
    return gpus if gpus <= batch else None


def _cases(seed: int) -> list[tuple]:
    if seed == 0:
        return SEED0_CASES
    pick = _picker(seed)
    cases = []
    for _ in range(6):  # sizes where the static state is a large part of each GPU
        cases.append(
            (
                pick(100, 3000) * 1_000_000,
                pick(20, 320) * MIB,
                2 ** pick(9, 12),
                [24, 40, 80][pick(0, 2)],
                bool(pick(0, 1)),
            )
        )
    rounding = []  # two cases a share that is not rounded up gets wrong, drawn until found
    while len(rounding) < 2:
        case = (
            pick(0, 1000) * 1_000_000,
            pick(50, 320) * MIB,
            pick(20, 500),
            [8, 16, 24][pick(0, 2)],
            bool(pick(0, 1)),
        )
        num_params, activation, batch, gpu_gib, amp = case
        right = gpus_needed(_static(num_params, amp), activation, batch, gpu_gib * GIB, USABLE)
        if right is not None and _unrounded(*case) != right:
            rounding.append(case)
    # A global batch that is a whole multiple of the images one GPU holds: batch // images + 1
    # is then one GPU too many (ceil is right whether it divides or not).
    num_params, activation, gpu_gib = pick(0, 300) * 1_000_000, pick(50, 320) * MIB, 24
    images = int((USABLE * gpu_gib * GIB - _static(num_params, False)) // activation)
    divides = (num_params, activation, images * pick(2, 8), gpu_gib, False)
    # Room beside the state for one image and not two: one image per GPU, as many GPUs as images.
    num_params = pick(0, 1000) * 1_000_000
    room = USABLE * 24 * GIB - _static(num_params, False)
    activation = int(room * pick(51, 99) / 100) // MIB * MIB
    one_each = (num_params, activation, pick(20, 500), 24, False)
    # The static state alone overflows a GPU: no count of GPUs fits (None, not 0).
    overflows = (pick(3000, 5000) * 1_000_000, pick(20, 320) * MIB, 2 ** pick(9, 12), 40, True)
    amp = bool(pick(0, 1))  # GPUs full to the byte at the count: < for "fits" asks for more
    num_params, activation, images, gpu_gib = exactly_full(pick, 16, amp, 64)
    full = (num_params, activation, images * pick(2, 64), gpu_gib, amp)
    return cases + rounding + [divides, one_each, overflows, _copies_decide(pick), full]


def _copies_decide(pick) -> tuple:
    """An AMP case whose count autocast's 2-byte copies decide, drawn until found: no copies, 4-byte
    copies or activations halved under AMP each give another count (each passed some grader
    seeds, up to 17 of 200, among the cases drawn above)."""
    while True:
        num_params, activation = pick(100, 3000) * 1_000_000, pick(20, 320) * MIB
        batch, memory = 2 ** pick(9, 12), [24, 40, 80][pick(0, 2)] * GIB
        amp, plain = _static(num_params, True), _static(num_params, False)
        right = gpus_needed(amp, activation, batch, memory, USABLE)
        slips = [(plain, activation), (amp + 2 * num_params, activation), (amp, activation // 2)]
        if right is not None and all(
            gpus_needed(state, a, batch, memory, USABLE) != right for state, a in slips
        ):
            return (num_params, activation, batch, memory // GIB, True)


def _plain(value):
    """A learner's return value as plain data: an int (8.0 counts as 8), a float, None, or (any
    other value) {"shown": how a message shows it}."""
    whole, number = as_whole(value), as_number(value)
    if whole is not None:
        return whole
    if number is not None:
        return int(number) if number.is_integer() else number
    return None if value is None else {"shown": shown(value, 60)}


def _shown(result) -> str:
    """A result as ``_plain`` recorded it, for a message: 23, 175.4, None, '23' (a str)."""
    return result["shown"] if isinstance(result, dict) else repr(result)


def observe(fn, seed: int) -> dict:
    """Call ``fn`` on the cases of ``seed``; record the inputs, the result or the error."""
    rows = []
    for case in _cases(seed):
        try:
            rows.append({"case": list(case), "result": _plain(fn(*case)), "error": None})
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            rows.append(
                {"case": list(case), "result": None, "error": f"{type(error).__name__}: {error}"}
            )
    return {"rows": rows}


def _size(num_bytes: float) -> str:
    return f"{num_bytes / GIB:.3f} GiB" if num_bytes >= GIB else f"{num_bytes / MIB:.1f} MiB"


def _account(num_params, activation, batch, gpu_gib, amp, gpus: int) -> str:
    """What each of ``gpus`` GPUs holds in this case, against what it may use, in words."""
    images = -(-batch // gpus)
    state, activations = _static(num_params, amp), images * activation
    usable = USABLE * gpu_gib * GIB
    return (
        f"on {gpus} GPUs each holds {_size(state)} of state for {num_params:_} parameters"
        f"{' under autocast' if amp else ''} and ceil({batch} / {gpus}) = {images} image(s) x "
        f"{_size(activation)} = {_size(activations)} of activations, {_size(state + activations)}"
        f" in all: {'within' if state + activations <= usable else 'more than'} the "
        f"{_size(usable)} usable ({USABLE:.0%} of {gpu_gib} GiB)"
    )


def compare(mine: dict, reference: dict, seed: int) -> None:
    """Raise ExerciseFailed at the first case where ``mine`` differs, with the account of memory
    at the count returned and at the expected one: what differs, not a guess at why."""
    for got, want in zip(mine["rows"], reference["rows"], strict=True):
        case = want["case"]
        num_params, activation, batch, gpu_gib, amp = case
        where = (
            f"gpus_for({num_params:_}, {activation // MIB} * 2**20, {batch}, {gpu_gib}, amp={amp})"
        )
        if got["error"]:
            raise ExerciseFailed(f"{where} raised {got['error']}.")
        result, expected = got["result"], want["result"]
        if result == expected:
            continue
        said = f"{where} returned {_shown(result)}, expected {expected}"
        if expected is None:
            raise ExerciseFailed(f"{said}: even with one image per GPU, {_account(*case, batch)}.")
        if result is None:
            raise ExerciseFailed(f"{said}: {_account(*case, expected)}.")
        if not isinstance(result, int) or result < 1:
            raise ExerciseFailed(f"{said}, a whole number of GPUs.")
        if result < expected:
            raise ExerciseFailed(f"{said}: {_account(*case, result)}.")
        raise ExerciseFailed(f"{said}: fewer GPUs suffice; {_account(*case, expected)}.")


register("00.gpus_for", observe, compare)


# 00.largest_batch: the same account turned around (the batch from the memory), for optimizers
# whose state the lesson did not count.
OPTIMIZERS = ("adamw", "sgd_momentum", "sgd")
# (parameters, activation bytes per image, GiB per GPU, optimizer, AMP) for seed 0.
SEED0_BATCH_CASES = [
    (300_000_000, 100 * MIB, 24, "adamw", False),
    (500_000_000, 60 * MIB, 24, "sgd_momentum", True),
    (1_000_000_000, 150 * MIB, 40, "sgd", True),
    (2_500_000_000, 50 * MIB, 40, "adamw", True),  # the state alone overflows the GPU
    (100_000_000, 80 * MIB, 16, "sgd", False),  # room for 174.78 images: 174, not 175
    (2**31, 128 * MIB, 40, "sgd_momentum", False),  # 24 GiB of state and 96 images fill 36 GiB
]


def _batch_cases(seed: int) -> list[tuple]:
    if seed == 0:
        return SEED0_BATCH_CASES
    pick = _picker(seed)
    cases = [
        (pick(50, 2000) * 1_000_000, pick(10, 320) * MIB, [16, 24, 40, 80][pick(0, 3)], opt, amp)
        for opt in OPTIMIZERS
        for amp in (False, True)
    ]
    cases.append((pick(3000, 4000) * 1_000_000, pick(10, 320) * MIB, 40, "adamw", True))
    # Cases where a slip in one byte count or in the rule gives another batch, drawn until found
    # (each slip passed a few grader seeds of 200 among the cases drawn above): AdamW's state
    # as one moment, SGD's momentum as two, 4-byte copies under AMP, the headroom read as
    # need x 1.1 <= memory, and rounding (room for more than half an image beyond a whole number).
    slips = {  # each as another optimizer's or copies' bytes, or another rule
        "adamw": lambda p, a, m: _batch(a, m, _state(p, "sgd_momentum", 0)),
        "sgd_momentum": lambda p, a, m: _batch(a, m, _state(p, "adamw", 0)),
        "amp": lambda p, a, m: _batch(a, m, _state(p, "sgd", 4)),
        "headroom": lambda p, a, m: max(0, int((m / 1.1 - _state(p, "sgd", 0)) // a)),
        "round": lambda p, a, m: max(0, round((USABLE * m - _state(p, "sgd", 0)) / a)),
    }
    optimizer, amp = OPTIMIZERS[pick(0, 2)], bool(pick(0, 1))  # full to the byte, as above
    num_params, activation, _, gpu_gib = exactly_full(
        pick, 8 + OPTIMIZER_STATE_BYTES[optimizer], amp, 400
    )
    cases.append((num_params, activation, gpu_gib, optimizer, amp))
    for slip, slipped in slips.items():
        optimizer, copies = (slip if slip in OPTIMIZERS else "sgd"), 2 if slip == "amp" else 0
        while True:
            num_params, activation = pick(50, 2000) * 1_000_000, pick(10, 320) * MIB
            memory = [16, 24, 40, 80][pick(0, 3)] * GIB
            right = _batch(activation, memory, _state(num_params, optimizer, copies))
            if right > 0 and slipped(num_params, activation, memory) != right:
                cases.append((num_params, activation, memory // GIB, optimizer, bool(copies)))
                break
    return cases


def _state(num_params, optimizer, copy_bytes) -> int:
    """Bytes of fp32 weights, gradients, ``optimizer``'s state and ``copy_bytes`` per parameter
    of weight copies."""
    return training_memory(
        num_params, 0, optimizer, weight_copy_bytes=copy_bytes * num_params
    ).total


def _batch(activation, memory, state) -> int:
    """The most images of ``activation`` bytes beside ``state`` in USABLE of ``memory``."""
    return max(0, int((USABLE * memory - state) // activation))


def observe_batch(fn, seed: int) -> dict:
    """Call ``fn`` on the cases of ``seed``; record the inputs, the result or the error."""
    rows = []
    for case in _batch_cases(seed):
        result, error = call_answer(fn, *case)
        rows.append({"case": list(case), "result": _plain(result), "error": error})
    return {"rows": rows}


def _batch_account(num_params, activation, gpu_gib, optimizer, amp, images: int) -> str:
    """What one GPU holds with ``images`` images in this case, against what it may use, in words."""
    optimizer_bytes, copies = OPTIMIZER_STATE_BYTES[optimizer], 2 if amp else 0
    per_param = 8 + optimizer_bytes + copies
    state, activations = per_param * num_params, images * activation
    usable = USABLE * gpu_gib * GIB
    parts = f"fp32 weights 4, gradients 4, {optimizer} state {optimizer_bytes}" + (
        ", autocast's copies 2" if amp else ""
    )
    return (
        f"with {images} image(s) the GPU holds {per_param} bytes ({parts}) x {num_params:_} "
        f"parameters = {_size(state)} of state and {images} x {_size(activation)} = "
        f"{_size(activations)} of activations, {_size(state + activations)} in all: "
        f"{'within' if state + activations <= usable else 'more than'} the {_size(usable)} usable "
        f"({USABLE:.0%} of {gpu_gib} GiB)"
    )


def compare_batch(mine: dict, reference: dict, seed: int) -> None:
    """Raise ExerciseFailed at the first case where ``mine`` differs, with the account of memory
    at the batch returned or at the expected one: what differs, not a guess at why."""
    for got, want in zip(mine["rows"], reference["rows"], strict=True):
        case = want["case"]
        num_params, activation, gpu_gib, optimizer, amp = case
        where = (
            f"largest_batch({num_params:_}, {activation // MIB} * 2**20, {gpu_gib}, "
            f"{optimizer!r}, amp={amp})"
        )
        fail_on_error(got["error"], where)
        result, expected = got["result"], want["result"]
        if result == expected:
            continue
        said = f"{where} returned {_shown(result)}, expected {expected}"
        if expected == 0:  # the state alone, or with one image, is over the usable memory
            raise ExerciseFailed(f"{said}: not even one image fits; {_batch_account(*case, 1)}.")
        if not isinstance(result, int):
            raise ExerciseFailed(f"{said}: a batch is a whole number of images.")
        if result > expected:
            raise ExerciseFailed(f"{said}: {_batch_account(*case, result)}.")
        raise ExerciseFailed(f"{said}: more images fit; {_batch_account(*case, expected)}.")


register("00.largest_batch", observe_batch, compare_batch)
