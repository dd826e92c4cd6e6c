"""Both labs notebooks: every lab shows its broken code, a blank and a check, and the broken code
fails; the bug hunts' checks reject the usual wrong fixes and accept correct ones written
differently."""

import conftest
import pytest
import torch
from conftest import tagged

from amp_course import exercises
from amp_course import scaling as ac_scaling
from amp_course.exercises import ExerciseFailed
from amp_course.exercises.solutions import labs_bug_hunts as fixes
from amp_course.labs import bug_hunts as lab

LABS = [
    "labs.clip_after_unscale",
    "labs.accumulation",
    "labs.bf16_scaler",
    "labs.scheduler_skip",
    "labs.resume",
    "labs.half_model",
    "labs.extra_step",
]
BEYOND_LABS = [
    "labs.checkpoint_autocast",
    "labs.custom_op_autocast",
    "labs.bf16_loss_sum",
    "labs.thread_autocast",
]
TRANSFERS = ["labs.autocast_pool"]  # a blank with no broken code: a case the others have not shown
# Each labs notebook: its labs with broken code, then its transfer labs, in notebook order.
NOTEBOOKS = {"labs_bug_hunts": (LABS, []), "labs_beyond_autocast": (BEYOND_LABS, TRANSFERS)}


def broken_versions(lesson="labs_bug_hunts"):
    """{lab name: the broken function exactly as the notebook shows it}."""
    return conftest.broken_versions(lesson)


@pytest.mark.parametrize("lesson", NOTEBOOKS)
def test_every_lab_has_a_broken_version_and_a_blank(lesson):
    labs, transfers = NOTEBOOKS[lesson]
    assert sorted(broken_versions(lesson)) == sorted(labs)
    # (each check cell checks the blank above it: tests/test_notebooks.py)
    blanks = [c.metadata["exercise"]["name"] for c in tagged(lesson, "exercise")]
    assert blanks == labs + transfers


@pytest.mark.parametrize(
    "lesson, name", [(lesson, name) for lesson, (labs, _) in NOTEBOOKS.items() for name in labs]
)
def test_broken_version_from_the_notebook_fails(lesson, name):
    with pytest.raises(ExerciseFailed):
        exercises.check(name, broken_versions(lesson)[name])


def _no_clip(model, optimizer, scaler, batches, max_norm):
    lab.train_steps(model, optimizer, scaler, batches)


def _clip_after_step(model, optimizer, scaler, batches, max_norm):
    for images, labels in batches:  # clips, but only after the weights have moved
        optimizer.zero_grad()
        scaler.scale(lab.forward_loss(model, images, labels)).backward()
        scaler.step(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.update()


def _accumulate_dividing_by(divisor):
    """A loop that steps after every group, the short last one included, dividing each loss by
    ``divisor(steps)`` whatever the group's length."""

    def train(model, optimizer, scaler, batches, steps, max_norm):
        optimizer.zero_grad()
        for index, (images, labels) in enumerate(batches):
            scaler.scale(lab.forward_loss(model, images, labels) / divisor(steps)).backward()
            if (index + 1) % steps == 0 or index == len(batches) - 1:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()

    return train


_accumulate_without_dividing = _accumulate_dividing_by(lambda steps: 1)
_accumulate_dividing_the_last_group_by_steps = _accumulate_dividing_by(lambda steps: steps)


def _accumulate_step_every_batch(model, optimizer, scaler, batches, steps, max_norm):
    fixes.train_accumulated(model, optimizer, scaler, batches, 1, max_norm)


def _accumulate_dropping_the_last_group(model, optimizer, scaler, batches, steps, max_norm):
    full = len(batches) - len(batches) % steps  # the usual loop: whole groups only
    fixes.train_accumulated(model, optimizer, scaler, batches[:full], steps, max_norm)


def _suppressed_warning(model, optimizer, scheduler, scaler, batches):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for images, labels in batches:
            optimizer.zero_grad()
            scaler.scale(lab.forward_loss(model, images, labels)).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()


def _no_scheduler(model, optimizer, scheduler, scaler, batches):
    lab.train_steps(model, optimizer, scaler, batches)


def _optimizer_step_only(model, optimizer, scaler, batches):
    for images, labels in batches:
        optimizer.zero_grad()
        scaler.scale(lab.forward_loss(model, images, labels)).backward()
        optimizer.step()
        scaler.update()


def _no_update(model, optimizer, scaler, batches):
    for images, labels in batches:
        optimizer.zero_grad()
        scaler.scale(lab.forward_loss(model, images, labels)).backward()
        scaler.step(optimizer)


WRONG = {
    "labs.clip_after_unscale": [_no_clip, _clip_after_step],
    "labs.accumulation": [
        _accumulate_without_dividing,
        _accumulate_step_every_batch,
        _accumulate_dropping_the_last_group,
        _accumulate_dividing_the_last_group_by_steps,
    ],
    "labs.bf16_scaler": [
        lambda device, dtype: torch.amp.GradScaler("cpu", enabled=False),
        lambda device, dtype: None if dtype != torch.float16 else torch.amp.GradScaler("cpu"),
    ],
    "labs.scheduler_skip": [_suppressed_warning, _no_scheduler],
    "labs.resume": [
        lambda m, o, s: {"model": m.state_dict(), "scaler": s.state_dict()},
        lambda m, o, s: {
            "model": m.state_dict(),
            "optimizer": o.state_dict(),
            "scale": s.get_scale(),
        },
    ],
    "labs.half_model": [
        lambda m, d: (
            lambda h: (
                h,
                torch.optim.SGD(h.parameters(), lr=lab.LR, momentum=0.9),
                torch.amp.GradScaler("cpu", enabled=False),
            )
        )(m.half()),
        lambda m, d: (
            m,
            torch.optim.SGD(m.parameters(), lr=lab.LR),
            torch.amp.GradScaler("cpu", **lab.SCALER_KWARGS),
        ),
        lambda m, d: (  # the lab's SCALER_KWARGS left out
            m,
            torch.optim.SGD(m.parameters(), lr=lab.LR, momentum=0.9),
            torch.amp.GradScaler("cpu"),
        ),
    ],
    "labs.extra_step": [_optimizer_step_only, _no_update],
}


@pytest.mark.parametrize(
    "name,wrong",
    [(n, w) for n, ws in WRONG.items() for w in ws],
    ids=[f"{n}-{i}" for n, ws in WRONG.items() for i in range(len(ws))],
)
def test_usual_wrong_fixes_fail(name, wrong):
    with pytest.raises(ExerciseFailed):
        exercises.check(name, wrong)


def _accumulate_written_differently(model, optimizer, scaler, batches, steps, max_norm):
    for index, (images, labels) in enumerate(batches):  # zero_grad after the step, loss * (1/n)
        in_group = min(steps, len(batches) - index // steps * steps)
        scaler.scale(lab.forward_loss(model, images, labels) * (1.0 / in_group)).backward()
        if index % steps == steps - 1 or index == len(batches) - 1:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


def _scheduler_with_found_inf_check(model, optimizer, scheduler, scaler, batches):
    for images, labels in batches:  # detects the skip from the unscaled gradients instead
        optimizer.zero_grad()
        scaler.scale(lab.forward_loss(model, images, labels)).backward()
        scaler.unscale_(optimizer)
        finite = all(torch.isfinite(p.grad).all() for p in model.parameters())
        scaler.step(optimizer)
        scaler.update()
        if finite:
            scheduler.step()


@pytest.mark.parametrize(
    "name,variant",
    [
        ("labs.accumulation", _accumulate_written_differently),
        ("labs.scheduler_skip", _scheduler_with_found_inf_check),
    ],
)
def test_correct_fixes_written_differently_pass(name, variant):
    assert exercises.check(name, variant)


@pytest.mark.parametrize("seed", [0, 12345])
def test_resumed_reference_continues_exactly_like_the_uninterrupted_run(seed):
    model, scaler, intact = lab.resumed_run(fixes.save_checkpoint, seed)
    assert intact == {"scaler": True, "optimizer": True}
    reference, optimizer, ref_scaler = lab.lab_setup(seed)
    lab.train_steps(reference, optimizer, ref_scaler, lab.lab_batches(lab.poisoned_for(seed), seed))
    assert scaler.history == ref_scaler.history[lab.resume_point(seed) :]
    assert ac_scaling.same_parameters(model, reference)


def test_messages_say_what_to_fix():
    with pytest.raises(ExerciseFailed, match="divide each micro-batch's loss"):
        exercises.check("labs.accumulation", _accumulate_without_dividing)
    with pytest.raises(ExerciseFailed, match="last, shorter group"):
        exercises.check("labs.accumulation", _accumulate_dropping_the_last_group)
    with pytest.raises(ExerciseFailed, match="the last group holds 1 batch"):
        exercises.check("labs.accumulation", _accumulate_dividing_the_last_group_by_steps)
    with pytest.raises(ExerciseFailed, match="growth_interval=2000"):
        exercises.check("labs.half_model", WRONG["labs.half_model"][2])
    with pytest.raises(ExerciseFailed, match="GradScaler is back at its initial state"):
        exercises.check("labs.resume", WRONG["labs.resume"][1])
    with pytest.raises(ExerciseFailed, match="keep them float32"):
        exercises.check("labs.half_model", WRONG["labs.half_model"][0])
    with pytest.raises(ExerciseFailed, match="lr_scheduler.step"):
        exercises.check("labs.scheduler_skip", broken_versions()["labs.scheduler_skip"])
    with pytest.raises(ExerciseFailed, match="should be disabled"):
        exercises.check("labs.bf16_scaler", broken_versions()["labs.bf16_scaler"])
