"""Plain data between a learner's process and the grader: JSON text, tensors as dtype/shape/bytes.

An exercise's ``observe`` returns numbers, strings, bools, None, lists or tuples, dicts with str
keys and torch tensors. ``dumps`` turns that into strict JSON text (non-finite floats and tensors
become small tagged objects); ``loads`` reads it back, refusing anything else. JSON rather than
pickle because the text comes from code the grader does not trust: reading it can build plain
values only, never run code. Tuples come back as lists, so ``check`` sends its own observations
through the same round trip and a checker sees in a notebook exactly what it sees when grading.
"""

from __future__ import annotations

import base64
import json
import math

import torch

TENSOR = "__tensor__"
FLOAT = "__float__"
MAX_DEPTH = 20
MAX_CHARS = 64 * 2**20  # an observation is a few hundred kB; anything far larger is refused
# Tensor dtypes an observation may carry; no other dtype name is ever turned into a torch dtype.
DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
    )
}
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class PlainDataError(ValueError):
    """A value is not plain data (or the text is not a valid observation)."""


def to_plain(value, depth: int = 0):
    """``value`` as JSON-ready data; raises PlainDataError for anything that is not plain."""
    if depth > MAX_DEPTH:
        raise PlainDataError("observation nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else {FLOAT: str(value)}
    if isinstance(value, (list, tuple)):
        return [to_plain(item, depth + 1) for item in value]
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise PlainDataError("observation dicts need str keys")
        if TENSOR in value or FLOAT in value:
            raise PlainDataError(f"{TENSOR!r} and {FLOAT!r} are reserved keys")
        return {key: to_plain(item, depth + 1) for key, item in value.items()}
    if isinstance(value, torch.Tensor):
        name = str(value.dtype).removeprefix("torch.")
        if name not in DTYPES:
            raise PlainDataError(f"tensors of dtype {value.dtype} cannot be sent")
        # A fresh tensor, not .contiguous(): that keeps a size-1 dimension's stride 0 (an
        # expanded scale), which the byte view below refuses.
        data = torch.empty(value.shape, dtype=value.dtype).copy_(value.detach())
        # Flat first: a 0-dim tensor has no dimension for the byte view to widen.
        raw = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
        return {TENSOR: {"dtype": name, "shape": list(data.shape), "data": _b64(raw)}}
    raise PlainDataError(f"{type(value).__name__} is not plain data")


def from_plain(value, depth: int = 0):
    """The inverse of ``to_plain``, validating as it goes (the input may be hostile)."""
    if depth > MAX_DEPTH:
        raise PlainDataError("observation nested too deeply")
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, list):
        return [from_plain(item, depth + 1) for item in value]
    if isinstance(value, dict):
        if set(value) == {FLOAT}:
            if value[FLOAT] not in _NON_FINITE:
                raise PlainDataError(f"bad float {value[FLOAT]!r}")
            return _NON_FINITE[value[FLOAT]]
        if set(value) == {TENSOR}:
            return _tensor(value[TENSOR])
        return {str(key): from_plain(item, depth + 1) for key, item in value.items()}
    raise PlainDataError(f"{type(value).__name__} in an observation")


def _tensor(spec) -> torch.Tensor:
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data"}:
        raise PlainDataError("a tensor needs exactly dtype, shape and data")
    dtype, shape, data = DTYPES.get(spec["dtype"]), spec["shape"], spec["data"]
    if dtype is None or not isinstance(data, str) or not isinstance(shape, list):
        raise PlainDataError(f"bad tensor {spec.get('dtype')!r}")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise PlainDataError("a tensor's shape holds non-negative integers")
    raw = base64.b64decode(data.encode("ascii"), validate=True)
    count = math.prod(shape)
    if len(raw) != count * torch.empty((), dtype=dtype).element_size():
        raise PlainDataError("a tensor's bytes do not match its dtype and shape")
    if not count:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape).clone()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _no_constants(name):
    raise PlainDataError(f"{name} is not valid in strict JSON")


def dumps(value) -> str:
    """Strict JSON text for ``value`` (see ``to_plain``)."""
    return json.dumps(to_plain(value), allow_nan=False, separators=(",", ":"))


def loads(text: str):
    """Plain data from JSON text made by ``dumps``; refuses oversized or malformed text."""
    if not isinstance(text, str):
        raise PlainDataError(f"an observation is JSON text, not {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise PlainDataError(f"observation of {len(text)} characters is too large")
    try:
        return from_plain(json.loads(text, parse_constant=_no_constants))
    except (ValueError, RecursionError, TypeError) as error:
        if isinstance(error, PlainDataError):
            raise
        raise PlainDataError(f"not a valid observation: {error}") from None


def roundtrip(value):
    """``value`` as the grader would receive it: ``loads(dumps(value))``."""
    return loads(dumps(value))
