"""Lesson 07's exercises (FSDP2 precision, the scaler per strategy): equivalent answers pass, the
usual wrong choices fail and say why."""

import itertools

import pytest
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

from amp_course import exercises
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_07 as lesson
from amp_course.exercises.solutions import lesson_07 as solutions

NAME = "07.fsdp_precision"


def test_equivalent_spellings_pass():
    # For fp32 training param_dtype=torch.float32 means no cast, as None does, and reduce_dtype
    # None means "as param_dtype": FSDP2 treats both alike (FSDPParam.init_dtype_attrs).
    def spelled_out(amp_dtype, device):
        policy = MixedPrecisionPolicy(param_dtype=amp_dtype, reduce_dtype=torch.float32)
        if amp_dtype == torch.float32:
            policy = MixedPrecisionPolicy(param_dtype=torch.float32)
        scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
        return policy, scaler

    assert exercises.check(NAME, spelled_out)


def _scaler(amp_dtype, device):
    return solutions.fsdp_precision(amp_dtype, device)[1]


def reduce_in_low_precision(amp_dtype, device):
    policy = solutions.fsdp_precision(amp_dtype, device)[0]
    return MixedPrecisionPolicy(param_dtype=policy.param_dtype), _scaler(amp_dtype, device)


def no_cast(amp_dtype, device):
    return MixedPrecisionPolicy(reduce_dtype=torch.float32), _scaler(amp_dtype, device)


def scaler_always_on(amp_dtype, device):
    return solutions.fsdp_precision(amp_dtype, device)[0], torch.amp.GradScaler(device.type)


def scaler_never_on(amp_dtype, device):
    policy = solutions.fsdp_precision(amp_dtype, device)[0]
    return policy, torch.amp.GradScaler(device.type, enabled=False)


def changed_output_dtype(amp_dtype, device):
    policy = solutions.fsdp_precision(amp_dtype, device)[0]
    changed = MixedPrecisionPolicy(
        param_dtype=policy.param_dtype, reduce_dtype=torch.float32, output_dtype=torch.float32
    )
    return changed, _scaler(amp_dtype, device)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (reduce_in_low_precision, "reduced in bf16; set reduce_dtype=torch.float32"),
        (no_cast, "gather the weights in fp32; with bf16 training set param_dtype"),
        (scaler_always_on, "bf16 has fp32's exponent range, so disable it"),
        (scaler_never_on, "fp16 needs loss scaling"),
        (changed_output_dtype, "leave output_dtype at its default"),
        (
            lambda dtype, device: solutions.fsdp_precision(dtype, device)[0],
            "return \\(policy, scaler\\)",
        ),
        (lambda dtype, device: (None, _scaler(dtype, device)), "build it with"),
    ],
)
def test_wrong_answers_fail_with_the_reason(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a 'cuda' scaler works where CUDA does")
def test_a_cuda_scaler_on_a_cpu_is_explained():
    def cuda_scaler(amp_dtype, device):
        policy = solutions.fsdp_precision(amp_dtype, device)[0]
        return policy, torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)

    with pytest.warns(UserWarning), pytest.raises(ExerciseFailed, match="device.type"):
        exercises.check(NAME, cuda_scaler)


def test_inputs_vary_with_the_seed():
    answers = itertools.cycle([torch.bfloat16, torch.float16, torch.float32])

    def by_call_order(amp_dtype, device):  # seed 0's answers in seed 0's order, whatever asked
        return solutions.fsdp_precision(next(answers), device)

    assert exercises.check(NAME, by_call_order)
    seed = 4
    with pytest.raises(ExerciseFailed):
        lesson.compare(
            lesson.observe(by_call_order, seed),
            lesson.observe(solutions.fsdp_precision, seed),
            seed,
        )


# ---- Exercise 2: which scaler for DDP, FSDP1 and FSDP2 -----------------------------------------
SCALER_FOR = "07.scaler_for"


def plain_everywhere(strategy, amp_dtype, device):
    return torch.amp.GradScaler(torch.device(device).type, enabled=amp_dtype == torch.float16)


def sharded_everywhere(strategy, amp_dtype, device):
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    return ShardedGradScaler(device=torch.device(device).type, enabled=amp_dtype == torch.float16)


def enabled_for_bf16_too(strategy, amp_dtype, device):
    scaler = exercises.solution(SCALER_FOR)(strategy, torch.float16, device)
    return scaler if amp_dtype != torch.float32 else plain_everywhere(strategy, amp_dtype, device)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (plain_everywhere, "FSDP1 gives each rank plain tensors"),
        (sharded_everywhere, "the plain torch.amp.GradScaler is the one to use"),
        (enabled_for_bf16_too, "bf16 needs no loss scaling"),
        (lambda strategy, amp_dtype, device: None, "return a torch.amp.GradScaler"),
    ],
)
def test_scaler_for_mistakes_fail_and_say_why(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(SCALER_FOR, wrong)
