"""Lesson 09's checkers reject typical wrong answers, saying why (that they accept the reference:
test_exercises.py)."""

import re

import conftest
import pytest
import torch

from amp_course import exercises
from amp_course.checkpointing import Checkpointed, encoder_blocks
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_09 as lesson
from amp_course.exercises.solutions import lesson_09 as solutions


def _every_block(model, k):
    return solutions.checkpoint_every(model, 1)


def _off_by_one(model, k):
    blocks = encoder_blocks(model)
    for index in range(k - 1, len(blocks), k):  # blocks k-1, 2k-1, ... instead of 0, k, ...
        blocks[index] = Checkpointed(blocks[index])
    return model


class _HandWritten(torch.nn.Module):
    """A block behind the labs' hand-written checkpoint, which recomputes without autocast."""

    def __init__(self, block):
        super().__init__()
        self.block = block
        self.checkpointed = conftest.broken_versions("labs_beyond_autocast")[
            "labs.checkpoint_autocast"
        ]

    def forward(self, x):
        return self.checkpointed(self.block, x)


def _hand_written(model, k):
    blocks = encoder_blocks(model)
    for index in range(0, len(blocks), k):
        blocks[index] = _HandWritten(blocks[index])
    return model


def _copy_of_the_model(model, k):
    import copy

    return solutions.checkpoint_every(copy.deepcopy(model), k)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (_every_block, "blocks [0, 1, 2] were recomputed"),
        (_off_by_one, "blocks [1] were recomputed"),
        (_hand_written, "lost the forward's autocast state"),
        (_copy_of_the_model, "got no gradient"),
        (lambda model, k: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_checkpoint_every_rejects(wrong, words):
    with pytest.raises(ExerciseFailed, match=re.escape(words)):
        exercises.check("09.checkpoint_every", wrong)


def test_checkpoint_every_inputs_vary_with_the_seed():
    seen = {
        (o["depth"], o["k"])
        for o in (lesson.observe_checkpoint_every(solutions.checkpoint_every, s) for s in range(6))
    }
    assert len(seen) > 1


def _unscaled(x, fp8_dtype):
    return x.to(fp8_dtype), torch.tensor(1.0)


def _inverted(x, fp8_dtype):
    scale = x.abs().max().clamp(min=1e-12) / torch.finfo(fp8_dtype).max
    return (x * scale).to(fp8_dtype), scale


def _no_floor(x, fp8_dtype):
    scale = torch.finfo(fp8_dtype).max / x.abs().max()
    return (x * scale).to(fp8_dtype), scale


def _always_e4m3(x, fp8_dtype):
    return solutions.to_float8(x, torch.float8_e4m3fn)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (_unscaled, "your scale is 1"),
        (_inverted, "the format's max over the tensor's amax"),
        (_no_floor, "an amax of 0 gives an infinite scale"),
        (_always_e4m3, "cast to the requested torch.float8_e5m2"),
    ],
)
def test_to_float8_rejects(wrong, words):
    with pytest.raises(ExerciseFailed, match=re.escape(words)):
        exercises.check("09.to_float8", wrong)


def _per_tensor(x, fp8_dtype):
    return solutions.to_float8(x, fp8_dtype)


def _per_tensor_in_rows(x, fp8_dtype):
    quantized, scale = solutions.to_float8(x, fp8_dtype)
    return quantized, scale.reshape(1, 1).expand(x.shape[0], 1)


def _per_column(x, fp8_dtype):
    scales = torch.finfo(fp8_dtype).max / x.abs().amax(0, keepdim=True).clamp(min=1e-12)
    return (x * scales).to(fp8_dtype), scales


def _rows_flat(x, fp8_dtype):
    quantized, scales = solutions.to_float8_rowwise(x, fp8_dtype)
    return quantized, scales.flatten()


def _rows_no_floor(x, fp8_dtype):
    scales = torch.finfo(fp8_dtype).max / x.abs().amax(1, keepdim=True)
    return (x * scales).to(fp8_dtype), scales


def _rows_inverted(x, fp8_dtype):
    scales = x.abs().amax(1, keepdim=True).clamp(min=1e-12) / torch.finfo(fp8_dtype).max
    return (x * scales).to(fp8_dtype), scales


def _rows_always_e4m3(x, fp8_dtype):
    return solutions.to_float8_rowwise(x, torch.float8_e4m3fn)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (_per_tensor, "one scale for the whole tensor"),
        (_per_tensor_in_rows, "every row got the same scale"),
        (_per_column, "one scale per column"),
        (_rows_flat, "without the row's dimension"),
        (_rows_no_floor, "an all-zero row has amax 0"),
        (_rows_inverted, "the format's max over that row's amax"),
        (_rows_always_e4m3, "cast to the requested torch.float8_e5m2"),
    ],
)
def test_to_float8_rowwise_rejects(wrong, words):
    with pytest.raises(ExerciseFailed, match=re.escape(words)):
        exercises.check("09.to_float8_rowwise", wrong)


def test_rowwise_keeps_small_rows_that_per_tensor_scaling_loses():
    # Why the exercise matters: the smallest rows of the check's first case.
    x, fp8_dtype = next(iter(lesson.rowwise_inputs(0).values()))
    quantized, scales = solutions.to_float8_rowwise(x, fp8_dtype)
    per_tensor, scale = solutions.to_float8(x, fp8_dtype)
    small = x.abs().amax(1).argmin()
    row_error = (quantized.float() / scales - x)[small].norm() / x[small].norm()
    tensor_error = (per_tensor.float() / scale - x)[small].norm() / x[small].norm()
    assert row_error < 0.1 < tensor_error


def test_to_float8_reference_saturates_and_round_trips():
    x = torch.tensor([0.0, 1e-3, -2.0, 4.0])
    q, scale = solutions.to_float8(x, torch.float8_e4m3fn)
    assert q.dtype == torch.float8_e4m3fn and q.float().abs().max() == 448
    torch.testing.assert_close(q.float() / scale, x, rtol=0.07, atol=1e-3)
