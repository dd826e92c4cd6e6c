"""Lesson 09's checkers reject typical wrong answers, saying why (that they accept the reference:
test_exercises.py)."""

import functools
import re
import warnings

import conftest
import pytest
import torch
from handwritten_checkpoint import recompute_in

from amp_course import exercises
from amp_course.checkpointing import Checkpointed, encoder_blocks
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_09 as lesson
from amp_course.exercises.lesson_09 import fp8 as fp8_checks
from amp_course.exercises.solutions import lesson_09 as solutions


def _every_block(model, k):
    return solutions.checkpoint_every(model, 1)


def _wrap(model, indices, wrapper=Checkpointed):
    blocks = encoder_blocks(model)
    for index in indices:
        blocks[index] = wrapper(blocks[index])
    return model


def _off_by_one(model, k):  # blocks k-1, 2k-1, ... instead of 0, k, ...
    return _wrap(model, range(k - 1, len(encoder_blocks(model)), k))


def _from_block_k(model, k):  # blocks k, 2k, ...: block 0 left out
    return _wrap(model, range(k, len(encoder_blocks(model)), k))


def _every_second_block(model, k):  # the lesson's example, whatever k
    return _wrap(model, range(0, len(encoder_blocks(model)), 2))


class _Reentrant(torch.nn.Module):
    """A block under torch.utils.checkpoint, reentrant (explicitly, or by torch's default)."""

    def __init__(self, block, **kwargs):
        super().__init__()
        self.block, self.kwargs = block, kwargs

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.block, x, **self.kwargs)


def _reentrant(model, k):
    wrapper = functools.partial(_Reentrant, use_reentrant=True)
    return _wrap(model, range(0, len(encoder_blocks(model)), k), wrapper)


def _reentrant_by_default(model, k):  # no use_reentrant: torch warns and runs the reentrant one
    return _wrap(model, range(0, len(encoder_blocks(model)), k), _Reentrant)


def _own_non_reentrant(model, k):  # another correct style: torch.utils.checkpoint by hand
    wrapper = functools.partial(_Reentrant, use_reentrant=False)
    return _wrap(model, range(0, len(encoder_blocks(model)), k), wrapper)


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
        (_every_block, "with k=3 on a 5-block ViT, blocks [0, 1, 2, 3, 4] were recomputed"),
        (
            _off_by_one,
            "blocks [2] were recomputed in backward; the reference recomputes blocks [0, 3]",
        ),
        (_from_block_k, "blocks [3] were recomputed"),
        (_every_second_block, "blocks [0, 2, 4] were recomputed"),
        (_reentrant, "holds 2 CheckpointFunctionBackward node(s), the reentrant checkpoint's"),
        (_reentrant_by_default, "holds 2 CheckpointFunctionBackward node(s)"),
        (_hand_written, "lost the forward's autocast state"),
        (_copy_of_the_model, "got no gradient"),
        (lambda model, k: 1 / 0, "ZeroDivisionError"),
        (
            lambda model, k: None if solutions.checkpoint_every(model, k) else None,
            "with k=3 on a 5-block ViT checkpoint_every returned None; the reference returns the "
            "model it was given, changed in place.",
        ),
    ],
)
def test_checkpoint_every_rejects(wrong, words):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's warning when use_reentrant is not passed
        with pytest.raises(ExerciseFailed, match=re.escape(words)):
            exercises.check("09.checkpoint_every", wrong)


class _Fp32Checkpoint(torch.nn.Module):
    """A block checkpointed with autocast turned off: recompute and forward agree, in fp32."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        with torch.autocast("cpu", enabled=False):
            return torch.utils.checkpoint.checkpoint(self.block, x.float(), use_reentrant=False)


def _checkpointed_in_fp32(model, k):
    return _wrap(model, range(0, len(encoder_blocks(model)), k), _Fp32Checkpoint)


def test_checkpoint_every_in_fp32_is_told_which_block_ran_in_which_dtype():
    with pytest.raises(
        ExerciseFailed,
        match=re.escape(
            "block 0's first MLP layer returned torch.float32 in the forward; the reference's "
            "torch.bfloat16"
        ),
    ):
        exercises.check("09.checkpoint_every", _checkpointed_in_fp32)


def _stops_one_block_early(model, k):  # range(0, depth - 1, k): the last block never wrapped
    return _wrap(model, range(0, len(encoder_blocks(model)) - 1, k))


def _every_k_plus_one(model, k):  # "every k-th" read as k blocks skipped between
    return _wrap(model, range(0, len(encoder_blocks(model)), k + 1))


def _first_block_only(model, k):
    return _wrap(model, [0])


def _none_past_depth(model, k):  # block 0 left plain when k > depth
    blocks = len(encoder_blocks(model))
    return model if k > blocks else _wrap(model, range(0, blocks, k))


def test_every_seed_tries_a_last_block_case_and_one_past_the_depth():
    """The miscounts below fail on every case of one of these tables, so at every seed. Before
    the table of cases past the depth, seeds 14, 17, 22 and 987654321 drew none, and an answer
    that left block 0 plain there passed."""
    for seed in range(500):
        cases = lesson.checkpoint_cases(seed)
        assert any(case in lesson.LAST_BLOCK_CASES for case in cases), (seed, cases)
        assert any(case in lesson.OVER_DEPTH_CASES for case in cases), (seed, cases)


@pytest.mark.parametrize(
    ("wrong", "cases"),
    [
        (_stops_one_block_early, lesson.LAST_BLOCK_CASES),
        (_every_k_plus_one, lesson.LAST_BLOCK_CASES),
        (_first_block_only, lesson.LAST_BLOCK_CASES),
        (_none_past_depth, lesson.OVER_DEPTH_CASES),
    ],
)
def test_checkpoint_every_miscounts_fail_in_the_notebook_and_at_grading(wrong, cases):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for depth, k in cases:  # each case of its table: whichever a seed draws
            mine = lesson._observe_checkpointing(wrong, depth, k, 0)
            want = lesson._observe_checkpointing(solutions.checkpoint_every, depth, k, 0)
            with pytest.raises(ExerciseFailed, match="were recomputed in backward"):
                lesson._compare_checkpointing(mine, want, f"({depth}, {k})")
        for seed in (0, *conftest.SECRET_SEEDS):  # and the whole check, as a learner meets it
            assert exercises.verdict("09.checkpoint_every", wrong, seed)[0] == "failed", seed


class _Bf16Checkpointed(torch.nn.Module):
    """A hand-written checkpoint whose recompute enters bf16 autocast of its own."""

    recompute = staticmethod(
        recompute_in(lambda enabled, dtype, _: torch.autocast("cpu", dtype=torch.bfloat16))
    )

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return self.recompute(self.block, x)


def _recompute_in_bf16(model, k):
    layers = model.encoder.layers
    for index in range(0, len(layers), k):
        layers[index] = _Bf16Checkpointed(layers[index])
    return model


def test_a_recompute_in_a_dtype_of_its_own_fails_at_every_seed():
    """It matched every bf16 case (a test learner's passed every seed): the fp16 case tells."""
    message = r"under fp16 autocast block 0 ran in torch.float16 in the forward but was recomputed"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ExerciseFailed, match=message):
            exercises.check("09.checkpoint_every", _recompute_in_bf16)
        for seed in (1, 2, *conftest.SECRET_SEEDS):
            assert exercises.verdict("09.checkpoint_every", _recompute_in_bf16, seed)[0] == "failed"


def _by_index(model, k):  # another correct style: a range with step k over the blocks
    return _wrap(model, range(0, len(encoder_blocks(model)), k))


@pytest.mark.parametrize("right", [_own_non_reentrant, _by_index])
def test_checkpoint_every_accepts_other_right_answers(right):
    for seed in (0, 12345):
        assert exercises.verdict("09.checkpoint_every", right, seed) == ("passed", ""), seed


def test_checkpoint_every_inputs_vary_with_the_seed():
    seen = {
        tuple((o["depth"], o["k"]) for o in lesson.observe_checkpoint_every(_every_block, s))
        for s in range(4)
    }
    assert len(seen) > 1
    assert all(k != 2 for _, k in lesson.CHECKPOINT_CASES)  # not the lesson's "every second block"


def _scaled(x, fp8_dtype, amax, low=None):
    """x cast with the scale that maps ``amax`` onto the format's max, clipped to [low, -low]."""
    fp8_max = torch.finfo(fp8_dtype).max
    scale = fp8_max / torch.tensor(amax, dtype=torch.float32)
    low = fp8_max if low is None else low
    return (x * scale).clamp(-low, low).to(fp8_dtype), scale


def _unscaled(x, fp8_dtype, history):
    return x.to(fp8_dtype), torch.tensor(1.0)


def _inverted(x, fp8_dtype, history):
    scale = max(max(history), 1e-12) / torch.finfo(fp8_dtype).max
    return (x * scale).to(fp8_dtype), scale


def _current_scaling(x, fp8_dtype, history):  # the lesson's own amax: the history ignored
    return _scaled(x, fp8_dtype, x.abs().max().clamp(min=1e-12).item())


def _most_recent(x, fp8_dtype, history):  # Transformer Engine's other choice, not the largest
    return _scaled(x, fp8_dtype, max(history[-1], 1e-12))


def _history_mean(x, fp8_dtype, history):
    return solutions.to_float8(x, fp8_dtype, [sum(history) / len(history)])


def _history_smallest(x, fp8_dtype, history):  # the smallest is the first entry at seed 0
    return solutions.to_float8(x, fp8_dtype, [min(history)])


def _no_clip(x, fp8_dtype, history):  # e5m2's cast overflows to inf where x grew past its history
    fp8_max = torch.finfo(fp8_dtype).max
    scale = fp8_max / max(max(history), 1e-12)
    return (x * scale).to(fp8_dtype), scale


def _clip_at_448(x, fp8_dtype, history):  # e4m3's max for every format
    return _scaled(x, fp8_dtype, max(max(history), 1e-12), low=448.0)


def _no_floor(x, fp8_dtype, history):
    return _scaled(x, fp8_dtype, max(history))


def _always_e4m3(x, fp8_dtype, history):
    return solutions.to_float8(x, torch.float8_e4m3fn, history)


def _in_float64(x, fp8_dtype, history):  # another correct style: the scale as a Python float
    fp8_max = torch.finfo(fp8_dtype).max
    scale = fp8_max / max(*history, 1e-12)
    return torch.clamp(x.double() * scale, -fp8_max, fp8_max).to(fp8_dtype), scale


@pytest.mark.parametrize(
    "wrong, words",
    [
        (_unscaled, "your scale is 1, the reference's 99.2986"),
        (_inverted, "your scale is 0.0100706, the reference's 99.2986"),
        (
            _current_scaling,
            "your scale is 109.229, the reference's 99.2986 (the history [3.69, 4.51, 3.9], x's "
            "own amax 4.1, the format's max 448): yours maps 4.101 onto the format's max, x's own "
            "amax.",
        ),
        (_most_recent, "your scale is 114.977, the reference's 99.2986 (the history [3.69"),
        (_most_recent, "yours maps 3.896 onto the format's max, the history's last entry."),
        (_history_mean, "your scale is 111.08, the reference's 99.2986 (the history [3.69"),
        (_history_mean, "yours maps 4.033 onto the format's max, the history's mean."),
        (
            _history_smallest,
            "yours maps 3.691 onto the format's max, the history's first entry, the history's "
            "smallest entry.",
        ),
        (
            _no_clip,
            "grown past their history (e5m2) x_fp8 holds 50 inf or NaN values where the "
            "reference's holds none; x * scale in float32 reaches 1.147e+05, and cast unclipped "
            "to torch.float8_e5m2 (largest finite 57344) it holds 50 of them.",
        ),
        (_clip_at_448, "with the same scale; your largest |x_fp8| is 448, the reference's 57344"),
        (_no_floor, "an all-zero history (e5m2) your scale is inf"),
        (
            _always_e4m3,
            "you returned torch.float8_e4m3fn; the reference returns the requested "
            "torch.float8_e5m2.",
        ),
    ],
)
def test_to_float8_rejects(wrong, words):
    with pytest.raises(ExerciseFailed, match=re.escape(words)):
        exercises.check("09.to_float8", wrong)


def _scaled_in_place(x, fp8_dtype, history):
    """Right values, but the caller's high-precision x overwritten on the way."""
    fp8_max = torch.finfo(fp8_dtype).max
    scale = fp8_max / torch.tensor(max(history)).clamp(min=1e-12)
    x.mul_(scale).clamp_(-fp8_max, fp8_max)
    return x.to(fp8_dtype), scale


def _rows_in_place(x, fp8_dtype):
    fp8_max = torch.finfo(fp8_dtype).max
    scales = fp8_max / x.abs().amax(1, keepdim=True).clamp(min=1e-12)
    x.mul_(scales).clamp_(-fp8_max, fp8_max)
    return x.to(fp8_dtype), scales


@pytest.mark.parametrize(
    "name, wrong", [("09.to_float8", _scaled_in_place), ("09.to_float8_rowwise", _rows_in_place)]
)
def test_a_cast_that_overwrites_its_input_fails(name, wrong):
    with pytest.raises(ExerciseFailed, match=r"the x your code was given changed during the call"):
        exercises.check(name, wrong)


def test_to_float8_accepts_another_style():
    for seed in (0, 12345):
        assert exercises.verdict("09.to_float8", _in_float64, seed) == ("passed", ""), seed
        assert exercises.verdict("09.to_float8", _divided, seed) == ("passed", ""), seed
        assert exercises.verdict("09.to_float8", _numpy_scale, seed) == ("passed", ""), seed


def _numpy_scale(x, fp8_dtype, history):
    """Right: the scale a NumPy float32, which is no Python float (a test learner's: it failed as
    'not a pair')."""
    import numpy as np

    fp8_max = np.float32(torch.finfo(fp8_dtype).max)
    scale = fp8_max / max(np.max(np.asarray(history, dtype=np.float32)), np.float32(1e-12))
    return (x * float(scale)).clamp(-float(fp8_max), float(fp8_max)).to(fp8_dtype), scale


def _divided(x, fp8_dtype, history):  # right: x divided by the inverse scale
    fp8_max = torch.finfo(fp8_dtype).max
    scale = torch.tensor(fp8_max / max(*history, 1e-12))
    return (x / (1 / scale)).clamp(-fp8_max, fp8_max).to(fp8_dtype), scale


def _product_in_bf16(x, fp8_dtype, history):  # the right scale, x * scale taken in bf16
    fp8_max = torch.finfo(fp8_dtype).max
    scale = torch.tensor(fp8_max / max(*history, 1e-12))
    product = x.bfloat16() * scale.bfloat16()
    return product.clamp(-fp8_max, fp8_max).to(fp8_dtype), scale


def _cast_at_another_scale(x, fp8_dtype, history):  # returns the right scale, casts at 0.1% more
    fp8_max = torch.finfo(fp8_dtype).max
    scale = fp8_max / max(*history, 1e-12)
    return (x * (scale * 1.001)).clamp(-fp8_max, fp8_max).to(fp8_dtype), scale


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            _product_in_bf16,
            r"^09.to_float8: for activations near 1, a history like them \(e4m3\) x_fp8 differs "
            r"from the reference's in 67 of 2048 elements, with the same scale: element \d+ of x "
            r"is \S+, x \* scale in float32 is \S+, your x_fp8 holds \S+ there, the reference's "
            r"\S+\.$",
        ),
        (_cast_at_another_scale, r"x_fp8 differs from the reference's in 23 of 2048 elements"),
        (
            lambda x, fp8_dtype, history: None,
            r"your function returned None; the reference returns the pair \(x_fp8, scale\): a "
            r"torch.float8_e4m3fn tensor shaped like x, \(64, 32\), then its scale\.$",
        ),
        (
            lambda x, fp8_dtype, history: solutions.to_float8(x, fp8_dtype, history)[::-1],
            r"your function returned the pair \(a Tensor of shape \(\), a Tensor of shape "
            r"\(64, 32\)\); the reference returns the pair \(x_fp8, scale\)",
        ),
    ],
)
def test_a_cast_that_differs_or_a_result_that_is_no_pair_is_named(wrong, words):
    """The FP8 values themselves are compared, at the reference's scale; a result that is not
    (x_fp8, scale) is described, not reported as an error raised by the learner's code."""
    with pytest.raises(ExerciseFailed, match=words) as failure:
        exercises.check("09.to_float8", wrong)
    assert "raised" not in str(failure.value)


def _product_in_fp16(x, fp8_dtype, history):  # clipped, but x * scale overflows fp16 first
    if fp8_dtype != torch.float8_e5m2:
        return solutions.to_float8(x, fp8_dtype, history)
    fp8_max = torch.finfo(fp8_dtype).max
    scale = torch.tensor(fp8_max / max(*history, 1e-12))
    return (x.half() * scale.half()).clamp(-fp8_max, fp8_max).to(fp8_dtype), scale


def test_infinities_beside_the_count_past_the_max_show_where_they_came_from():
    """A clipped cast whose product overflowed fp16: the count of infinities and the count of
    float32 products beyond the format's max differ, and the message gives both."""
    with pytest.raises(ExerciseFailed) as failure:
        exercises.check("09.to_float8", _product_in_fp16)
    assert "x_fp8 holds 57 inf or NaN values where the reference's holds none; x * scale " in (
        str(failure.value)
    ) and str(failure.value).endswith(
        "to torch.float8_e5m2 (largest finite 57344) it holds 50 of them."
    )


def test_a_rowwise_result_that_is_no_pair_is_named():
    with pytest.raises(
        ExerciseFailed,
        match=r"returned None; the reference returns the pair "
        r"\(x_fp8, scales\): .* then one per row\.$",
    ):
        exercises.check("09.to_float8_rowwise", lambda x, fp8_dtype: None)


def test_the_clip_is_what_keeps_e5m2_finite():
    """Why the check sees a missing clip: this torch's e5m2 cast overflows to inf (e4m3fn has no
    inf: it saturates to 448 from torch 2.12, NaN before), so only the e5m2 case can tell."""
    beyond = torch.tensor([1e6])
    assert beyond.to(torch.float8_e5m2).float().isinf().all()
    assert not beyond.to(torch.float8_e4m3fn).float().isinf().any()


def _per_tensor(x, fp8_dtype):
    return solutions.to_float8(x, fp8_dtype, [x.abs().max().item()])


def _per_tensor_in_rows(x, fp8_dtype):
    quantized, scale = _per_tensor(x, fp8_dtype)
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


def _rows_at(fp8_max):
    """Each row's amax mapped onto ``fp8_max(fp8_dtype)``: e4m3's 448 for both formats, or half
    the format's max; FP8's relative precision is the same at any such scale."""

    def cast(x, fp8_dtype):
        scales = fp8_max(fp8_dtype) / x.abs().amax(1, keepdim=True).float().clamp(min=1e-12)
        return (x * scales).to(fp8_dtype), scales

    return cast


def _rows_float64_scales(x, fp8_dtype):
    quantized, scales = solutions.to_float8_rowwise(x, fp8_dtype)
    return quantized, scales.double()


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            _per_tensor,
            "(x of shape (16, 32)) you returned scales of shape () and x_fp8 of shape (16, 32); "
            "the reference returns scales of shape (16, 1) and x_fp8 shaped like x.",
        ),
        (
            _per_tensor_in_rows,
            "every row got the same scale, 1.14; the reference's scales run from 1.14 to "
            "1.092e+06.",
        ),
        (_per_column, "you returned scales of shape (1, 32) and x_fp8 of shape (16, 32)"),
        (_rows_flat, "you returned scales of shape (16,) and x_fp8 of shape (16, 32)"),
        (
            _rows_no_floor,
            "row 7 (amax 0) has the scale inf and comes back holding inf or NaN; the reference's "
            "scale there is 4.48e+14, its round trip finite.",
        ),
        (_rows_inverted, "has the scale 0.0326188, the reference's 30.6571: yours maps 1.373e+04"),
        (
            _rows_at(lambda fp8_dtype: 448.0),
            "for gradient rows from 1e-9 to 1e-3 (e5m2), row 0 (amax 0.002012) has the scale "
            "222682, the reference's 2.85032e+07: yours maps 0.2575 onto torch.float8_e5m2's "
            "max, 57344.",
        ),
        (
            _rows_at(lambda fp8_dtype: torch.finfo(fp8_dtype).max / 2),
            "yours maps 29.23 onto torch.float8_e4m3fn's max, 448.",
        ),
        (
            _rows_float64_scales,
            "your scales are torch.float64; the reference's are torch.float32, of shape (16, 1).",
        ),
        (_rows_always_e4m3, "the reference returns the requested torch.float8_e5m2"),
    ],
)
def test_to_float8_rowwise_rejects(wrong, words):
    with pytest.raises(ExerciseFailed, match=re.escape(words)):
        exercises.check("09.to_float8_rowwise", wrong)


def _rows_through_bf16(product=False):
    """The right scales, x rounded to bf16 before the product (or the product taken in bf16)."""

    def cast(x, fp8_dtype):
        scales = torch.finfo(fp8_dtype).max / x.abs().amax(1, keepdim=True).float().clamp(min=1e-12)
        factor = scales.bfloat16() if product else scales
        return (x.bfloat16() * factor).to(fp8_dtype), scales

    return cast


def _rows_divided(x, fp8_dtype):
    """Right: x / (amax / max), in float32."""
    amax = x.abs().amax(1, keepdim=True).float().clamp(min=1e-12)
    fp8_max = torch.finfo(fp8_dtype).max
    return (x / (amax / fp8_max)).to(fp8_dtype), fp8_max / amax


# Both passed the error per row (within 5% of the reference's) at many grader seeds (28 and 63
# of 63); 09.to_float8 refused them, holding the values themselves.
@pytest.mark.parametrize("wrong", [_rows_through_bf16(), _rows_through_bf16(product=True)])
def test_a_rowwise_cast_through_bf16_fails_at_every_seed(wrong):
    said = r"\(e4m3\)(, row 1 .* comes back off by| x_fp8 differs from the reference's in \d+ of)"
    with pytest.raises(ExerciseFailed, match=said) as failed:
        exercises.check("09.to_float8_rowwise", wrong)
    # Its scales are the reference's: the message says the values differ, not "your scale is
    # 131.4, the reference's 131.4" (a test learner read that as the scale's fault).
    assert "your scale for that row" not in str(failed.value)
    for seed in range(41):
        assert exercises.verdict("09.to_float8_rowwise", wrong, seed)[0] == "failed", seed


def test_a_rowwise_cast_written_as_a_division_passes():
    for seed in (0, 1, 2, 12345, 987654321):
        assert exercises.verdict("09.to_float8_rowwise", _rows_divided, seed) == ("passed", "")


def test_rowwise_keeps_small_rows_that_per_tensor_scaling_loses():
    # Why the exercise matters: the smallest rows of the check's first case.
    x, fp8_dtype = next(iter(fp8_checks.rowwise_inputs(0).values()))
    quantized, scales = solutions.to_float8_rowwise(x, fp8_dtype)
    per_tensor, scale = _per_tensor(x, fp8_dtype)
    small = x.abs().amax(1).argmin()
    row_error = (quantized.float() / scales - x)[small].norm() / x[small].norm()
    tensor_error = (per_tensor.float() / scale - x)[small].norm() / x[small].norm()
    assert row_error < 0.1 < tensor_error


def test_to_float8_reference_clips_and_round_trips():
    x = torch.tensor([0.0, 1e-3, -2.0, 4.0])
    q, scale = solutions.to_float8(x, torch.float8_e5m2, [1.0, 2.0])  # x grew past its history
    assert q.dtype == torch.float8_e5m2 and q.float().abs().max() == 57344
    torch.testing.assert_close(q.float()[:3] / scale, x[:3], rtol=0.13, atol=1e-3)
    # The history's amax (2.0) sets the scale, not x's own (4.0): the 4.0 clips to 2.0.
    assert scale == 57344 / 2.0 and q.float()[3] / scale == 2.0


def test_every_seeds_amax_history_keeps_its_largest_entry_where_the_case_puts_it():
    """An answer scaling by the history's last entry (Transformer Engine's "most recent") passed
    at the grader seeds where every case's history came out with its largest entry last; the
    first case's largest is a middle one at every seed."""
    from amp_course.exercises.lesson_09 import fp8

    for seed in range(1, 201):
        for name, (_, history, _) in fp8.fp8_cases(seed).items():
            shape = fp8.FP8_CASES[name][1]
            assert history.index(max(history)) == shape.index(max(shape)), (seed, name)
