"""Every lesson as it opens, before anything runs: its metadata is what JupyterLab writes for the
course's kernel (so the notebook opens unmodified), and its quiz cell's example names no answer."""

import re

import nbformat
import pytest
import yaml
from conftest import NOTEBOOKS, ROOT
from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelspec import get_kernel_dict

# A literal call in the example would name a choice, and with choices shuffled per learner any
# letter, position or right text names the right answer for some learners.
LITERAL_ANSWER = re.compile(r"""quiz\.answer\(\s*["']""")


def quiz_cell(path):
    return nbformat.read(path, as_version=4).cells[-1]


def without_version(language_info: dict) -> dict:
    return {key: value for key, value in language_info.items() if key != "version"}


def test_metadata_is_what_jupyterlab_writes_for_the_course_kernel():
    # JupyterLab replaces kernelspec and language_info with the kernel's own on opening, and a
    # notebook whose stored values differ opens marked unsaved. The Python version is the one
    # part that differs between machines: the notebooks store one, the same in all.
    kernelspec = {"display_name": get_kernel_dict()["display_name"], "language": "python"}
    versions = set()
    for path in NOTEBOOKS:
        metadata = nbformat.read(path, as_version=4).metadata
        assert metadata["kernelspec"] == {**kernelspec, "name": "python3"}, path.name
        info = metadata["language_info"]
        assert without_version(info) == without_version(IPythonKernel.language_info), path.name
        versions.add(info["version"])
    assert len(versions) == 1, versions


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_quiz_cell_example_names_no_answer(path):
    source = quiz_cell(path).source
    assert f'ac.quiz.show("{path.stem}")' in source
    assert "quiz.answer(ID, CHOICE)" in source and not LITERAL_ANSWER.search(source)
    ids = {
        q["id"]
        for q in yaml.safe_load((ROOT / "quizzes" / f"{path.stem}.yaml").read_text())["questions"]
    }
    named = re.findall(r'e\.g\. "([^"]+)"', source)
    assert named and set(named) <= ids, (named, sorted(ids))  # the example id is a real one


def test_an_example_naming_a_choice_is_caught():
    assert LITERAL_ANSWER.search('# in code: quiz.answer("fp16-max", "b").')
    assert LITERAL_ANSWER.search("quiz.answer( 'why-scale', 2)")
    assert not LITERAL_ANSWER.search("# in code: quiz.answer(ID, CHOICE).")
