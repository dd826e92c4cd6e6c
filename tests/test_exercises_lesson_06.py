import pytest
import torch

from amp_course import device, exercises
from amp_course.exercises import ExerciseFailed, lesson_06

NAME = "06.choose_dtype"


def test_solution_passes():
    assert exercises.check(NAME, exercises.solution(NAME))


@pytest.mark.parametrize("capability", [(6, 0), (7, 0), (7, 5), (8, 0), (8, 9), (9, 0), (10, 0)])
def test_solution_agrees_with_pick_autocast_dtype(monkeypatch, capability):
    """The exercise's answer is the one the course's own device rule gives for that GPU."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _device=None: capability)
    assert exercises.solution(NAME)(capability) == device.pick_autocast_dtype("cuda")


@pytest.mark.parametrize("case", lesson_06.DEVICES, ids=[d[0] for d in lesson_06.DEVICES])
def test_every_case_follows_the_rule_of_ac_device(case):
    """One rule: the exercise's expected answers are what ac.device.recommended_dtype says."""
    _, capability, flags, wanted, _ = case
    assert device.recommended_dtype(capability, flags) == wanted


def test_this_cpu_gets_the_rule_the_lessons_state(monkeypatch):
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset({"avx2"}))
    monkeypatch.setattr(device.platform, "system", lambda: "Linux")
    assert device.recommended_dtype(None) == torch.float32
    assert exercises.solution(NAME)(None, device.cpu_flags()) == torch.float32
    monkeypatch.setattr(device, "cpu_flags", lambda: lesson_06.AMX_CPU)
    assert device.recommended_dtype(None) == torch.bfloat16


def bf16_on_every_cpu(cc, flags=frozenset()):
    return torch.bfloat16 if cc is None or cc >= (8, 0) else torch.float16


def avx512_means_bf16(cc, flags=frozenset()):
    if cc is None:
        return torch.bfloat16 if any(f.startswith("avx512") for f in flags) else torch.float32
    return torch.bfloat16 if cc >= (8, 0) else torch.float16


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda cc, flags: torch.bfloat16, "T4|V100"),  # bf16 everywhere
        (lambda cc, flags: torch.float16, "A100"),  # fp16 everywhere
        (lambda cc, flags: torch.float16 if cc is None or cc < (8, 0) else torch.bfloat16, "CPU"),
        (lambda cc, flags: torch.bfloat16 if cc is None or cc >= (7, 5) else torch.float16, "T4"),
        (bf16_on_every_cpu, "AVX2 CPU.*slower than fp32"),
        (avx512_means_bf16, "Skylake-SP.*no bf16 arithmetic"),
        (lambda cc, flags: "bf16", "torch dtype"),
    ],
)
def test_wrong_answers_fail(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)
