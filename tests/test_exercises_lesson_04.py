import pytest
import torch

from amp_course import exercises
from amp_course.exercises import ExerciseFailed
from amp_course.exercises.lesson_labs import forward_loss

NAME = "04.accumulate_and_clip"


def test_solution_passes():
    assert exercises.check(NAME, exercises.solution(NAME))


def clip_before_unscale(model, optimizer, scaler, micro_batches, max_norm):
    optimizer.zero_grad()
    for images, labels in micro_batches:
        scaler.scale(forward_loss(model, images, labels) / len(micro_batches)).backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm


def loss_not_divided(model, optimizer, scaler, micro_batches, max_norm):
    optimizer.zero_grad()
    for images, labels in micro_batches:
        scaler.scale(forward_loss(model, images, labels)).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm


def step_per_micro_batch(model, optimizer, scaler, micro_batches, max_norm):
    for images, labels in micro_batches:
        optimizer.zero_grad()
        scaler.scale(forward_loss(model, images, labels) / len(micro_batches)).backward()
        scaler.unscale_(optimizer)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
    return norm


@pytest.mark.parametrize("wrong", [clip_before_unscale, loss_not_divided, step_per_micro_batch])
def test_wrong_answers_fail(wrong):
    with pytest.raises(ExerciseFailed):
        exercises.check(NAME, wrong)


def divides_by_count(model, optimizer, scaler, micro_batches, max_norm):
    """The lesson's amp_step: right for equal micro-batches only."""
    optimizer.zero_grad()
    for images, labels in micro_batches:
        scaler.scale(forward_loss(model, images, labels) / len(micro_batches)).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm


def summed_then_divided(model, optimizer, scaler, micro_batches, max_norm):
    """Right, written differently: summed cross-entropy over all the digits."""
    optimizer.zero_grad()
    total = sum(len(labels) for _, labels in micro_batches)
    for images, labels in micro_batches:
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(images), labels, reduction="sum")
        scaler.scale(loss / total).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm


def test_equal_weights_fail_on_unequal_micro_batches_and_say_why():
    with pytest.raises(ExerciseFailed, match="share of the digits"):
        exercises.check(NAME, divides_by_count)


def test_a_correct_answer_written_differently_passes():
    assert exercises.check(NAME, summed_then_divided)
