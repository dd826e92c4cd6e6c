"""Lesson 07's FSDP2 precision exercise: the reference passes, the usual wrong choices fail."""

import itertools

import pytest
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

from amp_course import exercises
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_07 as lesson

NAME = "07.fsdp_precision"


def test_solution_passes():
    assert exercises.check(NAME, exercises.solution(NAME))


def test_equivalent_spellings_pass():
    # For fp32 training param_dtype=torch.float32 means no cast, as None does; reduce_dtype None
    # means "as param_dtype"; a disabled plain GradScaler is a no-op like a disabled sharded one.
    def spelled_out(amp_dtype, device):
        policy = MixedPrecisionPolicy(param_dtype=amp_dtype, reduce_dtype=torch.float32)
        if amp_dtype != torch.float16:
            return policy, torch.amp.GradScaler(device.type, enabled=False)
        return policy, sharded_scaler(device)

    assert exercises.check(NAME, spelled_out)


def sharded_scaler(device):
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    return ShardedGradScaler(device.type)


def reduce_in_low_precision(amp_dtype, device):
    policy, scaler = lesson.fsdp_precision(amp_dtype, device)
    return MixedPrecisionPolicy(param_dtype=policy.param_dtype), scaler


def no_cast(amp_dtype, device):
    return MixedPrecisionPolicy(reduce_dtype=torch.float32), lesson.fsdp_precision(
        amp_dtype, device
    )[1]


def plain_scaler(amp_dtype, device):
    policy = lesson.fsdp_precision(amp_dtype, device)[0]
    return policy, torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)


def scaler_always_on(amp_dtype, device):
    return lesson.fsdp_precision(amp_dtype, device)[0], sharded_scaler(device)


def scaler_for_cuda(amp_dtype, device):
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    policy = lesson.fsdp_precision(amp_dtype, device)[0]
    return policy, ShardedGradScaler("cuda", enabled=amp_dtype == torch.float16)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (reduce_in_low_precision, "reduced in bf16; set reduce_dtype=torch.float32"),
        (no_cast, "gather the weights in fp32; with bf16 training set param_dtype"),
        (plain_scaler, "FSDP needs torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler"),
        (scaler_always_on, "bf16 has fp32's exponent range, so disable it"),
        (
            lambda dtype, device: lesson.fsdp_precision(dtype, device)[0],
            "return \\(policy, scaler\\)",
        ),
    ],
)
def test_wrong_answers_fail_with_the_reason(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a 'cuda' scaler works where CUDA does")
def test_a_cuda_scaler_on_a_cpu_is_explained():
    with pytest.warns(UserWarning), pytest.raises(ExerciseFailed, match="device.type"):
        exercises.check(NAME, scaler_for_cuda)


def test_inputs_vary_with_the_seed():
    answers = itertools.cycle([torch.bfloat16, torch.float16, torch.float32])

    def by_call_order(amp_dtype, device):  # seed 0's answers in seed 0's order, whatever asked
        return lesson.fsdp_precision(next(answers), device)

    lesson.check_fsdp_precision(by_call_order)
    seed = 4
    with pytest.raises(ExerciseFailed):
        lesson.compare(
            lesson.observe(by_call_order, seed), lesson.observe(lesson.fsdp_precision, seed), seed
        )
