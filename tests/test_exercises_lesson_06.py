import pytest
import torch

from amp_course import device, exercises
from amp_course.exercises import ExerciseFailed

NAME = "06.choose_dtype"


def test_solution_passes():
    assert exercises.check(NAME, exercises.solution(NAME))


@pytest.mark.parametrize("capability", [(6, 0), (7, 0), (7, 5), (8, 0), (8, 9), (9, 0), (10, 0)])
def test_solution_agrees_with_pick_autocast_dtype(monkeypatch, capability):
    """The exercise's answer is the one the course's own device rule gives for that GPU."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _device=None: capability)
    assert exercises.solution(NAME)(capability) == device.pick_autocast_dtype("cuda")


def test_solution_agrees_with_pick_autocast_dtype_on_cpu():
    rule = device.pick_autocast_dtype("cpu", warn=False)
    assert exercises.solution(NAME)(None) == rule == torch.bfloat16


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda cc: torch.bfloat16, "T4|V100"),  # bf16 everywhere
        (lambda cc: torch.float16, "A100"),  # fp16 everywhere
        (lambda cc: torch.float16 if cc is None or cc < (8, 0) else torch.bfloat16, "CPU"),
        (lambda cc: torch.bfloat16 if cc is None or cc >= (7, 5) else torch.float16, "T4"),
        (lambda cc: "bf16", "torch dtype"),
    ],
)
def test_wrong_answers_fail(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)
