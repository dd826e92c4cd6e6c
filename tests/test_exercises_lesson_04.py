import pytest
import torch

from amp_course import exercises
from amp_course.exercises import ExerciseFailed
from amp_course.labs.bug_hunts import forward_loss

NAME = "04.accumulate_and_clip"


def answer(loss_for, unscale=True, per_micro_batch=False):
    """An answer to the exercise: ``loss_for(model, images, labels, micro_batches)`` is each
    micro-batch's loss; the rest is the AMP step, done right unless told otherwise."""

    def finish(model, optimizer, scaler, max_norm):
        if unscale:
            scaler.unscale_(optimizer)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()
        return norm

    def accumulate(model, optimizer, scaler, micro_batches, max_norm):
        optimizer.zero_grad()
        for images, labels in micro_batches:
            scaler.scale(loss_for(model, images, labels, micro_batches)).backward()
            if per_micro_batch:
                norm = finish(model, optimizer, scaler, max_norm)
                optimizer.zero_grad()
        return norm if per_micro_batch else finish(model, optimizer, scaler, max_norm)

    return accumulate


def by_count(model, images, labels, micro_batches):
    """The lesson's amp_step: right for equal micro-batches only."""
    return forward_loss(model, images, labels) / len(micro_batches)


def summed_over_all_digits(model, images, labels, micro_batches):
    """Right, written differently: summed cross-entropy over all the digits."""
    total = sum(len(y) for _, y in micro_batches)
    with torch.autocast("cpu", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(images), labels, reduction="sum")
    return loss / total


clip_before_unscale = answer(by_count, unscale=False)
loss_not_divided = answer(lambda model, images, labels, _: forward_loss(model, images, labels))
step_per_micro_batch = answer(by_count, per_micro_batch=True)


@pytest.mark.parametrize("wrong", [clip_before_unscale, loss_not_divided, step_per_micro_batch])
def test_wrong_answers_fail(wrong):
    with pytest.raises(ExerciseFailed):
        exercises.check(NAME, wrong)


def test_equal_weights_fail_on_unequal_micro_batches_and_say_why():
    with pytest.raises(ExerciseFailed, match="share of the digits"):
        exercises.check(NAME, answer(by_count))


def test_a_correct_answer_written_differently_passes():
    assert exercises.check(NAME, answer(summed_over_all_digits))
