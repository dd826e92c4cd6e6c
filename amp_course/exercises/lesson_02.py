"""Lesson 02 exercises: predicting output dtypes under CPU autocast, then under CUDA autocast."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..display import shown
from . import ExerciseFailed, ExerciseNotDone, register

# Expressions over two float32 tensors a, b (4 x 4), under torch.autocast("cpu", torch.bfloat16):
# ops the lesson did not trace, and inputs that are not float32.
EXPRESSIONS = {
    "torch.bmm(a[None], b[None])": lambda a, b: torch.bmm(a[None], b[None]),
    "F.conv1d(a[None], b[:, :, None])": lambda a, b: F.conv1d(a[None], b[:, :, None]),
    "torch.cumsum(a @ b, dim=0)": lambda a, b: torch.cumsum(a @ b, dim=0),
    "torch.prod(a @ b)": lambda a, b: torch.prod(a @ b),
    "F.l1_loss(a @ b, b)": lambda a, b: F.l1_loss(a @ b, b),
    "torch.stack([a @ b, a])": lambda a, b: torch.stack([a @ b, a]),
    "F.linear(a.double(), b.double())": lambda a, b: F.linear(a.double(), b.double()),
    "a @ b.half()": lambda a, b: a @ b.half(),
}
# Where to look, for a wrong prediction: never the answer itself.
HINTS = {
    "torch.bmm(a[None], b[None])": "find bmm on the CPU's lists",
    "F.conv1d(a[None], b[:, :, None])": "find conv1d on the CPU's lists",
    "torch.cumsum(a @ b, dim=0)": "find cumsum on the CPU's lists",
    "torch.prod(a @ b)": "find prod on the CPU's lists",
    "F.l1_loss(a @ b, b)": "look for l1_loss on the CPU's lists",
    "torch.stack([a @ b, a])": "find stack on the CPU's lists: what dtype is each input?",
    "F.linear(a.double(), b.double())": (
        "linear is on the lower-precision list; section 1 says which floating-point inputs "
        "autocast casts"
    ),
    "a @ b.half()": "matmul is on the lower-precision list: to what does it cast each input?",
}

# Under torch.autocast("cuda", torch.float16): a, b float32 (4 x 4), q, k, v float32 (1, 2, 4, 8).
CUDA_EXPRESSIONS = {
    "a @ b": lambda a, b, q, k, v: a @ b,
    "torch.logsumexp(a @ b, dim=0)": lambda a, b, q, k, v: torch.logsumexp(a @ b, dim=0),
    "F.group_norm(a @ b, 2)": lambda a, b, q, k, v: F.group_norm(a @ b, 2),
    "torch.baddbmm(a[None], q[0], k[0].transpose(1, 2))": lambda a, b, q, k, v: torch.baddbmm(
        a[None], q[0], k[0].transpose(1, 2)
    ),
    "torch.einsum('ij,jk->ik', a, b)": lambda a, b, q, k, v: torch.einsum("ij,jk->ik", a, b),
    "torch.exp(a @ b)": lambda a, b, q, k, v: torch.exp(a @ b),
    "F.gelu(a @ b)": lambda a, b, q, k, v: F.gelu(a @ b),
    "torch.cat([a @ b, a])": lambda a, b, q, k, v: torch.cat([a @ b, a]),
}
CUDA_HINTS = {
    "a @ b": "find matmul on CUDA's lists",
    "torch.logsumexp(a @ b, dim=0)": "find logsumexp on CUDA's lists (they differ from the CPU's)",
    "F.group_norm(a @ b, 2)": "find group_norm on CUDA's lists",
    "torch.baddbmm(a[None], q[0], k[0].transpose(1, 2))": "find baddbmm on CUDA's lists",
    "torch.einsum('ij,jk->ik', a, b)": "section 2.1 prints the CUDA ops the page leaves out",
    "torch.exp(a @ b)": "find exp on CUDA's lists",
    "F.gelu(a @ b)": "gelu is on no list: what does its input define?",
    "torch.cat([a @ b, a])": "cat is on no CUDA list: what does it make of inputs of two dtypes?",
}


def _predictions(expressions: dict, hints: dict, device: str, autocast_dtype: torch.dtype):
    """observe and compare for a dict of dtype predictions, one per expression, made under
    ``torch.autocast(device, dtype=autocast_dtype)``."""

    def observe(predictions, seed: int) -> dict:
        """Each prediction as a dtype's name (None where still None).

        The seed changes nothing: the answer is a fact about torch, the same for every input.
        """
        if not isinstance(predictions, dict):
            return {"type": type(predictions).__name__}
        names, others = {}, {}
        for text in expressions:
            value = predictions.get(text)
            names[text] = str(value) if isinstance(value, torch.dtype) else None
            if isinstance(value, type):  # numpy.float32, float: a class, not a torch dtype
                others[text] = f"the class {value.__module__}.{value.__qualname__}"
            elif value is not None and not isinstance(value, torch.dtype):
                others[text] = shown(value, 40)
        unknown = [repr(key)[:60] for key in predictions if key not in expressions]
        return {"predictions": names, "not_dtypes": others, "unknown": unknown}

    def compare(mine, reference, seed: int) -> None:
        if "predictions" not in mine:
            raise ExerciseFailed(
                f"predictions is a {mine['type']}; the reference's is a dict from expression to "
                "torch dtype."
            )
        predicted, actual, others = (
            mine["predictions"],
            reference["predictions"],
            mine["not_dtypes"],
        )
        if others:
            raise ExerciseFailed(
                f"{len(others)} of {len(actual)} predictions are not torch dtypes: "
                + "; ".join(f"{text} is {shown}" for text, shown in others.items())
                + ". The reference's are torch dtypes (torch.<name>)."
            )
        missing = [text for text in actual if predicted.get(text) is None]
        unknown = mine.get("unknown", [])
        if missing and unknown:  # a key edited: say which keys are not the exercise's
            raise ExerciseFailed(
                f"no prediction for: {', '.join(missing)}. The dict's keys "
                f"{', '.join(unknown)} are not among the exercise's expressions; each key is an "
                "expression exactly as the exercise cell writes it."
            )
        if len(missing) == len(actual):
            raise ExerciseNotDone("no predictions yet: replace each None with a torch dtype.")
        if missing:
            raise ExerciseFailed(f"no prediction yet for: {', '.join(missing)}.")
        wrong = [text for text, dtype in actual.items() if predicted[text] != dtype]
        # Every 16-bit prediction in the other 16-bit format: the setting was misread, not the
        # lists, and the setting is no answer to hide. (One stray beside right ones says nothing.)
        other = {torch.float16: torch.bfloat16, torch.bfloat16: torch.float16}[autocast_dtype]
        misread = str(autocast_dtype) not in predicted.values()
        strays = [text for text in wrong if misread and predicted[text] == str(other)]
        if wrong:
            raise ExerciseFailed(
                f"{len(wrong)} of {len(actual)} wrong under {device} autocast: "
                + "; ".join(f"{text} ({hints[text]})" for text in wrong)
                + "."
                + (
                    f" {len(strays)} of them you predicted {other}; the lower precision of this "
                    f"autocast, torch.autocast({device.lower()!r}, dtype={autocast_dtype}), is "
                    f"{autocast_dtype}."
                    if strays
                    else ""
                )
            )

    return observe, compare


register("02.predict_dtypes", *_predictions(EXPRESSIONS, HINTS, "CPU", torch.bfloat16))
register(
    "02.predict_cuda_dtypes", *_predictions(CUDA_EXPRESSIONS, CUDA_HINTS, "CUDA", torch.float16)
)
