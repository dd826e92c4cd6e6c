"""Lesson 07's exercises (FSDP2 precision, the scaler per strategy): equivalent answers pass, the
usual wrong choices fail and say why."""

import dataclasses
import itertools
import re
import subprocess
import sys

import conftest
import pytest
import torch
from conftest import ROOT
from torch.distributed.fsdp import MixedPrecisionPolicy

from amp_course import exercises
from amp_course.dist_train import mixed_precision_policy
from amp_course.exercises import ExerciseFailed
from amp_course.exercises import lesson_07 as lesson
from amp_course.exercises.solutions import lesson_07 as solutions
from amp_course.recipe import AmpRecipe

NAME = "07.fsdp_precision"


def test_equivalent_spellings_pass():
    # For fp32 training param_dtype=torch.float32 means no cast, as None does; reduce_dtype None
    # means "as param_dtype" (FSDPParam.init_dtype_attrs); output_dtype None keeps the compute
    # dtype, fp32 there.
    def spelled_out(amp_dtype, device):
        policy = MixedPrecisionPolicy(
            param_dtype=amp_dtype, reduce_dtype=torch.float32, output_dtype=torch.float32
        )
        if amp_dtype == torch.float32:
            policy = MixedPrecisionPolicy(param_dtype=torch.float32)
        scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
        return policy, scaler

    assert exercises.check(NAME, spelled_out)


def _scaler(amp_dtype, device):
    return solutions.fsdp_precision(amp_dtype, device)[1]


def _changed(amp_dtype, **fields):
    """The reference policy with ``fields`` changed."""
    policy = solutions.fsdp_precision(amp_dtype, torch.device("cpu"))[0]
    return dataclasses.replace(policy, **fields)


def the_lessons_policy(amp_dtype, device):
    # The policy printed above the exercise, copied: outputs in the compute dtype.
    recipe = AmpRecipe(device, amp_dtype)
    return mixed_precision_policy(recipe), _scaler(amp_dtype, device)


def reduce_in_low_precision(amp_dtype, device):
    return _changed(amp_dtype, reduce_dtype=None), _scaler(amp_dtype, device)


def no_cast(amp_dtype, device):
    return _changed(amp_dtype, param_dtype=None), _scaler(amp_dtype, device)


def inputs_not_cast(amp_dtype, device):
    return _changed(amp_dtype, cast_forward_inputs=False), _scaler(amp_dtype, device)


def fsdp1_scaler(amp_dtype, device):
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    policy = solutions.fsdp_precision(amp_dtype, device)[0]
    return policy, ShardedGradScaler(device.type, enabled=amp_dtype == torch.float16)


def scaler_always_on(amp_dtype, device):
    return solutions.fsdp_precision(amp_dtype, device)[0], torch.amp.GradScaler(device.type)


def scaler_never_on(amp_dtype, device):
    policy = solutions.fsdp_precision(amp_dtype, device)[0]
    return policy, torch.amp.GradScaler(device.type, enabled=False)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (
            the_lessons_policy,
            "the root's forward would return its outputs .* in bf16, the reference's in fp32",
        ),
        (
            fsdp1_scaler,
            r"fsdp_precision\(torch.float16, device\(type='cpu'\)\): the scaler is a "
            r"ShardedGradScaler; the "
            r"reference's is a torch.amp.GradScaler \(not a sharded one\), enabled\.$",
        ),
        (reduce_in_low_precision, "reduced in bf16, the reference's in fp32"),
        (no_cast, "gather the weights, and the layers compute, in fp32; the reference's in bf16"),
        (inputs_not_cast, "with cast_forward_inputs=False the root's fp32 inputs would reach"),
        (
            scaler_always_on,
            "bfloat16, device.type='cpu'..: the scaler is enabled; the reference's is disabled",
        ),
        (
            scaler_never_on,
            "float16, device.type='cpu'..: the scaler is disabled; the reference's is enabled",
        ),
        (
            lambda dtype, device: solutions.fsdp_precision(dtype, device)[0],
            "the reference returns a pair \\(policy, scaler\\)",
        ),
        (
            lambda dtype, device: (None, _scaler(dtype, device)),
            "the policy is None; the reference's is a torch.distributed.fsdp.Mixed",
        ),
        (
            lambda dtype, device: (solutions.fsdp_precision(dtype, device)[0], None),
            "the scaler is None; the reference's is a disabled scaler, of either kind",
        ),
    ],
)
def test_wrong_answers_fail_with_what_differs(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)


def test_the_reference_policy_does_what_the_exercise_asks_in_a_real_fsdp2_process():
    """One gloo process: under the reference's bf16 policy and no autocast the first Linear
    computes in bf16 and the root returns fp32; the lesson's policy returns bf16; without the
    input cast the first layer fails."""
    code = f"""
import os, torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from amp_course.dist_train import mixed_precision_policy
from amp_course.exercises.solutions.lesson_07 import fsdp_precision
from amp_course.recipe import AmpRecipe
import dataclasses
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="{conftest.free_port()}")
dist.init_process_group("gloo", rank=0, world_size=1)
cpu, bf16 = torch.device("cpu"), torch.bfloat16
reference = fsdp_precision(bf16, cpu)[0]
policies = [reference, mixed_precision_policy(AmpRecipe(cpu, bf16)),
            dataclasses.replace(reference, cast_forward_inputs=False)]
for policy in policies:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))
    seen = []
    model[0].register_forward_hook(lambda m, a, out: seen.append(str(out.dtype)))
    fully_shard(model, mp_policy=policy)
    try:
        out = model(torch.randn(2, 8))
        print(out.dtype, seen[0])
    except RuntimeError as error:
        print("error", "must have the same dtype" in str(error))
dist.destroy_process_group()
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == [
        "torch.float32 torch.bfloat16",
        "torch.bfloat16 torch.bfloat16",
        "error True",
    ]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a 'cuda' scaler works where CUDA does")
def test_a_cuda_scaler_on_a_cpu_is_explained():
    def cuda_scaler(amp_dtype, device):
        policy = solutions.fsdp_precision(amp_dtype, device)[0]
        return policy, torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)

    with pytest.raises(
        ExerciseFailed,
        match=r"built for device 'cuda' \(torch warned: .*\); the reference's for device 'cpu'",
    ):
        exercises.check(NAME, cuda_scaler)
    says = (
        "the scaler is built for device 'cuda' (torch warned: 'torch.cuda.amp.GradScaler is "
        "enabled, but CUDA is not available. Disabling.'); the reference's for device 'cpu'."
    )
    with pytest.raises(ExerciseFailed, match=re.escape(says)):
        exercises.check(SCALER_FOR, lambda strategy, amp_dtype, device: torch.amp.GradScaler())


def test_inputs_vary_with_the_seed():
    answers = itertools.cycle([torch.bfloat16, torch.float16, torch.float32, torch.float16])

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
        (
            plain_everywhere,
            r"\('fsdp1', torch.float16, 'cpu'\): the scaler is a torch.amp.GradScaler \(not a "
            r"sharded one\); the reference's is a ShardedGradScaler\.$",
        ),
        (sharded_everywhere, r"\('ddp', torch.float16, .*the reference's is a torch.amp.Grad"),
        (enabled_for_bf16_too, "bfloat16, 'cpu'.: the scaler is enabled; the reference's is dis"),
        (
            lambda strategy, amp_dtype, device: None,
            r"returned None; the reference returns a torch.amp.GradScaler \(not a sharded "
            r"one\), enabled\.$",
        ),
    ],
)
def test_scaler_for_mistakes_fail_and_say_why(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(SCALER_FOR, wrong)


def test_scaler_for_given_a_device_name_in_the_notebook_too():
    """The text allows a torch.device or its name: the notebook's check passes both, so an answer
    that reads ``device.type`` fails there, not first at grading."""

    def device_type_read(strategy, amp_dtype, device):
        return exercises.solution(SCALER_FOR)(strategy, amp_dtype, torch.device(device.type))

    for seed in (0, 1):
        status, message = exercises.verdict(SCALER_FOR, device_type_read, seed)
        assert status == "failed" and "'cpu') raised AttributeError: 'str' object" in message


def test_every_grader_seed_asks_for_every_dtype():
    """The text says the check asks for all three dtypes: a scaler enabled for bf16 fails
    wherever bf16 is asked, so every seed asks."""
    from amp_course.exercises import lesson_07

    for seed in range(40):
        assert set(lesson_07._order(seed)) == set(lesson_07.DTYPES), seed


def test_no_scaler_where_the_reference_has_a_disabled_one_is_told_it_is_disabled():
    """The message named the reference's GradScaler only, as if bf16 wanted one enabled; then it
    named the GradScaler's class, 'not a sharded one', where a disabled ShardedGradScaler passes."""
    reference = exercises.solution("07.fsdp_precision")

    def none_for_bf16(dtype, device):
        policy, scaler = reference(dtype, device)
        return policy, (scaler if dtype == torch.float16 else None)

    def no_scaler_for_bf16(strategy, dtype, device):
        return solutions.scaler_for(strategy, dtype, device) if dtype == torch.float16 else None

    either = "a disabled scaler, of either kind (torch.amp.GradScaler or ShardedGradScaler)."
    message = exercises.verdict("07.fsdp_precision", none_for_bf16, 0)[1]
    assert message.endswith(f"the scaler is None; the reference's is {either}"), message
    message = exercises.verdict("07.scaler_for", no_scaler_for_bf16, 0)[1]
    assert message.endswith(f"returned None; the reference returns {either}"), message


def test_a_device_written_into_the_answer_fails_on_the_cuda_cases():
    """Every CPU case passes an answer that builds its scaler for "cpu" whatever it is given; the
    CUDA cases (built on any machine, the scaler disabling itself without a GPU) tell it."""

    def policy_on_cpu(amp_dtype, device):
        return solutions.fsdp_precision(amp_dtype, torch.device("cpu"))

    def scaler_on_cpu(strategy, amp_dtype, device):
        return exercises.solution(SCALER_FOR)(strategy, amp_dtype, "cpu")

    for name, answer, call in [
        (NAME, policy_on_cpu, "fsdp_precision(torch.float16, device(type='cuda'))"),
        (SCALER_FOR, scaler_on_cpu, "scaler_for('ddp', torch.float16, 'cuda')"),
    ]:
        for seed in (0, 3):
            status, message = exercises.verdict(name, answer, seed)
            assert status == "failed", (name, seed)
            assert message == (
                f"{call}: the scaler is built for device 'cpu'; the reference's for device 'cuda'."
            )


def test_a_scaler_built_for_the_torch_device_itself_fails_on_every_machine():
    """GradScaler compares the device it keeps with names: given torch.device("cuda") it stayed
    enabled where no GPU is, so "the scaler is enabled; the reference's is disabled" blamed the
    dtype rule, and a machine with a GPU passed the same answer. Its device is what differs."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    def policy_and_device_scaler(amp_dtype, device):
        policy = solutions.fsdp_precision(amp_dtype, device)[0]
        return policy, torch.amp.GradScaler(device, enabled=amp_dtype == torch.float16)

    def device_scaler(strategy, amp_dtype, device):
        kind = ShardedGradScaler if strategy == "fsdp1" else torch.amp.GradScaler
        return kind(device, enabled=amp_dtype == torch.float16)

    says = (
        "the scaler is built for device(type='cpu'), a torch.device where the reference passes a "
        "name (GradScaler compares the device it is given with names such as 'cuda'); the "
        "reference's for device 'cpu'."
    )
    for name, answer in [(NAME, policy_and_device_scaler), (SCALER_FOR, device_scaler)]:
        for seed in (0, 1, 2, *conftest.SECRET_SEEDS):
            status, message = exercises.verdict(name, answer, seed)
            assert status == "failed" and message.endswith(says), (name, seed, message)


def test_a_disabled_scaler_of_either_class_passes_as_the_text_says():
    """A disabled scaler skips no step on any rank, so its class does not matter: FSDP1's usual
    ``ShardedGradScaler(enabled=fp16)`` passes, and so does a plain one there."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    def sharded_when_disabled(strategy, amp_dtype, device):
        device = torch.device(device).type
        if amp_dtype != torch.float16:
            return ShardedGradScaler(device=device, enabled=False)
        return exercises.solution(SCALER_FOR)(strategy, amp_dtype, device)

    def plain_when_disabled(strategy, amp_dtype, device):
        if amp_dtype != torch.float16:
            return torch.amp.GradScaler(torch.device(device).type, enabled=False)
        return exercises.solution(SCALER_FOR)(strategy, amp_dtype, device)

    for answer in (sharded_when_disabled, plain_when_disabled):
        for seed in (0, 2):
            assert exercises.verdict(SCALER_FOR, answer, seed)[0] == "passed", answer


def test_a_disabled_scaler_given_the_torch_device_passes():
    """A disabled scaler does the same whatever device it was given (scale() returns the loss,
    step() calls the optimizer's), so only an enabled one is held to the name (a test learner
    was told GradScaler compares its device with names, which no disabled scaler does)."""

    def scaler_for(strategy, amp_dtype, device):
        if amp_dtype == torch.float16:
            return exercises.solution(SCALER_FOR)(strategy, amp_dtype, device)
        return torch.amp.GradScaler(torch.device(device), enabled=False)

    def fsdp_precision(amp_dtype, device):
        policy, scaler = solutions.fsdp_precision(amp_dtype, device)
        if amp_dtype == torch.float16:
            return policy, scaler
        return policy, torch.amp.GradScaler(torch.device(device), enabled=False)

    for name, answer in [(SCALER_FOR, scaler_for), (NAME, fsdp_precision)]:
        for seed in (0, 1, 2, *conftest.SECRET_SEEDS):
            assert exercises.verdict(name, answer, seed) == ("passed", ""), (name, seed)


def _sharded_only_on(device_type: str, strategies: tuple[str, ...]):
    """The right scaler's class chosen only on one kind of device (a test learner's)."""
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    def scaler_for(strategy, amp_dtype, device):
        kind = torch.device(device).type
        sharded = strategy in strategies and kind == device_type
        return (ShardedGradScaler if sharded else torch.amp.GradScaler)(
            kind, enabled=amp_dtype == torch.float16
        )

    return scaler_for


@pytest.mark.skipif(torch.cuda.is_available(), reason="where CUDA works its scalers stay enabled")
def test_the_cuda_cases_compare_the_scalers_class_on_a_machine_without_a_gpu():
    """There the reference's CUDA scaler disables itself too; fp16's class still counts (a class
    chosen by the device passed every seed of both exercises)."""
    says = r"\('fsdp1', torch.float16, device\(type='cuda'\)\): the scaler is a torch.amp"
    with pytest.raises(ExerciseFailed, match=says):
        exercises.check(SCALER_FOR, _sharded_only_on("cpu", ("fsdp1",)))

    def fsdp2_sharded_on_cuda(amp_dtype, device):
        policy = solutions.fsdp_precision(amp_dtype, device)[0]
        return policy, _sharded_only_on("cuda", ("fsdp2",))("fsdp2", amp_dtype, device)

    says = r"for fp16 \(disabled here only because this machine has no GPU\)"
    with pytest.raises(ExerciseFailed, match=says):
        exercises.check(NAME, fsdp2_sharded_on_cuda)
