"""How the suite splits over pytest-xdist workers: each lesson's run is a unit of its own, so the
lessons spread over the workers, and a lesson runs once however many workers ask for it."""

import multiprocessing
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import once, pytest_collection_modifyitems


class _Item:
    """What pytest_collection_modifyitems reads of a collected test."""

    def __init__(self, file: str, lesson: str | None = None):
        self.path = Path("tests") / file
        self.keywords = {"executes_lessons": True} if lesson else {}
        self.callspec = SimpleNamespace(params={"path": Path(f"notebooks/{lesson}.ipynb")})
        self.groups = []

    def add_marker(self, mark):
        if mark.name == "xdist_group":
            self.groups.append(mark.args[0])


def test_each_lesson_is_a_unit_of_its_own_and_the_site_waits_in_none():
    smoke_00, all_00, smoke_01 = (
        _Item("test_notebooks.py", "00_scenario"),
        _Item("test_notebooks.py", "00_scenario"),
        _Item("test_notebooks.py", "01_number_formats"),
    )
    site, grading = _Item("test_site.py"), _Item("test_grading.py")
    pytest_collection_modifyitems(None, [smoke_00, all_00, smoke_01, site, grading])
    assert smoke_00.groups == all_00.groups != smoke_01.groups  # one run, shared by its tests
    assert len(smoke_00.groups) == len(smoke_01.groups) == 1
    assert site.groups == []  # never queued behind the lessons it waits for
    assert grading.groups == ["test_grading.py"]  # a module fixture built once


def _ask(verdict, ran, seconds):
    def make():
        with ran.open("a") as log:
            log.write("ran\n")
        time.sleep(seconds)

    assert once(verdict, make) == ""


def test_once_runs_for_the_first_process_that_asks_and_the_others_wait(tmp_path):
    verdict, ran = tmp_path / "lesson.executed", tmp_path / "ran.log"
    fork = multiprocessing.get_context("fork")
    workers = [fork.Process(target=_ask, args=(verdict, ran, 0.5)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]  # each read the verdict: ""
    assert ran.read_text() == "ran\n"


def test_once_gives_a_failure_to_every_process_that_asks(tmp_path):
    verdict = tmp_path / "lesson.executed"

    def fail():
        raise RuntimeError("cell 3 raised")

    with pytest.raises(RuntimeError):
        once(verdict, fail)
    assert once(verdict, lambda: pytest.fail("ran twice")) == "RuntimeError: cell 3 raised"
