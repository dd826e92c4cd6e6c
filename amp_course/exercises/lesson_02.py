"""Lesson 02 exercises: predicting output dtypes under CPU autocast."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import ExerciseFailed, ExerciseNotDone, register

# Expressions over two float32 tensors a, b (4 x 4), under torch.autocast("cpu", torch.bfloat16).
EXPRESSIONS = {
    "a @ b": lambda a, b: a @ b,
    "F.linear(a, b)": lambda a, b: F.linear(a, b),
    "a + b": lambda a, b: a + b,
    "(a @ b) + a": lambda a, b: (a @ b) + a,
    "torch.softmax(a @ b, dim=-1)": lambda a, b: torch.softmax(a @ b, dim=-1),
    "F.mse_loss(a @ b, b)": lambda a, b: F.mse_loss(a @ b, b),
    "torch.cat([a @ b, a])": lambda a, b: torch.cat([a @ b, a]),
    "(a @ b).float()": lambda a, b: (a @ b).float(),
}


def observe(predictions, seed: int) -> dict:
    """Each prediction as a dtype's name (None where still None).

    The seed changes nothing: the answer is a fact about torch, the same for every input.
    """
    if not isinstance(predictions, dict):
        return {"type": type(predictions).__name__}
    names = {}
    for text in EXPRESSIONS:
        value = predictions.get(text)
        names[text] = str(value) if isinstance(value, torch.dtype) else repr(value)
    return {
        "predictions": {text: (None if name == "None" else name) for text, name in names.items()}
    }


def compare(mine, reference, seed: int) -> None:
    if "predictions" not in mine:
        raise ExerciseFailed(
            f"predictions should be a dict from expression to torch dtype, got {mine['type']}."
        )
    predicted, actual = mine["predictions"], reference["predictions"]
    missing = [text for text in actual if predicted.get(text) is None]
    if len(missing) == len(actual):
        raise ExerciseNotDone("no predictions yet: replace each None with a torch dtype.")
    if missing:
        raise ExerciseFailed(f"no prediction yet for: {', '.join(missing)}.")
    wrong = [
        f"{text} gives {dtype}, not {predicted[text]}"
        for text, dtype in actual.items()
        if predicted[text] != dtype
    ]
    if wrong:
        raise ExerciseFailed(f"{len(wrong)} of {len(actual)} wrong: " + "; ".join(wrong) + ".")


register("02.predict_dtypes", observe, compare)
