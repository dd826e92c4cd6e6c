"""The learner's workspace (``make course`` opens JupyterLab on it): a git-ignored copy of the
lessons that a Run All, its saved outputs and its quiz answers leave the checkout clean beside,
that never overwrites a learner's file, and that gives one lesson back fresh on request."""

import datetime
import subprocess

import nbformat
import pytest
from conftest import clone_checkout
from nbclient import NotebookClient

from amp_course.paths import lesson_notebooks
from amp_course.tooling import workspace
from amp_course.tooling.runs.kernels import AsyncIpcKernelManager


@pytest.fixture
def checkout(tmp_path):
    return clone_checkout(tmp_path)


def _status(clone) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout


def test_run_all_in_the_workspace_leaves_the_checkout_clean(checkout):
    copied, changed = workspace.prepare(checkout)
    lessons = lesson_notebooks(checkout)
    assert [p.name for p in copied] == [p.name for p in lessons] and not changed
    lab = checkout / "workspace" / "labs_more_failures.ipynb"
    nb = nbformat.read(lab, as_version=4)
    # Run All as JupyterLab does it, in the notebook's folder, then save: outputs, answers file.
    NotebookClient(
        nb,
        timeout=120,
        resources={"metadata": {"path": str(lab.parent)}},
        kernel_manager_class=AsyncIpcKernelManager,  # no TCP port to race for
    ).execute()
    nbformat.write(nb, lab)
    assert any(cell.get("outputs") for cell in nb.cells)
    assert (lab.parent / "labs_more_failures.answers.json").exists()
    assert _status(checkout) == "", _status(checkout)


def test_the_workspace_never_overwrites_and_says_what_the_course_changed(checkout):
    workspace.prepare(checkout)
    mine = checkout / "workspace" / "00_scenario.ipynb"
    mine.write_text(mine.read_text() + " ")  # the learner's edits
    kept = mine.read_bytes()
    (checkout / "workspace" / "01_number_formats.ipynb").unlink()  # a lesson the learner lacks
    shipped = checkout / "notebooks" / "00_scenario.ipynb"
    shipped.write_text(shipped.read_text() + "\n")  # a git pull changed the lesson
    copied, changed = workspace.prepare(checkout)
    assert [p.name for p in copied] == ["01_number_formats.ipynb"]
    assert changed == ["00_scenario"] and mine.read_bytes() == kept


def test_fresh_gives_one_lesson_back_and_keeps_the_learners_copy(checkout):
    workspace.prepare(checkout)
    mine = checkout / "workspace" / "03_grad_scaler.ipynb"
    mine.write_text("my work")
    at = datetime.datetime(2026, 12, 2, 10, 30, 0)
    target, kept = workspace.fresh("03", checkout, now=at)
    assert (
        target == mine and target.read_bytes() == (checkout / "notebooks" / mine.name).read_bytes()
    )
    assert kept == checkout / "workspace" / "old" / "03_grad_scaler-20261202-103000.ipynb"
    assert kept.read_text() == "my work"
    with pytest.raises(FileExistsError):  # the same second again: nothing is lost
        workspace.fresh("03_grad_scaler.ipynb", checkout, now=at)
    assert kept.read_text() == "my work" and mine.exists()
    assert _status(checkout) == ""


@pytest.mark.parametrize(
    ("name", "why"), [("1", "matches several"), ("99", "is no lesson"), ("", "is no lesson")]
)
def test_a_lesson_name_that_names_no_one_lesson_lists_them(name, why):
    with pytest.raises(ValueError, match=f"{why}.*00_scenario"):
        workspace.find_lesson(name)


def test_a_root_that_is_no_course_is_refused_and_left_as_it_was(tmp_path, capsys):
    """`--root` naming a folder without the course's lessons made a workspace/ there (inside the
    tracked notebooks/ folder too) and said it had done so; a missing folder or a file ended in a
    traceback, and so did a file named workspace. Each is one line, and nothing is written."""
    (tmp_path / "not-a-course").mkdir()
    (tmp_path / "a-file").write_text("x")
    for root in ("not-a-course", "absent", "a-file"):
        assert workspace.main(["--root", str(tmp_path / root)]) == 2
        assert "is not the course's checkout" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "not-a-course"]
    assert not any((tmp_path / "not-a-course").iterdir())


def test_a_file_where_the_workspace_goes_is_one_line(checkout, capsys):
    (checkout / "workspace").write_text("notes")
    assert workspace.main(["--root", str(checkout)]) == 2
    assert "workspace is a file" in capsys.readouterr().out
    assert (checkout / "workspace").read_text() == "notes"
