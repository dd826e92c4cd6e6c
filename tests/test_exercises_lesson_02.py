import pytest
import torch

from amp_course import exercises
from amp_course.exercises import lesson_02
from amp_course.exercises.solutions.lesson_02 import PREDICTIONS, observed_dtypes


def test_solution_passes_and_matches_torch():
    assert exercises.check("02.predict_dtypes", exercises.solution("02.predict_dtypes"))
    assert observed_dtypes() == PREDICTIONS


def cuda_thinking():
    # Softmax and cat guessed from the CUDA lists: fp32.
    return {**PREDICTIONS, "torch.softmax(a @ b, dim=-1)": torch.float32}


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


def test_messages_name_the_wrong_and_missing_predictions(capsys):
    with pytest.raises(
        exercises.ExerciseFailed, match=r"1 of 8 wrong: torch.softmax.*gives torch.bfloat16"
    ):
        exercises.check("02.predict_dtypes", cuda_thinking())
    with pytest.raises(exercises.ExerciseFailed, match="no prediction yet for: F.linear"):
        exercises.check("02.predict_dtypes", {"a @ b": torch.bfloat16})


def test_the_untouched_blank_is_not_done_yet(capsys):
    blank = dict.fromkeys(lesson_02.EXPRESSIONS)  # every prediction still None
    assert exercises.check("02.predict_dtypes", blank) == exercises.Verdict("not done")
    assert "Not done yet" in capsys.readouterr().out
