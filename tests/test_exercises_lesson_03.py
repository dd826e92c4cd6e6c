import pytest

from amp_course import exercises
from amp_course.exercises import ExerciseFailed, lesson_03
from amp_course.exercises.solutions.lesson_03 import torch_update, update_scale


def test_solution_passes():
    assert exercises.check("03.update_scale", exercises.solution("03.update_scale"))


@pytest.mark.parametrize("seed", [0, 12345, 987654321])
def test_reference_is_what_a_real_gradscaler_does(seed):
    def gradscaler(scale, good, found, growth_factor, backoff_factor, growth_interval):
        return torch_update(scale, good, found, growth_factor, backoff_factor, growth_interval)

    assert lesson_03.observe(update_scale, seed) == lesson_03.observe(gradscaler, seed)


def never_grows(scale, good, found, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
    return (scale * backoff_factor, 0) if found else (scale, good + 1)


def keeps_counter_on_overflow(
    scale, good, found, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000
):
    if found:
        return scale * backoff_factor, good
    good += 1
    return (scale * growth_factor, 0) if good == growth_interval else (scale, good)


def grows_one_step_early(
    scale, good, found, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000
):
    if found:
        return scale * backoff_factor, 0
    return (scale * growth_factor, 0) if good + 1 >= growth_interval - 1 else (scale, good + 1)


@pytest.mark.parametrize("wrong", [never_grows, keeps_counter_on_overflow, grows_one_step_early])
def test_wrong_rules_fail(wrong):
    with pytest.raises(ExerciseFailed, match="GradScaler gives"):
        exercises.check("03.update_scale", wrong)
