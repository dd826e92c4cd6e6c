"""Lesson 02 exercises: predicting output dtypes under CPU autocast."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import ExerciseFailed, exercise

# Expressions over two float32 tensors a, b (4 x 4), run under
# torch.autocast("cpu", torch.bfloat16).
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

PREDICTIONS = {
    "a @ b": torch.bfloat16,  # matmul: on the CPU lower-precision list
    "F.linear(a, b)": torch.bfloat16,  # linear: on the list
    "a + b": torch.float32,  # unlisted: runs in its inputs' dtype
    "(a @ b) + a": torch.float32,  # unlisted add promotes bf16 + fp32 to fp32
    "torch.softmax(a @ b, dim=-1)": torch.bfloat16,  # unlisted on CPU (fp32-listed on CUDA)
    "F.mse_loss(a @ b, b)": torch.float32,  # mse_loss: on the CPU fp32 list
    "torch.cat([a @ b, a])": torch.float32,  # cat: promotes to the widest input
    "(a @ b).float()": torch.float32,  # an explicit cast wins
}


def observed_dtypes(device="cpu") -> dict[str, torch.dtype]:
    """What torch actually gives for each expression under bf16 autocast on ``device``."""
    a = torch.randn(4, 4, device=device)
    b = torch.randn(4, 4, device=device)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        return {text: fn(a, b).dtype for text, fn in EXPRESSIONS.items()}


@exercise("02.predict_dtypes", solution=dict(PREDICTIONS))
def check_predictions(predictions):
    if not isinstance(predictions, dict):
        raise ExerciseFailed(
            "predictions should be a dict from expression to torch dtype, "
            f"got {type(predictions).__name__}."
        )
    missing = [text for text in EXPRESSIONS if predictions.get(text) is None]
    if missing:
        raise ExerciseFailed(f"no prediction yet for: {', '.join(missing)}.")
    wrong = [
        f"{text} gives {actual}, not {predictions[text]}"
        for text, actual in observed_dtypes().items()
        if predictions[text] != actual
    ]
    if wrong:
        raise ExerciseFailed(f"{len(wrong)} of {len(EXPRESSIONS)} wrong: " + "; ".join(wrong) + ".")
