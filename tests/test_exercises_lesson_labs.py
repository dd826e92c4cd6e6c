"""Both labs notebooks: every lab shows its broken code, a blank and a check, and the broken code
fails; the bug hunts' checks reject the usual wrong fixes and accept correct ones written
differently."""

import math
import re

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


# Words naming each lab's cause or fix, and the reports that name them: its text before the blank
# must not use them (it gives the symptom); its "Why it broke", after its check, gives the cause.
FIX_WORDS = {
    "labs_bug_hunts": {
        "labs.clip_after_unscale": r"unscale|true units|Pytorch-UNet|#468|many times\s+the\s+norm",
        "labs.accumulation": r"once per (?:optimizer|group)|complete only|#641|#23935",
        "labs.bf16_scaler": r"exponent range|underflow|enabled=|only makes sense|#1036|#127176",
        "labs.scheduler_skip": r"counts its own|stepped on all|only where the scaler|post-hook|"
        r"#44511|#67590",
        "labs.resume": r"init_scale|growth tracker|state_dict\(\) holds|load_state_dict|#11663|"
        r"getsource|scaler's `state_dict",
        "labs.half_model": r"gradients are fp16|refuses to unscale|fp32 weights|\.half\(\) made|"
        r"#74739",
        "labs.extra_step": r"itself|left from|leftover|second update|Applio|#860",
    },
    "labs_beyond_autocast": {
        "labs.checkpoint_autocast": r"re-?enter|autocast's state|per region|is_autocast_enabled|"
        r"torch\.utils\.checkpoint",
        "labs.custom_op_autocast": r"register_autocast|no list|custom_fwd|145588|"
        r"lower-precision list|dispatch key",
        "labs.bf16_loss_sum": r"spacing|stops? growing|\bfp32\b|float32|\.item\(\)|4096",
        "labs.thread_autocast": r"thread-local|per thread|belongs to the thread|parallel_apply|"
        r"invoked|off in the worker|main thread",
    },
    "labs_more_failures": {
        "labs.no_inf_checks": r"nothing to record|records whether|get no gradients|assign=True|"
        r"`\.grad` is `None`|"
        r"Module\.to|nerfstudio|deep_pipe|accelerate#328",
        "labs.masked_fill_fp16": r"finfo|lowest value|65504|exponent range|cannot hold|apex#1052",
        "labs.fully_masked_rows": r"zero weights?|weights? of (?:0|zero)|nan_to_num|0/0|whole row|"
        r"103749|133882|_safe_softmax|like an overflow|scaled_dot_product_attention",
        "labs.rope_bf16": r"lower-precision list|significant bits|spacing|float64|enabled=False|"
        r"29285|13920",
    },
    "labs_modern_stack": {
        "labs.compiled_dtype_mix": r"need not check|177630|same dtype|scalar type|sums are fp32",
        "labs.tf32_api_mix": r"doesn't allow|mixing the old|chronos|21256|wins over",
        "labs.ema_skipped_steps": r"\bgat(?:e|es|ed|ing)\b|found_inf|halves the scale|still runs|"
        r"55585|4652|far above",
        "labs.setup_context_autocast": r"first argument|args\[0\]|landed on|132388|_fwd_used|"
        r"two ways|forward\(ctx",
        "labs.adam_fp16_eps": r"\beps\b|1e-8|squared|underflow|147437|holds neither",
        "labs.fp8_zero_scale": r"epsilon|\beps\b|clamp|floor|amax of 0|448 / 0|4713|3356",
    },
}


@pytest.mark.parametrize(
    "lesson, name",
    [(lesson, name) for lesson, words in FIX_WORDS.items() for name in sorted(words)],
)
def test_lab_text_gives_the_symptom_not_the_fix(lesson, name):
    said = re.findall(FIX_WORDS[lesson][name], conftest.lab_text(lesson, name), flags=re.I)
    assert not said, said


@pytest.mark.parametrize("lesson", list(FIX_WORDS))
def test_each_cause_follows_its_check(lesson):
    """Each lab's text gives its symptom; the mechanism and its cited reports sit right after its
    check cell, so a learner reads why once the check passes."""
    cells = conftest.notebook(lesson).cells
    names = [c.metadata["lab"]["name"] for c in tagged(lesson, "broken")]
    for name in names:
        at = next(i for i, c in enumerate(cells) if f'check("{name}"' in c.source)
        assert cells[at + 1].source.startswith(
            "**Why it broke** (read it once your check passes)"
        ), name


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


def _no_zero_grad(model, optimizer, scaler, batches):
    for images, labels in batches:  # the corrupt batch's inf stays in the accumulated .grad
        scaler.scale(lab.forward_loss(model, images, labels)).backward()
        scaler.step(optimizer)
        scaler.update()


def _tracker_reset(model, optimizer, scaler):
    state = {**scaler.state_dict(), "_growth_tracker": 0}
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": state}


def _fresh_scaler_at_the_same_scale(model, optimizer, scaler):
    fresh = torch.amp.GradScaler("cpu", init_scale=scaler.get_scale(), growth_interval=3)
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": fresh.state_dict(),
    }


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
        _tracker_reset,
        _fresh_scaler_at_the_same_scale,
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
    "labs.extra_step": [_optimizer_step_only, _no_update, _no_zero_grad],
}


@pytest.mark.parametrize(
    "name,wrong",
    [(n, w) for n, ws in WRONG.items() for w in ws],
    ids=[f"{n}-{i}" for n, ws in WRONG.items() for i in range(len(ws))],
)
def test_usual_wrong_fixes_fail(name, wrong):
    with pytest.raises(ExerciseFailed):
        exercises.check(name, wrong)
    for seed in conftest.SECRET_SEEDS:  # and at seeds a grader may draw
        assert exercises.verdict(name, wrong, seed)[0] == "failed", seed


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
    model, scaler, differs = lab.resumed_run(fixes.save_checkpoint, seed)
    assert differs == {"scaler": {}, "optimizer": None}
    reference, optimizer, ref_scaler = lab.lab_setup(seed)
    lab.train_steps(reference, optimizer, ref_scaler, lab.lab_batches(lab.poisoned_for(seed), seed))
    assert scaler.history == ref_scaler.history[lab.resume_point(seed) :]
    assert ac_scaling.same_parameters(model, reference)


@pytest.mark.parametrize("seed", [0, *range(1, 40)])
def test_every_resume_point_has_a_growth_tracker_to_lose(seed):
    """A checkpoint without the scaler, or with its tracker reset, fails at every seed."""
    model, optimizer, scaler = lab.lab_setup(seed)
    batches = lab.lab_batches(lab.poisoned_for(seed), seed)
    lab.train_steps(model, optimizer, scaler, batches[: lab.resume_point(seed)])
    assert scaler.state_dict()["_growth_tracker"] != 0


def test_lab2_broken_loop_stops_at_the_second_micro_batch(monkeypatch):
    """What the notebook says of lab 2's broken loop: it crashes at the second micro-batch's
    unscale_, before any optimizer step."""
    calls = []
    forward = lab.forward_loss
    monkeypatch.setattr(lab, "forward_loss", lambda *a: calls.append(1) or forward(*a))
    broken = broken_versions()["labs.accumulation"]
    out = lab.run(broken, (lab.ACCUMULATION_STEPS, lab.ACCUMULATION_MAX_NORM))
    assert out.error == (
        "RuntimeError: unscale_() has already been called on this optimizer since the last "
        "update()."
    )
    assert len(calls) == 2 and out.step_norms == [] and out.scales == []


# Each wrong answer, and what its message must name (what differs, never a guessed cause).
MESSAGES = [
    ("labs.accumulation", _accumulate_without_dividing, r"gradient norm is .*, 2x the reference's"),
    (
        "labs.accumulation",
        _accumulate_dropping_the_last_group,
        "ran optimizer.step\\(\\) 2 times, the reference 3",
    ),
    (
        "labs.accumulation",
        _accumulate_dividing_the_last_group_by_steps,
        r"group 5 of 5, 1 batch\), .*0.5x the reference's",
    ),
    (
        "labs.half_model",
        WRONG["labs.half_model"][2],
        r"your GradScaler has growth_interval=2000; the broken prepare\(\)'s, and the "
        r"reference's, 3\.$",
    ),
    (
        "labs.half_model",
        lambda m, d: (m, torch.optim.SGD(m.parameters(), lr=lab.LR, momentum=0.9), None),
        r"the scaler prepare\(\) returned is a NoneType; the reference's is an enabled",
    ),
    (
        "labs.half_model",
        lambda m, d: (
            m,
            torch.optim.SGD(m.parameters(), lr=lab.LR, momentum=0.9),
            torch.amp.GradScaler(**lab.SCALER_KWARGS),
        ),
        r"of what prepare\(\) returned, the scaler is built for device 'cuda' \(torch warned: ",
    ),
    (
        "labs.half_model",
        lambda m, d: (m, None),
        r"returned a tuple \(Sequential, NoneType\); the reference returns \(model,",
    ),
    ("labs.half_model", WRONG["labs.half_model"][0], r"parameters are \['torch.float16'\]"),
    (
        "labs.resume",
        WRONG["labs.resume"][3],
        r"GradScaler's state_dict\(\) differs .*: scale 65536 \(saved: 32768\), "
        r"_growth_tracker 0 \(saved: 1\)",
    ),
    # A reset tracker alone is named as such, not as a scaler "back at its initial state".
    (
        "labs.resume",
        _tracker_reset,
        r"differs from the saved one: _growth_tracker 0 \(saved: 1\)\.$",
    ),
    ("labs.resume", _fresh_scaler_at_the_same_scale, r": _growth_tracker 0 \(saved: 1\)\.$"),
    ("labs.resume", WRONG["labs.resume"][2], r"optimizer's state_dict\(\) differs"),
    (
        "labs.resume",
        lambda m, o, s: {"model": m.state_dict(), "optimizer": o.state_dict(), "scaler": s},
        r"failed: TypeError: the checkpoint holds a GradScaler object at checkpoint\['scaler'\]; "
        r"torch.load\(..., weights_only=True\), which the lab loads it with, reads only tensors, "
        r"Python numbers and strings, and dicts, lists and tuples of them\.$",
    ),
    ("labs.scheduler_skip", "broken", "lr_scheduler.step"),
    (
        "labs.bf16_scaler",
        "broken",
        r"make_scaler\(device\(type='cpu'\), torch.bfloat16\) returned an enabled GradScaler "
        r"\(get_scale\(\) 65536\); the reference returns a disabled GradScaler "
        r"\(get_scale\(\) 1\)\.$",
    ),
    (
        "labs.bf16_scaler",
        lambda device, dtype: torch.amp.GradScaler("cuda", enabled=dtype == torch.float16),
        r"make_scaler\(device\(type='cpu'\), torch.float16\): the scaler is built for device "
        r"'cuda' \(torch warned: 'torch.cuda.amp.GradScaler is enabled, but CUDA is not "
        r"available. Disabling.'\); the reference's for device 'cpu'\.$",
    ),
    # The extra optimizer.step(): it ran on the skipped first step.
    (
        "labs.extra_step",
        "broken",
        r"after update\(\) number 1 .* had run 1 time in all .*; in the reference 0 times",
    ),
    # A missing zero_grad: the step after the corrupt batch is skipped too; no word of update().
    (
        "labs.extra_step",
        _no_zero_grad,
        r"after update\(\) number 2 .* had run 0 times in all and the scale was 16384; "
        r"in the reference 1 time, scale 32768",
    ),
]


@pytest.mark.parametrize("name, wrong, pattern", MESSAGES)
def test_messages_say_what_differs(name, wrong, pattern):
    wrong = broken_versions()[name] if wrong == "broken" else wrong
    with pytest.raises(ExerciseFailed, match=pattern) as failure:
        exercises.check(name, wrong)
    assert "initial state" not in str(failure.value)
    assert "one update() per optimizer step" not in str(failure.value)


# ---- Lab 3: what each make_scaler returned against the reference, never why ---------------------
class _ScaleCopies(torch.amp.GradScaler):
    """A scaler whose scale() returns a copy of the loss even when disabled."""

    def scale(self, outputs):
        return outputs * 1.0


SCALER_WRONG = [
    (
        lambda device, dtype: torch.amp.GradScaler("cpu", enabled=False),
        r"make_scaler\(device\(type='cpu'\), torch.float16\) returned a disabled GradScaler "
        r"\(get_scale\(\) 1\); the reference returns an enabled GradScaler \(get_scale\(\) 65536\)",
    ),
    (
        lambda device, dtype: torch.amp.GradScaler("cpu") if dtype == torch.float16 else None,
        r"torch.bfloat16\) returned None; the reference returns a disabled GradScaler",
    ),
    (
        lambda device, dtype: torch.amp.GradScaler("cpu", enabled=dtype != torch.float32),
        r"torch.bfloat16\) returned an enabled GradScaler \(get_scale\(\) 65536\); the reference "
        r"returns a disabled",
    ),
    (
        lambda device, dtype: torch.amp.GradScaler(
            "cpu", init_scale=1024.0, enabled=dtype == torch.float16
        ),
        r"returned an enabled GradScaler \(get_scale\(\) 1024\); the reference returns an enabled "
        r"GradScaler \(get_scale\(\) 65536\)",
    ),
    (
        lambda device, dtype: _ScaleCopies(
            torch.device(device).type, enabled=dtype == torch.float16
        ),
        r"scaler.scale\(loss\) for loss = tensor\(1.5000\) returned another object, "
        r"tensor\(1.5000\) \(a Tensor\); the reference's returns the loss itself\.",
    ),
]


@pytest.mark.parametrize("wrong, pattern", SCALER_WRONG)
def test_bf16_scaler_messages_say_what_differs(wrong, pattern):
    with pytest.raises(ExerciseFailed, match=pattern) as failure:
        exercises.check("labs.bf16_scaler", wrong)
    said = str(failure.value)
    assert "only fp16 needs" not in said and "keep GradScaler's" not in said
    assert "should be" not in said
    for seed in (12345, 987654321):  # and at the grader's seeds, a device given by name
        assert exercises.verdict("labs.bf16_scaler", wrong, seed)[0] == "failed"


def _scaler_by_value(device, autocast_dtype):  # nanoGPT's style: the switch is a value
    return torch.amp.GradScaler(
        torch.device(device).type, enabled=(autocast_dtype is torch.float16)
    )


def _scaler_by_branch(device, autocast_dtype):
    device_type = device if isinstance(device, str) else device.type
    if autocast_dtype == torch.float16:
        return torch.amp.GradScaler(device_type, init_scale=2.0**16)
    return torch.amp.GradScaler(device_type, enabled=False)


def _disabled_scaler_of_the_default_device(device, autocast_dtype):
    """A disabled scaler built for GradScaler's default device, "cuda": it does what any disabled
    one does (a test learner's; refused with the message "None" for a while)."""
    if autocast_dtype != torch.float16:
        return torch.amp.GradScaler(enabled=False)
    return torch.amp.GradScaler(torch.device(device).type)


@pytest.mark.parametrize(
    "answer", [_scaler_by_value, _scaler_by_branch, _disabled_scaler_of_the_default_device]
)
@pytest.mark.parametrize("seed", [0, 1, 2, 12345, 987654321])
def test_bf16_scaler_right_answers_written_differently_pass(answer, seed):
    assert exercises.verdict("labs.bf16_scaler", answer, seed) == ("passed", "")


def _accumulate_without_clipping(model, optimizer, scaler, batches, steps, max_norm):
    fixes.train_accumulated(model, optimizer, scaler, batches, steps, math.inf)


# Seeds 2 and 5 draw the last batch corrupt (poisoned_for), where its group's step would be
# skipped and its division never seen; the lab's check moves that corruption elsewhere.
@pytest.mark.parametrize("seed", [0, 2, 5, 12345])
@pytest.mark.parametrize(
    "wrong", [_accumulate_dividing_the_last_group_by_steps, _accumulate_without_clipping]
)
def test_accumulation_wrong_at_every_seed(wrong, seed):
    assert lab.NUM_BATCHES - 1 in lab.poisoned_for(2) + lab.poisoned_for(5)
    assert exercises.verdict("labs.accumulation", wrong, seed)[0] == "failed"


def _scheduler_stepped_on_a_finite_loss(model, optimizer, scheduler, scaler, batches):
    """Tells a skipped step by its loss: an inf loss skips, but so can a finite one."""
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = lab.forward_loss(model, images, labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if torch.isfinite(loss):
            scheduler.step()


@pytest.mark.parametrize("seed", [0, 1, 2, 12345])
def test_a_finite_loss_taken_for_a_step_fails_at_every_seed(seed):
    status, message = exercises.verdict(
        "labs.scheduler_skip", _scheduler_stepped_on_a_finite_loss, seed
    )
    assert status == "failed" and message.startswith("the final learning rate is"), message
    # The check's batches are not the notebook's: it says how many updates they gave, and how
    # many of the schedule's steps the learner's rate reflects.
    found = re.search(r"the optimizer stepped (\d+) times, .*; yours is where (\d+) steps", message)
    assert found and int(found[2]) > int(found[1]), message


def test_the_clipping_lab_shows_the_symptom_without_unscaling():
    """Lab 1's text and the cells before its blank show a norm and weights that barely move; the
    call that fixes it, unscale_, is the learner's to find."""
    cells, inside = [], False
    for cell in conftest.notebook("labs_bug_hunts").cells:
        heading = re.search(r"^## Lab \d+\.", cell.source, re.M)
        if cell.cell_type == "markdown" and heading:
            inside = heading.group() == "## Lab 1."
        if cell.get("metadata", {}).get("exercise", {}).get("name") == "labs.clip_after_unscale":
            break
        if inside:
            cells.append(cell.source)
    assert cells and not [source for source in cells if "unscale" in source]


@pytest.mark.parametrize(
    "extra, named",
    [(torch.__version__, "a TorchVersion object at checkpoint['v']"), (0.5, None)],
)
def test_a_checkpoint_entry_weights_only_refuses_is_named(extra, named):
    """torch.__version__ is a str subclass and numpy's float64 a float subclass: weights_only
    loading refuses both, and the message names the entry instead of torch's raw error."""
    import numpy

    def save(model, optimizer, scaler):
        checkpoint = fixes.save_checkpoint(model, optimizer, scaler)
        checkpoint["v"] = extra if named else numpy.float64(extra)
        return checkpoint

    status, message = exercises.verdict("labs.resume", save, 0)
    assert status == "failed"
    assert (named or "a float64 object at checkpoint['v']") in message


def _clip_written_out(model, max_norm, capped=True):
    """The clip's norm and factor written out (capped at 1, as clip_grad_norm_'s, unless told)."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    factor = max_norm / norm
    for grad in grads:
        grad.mul_(factor.clamp(max=1.0) if capped else factor)


def _clip_by_hand(model, optimizer, scaler, batches, max_norm, capped=True):
    """Right, the norm and the factor written out after unscale_."""
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(lab.forward_loss(model, images, labels)).backward()
        scaler.unscale_(optimizer)
        _clip_written_out(model, max_norm, capped)
        scaler.step(optimizer)
        scaler.update()


def _clip_scaled_gradients_at_a_scaled_norm(model, optimizer, scaler, batches, max_norm):
    """Right in exact arithmetic: the scaled gradients clipped at max_norm times the scale."""
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(lab.forward_loss(model, images, labels)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm * scaler.get_scale())
        scaler.step(optimizer)
        scaler.update()


# Each rounds otherwise than clip_grad_norm_ after unscale_, and failed about a seed in four
# while the check held the weights to 1e-5.
@pytest.mark.parametrize("right", [_clip_by_hand, _clip_scaled_gradients_at_a_scaled_norm])
def test_clipping_written_otherwise_passes_at_every_seed(right):
    for seed in range(12):
        assert exercises.verdict("labs.clip_after_unscale", right, seed) == ("passed", ""), seed


def _scaled_loop(after_update):
    """Lab 4's loop with ``after_update(scheduler, optimizer, scale before, scale after)`` where
    its scheduler.step() was."""

    def train_scheduled(model, optimizer, scheduler, scaler, batches):
        for images, labels in batches:
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(lab.forward_loss(model, images, labels)).backward()
            before = scaler.get_scale()
            scaler.step(optimizer)
            scaler.update()
            after_update(scheduler, optimizer, before, scaler.get_scale())

    return train_scheduled


# A step counted as skipped wherever the scale did not hold: growths are steps too.
_scheduler_when_the_scale_held = _scaled_loop(
    lambda scheduler, optimizer, before, after: after == before and scheduler.step()
)


# They passed 72 and 14 grader seeds of 300: where the scale never grew, and where the brightened
# batch's step ran (its gradients times a scale an earlier backoff had lowered fit fp16).
@pytest.mark.parametrize(
    "wrong", [_scheduler_when_the_scale_held, _scheduler_stepped_on_a_finite_loss]
)
def test_scheduler_skips_told_by_the_scale_or_the_loss_fail_at_every_seed(wrong):
    for seed in range(25):
        assert exercises.verdict("labs.scheduler_skip", wrong, seed)[0] == "failed", seed


def test_a_scaler_entry_without_its_keys_is_told_what_load_checkpoint_reads():
    def save(model, optimizer, scaler):
        checkpoint = fixes.save_checkpoint(model, optimizer, scaler)
        checkpoint["scaler"] = {"scale": scaler.get_scale()}  # the scale alone
        return checkpoint

    status, message = exercises.verdict("labs.resume", save, 0)
    assert status == "failed" and "KeyError: 'growth_factor'" in message, message
    assert "reads the keys that object's state_dict() returns" in message, message


def _rate_set_by_hand(model, optimizer, scheduler, scaler, batches):
    """The schedule's rates set on the optimizer by hand; scheduler.step() never called."""
    updates = []

    def after_update(scheduler, optimizer, before, after):
        if after >= before:
            updates.append(1)
            for group in optimizer.param_groups:
                group["lr"] = lab.LR * lab.SCHEDULER_GAMMA ** len(updates)

    _scaled_loop(after_update)(model, optimizer, scheduler, scaler, batches)


def _tracker_kept_scale_lost(model, optimizer, scaler):
    fresh = torch.amp.GradScaler("cpu", **lab.SCALER_KWARGS).state_dict()
    fresh["_growth_tracker"] = scaler.state_dict()["_growth_tracker"]
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": fresh}


def _clip_scaling_every_gradient_to_max_norm(model, optimizer, scaler, batches, max_norm):
    """The clip's factor without its cap at 1: small gradients are scaled up to max_norm too."""
    _clip_by_hand(model, optimizer, scaler, batches, max_norm, capped=False)


def _accumulate_with_divisor(divisor):
    """Steps after every group; each loss divided by ``divisor(index, count, steps)``."""

    def train(model, optimizer, scaler, batches, steps, max_norm):
        optimizer.zero_grad(set_to_none=True)
        for index, (images, labels) in enumerate(batches):
            loss = lab.forward_loss(model, images, labels) / divisor(index, len(batches), steps)
            scaler.scale(loss).backward()
            if (index + 1) % steps == 0 or index == len(batches) - 1:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)

    return train


# A test learner's wrong fixes that passed every seed: the clip without its cap while every
# step's norm was above the check's max_norm; divisors right for 9 batches in groups of 2 only
# (the last batch alone, the remainder, the batches left) while every run split 9 by 2; and a
# CUDA scaler built for "cpu", the notebook's device, while the check asked for the CPU only.
@pytest.mark.parametrize(
    "name, wrong, says",
    [
        (
            "labs.clip_after_unscale",
            _clip_scaling_every_gradient_to_max_norm,
            "With max_norm=4, at the optimizer step ",
        ),
        (
            "labs.accumulation",
            _accumulate_with_divisor(lambda i, n, k: 1 if i == n - 1 else k),
            "with accumulation_steps=3 and clipping off (max_norm=math.inf), at the optimizer step",
        ),
        (
            "labs.accumulation",
            _accumulate_with_divisor(lambda i, n, k: n % k if i == n - 1 else k),
            "with accumulation_steps=3 and clipping off (max_norm=math.inf), your loop ran "
            "optimizer.step() ",
        ),
        (
            "labs.accumulation",
            _accumulate_with_divisor(lambda i, n, k: min(k, n - i)),
            "with accumulation_steps=3 and clipping off (max_norm=math.inf), at the optimizer step",
        ),
        (
            "labs.bf16_scaler",
            lambda device, dtype: torch.amp.GradScaler("cpu", enabled=dtype == torch.float16),
            "torch.float16): the scaler is built for device 'cpu'; the reference's for device "
            "'cuda'.",
        ),
    ],
)
def test_wrong_fixes_fitted_to_the_checks_one_case_fail_at_every_seed(name, wrong, says):
    for seed in (0, 1, 2, 3, *conftest.SECRET_SEEDS):
        status, message = exercises.verdict(name, wrong, seed)
        assert status == "failed" and says in message, (seed, message)


def test_scaling_every_gradient_to_max_norm_fails_where_every_step_clips_at_three():
    """At a loose max_norm of 3 every step of seed 19 still clipped, and the answer passed there
    (a test learner's): the loose run's threshold is above some step's norm at every seed."""
    wrong = _clip_scaling_every_gradient_to_max_norm
    passed = [
        s
        for s in range(16, 24)
        if exercises.verdict("labs.clip_after_unscale", wrong, s)[0] != "failed"
    ]
    assert passed == []


def test_a_prepared_list_passes_as_the_tuple_does():
    """A list of (model, optimizer, scaler) failed every seed ('returned a list'; a test
    learner's): the text's tuple is a way of writing three values, not a type to match."""

    def as_list(model, device):
        return list(fixes.prepare(model, device))

    for seed in (0, 1, *conftest.SECRET_SEEDS):
        assert exercises.verdict("labs.half_model", as_list, seed) == ("passed", ""), seed


def _accumulate_clipping_by_hand(model, optimizer, scaler, batches, steps, max_norm):
    """Right: each group's mean loss, the norm and the clip's factor written out."""
    for start in range(0, len(batches), steps):
        group = batches[start : start + steps]
        optimizer.zero_grad(set_to_none=True)
        for images, labels in group:
            scaler.scale(lab.forward_loss(model, images, labels) / len(group)).backward()
        scaler.unscale_(optimizer)
        _clip_written_out(model, max_norm)
        scaler.step(optimizer)
        scaler.update()


def test_accumulation_clipped_by_hand_passes_at_the_seeds_it_failed():
    """It rounds otherwise than clip_grad_norm_, and failed 6 seeds of 32 while the check held the
    weights to 1e-5 (lab 1's tolerance holds them now)."""
    for seed in (5, 10, 14, 20, 21, 22):
        assert exercises.verdict("labs.accumulation", _accumulate_clipping_by_hand, seed) == (
            "passed",
            "",
        ), seed


# A test learner's: the first passed every seed (only the final rate was compared), the second
# the seeds whose resume point had the scale back at init_scale.
@pytest.mark.parametrize(
    "name, wrong, says, seeds",
    [
        (
            "labs.scheduler_skip",
            _rate_set_by_hand,
            "your loop called scheduler.step() 0 time(s) (its last_epoch); the reference's, ",
            range(8),
        ),
        ("labs.resume", _tracker_kept_scale_lost, "state_dict() differs", (2, 4, 7, 11, 12, 15)),
    ],
)
def test_wrong_fixes_that_passed_grader_seeds_fail_there(name, wrong, says, seeds):
    for seed in seeds:
        status, message = exercises.verdict(name, wrong, seed)
        assert status == "failed" and says in message, (seed, message)


@pytest.mark.parametrize("name", ["labs.clip_after_unscale", "labs.extra_step"])
def test_a_lowered_learning_rate_in_a_lab_without_a_schedule_is_told_without_one(name):
    """The message explained the expected rate by a schedule these labs have not ('expected 0.05:
    ... the optimizer stepped 7 times, and 0.05 x 0.8^7 = 0.0104858')."""
    reference = exercises.solution(name)

    def lowered(model, optimizer, *rest):
        for group in optimizer.param_groups:
            group["lr"] *= 0.1
        return reference(model, optimizer, *rest)

    status, message = exercises.verdict(name, lowered, 0)
    assert status == "failed" and "^" not in message, message
    assert message.endswith(
        "expected 0.05: the learning rate the loop was given, which the reference leaves as it is."
    ), message


def _clip_every_backward(model, optimizer, scaler, batches, accumulation_steps, max_norm):
    """Each group divided right, but its gradients clipped after every backward, in the scale's
    units, before the group is complete."""
    optimizer.zero_grad(set_to_none=True)
    n = len(batches)
    for index, (images, labels) in enumerate(batches):
        group = min(accumulation_steps, n - index // accumulation_steps * accumulation_steps)
        loss = lab.forward_loss(model, images, labels) / group
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm * scaler.get_scale())
        if (index + 1) % accumulation_steps == 0 or index == n - 1:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)


def test_clipping_a_group_before_it_is_complete_fails_in_the_notebook_and_at_grading():
    """At ACCUMULATION_MAX_NORM alone a group's first micro-batch rarely reached the bound: this
    loop passed the check cell and 149 grader seeds of 150 (a test learner's finding)."""
    for seed in (0, 1, 2, 3, 123, 4567):
        status, message = exercises.verdict("labs.accumulation", _clip_every_backward, seed)
        assert status == "failed" and "parameters differ from the reference fix" in message
