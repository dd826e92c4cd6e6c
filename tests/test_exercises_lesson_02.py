import pytest
import torch

from amp_course import exercises
from amp_course.exercises import lesson_02


def test_solution_passes_and_matches_torch():
    assert exercises.check("02.predict_dtypes", exercises.solution("02.predict_dtypes"))
    assert lesson_02.observed_dtypes() == lesson_02.PREDICTIONS


def cuda_thinking():
    # Softmax and cat guessed from the CUDA lists: fp32.
    return {**lesson_02.PREDICTIONS, "torch.softmax(a @ b, dim=-1)": torch.float32}


@pytest.mark.parametrize(
    "wrong",
    [
        {k: torch.bfloat16 for k in lesson_02.EXPRESSIONS},
        {k: torch.float32 for k in lesson_02.EXPRESSIONS},
        cuda_thinking(),
        {"a @ b": torch.bfloat16},
        [torch.bfloat16],
    ],
)
def test_wrong_answers_fail(wrong):
    with pytest.raises(exercises.ExerciseFailed):
        exercises.check("02.predict_dtypes", wrong)
