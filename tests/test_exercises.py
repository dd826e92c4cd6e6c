import nbformat
import pytest

from amp_course import exercises


@pytest.fixture
def toy_exercise():
    def double(x):
        return 2 * x

    @exercises.exercise("toy.double", solution=double)
    def check_double(fn):
        for x in (0, 1, -3):
            if fn(x) != 2 * x:
                raise exercises.ExerciseFailed(f"double({x}) returned {fn(x)}, expected {2 * x}.")

    yield "toy.double"
    exercises._REGISTRY.pop("toy.double")


def test_check_accepts_solution_and_reports(toy_exercise, capsys):
    assert exercises.check(toy_exercise, exercises.solution(toy_exercise))
    assert "✓ toy.double" in capsys.readouterr().out


def test_check_rejects_wrong_answer_in_plain_words(toy_exercise, capsys):
    with pytest.raises(exercises.ExerciseFailed, match=r"double\(1\) returned 1, expected 2"):
        exercises.check(toy_exercise, lambda x: x)
    assert "✗" in capsys.readouterr().out


def test_crashing_and_unfinished_answers_fail_clearly(toy_exercise):
    with pytest.raises(exercises.ExerciseFailed, match="raised ZeroDivisionError"):
        exercises.check(toy_exercise, lambda x: 1 / 0)
    with pytest.raises(exercises.ExerciseFailed, match="NotImplementedError"):
        exercises.check(toy_exercise, lambda x: (_ for _ in ()).throw(NotImplementedError()))
    with pytest.raises(exercises.ExerciseFailed, match="fill in"):
        exercises.check(toy_exercise, None)


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
