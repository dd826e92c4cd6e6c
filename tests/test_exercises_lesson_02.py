import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from amp_course import exercises
from amp_course.exercises import lesson_02
from amp_course.exercises.solutions.lesson_02 import CUDA_PREDICTIONS, PREDICTIONS

CPU, CUDA = "02.predict_dtypes", "02.predict_cuda_dtypes"


def test_reference_matches_torchs_cpu_autocast():
    """What torch gives for each CPU expression under bf16 autocast is the reference's answer."""
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        observed = {text: fn(a, b).dtype for text, fn in lesson_02.EXPRESSIONS.items()}
    assert observed == PREDICTIONS


def cuda_observed_dtypes() -> dict[str, torch.dtype]:
    """What CUDA fp16 autocast gives for each expression: fake CUDA tensors, no GPU needed.

    Fake tensors carry shapes and dtypes through the same dispatcher, CUDA autocast kernels
    included; torch.autocast refuses "cuda" without a GPU, so autocast is switched on below it.
    """
    fake = FakeTensorMode()
    with fake:
        a, b = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
        q = k = v = torch.randn(1, 2, 4, 8, device="cuda")
    before = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    torch.set_autocast_enabled("cuda", True)
    torch.set_autocast_dtype("cuda", torch.float16)
    try:
        with fake:
            return {t: fn(a, b, q, k, v).dtype for t, fn in lesson_02.CUDA_EXPRESSIONS.items()}
    finally:
        torch.set_autocast_enabled("cuda", before[0])
        torch.set_autocast_dtype("cuda", before[1])


def test_cuda_reference_matches_torchs_cuda_autocast():
    assert cuda_observed_dtypes() == CUDA_PREDICTIONS


@pytest.mark.gpu
def test_cuda_solution_matches_a_real_gpu():
    a, b = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
    q = k = v = torch.randn(1, 2, 4, 8, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        got = {t: fn(a, b, q, k, v).dtype for t, fn in lesson_02.CUDA_EXPRESSIONS.items()}
    assert got == CUDA_PREDICTIONS


def test_the_lesson_never_runs_the_expressions_it_asks_about():
    """A transfer: none of the exercise's ops is one the lesson traced or ran on the CPU."""
    import nbformat
    from conftest import ROOT

    notebook = nbformat.read(ROOT / "notebooks" / "02_autocast.ipynb", as_version=4)
    code = "\n".join(
        c.source
        for c in notebook.cells
        if c.cell_type == "code" and "exercise" not in c.metadata.get("tags", [])
    )
    ops = ("bmm", "conv1d", "cumsum", "prod", "l1_loss", "stack", "group_norm", "exp", "logsumexp")
    for op in ops:
        assert not re.search(rf"\b{op}\(", code), op
    # Nor does its text name CUDA's ops that the CUDA exercise asks about beside the matmuls.
    text = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    for op in ("logsumexp", "group_norm", "exp"):
        assert not re.search(rf"(?<![-\w]){op}\b", text), op  # not log-sum-exp
    assert "linear(a.double()" not in code and "b.half()" not in code


def cuda_thinking():
    # cumsum read from CUDA's lists: fp32.
    return {**PREDICTIONS, "torch.cumsum(a @ b, dim=0)": torch.float32}


def every_float_is_cast():
    # autocast taken to cast float64 inputs of a listed op too.
    return {**PREDICTIONS, "F.linear(a.double(), b.double())": torch.bfloat16}


def fp16_input_kept():
    # A listed op taken to leave an fp16 input alone.
    return {**PREDICTIONS, "a @ b.half()": torch.float16}


@pytest.mark.parametrize(
    "wrong",
    [
        {k: torch.bfloat16 for k in lesson_02.EXPRESSIONS},
        {k: torch.float32 for k in lesson_02.EXPRESSIONS},
        cuda_thinking(),
        every_float_is_cast(),
        fp16_input_kept(),
        {"torch.bmm(a[None], b[None])": torch.bfloat16},
        [torch.bfloat16],
    ],
)
def test_wrong_answers_fail(wrong):
    with pytest.raises(exercises.ExerciseFailed):
        exercises.check(CPU, wrong)


@pytest.mark.parametrize(
    "wrong, named",
    [
        (cuda_thinking(), "torch.cumsum(a @ b, dim=0) (find cumsum on the CPU's lists)."),
        (
            every_float_is_cast(),
            "F.linear(a.double(), b.double()) (linear is on the lower-precision",
        ),
        (fp16_input_kept(), "a @ b.half() (matmul is on the lower-precision list"),
    ],
)
def test_messages_name_the_wrong_predictions_but_not_the_answers(wrong, named):
    with pytest.raises(exercises.ExerciseFailed) as failure:
        exercises.check(CPU, wrong)
    message = str(failure.value)
    assert f"1 of 8 wrong under CPU autocast: {named}" in message
    assert "torch.bfloat16" not in message and "torch.float" not in message  # no answers


def test_a_prediction_that_is_no_dtype_is_named_as_such():
    names = {**PREDICTIONS, "torch.prod(a @ b)": "float32", "a @ b.half()": torch.float32.itemsize}
    says = (
        "2 of 8 predictions are not torch dtypes: torch.prod(a @ b) is 'float32' (a str); "
        "a @ b.half() is 4 (an int). The reference's are torch dtypes (torch.<name>)."
    )
    with pytest.raises(exercises.ExerciseFailed, match=re.escape(says)):
        exercises.check(CPU, names)
    with pytest.raises(
        exercises.ExerciseFailed,
        match=r"1 of 8 predictions are not torch dtypes: a @ b is 'float16' \(a str\)\.",
    ):
        exercises.check("02.predict_cuda_dtypes", {**CUDA_PREDICTIONS, "a @ b": "float16"})


def test_a_missing_prediction_is_named():
    with pytest.raises(exercises.ExerciseFailed, match="no prediction yet for: F.conv1d"):
        exercises.check(CPU, {"torch.bmm(a[None], b[None])": torch.bfloat16})


def test_keys_that_are_not_the_expressions_are_named():
    """Keys retyped without their spaces are no predictions: the message names them, and does not
    say the learner has not started."""
    retyped = {key.replace(" ", ""): dtype for key, dtype in PREDICTIONS.items()}
    with pytest.raises(exercises.ExerciseFailed) as failure:
        exercises.check(CPU, retyped)
    message = str(failure.value)
    assert message.startswith("02.predict_dtypes: no prediction for: torch.bmm(a[None], b[None])")
    assert (
        "'torch.cumsum(a@b,dim=0)'" in message and "not among the exercise's expressions" in message
    )
    typo = {**PREDICTIONS, "torch.prod(a@b)": PREDICTIONS["torch.prod(a @ b)"]}
    del typo["torch.prod(a @ b)"]
    with pytest.raises(exercises.ExerciseFailed) as failure:
        exercises.check(CPU, typo)
    assert str(failure.value) == (
        "02.predict_dtypes: no prediction for: torch.prod(a @ b). The dict's keys "
        "'torch.prod(a@b)' are not among the exercise's expressions; each key is an expression "
        "exactly as the exercise cell writes it."
    )


def test_a_class_given_for_a_dtype_is_named_as_a_class():
    numpy = pytest.importorskip("numpy")
    with pytest.raises(exercises.ExerciseFailed) as failure:
        exercises.check(CPU, {**PREDICTIONS, "a @ b.half()": numpy.float32})
    assert "a @ b.half() is the class numpy.float32." in str(failure.value)


def cpu_thinking_on_cuda():
    """The CPU's lists applied to CUDA: logsumexp, group_norm and exp follow their input."""
    return {
        **CUDA_PREDICTIONS,
        "torch.logsumexp(a @ b, dim=0)": torch.float16,
        "F.group_norm(a @ b, 2)": torch.float16,
        "torch.exp(a @ b)": torch.float16,
    }


@pytest.mark.parametrize(
    "wrong, named",
    [
        (cpu_thinking_on_cuda(), ["torch.logsumexp", "F.group_norm", "torch.exp"]),
        # Trusting the documentation page: einsum unlisted, so fp32 from fp32 inputs.
        ({**CUDA_PREDICTIONS, "torch.einsum('ij,jk->ik', a, b)": torch.float32}, ["einsum"]),
        # The last matmul taken to keep its fp32 addend's dtype.
        (
            {
                **CUDA_PREDICTIONS,
                "torch.baddbmm(a[None], q[0], k[0].transpose(1, 2))": torch.float32,
            },
            ["torch.baddbmm"],
        ),
        ({**CUDA_PREDICTIONS, "torch.cat([a @ b, a])": torch.float16}, ["torch.cat"]),
    ],
)
def test_cuda_mistakes_are_named_with_where_to_look(wrong, named):
    with pytest.raises(exercises.ExerciseFailed) as failure:
        exercises.check(CUDA, wrong)
    message = str(failure.value)
    assert f"{len(named)} of 8 wrong under CUDA autocast" in message
    assert all(text in message for text in named) and "torch.float" not in message


def test_the_untouched_blank_is_not_done_yet(capsys):
    for name, expressions in ((CPU, lesson_02.EXPRESSIONS), (CUDA, lesson_02.CUDA_EXPRESSIONS)):
        blank = dict.fromkeys(expressions)  # every prediction still None
        assert exercises.check(name, blank) == exercises.Verdict("not done")
        assert "Not done yet" in capsys.readouterr().out
