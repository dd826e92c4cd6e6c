import re

import pytest
import torch

from amp_course import exercises
from amp_course.exercises import ExerciseFailed
from amp_course.labs.bug_hunts import forward_loss

NAME = "04.accumulate_and_clip"


def _finish(model, optimizer, scaler, max_norm, unscale=True):
    """Unscale (unless told not to), clip, step and update; the norm before clipping."""
    if unscale:
        scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return norm


def answer(loss_for, unscale=True, per_micro_batch=False):
    """An answer to the exercise: ``loss_for(model, images, labels, micro_batches)`` is each
    micro-batch's loss; the rest is the AMP step, done right unless told otherwise."""

    def accumulate(model, optimizer, scaler, micro_batches, max_norm):
        optimizer.zero_grad()
        for images, labels in micro_batches:
            scaler.scale(loss_for(model, images, labels, micro_batches)).backward()
            if per_micro_batch:
                norm = _finish(model, optimizer, scaler, max_norm, unscale)
                optimizer.zero_grad()
        return norm if per_micro_batch else _finish(model, optimizer, scaler, max_norm, unscale)

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


def test_equal_weights_fail_on_unequal_micro_batches_saying_what_differs():
    message = (
        r"with micro-batches of 7, 5, 4 digits, the returned norm is 3\.93322; the true "
        r"\(unscaled\) gradient norm of the mean loss over all their digits, under the "
        r"exercise.s fp16 autocast, is 3\.6526; yours is 1\.077 times that \(the check allows "
        r"a relative 1e-4; its GradScaler starts at "
        r"init_scale=8\)\. With the equal micro-batches before them, it matched\.$"
    )
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, answer(by_count))


def never_zeroed(model, optimizer, scaler, micro_batches, max_norm):
    """Right on a fresh model; a second step also adds the gradients the first one left."""
    total = sum(len(labels) for _, labels in micro_batches)
    for images, labels in micro_batches:
        loss = forward_loss(model, images, labels) * (len(labels) / total)
        scaler.scale(loss).backward()
    return _finish(model, optimizer, scaler, max_norm)


def zeroed_after_the_step(model, optimizer, scaler, micro_batches, max_norm):
    """Right, as the course's amp_step does it: the gradients set to None after the step."""
    norm = never_zeroed(model, optimizer, scaler, micro_batches, max_norm)
    optimizer.zero_grad(set_to_none=True)
    return norm


def one_concatenated_batch(model, optimizer, scaler, micro_batches, max_norm):
    """Not a backward per micro-batch: one forward on all the digits, fp16 rounding apart."""
    optimizer.zero_grad()
    images, labels = (torch.cat(parts) for parts in zip(*micro_batches, strict=True))
    scaler.scale(forward_loss(model, images, labels)).backward()
    return _finish(model, optimizer, scaler, max_norm)


@pytest.mark.parametrize("seed", [0, 1, 2, 12345])
def test_gradients_left_from_a_step_before_fail_at_every_seed(seed):
    status, message = exercises.verdict(NAME, never_zeroed, seed)
    assert status == "failed"
    assert "on a second call with the same model, optimizer and scaler, the returned norm" in (
        message
    )
    assert exercises.verdict(NAME, zeroed_after_the_step, seed) == ("passed", "")


def one_backward_of_the_summed_losses(model, optimizer, scaler, micro_batches, max_norm):
    """The right weighting, but every micro-batch's graph kept until one backward at the end."""
    optimizer.zero_grad()
    total = sum(len(labels) for _, labels in micro_batches)
    loss = sum(forward_loss(model, x, y) * (len(y) / total) for x, y in micro_batches)
    scaler.scale(loss).backward()
    return _finish(model, optimizer, scaler, max_norm)


def popping_the_callers_list(model, optimizer, scaler, micro_batches, max_norm):
    """Right, but it empties the list of micro-batches the caller passed."""
    optimizer.zero_grad()
    total = sum(len(labels) for _, labels in micro_batches)
    while micro_batches:
        images, labels = micro_batches.pop()
        scaler.scale(forward_loss(model, images, labels) * (len(labels) / total)).backward()
    return _finish(model, optimizer, scaler, max_norm)


@pytest.mark.parametrize(
    "wrong, says",
    [  # the first two passed every seed on their gradients' values (fp16 rounding apart)
        (one_concatenated_batch, "added into the weights' gradients 1 time(s) during your step"),
        (one_backward_of_the_summed_losses, "1 time(s) during your step; during the reference's"),
        (popping_the_callers_list, "your step was given holds 0 after the call; the reference"),
    ],
)
def test_one_backward_or_a_consumed_list_fails_at_every_seed_saying_what_differs(wrong, says):
    with pytest.raises(ExerciseFailed) as failure:
        exercises.check(NAME, wrong)
    assert says in str(failure.value), failure.value
    for seed in (1, 12345, 987654321):
        assert exercises.verdict(NAME, wrong, seed)[0] == "failed", seed


def clipped_with_its_own_norm(model, optimizer, scaler, micro_batches, max_norm):
    """Right, written differently: the norm from torch.linalg over all the gradients, then
    clip_grads_with_norm_; it rounds otherwise than clip_grad_norm_."""
    optimizer.zero_grad()
    for images, labels in micro_batches:
        scaler.scale(_by_share(model, images, labels, micro_batches)).backward()
    scaler.unscale_(optimizer)
    grads = [p.grad.flatten() for p in model.parameters()]
    norm = torch.linalg.vector_norm(torch.cat(grads))
    torch.nn.utils.clip_grads_with_norm_(model.parameters(), max_norm, norm)
    scaler.step(optimizer)
    scaler.update()
    return norm


def divided_after_unscaling(model, optimizer, scaler, micro_batches, max_norm):
    """Right, written differently: summed losses backward, the gradients divided once unscaled."""
    optimizer.zero_grad()
    total = sum(len(labels) for _, labels in micro_batches)
    for images, labels in micro_batches:
        scaler.scale(forward_loss(model, images, labels) * len(labels)).backward()
    scaler.unscale_(optimizer)
    for param in model.parameters():
        param.grad.div_(total)
    return _finish(model, optimizer, scaler, max_norm, unscale=False)


# A test learner's: each failed a few seeds in 150 (up to 9e-7 apart after the second step)
# while the check allowed 1e-7 + 1e-5 x |value|.
@pytest.mark.parametrize("right", [clipped_with_its_own_norm, divided_after_unscaling])
def test_a_clip_or_division_that_rounds_otherwise_passes_at_every_seed(right):
    for seed in (0, 7, 24, 74, 91, 142):
        assert exercises.verdict(NAME, right, seed) == ("passed", ""), seed


def test_a_correct_answer_written_differently_passes():
    assert exercises.check(NAME, answer(summed_over_all_digits))


def _by_share(model, images, labels, micro_batches):
    """Each micro-batch's mean loss times its share of the digits: the right weighting."""
    total = sum(len(y) for _, y in micro_batches)
    return forward_loss(model, images, labels) * len(labels) / total


def _norm_zeroed_when_not_finite(model, optimizer, scaler, micro_batches, max_norm):
    norm = answer(_by_share)(model, optimizer, scaler, micro_batches, max_norm)
    return norm if torch.isfinite(norm) else torch.zeros(())


def _norm_in_fp16(model, optimizer, scaler, micro_batches, max_norm):
    return answer(_by_share)(model, optimizer, scaler, micro_batches, max_norm).half()


def _updated_to_its_own_scale(model, optimizer, scaler, micro_batches, max_norm):
    """update(scaler.get_scale()): one update() per call, which never backs off."""
    optimizer.zero_grad()
    for images, labels in micro_batches:
        scaler.scale(_by_share(model, images, labels, micro_batches)).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update(scaler.get_scale())
    return norm


@pytest.mark.parametrize(
    "wrong, says",
    [
        # A test learner's answers: the messages give the facts to tell each apart.
        (
            clip_before_unscale,
            "the returned norm is 29.2205; the true (unscaled) gradient norm of the mean loss "
            "over all their digits, under the exercise's fp16 autocast, is 3.65256; yours is 8 "
            "times that (the check allows a relative 1e-4; its GradScaler starts at init_scale=8)",
        ),
        (
            _norm_zeroed_when_not_finite,
            "with micro-batches whose gradients overflow, the returned norm is 0; the unscaled "
            "gradients hold inf or NaN, and clip_grad_norm_ returns ",
        ),
        (_norm_in_fp16, "the returned norm (a torch.float16 tensor) is "),
        (
            _updated_to_its_own_scale,
            "the scale after your step is 8; after the reference's, 4 (the check's",
        ),
    ],
)
def test_near_misses_are_told_by_what_differs(wrong, says):
    with pytest.raises(ExerciseFailed) as failure:
        exercises.check(NAME, wrong)
    assert says in str(failure.value), failure.value
    assert exercises.check(NAME, answer(_by_share))  # the right weighting passes


def _weighted_in_bf16(model, images, labels, micro_batches):
    """The right weighting under bf16 autocast, where the exercise asks for fp16."""
    total = sum(len(y) for _, y in micro_batches)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
    return loss * len(labels) / total


def test_a_norm_near_the_true_one_is_told_apart_from_it():
    """1.00047 printed as '1 times that' (4 digits) said nothing: enough digits to differ."""
    with pytest.raises(ExerciseFailed) as failure:
        exercises.check(NAME, answer(_weighted_in_bf16))
    ratio = re.search(r"yours is (\S+) times that", str(failure.value))[1]
    assert float(ratio) != 1 and "under the exercise's fp16 autocast" in str(failure.value)
