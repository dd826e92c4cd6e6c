"""The exercise machinery: check cells, not-done answers, plain data, and every exercise's shape."""

import importlib
import math
import re
import subprocess
import sys
import types

import nbformat
import numpy
import pytest
import torch
from conftest import SECRET_SEEDS

from amp_course import exercises
from amp_course.exercises import ExerciseFailed, answers, calling, plain


def _observe_double(fn, seed):
    xs = (0, 1, -3) if seed == 0 else (seed % 97, -(seed % 13), 7)
    results = []
    for x in xs:
        got, error = exercises.call_answer(fn, x)
        results.append({"x": x, "got": got if isinstance(got, (int, float)) else None, "e": error})
    return results


def _compare_double(mine, reference, seed):
    for got, want in zip(mine, reference, strict=True):
        exercises.fail_on_error(got["e"], f"double({want['x']})")
        if got["got"] != want["got"]:
            raise ExerciseFailed(
                f"double({want['x']}) returned {got['got']}, expected {want['got']}."
            )


@pytest.fixture
def toy_exercise(monkeypatch):
    exercises.register("toy.double", _observe_double, _compare_double, points=2)
    # The reference of an exercise registered here lives in solutions/<this module's name>.
    hidden = types.ModuleType("toy_solutions")
    hidden.SOLUTIONS = {"toy.double": lambda x: 2 * x}
    monkeypatch.setitem(sys.modules, f"{exercises.SOLUTIONS_PACKAGE}.{__name__}", hidden)
    exercises._reference_text.cache_clear()
    yield "toy.double"
    exercises._REGISTRY.pop("toy.double")
    exercises._LAST_STATUS.pop("toy.double", None)
    exercises._reference_text.cache_clear()


def test_check_accepts_solution_and_reports(toy_exercise, capsys):
    assert exercises.check(toy_exercise, exercises.solution(toy_exercise))
    assert "✓ toy.double: correct (2 points)" in capsys.readouterr().out


def test_check_accepts_a_correct_answer_written_differently(toy_exercise):
    assert exercises.check(toy_exercise, lambda x: x + x)


def test_a_labs_check_cell_also_runs_a_drawn_case_and_says_whose_inputs_failed(toy_exercise):
    """A lab's seed 0 is the case its notebook shows: an answer fitted to that case passes a
    lesson's check cell (seed 0 alone) but not a lab's, whose message says the inputs were the
    check's own."""
    fitted = {0: 0, 1: 2, -3: -6}  # right on seed 0's inputs (0, 1, -3) alone

    def answer(x):
        return fitted.get(x, x)

    assert exercises.check(toy_exercise, answer)
    lab = "labs.toy_double"
    exercises.register(lab, _observe_double, _compare_double)
    sys.modules[f"{exercises.SOLUTIONS_PACKAGE}.{__name__}"].SOLUTIONS[lab] = lambda x: 2 * x
    try:
        assert exercises.check_seeds(lab) == (0, exercises.LAB_DRAWN_SEED)
        assert exercises.verdict(lab, answer, 0) == ("passed", "")
        with pytest.raises(ExerciseFailed) as failure:
            exercises.check(lab, answer)
        assert str(failure.value).startswith(
            f"{lab}: on the check's own inputs, not the notebook's: double(-1) returned -1"
        ), failure.value
        assert exercises.check(lab, lambda x: x + x)  # a right answer passes both cases
        with pytest.raises(ExerciseFailed) as failure:  # wrong on the notebook's case: no prefix
            exercises.check(lab, lambda x: x)
        assert str(failure.value).startswith(f"{lab}: double(1) returned 1"), failure.value
    finally:
        exercises._REGISTRY.pop(lab)
        exercises._LAST_STATUS.pop(lab, None)
        exercises._reference_text.cache_clear()


def test_check_rejects_wrong_answer_in_plain_words(toy_exercise):
    with pytest.raises(ExerciseFailed, match=r"double\(1\) returned 1, expected 2") as failure:
        exercises.check(toy_exercise, lambda x: x)
    # IPython shows the verdict and how to go on, not a traceback through the checking code.
    shown = failure.value._render_traceback_()
    assert shown[0] == f"✗ {failure.value}" and "Traceback" not in "".join(shown)
    assert "Run All stops at this failed check" in " ".join(shown)


def test_a_failed_check_wraps_at_words():
    words = ["fp16"] * 30 + ["a_very_long_identifier_" * 5]
    shown = ExerciseFailed(" ".join(words))._render_traceback_()
    verdict = shown[: shown.index("")]
    assert len(verdict) > 1 and all(line.startswith("  ") for line in verdict[1:])
    # Every line fits the notebook's box (so the browser breaks none of them mid-word), unless a
    # single word is longer; every word arrives whole.
    assert all(len(line) <= answers.WRAP_COLUMNS or " " not in line.strip() for line in shown)
    assert " ".join(" ".join(verdict).split()) == "✗ " + " ".join(words)


def test_a_verdict_shows_no_out_prompt(toy_exercise):
    from IPython.core.formatters import DisplayFormatter

    passed = exercises.check(toy_exercise, lambda x: 2 * x)
    not_done = exercises.check(toy_exercise, None)
    assert passed and passed == True and not not_done and not_done == False  # noqa: E712
    for verdict in (passed, not_done):
        assert DisplayFormatter().format(verdict) == ({}, {})  # nothing displayed, no Out[n]


def test_crashing_answers_fail_clearly(toy_exercise):
    with pytest.raises(ExerciseFailed, match="raised ZeroDivisionError"):
        exercises.check(toy_exercise, lambda x: 1 / 0)


def test_unfinished_answers_say_not_done_and_let_the_lesson_go_on(toy_exercise, capsys):
    def blank(x):
        raise NotImplementedError

    assert exercises.check(toy_exercise, blank) == exercises.Verdict("not done")
    assert exercises.check(toy_exercise, None) == exercises.Verdict("not done")
    out = capsys.readouterr().out
    assert out.count("Not done yet") == 2 and "scores 0" in out and "✗" not in out
    assert exercises.verdict(toy_exercise, blank, SECRET_SEEDS[0])[0] == "not done"


def test_answer_or_reference_stands_in_only_while_not_done(toy_exercise, capsys, monkeypatch):
    def blank(x):
        raise NotImplementedError

    exercises.check(toy_exercise, blank)
    stand_in = exercises.answer_or_reference(toy_exercise, blank)
    assert stand_in(21) == 42 and "use the course's reference" in capsys.readouterr().out
    monkeypatch.setenv(exercises.GRADING_ENV, "1")  # never while grading
    assert exercises.answer_or_reference(toy_exercise, blank) is blank
    monkeypatch.delenv(exercises.GRADING_ENV)
    mine = lambda x: x + x  # noqa: E731
    exercises.check(toy_exercise, mine)
    assert exercises.answer_or_reference(toy_exercise, mine) is mine


def test_hard_coded_seed_zero_answers_fail_at_the_graders_seed(toy_exercise):
    table = {0: 0, 1: 2, -3: -6}
    assert exercises.verdict(toy_exercise, table.get, 0)[0] == "passed"
    status, message = exercises.verdict(toy_exercise, table.get, SECRET_SEEDS[0])
    assert status == "failed" and "expected" in message


def test_reference_is_refused_while_grading(toy_exercise, monkeypatch, capsys):
    monkeypatch.setenv(exercises.GRADING_ENV, "1")
    with pytest.raises(exercises.SolutionUnavailable, match="not available while grading"):
        exercises.solution(toy_exercise)
    # Without the reference a check cell cannot decide; it says who does and passes nobody.
    assert exercises.check(toy_exercise, lambda x: 2 * x) is None
    assert "checked by the grader" in capsys.readouterr().out


def test_unknown_exercise_lists_known():
    with pytest.raises(KeyError, match="Unknown exercise"):
        exercises.get("nope.nope")


def test_fill_solutions_replaces_tagged_blank(toy_exercise):
    nb = nbformat.v4.new_notebook()
    blank = nbformat.v4.new_code_cell("def double(x):\n    raise NotImplementedError")
    blank.metadata["tags"] = ["exercise"]
    blank.metadata["exercise"] = {"name": toy_exercise, "symbol": "double"}
    other = nbformat.v4.new_code_cell("print(1)")
    exercises.fill_solutions(nb.cells.append(blank) or nb.cells.append(other) or nb)
    assert "double = ac.exercises.solution('toy.double')" in nb.cells[0].source
    assert nb.cells[1].source == "print(1)"


def test_fill_solutions_needs_metadata():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("raise NotImplementedError")
    cell.metadata["tags"] = ["exercise"]
    nb.cells.append(cell)
    with pytest.raises(ValueError, match="exercise.name"):
        exercises.fill_solutions(nb)


# ---- plain data ---------------------------------------------------------------------------------
def test_plain_data_round_trip_keeps_values_and_tensors():
    value = {
        "n": [1, 2.5, -0.0, math.inf, True, None, "text", (3, 4)],
        "t": torch.arange(6, dtype=torch.float16).reshape(2, 3),
        "b": torch.tensor([True, False]),
        "empty": torch.empty(0, 4),
    }
    back = plain.roundtrip(value)
    assert back["n"] == [1, 2.5, -0.0, math.inf, True, None, "text", [3, 4]]
    assert math.isnan(plain.roundtrip(math.nan))
    assert back["t"].dtype == torch.float16 and torch.equal(back["t"], value["t"])
    assert torch.equal(back["b"], value["b"]) and back["empty"].shape == (0, 4)


def test_plain_data_sends_expanded_and_strided_tensors():
    # An expanded scale (stride 0 on a size-1 dimension) and a transposed bf16 view.
    scale = torch.tensor(3.0).expand(1)
    view = torch.arange(6.0, dtype=torch.bfloat16).reshape(2, 3).t()
    back = plain.roundtrip({"scale": scale, "view": view})
    assert torch.equal(back["scale"], scale) and torch.equal(back["view"], view)


@pytest.mark.parametrize(
    "value", [object(), {1: "int key"}, torch.zeros(2, dtype=torch.complex64), {"__tensor__": 1}]
)
def test_plain_data_refuses_what_is_not_plain(value):
    with pytest.raises(plain.PlainDataError):
        plain.dumps(value)


@pytest.mark.parametrize(
    "text",
    [
        "NaN",
        '{"__tensor__": {"dtype": "float32", "shape": [4], "data": "AAAA"}}',
        '{"__tensor__": {"dtype": "object", "shape": [], "data": ""}}',
        '{"__tensor__": {"dtype": "float32", "shape": [-1], "data": ""}}',
        '{"__float__": "1e999"}',
        "[" * 50 + "]" * 50,
        "x" * 10,
        b"\x80\x04K\x01.",  # a pickle is never read
    ],
)
def test_plain_data_refuses_malformed_or_hostile_text(text):
    with pytest.raises(plain.PlainDataError):
        plain.loads(text)


# ---- every registered exercise ------------------------------------------------------------------
NAMES = exercises.names()
# References that are the course's own helpers, which the lessons use openly: the MFU formula the
# benchmark uses (ac.flops.mfu), lesson 08's interval (ac.stats.t_interval) and the TF32 lab's
# reading of the flags (ac.recipe.tf32_enabled). The bf16-scaler lab's reference is hidden
# again: the course's scaler is the recipe's (AmpRecipe.scaler), not a make_scaler helper.
PUBLIC_REFERENCES = {"05.mfu", "labs.tf32_api_mix"}


@pytest.mark.parametrize("name", NAMES)
def test_every_exercise_has_observe_compare_and_a_hidden_reference(name):
    item = exercises.get(name)
    assert callable(item.observe) and callable(item.compare)
    module = importlib.import_module(f"{exercises.SOLUTIONS_PACKAGE}.{item.module}")
    assert name in module.SOLUTIONS
    reference = exercises.solution(name)
    if callable(reference) and name not in PUBLIC_REFERENCES:
        where = reference.__module__
        assert where.startswith(exercises.SOLUTIONS_PACKAGE), f"{name}'s reference is in {where}"


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes_at_every_seed_and_inputs_vary_with_it(name):
    """The reference passes at the check cell's seeds (a lab's drawn case too) and at the grader's,
    and each seed's inputs give other results."""
    seeds = (*exercises.check_seeds(name), SECRET_SEEDS[0])
    for seed in seeds:
        assert exercises.verdict(name, exercises.solution(name), seed) == ("passed", ""), seed
    observed = {exercises._reference_text(name, seed) for seed in seeds}
    assert len(observed) == (1 if name.startswith("02.predict") else len(seeds))


@pytest.mark.parametrize("name", NAMES)
def test_untouched_blank_is_not_done(name):
    def blank(*args, **kwargs):
        raise NotImplementedError

    answer = {} if name.startswith("02.predict") else blank
    assert exercises.verdict(name, answer, 0)[0] == "not done"
    assert exercises.verdict(name, answer, SECRET_SEEDS[0])[0] == "not done"


# One exercise for each way a check reads the blank: the learner's function (to_float8's clip
# after the cast), a class (the scaler core), a bug hunt's loop and its checkpoint.
TORCH_LACKS = ["09.to_float8", "03.scaler_core", "labs.accumulation", "labs.resume"]


@pytest.mark.parametrize("name", TORCH_LACKS)
def test_an_op_torch_lacks_fails_with_torchs_reason_not_as_a_blank(name):
    """torch raises NotImplementedError too, for an op a dtype lacks (clamping a float8 tensor on a
    CPU, as an answer that clips after its cast does): the answer failed, and the learner reads
    why, in the notebook and at grading; only the blank's bare raise is "not done"."""
    from amp_course.exercises.probe import observation_payload

    def clips_after_the_cast(*args, **kwargs):
        return torch.zeros(2, dtype=torch.float8_e4m3fn).clamp(-1.0, 1.0)

    status, message = exercises.verdict(name, clips_after_the_cast, 0)
    assert status == "failed" and "not implemented for 'Float8_e4m3fn'" in message, message
    assert observation_payload(name, clips_after_the_cast, SECRET_SEEDS[0])["not_done"] is False


def test_lesson_modules_import_without_the_references():
    """The grading sandbox hides exercises/solutions: every public module must import without it.
    Looking an exercise up imports only the modules its name's prefix points to, and lists no
    folder of references (the grader's guard flags that in a learner's kernel)."""
    code = (
        "import importlib.abc, sys\n"
        "listed = []\n"
        "def audit(event, args):\n"
        "    if event in ('os.listdir', 'os.scandir') and 'solutions' in str(args[0]):\n"
        "        listed.append(str(args[0]))\n"
        "sys.addaudithook(audit)\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.startswith('amp_course.exercises.solutions'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from amp_course import exercises\n"
        "exercises.get('labs.resume'), exercises.get('05.mfu')\n"
        "print(' '.join(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.count('.') == 2\n"
        "    and m.startswith(('amp_course.exercises.lesson_', 'amp_course.exercises.labs_')))))\n"
        "print(len(exercises.names()))\n"
        "print(listed)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    looked_up, count, listed = result.stdout.splitlines()
    assert looked_up.split() == ["labs_beyond_autocast", "labs_bug_hunts", "lesson_05"]
    assert int(count) == len(NAMES)
    assert listed == "[]"


@pytest.mark.parametrize(
    "value, number",
    [
        (3, 3.0),
        (2.5, 2.5),
        (numpy.float32(0.5), 0.5),
        (numpy.int64(7), 7.0),
        (torch.tensor(1.5), 1.5),
        (torch.tensor(48), 48.0),  # a count summed in an integer tensor is a number too
        (torch.tensor(2, dtype=torch.int32), 2.0),
        (True, None),
        (numpy.True_, None),
        (torch.tensor(True), None),
        ("3", None),
        (torch.tensor([3.0]), None),  # a vector of one value is not the number
        (torch.tensor(1 + 2j), None),
        (None, None),
    ],
)
def test_one_rule_reads_a_number_in_every_check(value, number):
    """Every check that asks for a number reads answers by one rule: a real number of Python,
    NumPy or a 0-d tensor of a real dtype, never a bool, a string or a vector."""
    assert answers.as_number(value) == number


def test_an_answer_that_never_returns_is_stopped_and_the_call_named(monkeypatch):
    """A loop searching for a GPU count that no count satisfies (lesson 00's case whose fixed state
    alone overflows the GPU) left the check cell busy for ever, with no word."""
    from amp_course.exercises.probe import observation_payload

    monkeypatch.setattr(calling, "ANSWER_LIMIT_S", 0.5)

    def gpus_for(params, act_bytes, batch, gib, amp):
        usable, count = 0.9 * gib * 2**30, 1
        while params * (18 if amp else 16) + math.ceil(batch / count) * act_bytes > usable:
            count += 1
        return count

    status, message = exercises.verdict("00.gpus_for", gpus_for, 0)
    assert status == "failed", message
    assert message.startswith("gpus_for(5000000000, 10485760, 1024, 80, True) ran for 0.5 s")
    with pytest.raises(ExerciseFailed, match="without returning and was stopped"):
        exercises.check("00.gpus_for", gpus_for)
    payload = observation_payload("00.gpus_for", gpus_for, SECRET_SEEDS[0])
    assert payload["not_done"] is False
    assert payload["error"].startswith("gpus_for(") and payload["error"].endswith(
        "ran for 0.5 s and was stopped"
    )


# Observations a kernel could hand the grader after replacing a check's observe (a student's cell
# can rewrite anything in its own kernel): each compare reads the cases and PyTorch's side from
# the reference's observation, so an empty or self-consistent forgery fails.
FORGED = {
    "05.timer": {"runs": []},
    "03.scaler_core": {"updates": [], "unscaled": []},
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_forged_observation_that_skips_the_cases_fails(name):
    item = exercises.get(name)
    reference = exercises.reference_observation(name, 12345)
    with pytest.raises(exercises.ExerciseFailed, match="does not hold the check's"):
        item.compare(FORGED[name], reference, 12345)
    # Its cases with PyTorch's side made to agree with a wrong answer's: still judged by the
    # reference's side.
    if name == "03.scaler_core":
        forged = exercises.reference_observation(name, 12345)
        for run in forged["updates"]:
            run["seen"] = [(1.5, 0, 1.0)] * len(run["seen"])  # scale(1.5) at a scale of 1
            run["torch"] = [(1.0, 0)] * len(run["torch"])
        with pytest.raises(exercises.ExerciseFailed, match="PyTorch's update"):
            item.compare(forged, reference, 12345)


@pytest.mark.parametrize("exit_call", [lambda: sys.exit(1), lambda: sys.exit()], ids=["1", "none"])
@pytest.mark.parametrize("name", ["labs.accumulation", "10.matmul_intensity", "05.timer"])
def test_an_answer_that_calls_sys_exit_fails_with_a_verdict(name, exit_call):
    """SystemExit is no Exception: it left the check cell with a traceback and no verdict."""

    def leaves(*args, **kwargs):
        exit_call()

    status, message = exercises.verdict(name, leaves, 0)
    assert status == "failed" and re.fullmatch(r"your code raised SystemExit(: 1)?", message)


# What each lab's kit said when the learner's function returned None: the kit's own unpacking
# failed, and the check blamed the learner ("your function raised AttributeError: 'NoneType' ...",
# for setup_context_autocast "the backward through your function ... raised").
RETURNS_NONE = {
    "labs.masked_fill_fp16": "your function returned None; the lab takes the attention's output",
    "labs.fully_masked_rows": "your function returned None; the lab takes the attention's output",
    "labs.rope_bf16": "your function returned None; the lab takes (cos, sin), 2 tensors",
    "labs.checkpoint_autocast": "your function returned None; the lab takes the block's output",
    "labs.thread_autocast": "your function returned None; the lab takes the outputs",
    "labs.setup_context_autocast": "your function returned None; the lab takes the product",
    "labs.resume": "save_checkpoint returned None; lab.load_checkpoint reads a dict",
    "labs.custom_op_autocast": "your function returned None; the lab calls what it returns",
}


@pytest.mark.parametrize("name", RETURNS_NONE)
def test_a_lab_function_that_returns_none_is_told_so_not_that_it_raised(name):
    status, message = exercises.verdict(name, lambda *args: None, 0)
    assert status == "failed" and RETURNS_NONE[name] in message, message
    assert "raised" not in message and "NoneType" not in message, message
