"""The more-failures labs: each symptom is real on this CPU, the notebook's broken code fails its
check, the usual wrong fixes are rejected with a message that says what differs, and right fixes
written in several styles pass at the grader's seeds too."""

import contextlib
import re

import conftest
import pytest
import torch
import torch.nn.functional as F
from conftest import notebook, tagged

from amp_course import exercises
from amp_course.exercises import ExerciseFailed
from amp_course.exercises.solutions import labs_more_failures as solutions
from amp_course.labs import more_failures as lab

LESSON = "labs_more_failures"
LABS = ["labs.no_inf_checks", "labs.masked_fill_fp16", "labs.fully_masked_rows", "labs.rope_bf16"]
# The notebook's, the check cell's drawn case and the grader's (tests/test_exercises.py).
SEEDS = (0, exercises.LAB_DRAWN_SEED, *conftest.SECRET_SEEDS)


def broken_versions():
    return conftest.broken_versions(LESSON)


def test_every_lab_has_a_broken_version_and_a_blank():
    assert sorted(broken_versions()) == sorted(LABS)
    blanks = [c.metadata["exercise"]["name"] for c in tagged(LESSON, "exercise")]
    assert blanks == LABS


BROKEN_SAYS = {
    "labs.no_inf_checks": "on batch 1 (without parity labels), after 1 update() call, your loop "
    "raised AssertionError: No inf checks were recorded for this optimizer.",
    "labs.masked_fill_fp16": "In the case 'fp16 autocast', your function raised RuntimeError: "
    "value cannot be converted to type c10::Half without overflow",
    "labs.fully_masked_rows": "In the case 'fp16 autocast', your output holds NaN at [0, 0, 0, 0] "
    "(query [0, 0, 0], which has no key to attend)",
    "labs.rope_bf16": "In yours, positions 256 and 257 get the same cos and sin in every column",
}


@pytest.mark.parametrize("name", LABS)
def test_broken_version_from_the_notebook_fails_with_its_symptom(name):
    with pytest.raises(ExerciseFailed) as failure:
        exercises.check(name, broken_versions()[name])
    assert BROKEN_SAYS[name] in str(failure.value)


def test_symptoms_show_on_this_cpu():
    broken = broken_versions()
    assert lab.run_multitask(broken["labs.no_inf_checks"])["error"].startswith(
        "AssertionError: No inf checks were recorded for this optimizer"
    )
    masked = lab.run_masked(broken["labs.masked_fill_fp16"])
    assert [case for case, seen in masked.items() if seen["error"]] == [
        "fp16 autocast",
        lab.MASKED_ABOVE,
    ]
    history = lab.train_padded(broken["labs.fully_masked_rows"])
    assert not any(step["stepped"] for step in history)
    assert [step["scale"] for step in history] == [2.0 ** (15 - i) for i in range(len(history))]
    assert all(step["stepped"] for step in lab.train_padded(solutions.padded_attention))
    rope = lab.run_rope(broken["labs.rope_bf16"])["bf16 autocast"]
    same = (rope["cos"][1:] == rope["cos"][:-1]).all(-1) & (
        rope["sin"][1:] == rope["sin"][:-1]
    ).all(-1)
    assert rope["positions"][int(same.nonzero()[0])] == 256  # positions 256 and 257


def test_sdpa_gives_a_row_with_no_key_zeros_and_the_reference_agrees_with_it():
    """What lab 3 prints of this torch's SDPA, and why its reference is written out by hand."""
    q, k, v, keep = lab.padded_inputs(0)
    has_key = keep.any(-1, keepdim=True)
    for dtype in (torch.float16, torch.bfloat16, None):
        with lab.autocast(dtype):
            builtin = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            mine = solutions.padded_attention(q, k, v, keep)
        assert torch.equal(builtin * ~has_key, torch.zeros_like(builtin))
        assert torch.equal(mine * ~has_key, torch.zeros_like(mine))
        assert torch.allclose(mine.float(), builtin.float(), atol=2e-2)


# ---- typical wrong fixes ------------------------------------------------------------------------
def _multitask(zero_grad_to_none=True, parity_times_zero=False, step=None):
    """A loop like the broken one; ``step(scaler, optimizer, index, has_aux)`` steps each."""

    def train(model, optimizers, scaler, batches):
        for images, labels, has_aux in batches:
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=zero_grad_to_none)
            if parity_times_zero:  # every head in every loss, the unused one multiplied by 0
                with torch.autocast("cpu", dtype=torch.float16):
                    features = model(images)
                    parity = F.cross_entropy(model.aux(features), labels % 2)
                    loss = F.cross_entropy(model.head(features), labels) + float(has_aux) * parity
            else:
                loss = lab.multitask_loss(model, images, labels, has_aux)
            scaler.scale(loss).backward()
            for index, optimizer in enumerate(optimizers):
                (step or _scaler_step)(scaler, optimizer, index, has_aux)
            scaler.update()

    return train


def _scaler_step(scaler, optimizer, index, has_aux):
    scaler.step(optimizer)


def _main_only(scaler, optimizer, index, has_aux):
    if index == 0:
        scaler.step(optimizer)


def _parity_head_stepped_directly(scaler, optimizer, index, has_aux):
    if index == 0:
        scaler.step(optimizer)
    elif has_aux:
        optimizer.step()


def _parity_head_stepped_on_scaled_gradients(scaler, optimizer, index, has_aux):
    """The parity head stepped outside the scaler, where its gradients exist and are finite: the
    right steps, but on gradients still times the scale, which Adam's weights nearly hide."""
    if index == 0:
        scaler.step(optimizer)
        return
    grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
    if all(g is not None and g.isfinite().all() for g in grads):
        optimizer.step()


def _parity_head_unscaled_then_stepped(scaler, optimizer, index, has_aux):
    """unscale_ and a plain optimizer.step(): the inf check is the scaler's step, left out."""
    if index == 0:
        scaler.step(optimizer)
    elif has_aux:
        scaler.unscale_(optimizer)
        optimizer.step()


def _parity_gradients_never_cleared(model, optimizers, scaler, batches):
    """Only the first optimizer's gradients cleared: the parity head's keep a corrupt one's inf."""
    main, parity = optimizers
    for images, labels, has_aux in batches:
        main.zero_grad(set_to_none=True)
        scaler.scale(lab.multitask_loss(model, images, labels, has_aux)).backward()
        scaler.step(main)
        if has_aux:
            scaler.step(parity)
        scaler.update()


def _attention(fill, scale=True, autocast_off=False, clean_output=None):
    def attention(q, k, v, keep):
        with torch.autocast("cpu", enabled=False) if autocast_off else contextlib.nullcontext():
            scores = q @ k.transpose(-2, -1)
            scores = scores / q.shape[-1] ** 0.5 if scale else scores
            out = scores.masked_fill(~keep, fill(scores, q)).softmax(-1) @ v
        if clean_output == "zero rows":
            return out * keep.any(-1, keepdim=True)
        return out.nan_to_num() if clean_output == "nan_to_num" else out

    return attention


def _own_position_kept(q, k, v, keep):
    keep = keep | torch.eye(keep.shape[-1], dtype=torch.bool)  # no row left without a key
    scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~keep, float("-inf"))
    return scores.softmax(-1) @ v


def _rows_without_key_opened(q, k, v, keep):
    has_key = keep.any(-1, keepdim=True)
    scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(
        ~(keep | ~has_key), float("-inf")
    )
    return scores.softmax(-1) @ v * has_key


def _rope(angles):
    def rope_cos_sin(inv_freq, positions, dtype):
        freqs = angles(inv_freq, positions)
        both = torch.cat((freqs, freqs), dim=-1)
        return both.cos().to(dtype), both.sin().to(dtype)

    return rope_cos_sin


def _fp32_angles_no_cast_back(inv_freq, positions, dtype):
    with torch.autocast("cpu", enabled=False):
        freqs = torch.outer(positions.float(), inv_freq)
        both = torch.cat((freqs, freqs), dim=-1)
        return both.cos(), both.sin()


WRONG = {
    "labs.no_inf_checks": [
        (
            "zero_grad(set_to_none=False)",
            _multitask(zero_grad_to_none=False),
            "after batch 1 (without parity labels), the trunk and digit head's optimizer had "
            "taken 2 steps and the parity head's 2 steps; in the reference 2 and 1.",
        ),
        (
            "the parity loss times 0",
            _multitask(parity_times_zero=True),
            "the parity head's 2 steps; in the reference 2 and 1.",
        ),
        (
            "the parity head never stepped",
            _multitask(step=_main_only),
            "after batch 0 (with parity labels), the trunk and digit head's optimizer had taken "
            "1 step and the parity head's 0 steps; in the reference 1 and 1.",
        ),
        (
            "the parity head stepped without the scaler",
            _multitask(step=_parity_head_stepped_directly),
            "after batch 5 (with parity labels, corrupt), the trunk and digit head's optimizer "
            "had taken 5 steps and the parity head's 3 steps; in the reference 5 and 2.",
        ),
        (
            "the parity head stepped outside the scaler where its gradients are finite",
            _multitask(step=_parity_head_stepped_on_scaled_gradients),
            "the parity head's Adam first moments (exp_avg: the running mean of the gradients its "
            "steps used): tensor 0 is off by up to",
        ),
        (
            "the parity head unscaled, then stepped without the scaler",
            _multitask(step=_parity_head_unscaled_then_stepped),
            "after batch 5 (with parity labels, corrupt), the trunk and digit head's optimizer "
            "had taken 5 steps and the parity head's 3 steps; in the reference 5 and 2.",
        ),
        (
            "the parity head's gradients never cleared",
            _parity_gradients_never_cleared,
            "after batch 6 (with parity labels), the trunk and digit head's optimizer had taken 6 "
            "steps and the parity head's 2 steps; in the reference 6 and 3.",
        ),
    ],
    "labs.masked_fill_fp16": [
        (
            "finfo of the fp32 inputs",
            _attention(lambda scores, q: torch.finfo(q.dtype).min),
            "In the case 'fp16 autocast', your function raised RuntimeError: value cannot be "
            "converted to type c10::Half without overflow",
        ),
        (
            "-1e4",
            _attention(lambda scores, q: -1e4),
            f"In the case '{lab.MASKED_ABOVE}', query [0, 0, 0] gives its masked keys a weight "
            "of 1 in all",
        ),
        (
            "a penalty added to the masked keys' scores",
            lambda q, k, v, keep: (
                (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5 - 100 * ~keep).softmax(-1) @ v
            ),
            f"In the case '{lab.MASKED_ABOVE}', query [0, 0, 0] gives its masked keys a weight "
            "of 1 in all",
        ),
        (
            "attention in fp32, autocast off",
            _attention(lambda scores, q: -1e9, autocast_off=True),
            "In the case 'fp16 autocast', your output is fp32, the reference's fp16.",
        ),
        (
            "no 1/sqrt(d)",
            _attention(lambda scores, q: torch.finfo(scores.dtype).min, scale=False),
            "In the case 'fp16 autocast', your output differs from the reference's by up to",
        ),
        (
            "the mask inverted",
            lambda q, k, v, keep: solutions.masked_attention(q, k, v, ~keep),
            "In the case 'fp16 autocast', query [0, 0, 0] gives its masked keys a weight of 1 in "
            "all",
        ),
    ],
    "labs.fully_masked_rows": [
        (
            "-inf, output rows with no key zeroed",
            _attention(lambda scores, q: float("-inf"), clean_output="zero rows"),
            "your output holds NaN at [0, 0, 0, 0] (query [0, 0, 0], which has no key to attend)",
        ),
        (
            "-inf, output cleaned with nan_to_num",
            _attention(lambda scores, q: float("-inf"), clean_output="nan_to_num"),
            "In the case 'fp16 autocast', the gradient of v holds NaN at [0, 0, 0, 0]; the "
            "reference's is finite.",
        ),
        (
            "-1e9",
            _attention(lambda scores, q: -1e9),
            "In the case 'fp16 autocast', your function raised RuntimeError",
        ),
        (
            "-1e4, the constant the pitfalls warn against",
            _attention(lambda scores, q: -1e4),
            "In the case 'fp16 autocast, scores near -12000', at the queries that have keys, your "
            "output differs from the reference's by up to",
        ),
        (
            "every query let attend its own position (right only for causal masks)",
            _own_position_kept,
            "In the case 'fp32, keys drawn at random', at the queries that have keys, your output "
            "differs from the reference's by up to",
        ),
    ],
    "labs.rope_bf16": [
        (
            ".float() casts, autocast left on",
            _rope(lambda f, p: (f[:, None].float() @ p[None, :].float()).T),
            "In the case 'bf16 autocast', your cos at position",
        ),
        (
            "angles rounded to dtype before cos and sin",
            lambda inv_freq, positions, dtype: _rope(
                lambda f, p: torch.outer(p.float(), f).to(dtype)
            )(inv_freq, positions, dtype),
            "In the case 'bf16 autocast', your cos at position",
        ),
        (
            "cos and sin left in fp32",
            _fp32_angles_no_cast_back,
            "In the case 'bf16 autocast', your cos is fp32, the reference's bf16.",
        ),
    ],
}
WRONG_CASES = [
    (name, label, fn, says) for name, cases in WRONG.items() for label, fn, says in cases
]

# Words that would guess at the learner's mistake or name a fix; a message says what differs.
GUESSES = re.compile(
    r"zero_grad|set_to_none|finfo|nan_to_num|enabled=False|should|forgot|instead|you need|try ",
    re.IGNORECASE,
)


@pytest.mark.parametrize(
    "name, label, wrong, says",
    WRONG_CASES,
    ids=[f"{name}-{label}" for name, label, _, _ in WRONG_CASES],
)
def test_wrong_fix_fails_saying_what_differs(name, label, wrong, says):
    with pytest.raises(ExerciseFailed) as failure:
        exercises.check(name, wrong)
    message = str(failure.value)
    assert says in message
    assert not GUESSES.search(message.split(": ", 1)[1].replace("cannot be converted", "")), message
    for seed in SEEDS[1:]:
        assert exercises.verdict(name, wrong, seed)[0] == "failed", seed


# ---- right fixes written differently ------------------------------------------------------------
def _step_if(condition):
    def step(scaler, optimizer, index, has_aux):
        if condition(optimizer, index, has_aux):
            scaler.step(optimizer)

    return step


def _step_unless_it_asserts(scaler, optimizer, index, has_aux):
    try:
        scaler.step(optimizer)
    except AssertionError:  # nothing to unscale: the step is not taken, update() goes on
        pass


def _masked_where(fill_rows_with_key_only):
    def attention(q, k, v, keep):
        scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
        scores = scores.masked_fill(~keep, float("-inf"))
        if fill_rows_with_key_only:
            scores = torch.where(keep.any(-1, keepdim=True), scores, 0.0)
        weights = scores.softmax(-1)
        return (weights.nan_to_num() if not fill_rows_with_key_only else weights) @ v

    return attention


def _rope_in_float64(inv_freq, positions, dtype):
    freqs = positions.double()[:, None] * inv_freq.double()[None, :]
    both = torch.cat((freqs, freqs), dim=-1)
    return both.cos().to(dtype), both.sin().to(dtype)


def _rope_einsum_autocast_off(inv_freq, positions, dtype):
    with torch.autocast("cpu", enabled=False):
        both = torch.einsum("p,f->pf", positions.float(), inv_freq.float()).repeat(1, 2)
        return both.cos().to(dtype), both.sin().to(dtype)


RIGHT = {
    "labs.no_inf_checks": [
        _multitask(step=_step_if(lambda optimizer, index, has_aux: index == 0 or has_aux)),
        _multitask(
            step=_step_if(
                lambda optimizer, index, has_aux: any(
                    p.grad is not None for group in optimizer.param_groups for p in group["params"]
                )
            )
        ),
        _multitask(step=_step_unless_it_asserts),
    ],
    "labs.masked_fill_fp16": [
        _attention(lambda scores, q: torch.finfo(scores.dtype).min),
        _attention(lambda scores, q: float("-inf")),
        lambda q, k, v, keep: F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
    ],
    "labs.fully_masked_rows": [
        _attention(lambda scores, q: torch.finfo(scores.dtype).min),  # those rows: mean of v
        _masked_where(fill_rows_with_key_only=True),
        _masked_where(fill_rows_with_key_only=False),  # NaN weights cleaned before @ v
        lambda q, k, v, keep: F.scaled_dot_product_attention(q, k, v, attn_mask=keep),
        _rows_without_key_opened,
    ],
    "labs.rope_bf16": [_rope_in_float64, _rope_einsum_autocast_off, solutions.rope_cos_sin],
}
RIGHT_CASES = [(name, index, fn) for name, fns in RIGHT.items() for index, fn in enumerate(fns)]


@pytest.mark.parametrize(
    "name, index, right", RIGHT_CASES, ids=[f"{n}-{i}" for n, i, _ in RIGHT_CASES]
)
@pytest.mark.parametrize("seed", SEEDS)
def test_right_fixes_written_differently_pass(name, index, right, seed):
    assert exercises.verdict(name, right, seed) == ("passed", "")


def _rope_from_zero(inv_freq, positions, dtype):
    """Right, but for positions counted from 0 whatever it is given."""
    return solutions.rope_cos_sin(inv_freq, torch.arange(len(positions)), dtype)


def test_parity_gradients_never_cleared_fail_where_a_labelled_batch_overflows_on_its_own():
    """With one labelled batch after the corrupt one, a loop that never clears the parity head's
    gradients passed 5 seeds of 150 (5 and 13 among the first 20): that batch's parity gradients
    overflowed at the scale of the time, so the right loop skipped its step too (a test learner
    found it)."""
    passed = [
        seed
        for seed in range(20)
        if exercises.verdict("labs.no_inf_checks", _parity_gradients_never_cleared, seed)[0]
        != "failed"
    ]
    assert passed == []


@pytest.mark.parametrize("seed", SEEDS)
def test_rope_from_position_zero_fails_at_every_seed(seed):
    status, message = exercises.verdict("labs.rope_bf16", _rope_from_zero, seed)
    assert status == "failed", message


def test_observations_vary_with_the_seed():
    plans = {lab.multitask_plan(seed) for seed in range(6)}
    assert len(plans) > 1
    assert len({lab.masked_inputs(seed)[0].shape for seed in range(8)}) > 1
    assert len({lab.padded_inputs(seed)[0].shape for seed in range(8)}) > 1
    assert len({lab.rope_cases(seed)["fp32"][4][0].item() for seed in range(4)}) > 1


def test_a_fix_fitted_to_the_notebooks_batches_fails_in_the_notebook():
    """Stepping the parity head except on the batches the notebook printed without parity labels
    passes on the notebook's batches; the check cell's drawn case rejects it there, not first the
    grader (a test learner's fix)."""
    without_parity = [i for i, aux in enumerate(lab.multitask_plan(0)[0]) if not aux]

    def train(model, optimizers, scaler, batches):
        for index, (images, labels, has_aux) in enumerate(batches):
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=True)
            scaler.scale(lab.multitask_loss(model, images, labels, has_aux)).backward()
            for optimizer in optimizers[:1] if index in without_parity else optimizers:
                scaler.step(optimizer)
            scaler.update()

    assert exercises.verdict("labs.no_inf_checks", train, 0) == ("passed", "")
    with pytest.raises(ExerciseFailed, match="on the check's own inputs, not the notebook's: "):
        exercises.check("labs.no_inf_checks", train)


# ---- the quiz's keys, checked against torch ------------------------------------------------------
def _key(question_id):
    return conftest.quiz_key(LESSON, question_id)


def test_no_inf_checks_and_double_step_errors():
    model = torch.nn.Linear(4, 2)
    unused = torch.nn.Linear(4, 2)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, unused)]
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale(model(torch.randn(3, 4)).sum()).backward()
    with pytest.raises(AssertionError, match="No inf checks were recorded for this optimizer"):
        scaler.step(optimizers[1])
    scaler.step(optimizers[0])
    with pytest.raises(RuntimeError, match=re.escape("step() has already been called since")):
        scaler.step(optimizers[0])
    key = _key("no-inf-checks")
    assert key["scaler.step(optimizer) was called twice before update()"] is False
    assert conftest.quiz_answers(LESSON, "no-inf-checks") == [
        "None of the optimizer's parameters has a gradient at this step"
    ]


def test_adam_moves_weights_on_a_zero_gradient():
    weight = torch.nn.Parameter(torch.ones(3))
    adam = torch.optim.Adam([weight], lr=0.1)
    weight.grad = torch.tensor([1.0, -2.0, 3.0])
    adam.step()
    before = weight.detach().clone()
    weight.grad = torch.zeros(3)
    adam.step()
    assert not torch.equal(weight.detach(), before)
    assert conftest.quiz_answers(LESSON, "zero-grad-steps") == [
        "Its weights still move, by Adam's running averages of earlier gradients"
    ]


def test_fill_values_under_fp16_autocast():
    q, k, _, keep = lab.masked_inputs(0)
    with torch.autocast("cpu", dtype=torch.float16):
        scores = q @ k.transpose(-2, -1)
        with pytest.raises(RuntimeError, match="without overflow"):
            scores.masked_fill(~keep, torch.finfo(q.dtype).min)
        filled = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    assert filled.dtype == torch.float16 and torch.isfinite(filled).all()
    key = _key("fill-dtype")
    assert key["torch.finfo(scores.dtype).min"] and not key["torch.finfo(q.dtype).min"]


def test_a_row_with_no_key():
    q, k, v, keep = lab.padded_inputs(0)
    row = (0, 0, 0)  # a left-padding query of the first sequence
    assert not keep[0, 0, 0].any()
    minus_inf = _attention(lambda scores, q: float("-inf"))(q, k, v, keep)
    lowest = _attention(lambda scores, q: torch.finfo(scores.dtype).min)(q, k, v, keep)
    builtin = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert minus_inf[row].isnan().all()
    assert torch.allclose(lowest[row], v[0, 0].mean(0), atol=1e-6)
    assert torch.equal(builtin[row], torch.zeros_like(builtin[row]))
    assert conftest.quiz_answers(LESSON, "no-key-row") == ["NaN, and zeros"]


def test_a_cleaned_output_still_has_nan_gradients():
    q, k, v, keep = (
        t.requires_grad_() if t.is_floating_point() else t for t in lab.padded_inputs(0)
    )
    out = _attention(lambda scores, q: float("-inf"), clean_output="nan_to_num")(q, k, v, keep)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert v.grad.isnan().any()
    assert _key("nan-output")["Every step with a padded batch is still skipped"] is True


def test_bf16_positions_and_autocast_dtypes():
    whole = torch.arange(300, dtype=torch.float32)
    rounded = whole.to(torch.bfloat16).float()
    first = next(p for p in range(299) if rounded[p] == rounded[p + 1])
    assert first == conftest.quiz_question(LESSON, "bf16-position")["answer"] == 256
    inv_freq, positions = lab.inverse_frequencies(8), torch.arange(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (inv_freq[:, None].float() @ positions[None, :].float()).dtype == torch.bfloat16
        assert (inv_freq[:, None].double() @ positions[None, :].double()).dtype == torch.float64
    assert conftest.quiz_answers(LESSON, "float-upcast") == ["bfloat16"]
    assert conftest.quiz_answers(LESSON, "rope-fixes") == [
        "The matmul inside torch.autocast('cpu', enabled=False), on float32 inputs",
        "The matmul on .double() inputs, autocast left on",
    ]


def _attention_in_fp32(q, k, v, keep):
    """Closer to exact than the reference: scores and softmax in fp32 with autocast off, the
    output in autocast's dtype; zero weights for a query with no key."""
    dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32
    with torch.autocast("cpu", enabled=False):
        scores = q.float() @ k.float().transpose(-2, -1) / q.shape[-1] ** 0.5
        weights = scores.masked_fill(~keep, -1e9).softmax(-1) * keep.any(-1, keepdim=True)
        return (weights @ v.float()).to(dtype)


# The scores near -12000 once drew keys a few units apart, which fp16 (spacing 8 there) merged in
# the reference: SDPA and fp32 attention then failed seeds 2, 4, 5, 6, 7... against its rounding.
@pytest.mark.parametrize("name", ["labs.masked_fill_fp16", "labs.fully_masked_rows"])
@pytest.mark.parametrize(
    "right",
    [_attention_in_fp32, lambda q, k, v, keep: F.scaled_dot_product_attention(q, k, v, keep)],
    ids=["fp32", "sdpa"],
)
def test_attention_more_exact_than_the_reference_passes_at_every_seed(name, right):
    failed = {seed: exercises.verdict(name, right, seed) for seed in range(12)}
    assert all(status == "passed" for status, _ in failed.values()), failed


def _step_where_gradients_exist(scaler, optimizer, index, has_aux):
    if any(p.grad is not None for group in optimizer.param_groups for p in group["params"]):
        scaler.step(optimizer)


def test_zeroed_gradients_stepped_fail_at_every_seed():
    """Gradients zeroed, not set to None, then each optimizer holding any stepped: right only
    until a batch without parity labels follows one with them, which 20 grader seeds of 300
    never drew."""
    wrong = _multitask(zero_grad_to_none=False, step=_step_where_gradients_exist)
    for seed in range(30):
        assert exercises.verdict("labs.no_inf_checks", wrong, seed)[0] == "failed", seed


# A test learner's wrong fixes that passed grader seeds: fp16's lowest value as the fill in every
# dtype (every seed, while no fp32 case scored its kept keys below it), and inverse frequencies
# rebuilt at base 10000 instead of the ones given (the seeds that drew 10000 for every case).
_fp16_lowest_everywhere = _attention(lambda scores, q: -65504.0)
# fp16's lowest value in either 16-bit dtype (a test learner's: it passed every seed while only the
# fp32 cases scored kept keys below it).
_fp16_lowest_in_16_bits = _attention(
    lambda scores, q: -65504.0 if scores.element_size() == 2 else torch.finfo(scores.dtype).min
)


def _rope_at_base_10000(inv_freq, positions, dtype):
    return solutions.rope_cos_sin(lab.inverse_frequencies(2 * len(inv_freq)), positions, dtype)


def _rope_counted_on_from_the_first(inv_freq, positions, dtype):
    """Right for a range of positions only: it passed every seed while each case's were one."""
    return solutions.rope_cos_sin(inv_freq, positions[0] + torch.arange(len(positions)), dtype)


@pytest.mark.parametrize(
    "name, wrong, says",
    [
        (
            "labs.masked_fill_fp16",
            _fp16_lowest_everywhere,
            "'fp32, scores near -100000 for kept keys",
        ),
        ("labs.fully_masked_rows", _fp16_lowest_everywhere, "'fp32, scores near -100000'"),
        (
            "labs.masked_fill_fp16",
            _fp16_lowest_in_16_bits,
            "'bf16 autocast, scores near -100000 for kept keys",
        ),
        (
            "labs.fully_masked_rows",
            _fp16_lowest_in_16_bits,
            "'bf16 autocast, scores near -100000'",
        ),
        ("labs.rope_bf16", _rope_at_base_10000, "In the case '"),
        ("labs.rope_bf16", _rope_counted_on_from_the_first, "your cos at position"),
    ],
)
def test_fixes_right_only_at_the_cases_the_seeds_drew_fail_at_every_grader_seed(name, wrong, says):
    for seed in (1, 2, 3, 4, 5, *conftest.SECRET_SEEDS):
        status, message = exercises.verdict(name, wrong, seed)
        assert status == "failed" and says in message, (seed, message)


def test_the_padded_attention_lab_runs_pytorchs_attention_only_after_the_check():
    """Printed before the blank, PyTorch's attention beside the broken one laid out a one-call fix
    that the check accepts (a test learner's read): it runs after the check, for "Why it broke"."""
    cells = notebook("labs_more_failures").cells
    start = next(i for i, c in enumerate(cells) if c.source.startswith("## Lab 3."))
    blank = next(
        i
        for i, c in enumerate(cells)
        if c.metadata.get("exercise", {}).get("name") == "labs.fully_masked_rows"
    )
    before = [c.source for c in cells[start:blank]]
    assert not [s for s in before if "scaled_dot_product_attention" in s]
    assert any("scaled_dot_product_attention" in c.source for c in cells[blank:])
