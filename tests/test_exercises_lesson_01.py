import pytest
import torch

from amp_course import exercises
from amp_course.exercises import lesson_01
from amp_course.exercises.solutions.lesson_01 import decompose_bits


def test_solution_passes():
    assert exercises.check("01.bit_fields", exercises.solution("01.bit_fields"))


def test_solution_matches_the_inspector():
    from amp_course import inspector

    for dtype, name in [(torch.float32, "fp32"), (torch.float16, "fp16"), (torch.bfloat16, "bf16")]:
        for value in lesson_01.CASES + lesson_01.cases(12345):
            f = inspector.decompose(value, name)
            assert decompose_bits(value, dtype) == (f.sign, f.exponent, f.mantissa)


def unmasked(value, dtype):
    # Forgets that view() gives a signed integer: negative numbers break.
    e, m = lesson_01.LAYOUTS[dtype]
    view = {32: torch.int32, 16: torch.int16}[1 + e + m]
    bits = torch.tensor(value, dtype=torch.float64).to(dtype).view(view).item()
    return bits >> (e + m), (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)


def fp16_layout_everywhere(value, dtype):
    # Uses fp16's 5/10 split for bf16 too.
    bits = torch.tensor(value, dtype=torch.float64).to(dtype)
    bits = bits.view(torch.int32 if dtype == torch.float32 else torch.int16).item()
    bits &= (1 << (32 if dtype == torch.float32 else 16)) - 1
    e, m = (8, 23) if dtype == torch.float32 else (5, 10)
    return bits >> (e + m), (bits >> m) & ((1 << e) - 1), bits & ((1 << m) - 1)


@pytest.mark.parametrize(
    "wrong", [unmasked, fp16_layout_everywhere, lambda v, d: (0, 0, 0), lambda v, d: 1.0]
)
def test_wrong_answers_fail(wrong):
    with pytest.raises(exercises.ExerciseFailed):
        exercises.check("01.bit_fields", wrong)


def test_wrong_answers_say_what_is_wrong():
    with pytest.raises(exercises.ExerciseFailed, match=r"decompose\(-2.0, torch.float32\).*mask"):
        exercises.check("01.bit_fields", unmasked)
    with pytest.raises(exercises.ExerciseFailed, match="three integers"):
        exercises.check("01.bit_fields", lambda v, d: 1.0)


def test_seed_zero_answers_replayed_fail_at_the_graders_seed():
    table = {(str(v), d): decompose_bits(v, d) for d in lesson_01.LAYOUTS for v in lesson_01.CASES}
    replay = lambda v, d: table.get((str(v), d), (0, 0, 0))  # noqa: E731
    assert exercises.verdict("01.bit_fields", replay, 0)[0] == "passed"
    assert exercises.verdict("01.bit_fields", replay, 12345)[0] == "failed"
