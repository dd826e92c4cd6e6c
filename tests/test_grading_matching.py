"""Which file of a submission the grader takes for a lesson (``grading.matching``): the lesson id
a notebook carries decides, else its name as learners' tools write it; of several, the stated
rule. No kernel runs here: what a kernel makes of the file chosen is test_grading's."""

import json
import os

import nbformat
import pytest
from conftest import NOTEBOOKS
from test_grading import CHOOSE, MASTER, _notebook

from amp_course.tooling.grading import matching

BLANKS = {"99_toy": matching.shipped(nbformat.read(MASTER, as_version=4))}


def _found(folder):
    return matching.find(folder, BLANKS)["99_toy"]


def _hand_in(folder, name, nb=None):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb if nb is not None else _notebook(), path)
    return path


def test_every_lesson_carries_its_id_in_its_metadata():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata[matching.METADATA_KEY]["lesson"] == path.stem, path.name
    assert matching.lesson_of_metadata(nbformat.read(MASTER, as_version=4)) == "99_toy"


@pytest.mark.parametrize(
    "name",
    [
        "99_toy.ipynb",
        "Copy of 99_toy.ipynb",  # Colab's "Save a copy in Drive", downloaded
        "99_toy (1).ipynb",  # a browser's second download
        "Copy of 99_toy (2).ipynb",
        "99_toy-Copy1.ipynb",  # JupyterLab's Duplicate
        "99_TOY.IPYNB",
        "week 3/Downloads/99_toy.ipynb",
    ],
)
def test_a_notebook_without_its_id_is_found_by_its_name_as_tools_write_it(tmp_path, name):
    nb = _notebook()
    del nb.metadata[matching.METADATA_KEY]  # its cells pasted into a new notebook
    path = _hand_in(tmp_path, name, nb)
    found = _found(tmp_path)
    assert found.path == path and found.others == ()
    assert found.note(tmp_path) == f"graded `{path.relative_to(tmp_path)}`."


def test_save_as_under_any_name_is_found_by_its_id(tmp_path):
    path = _hand_in(tmp_path, "amp homework final.ipynb")
    assert _found(tmp_path).path == path


def test_the_id_outranks_the_name(tmp_path):
    """A notebook named like the lesson but carrying another lesson's id is that other lesson."""
    nb = _notebook()
    nb.metadata[matching.METADATA_KEY] = {"lesson": "98_other"}
    _hand_in(tmp_path, "99_toy.ipynb", nb)
    assert _found(tmp_path).path is None


def test_a_notebook_of_no_lesson_is_not_taken(tmp_path):
    nb = _notebook()
    del nb.metadata[matching.METADATA_KEY]
    _hand_in(tmp_path, "scratch.ipynb", nb)
    (tmp_path / "99_toy.txt").write_text("not a notebook")
    assert _found(tmp_path).path is None


def test_a_file_that_is_not_json_is_still_taken_by_its_name_and_graded_as_corrupt(tmp_path):
    (tmp_path / "Copy of 99_toy.ipynb").write_text('{"cells": [')
    assert _found(tmp_path).path == tmp_path / "Copy of 99_toy.ipynb"


def test_of_two_copies_the_one_with_more_answers_wins_even_if_older(tmp_path):
    answered = _hand_in(tmp_path, "mine.ipynb")
    blank = _hand_in(tmp_path, "99_toy.ipynb", _notebook(blank=True))
    os.utime(answered, (1_000_000_000, 1_000_000_000))
    found = _found(tmp_path)
    assert found.path == answered and found.others == (blank,)
    assert found.note(tmp_path) == (
        "graded `mine.ipynb`; also handed in for 99_toy: `99_toy.ipynb` "
        f"(of several, graded is {matching.RULE})."
    )


def test_of_two_copies_answered_alike_the_one_saved_last_wins(tmp_path):
    older = _hand_in(tmp_path, "99_toy.ipynb")
    newer = _hand_in(tmp_path, "Copy of 99_toy.ipynb", _notebook(mfu="    return 0.5"))
    os.utime(older, (1_000_000_000, 1_000_000_000))
    assert _found(tmp_path).path == newer
    os.utime(newer, (900_000_000, 900_000_000))
    assert _found(tmp_path).path == older


def test_a_link_is_never_taken_and_is_named(tmp_path):
    elsewhere = _hand_in(tmp_path / "alice", "99_toy.ipynb")
    kim = tmp_path / "kim"
    kim.mkdir()
    (kim / "Copy of 99_toy.ipynb").symlink_to(elsewhere)
    found = _found(kim)
    assert found.path is None and found.links == (kim / "Copy of 99_toy.ipynb",)


def test_every_lessons_grading_note_says_any_name_is_fine():
    for path in NOTEBOOKS:
        notes = [
            c.source
            for c in nbformat.read(path, as_version=4).cells
            if "Questions marked *graded*" in c.source
        ]
        assert len(notes) == 1 and "Hand in this notebook under any name" in notes[0], path.name


def test_a_checkpoint_copy_is_never_taken_even_if_newer(tmp_path):
    """Jupyter's .ipynb_checkpoints holds an older copy of each notebook; a plain `cp -r` of the
    folder makes it the newest file."""
    work = _hand_in(tmp_path, "99_toy.ipynb")
    checkpoint = _hand_in(
        tmp_path, ".ipynb_checkpoints/99_toy-checkpoint.ipynb", _notebook(mfu="    return 0.5")
    )
    os.utime(work, (1_000_000_000, 1_000_000_000))
    _hand_in(tmp_path, ".hidden copy of 99_toy.ipynb")
    found = _found(tmp_path)
    assert found.path == work and found.others == (), checkpoint


def _pasted(nb):
    """``nb``'s cells pasted into a new notebook: no lesson id, no cell metadata."""
    del nb.metadata[matching.METADATA_KEY]
    for cell in nb.cells:
        cell.metadata = {}
    return nb


def test_answers_pasted_into_a_new_notebook_count_as_answered(tmp_path):
    """An answered notebook whose cells lost their metadata outranks a blank copy saved later."""
    pasted = _hand_in(tmp_path, "Copy of 99_toy.ipynb", _pasted(_notebook()))
    blank = _hand_in(tmp_path, "99_toy.ipynb", _notebook(blank=True))
    os.utime(pasted, (1_000_000_000, 1_000_000_000))
    found = _found(tmp_path)
    assert found.path == pasted and found.others == (blank,)


def test_an_answer_in_a_cell_of_the_learners_own_counts(tmp_path):
    """The exercise's cell deleted and the function written in a new cell (no metadata) is as
    answered as the cell itself; a pasted blank is not."""
    nb = _notebook(edit=lambda nb: nb.cells.remove(_exercise_cell(nb, "choose")))
    nb.cells.append(nbformat.v4.new_code_cell(f"def choose(capability, cpu_flags):\n{CHOOSE}"))
    own = _hand_in(tmp_path, "own cell.ipynb", nb)
    one = _hand_in(tmp_path, "99_toy.ipynb", _notebook(edit=_blank_choose))
    os.utime(own, (1_000_000_000, 1_000_000_000))
    assert _found(tmp_path).path == own  # both answered, the older one wins on more answers
    blank = _hand_in(tmp_path, "sub/99_toy.ipynb", _pasted(_notebook(blank=True)))
    assert matching._answered(nbformat.read(blank, 4), BLANKS["99_toy"]) == 0
    assert matching._answered(nbformat.read(one, 4), BLANKS["99_toy"]) == 1
    assert matching._answered(nbformat.read(own, 4), BLANKS["99_toy"]) == 2


def _exercise_cell(nb, symbol):
    return next(c for c in nb.cells if c.metadata.get("exercise", {}).get("symbol") == symbol)


def _blank_choose(nb):
    master = nbformat.read(MASTER, as_version=4)
    _exercise_cell(nb, "choose").source = _exercise_cell(master, "choose").source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_lessons_copy_counts_as_answered_only_where_it_was_answered(path):
    """As shipped, with or without its metadata, a lesson answers nothing (the labs' broken loops
    define the exercises' names too); with every exercise cell changed it answers them all,
    pasted or not."""
    lesson = matching.shipped(nbformat.read(path, as_version=4))
    assert lesson.blanks, path.name
    shipped = nbformat.read(path, as_version=4)
    answered = nbformat.read(path, as_version=4)
    for cell in answered.cells:
        if cell.metadata.get("exercise", {}).get("name") in lesson.blanks:
            cell.source += "\n# answered"
    for nb, count in ((shipped, 0), (answered, len(lesson.blanks))):
        assert matching._answered(nb, lesson) == count, path.name
        assert matching._answered(_pasted(nb), lesson) == count, path.name


@pytest.mark.parametrize(
    "cells",
    [
        5,  # "cells" no list
        [{"cell_type": "code", "metadata": [1], "source": "x"}],  # metadata no dict
        [{"cell_type": "code", "metadata": {}, "source": 5}],  # source no text
        [{"cell_type": "code", "metadata": {"exercise": {"name": []}}, "source": "x"}],
    ],
)
def test_a_notebook_of_any_shape_is_taken_for_its_lesson_and_breaks_no_other(tmp_path, cells):
    """A file of valid JSON in no notebook's shape is its lesson's file (graded as corrupt, for
    that lesson alone): finding the files never fails, so no other lesson's work is lost."""
    odd = tmp_path / "mine.ipynb"
    odd.write_text(json.dumps({"cells": cells, "metadata": {"amp_course": {"lesson": "99_toy"}}}))
    found = _found(tmp_path)
    assert found.path == odd
    answered = _hand_in(tmp_path, "Copy of 99_toy.ipynb")
    os.utime(answered, (1_000_000_000, 1_000_000_000))
    assert _found(tmp_path).path == answered  # the answered copy still outranks it


def test_a_notebook_nested_past_pythons_stack_is_taken_as_corrupt(tmp_path):
    (tmp_path / "99_toy.ipynb").write_text("[" * 1_000_000 + "]" * 1_000_000)
    assert _found(tmp_path).path == tmp_path / "99_toy.ipynb"  # by its name; graded as corrupt
