import pytest
import torch

from amp_course import exercises
from amp_course.exercises import ExerciseFailed

NAME = "06.choose_dtype"


def test_solution_passes():
    assert exercises.check(NAME, exercises.solution(NAME))


def test_solution_agrees_with_the_course_rule():
    choose = exercises.solution(NAME)
    for major, minor in [(6, 0), (7, 0), (7, 5), (8, 0), (8, 9), (9, 0), (10, 0)]:
        assert choose((major, minor)) == (torch.bfloat16 if major >= 8 else torch.float16)


@pytest.mark.parametrize("wrong, message", [
    (lambda cc: torch.bfloat16, "T4|V100"),                      # bf16 everywhere
    (lambda cc: torch.float16, "A100"),                          # fp16 everywhere
    (lambda cc: torch.float16 if cc is None or cc < (8, 0) else torch.bfloat16, "CPU"),
    (lambda cc: torch.bfloat16 if cc is None or cc >= (7, 5) else torch.float16, "T4"),
    (lambda cc: "bf16", "torch dtype"),
])
def test_wrong_answers_fail(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)
