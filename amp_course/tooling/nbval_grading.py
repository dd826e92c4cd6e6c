"""Grading as a pytest run, for instructors who grade with nbval's command line:

    pytest --nbval-lax -p amp_course.tooling.nbval_grading SUBMISSIONS \\
        --amp-grade "--key KEY --out gradebook.csv"

grades the folder exactly as ``amp-course grade SUBMISSIONS --key KEY --out gradebook.csv``
does, ``--amp-grade`` holding that command's options (``--format canvas``, ``--lessons``,
``--jobs`` and the rest): the same grader (``grading.run.grade_all``) writes the same gradebook,
feedback files and summary. What pytest adds is one test per student, lesson and item, named
``student/lesson/item``, passing when the item earned its points and failing with the
gradebook's message otherwise; pytest exits 1 when any item earned nothing.

The students' notebooks never run the way nbval runs a notebook. nbval would execute each cell
as written, in a kernel with the instructor's permissions, and compare outputs: a submission
could print a pass, edit its outputs, replace the checker or read the key, and nothing would be
sandboxed or scored. So this plugin switches nbval's collection off for the run, and the
notebooks go to the course's grading kernel: rebuilt around the course's check cells, run in the
sandbox, probed with hidden inputs, the verdicts decided in the grader's process
(``tooling.runs.execute`` says why that kernel is not nbval's). Nor does pytest read anything of
the submissions itself: their ``conftest.py`` files are never loaded (``--noconftest`` is forced)
and their folders are not searched for tests.
"""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

import pytest

from .grading.reports import EARNED

OPTION = "--amp-grade"


def pytest_addoption(parser):
    group = parser.getgroup("amp-course", "grading a folder of submissions (amp-course grade)")
    group.addoption(
        OPTION,
        dest="amp_grade",
        default=None,
        metavar="OPTIONS",
        help="grade the folder given to pytest as `amp-course grade FOLDER OPTIONS` does, e.g. "
        '"--key quiz-key.json --out gradebook.csv": one test per student, lesson and item',
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """A submission's conftest.py would run in this process: none is loaded while grading."""
    if getattr(early_config.known_args_namespace, "amp_grade", None) is not None:
        early_config.known_args_namespace.noconftest = True


def _grade_arguments(config, folder: Path):
    """``amp-course grade``'s own parser applied to ``folder`` and ``--amp-grade``'s options."""
    from .instructor_commands import grade_parser

    try:
        return grade_parser().parse_args([str(folder), *shlex.split(config.option.amp_grade)])
    except SystemExit:
        raise pytest.UsageError(f"{OPTION}: not options of `amp-course grade`") from None


def pytest_configure(config):
    if config.option.amp_grade is None:
        return
    nbval = config.pluginmanager.get_plugin("nbval")
    if nbval is not None:  # its collection would run every submitted notebook unsandboxed
        config.pluginmanager.unregister(nbval)
    # pytest_load_initial_conftests turned conftest loading off; pytest keeps that switch on
    # its plugin manager (the option itself is parsed again later): check it took.
    if not getattr(config.pluginmanager, "_noconftest", False):
        raise pytest.UsageError(f"{OPTION}: add --noconftest (a submission's conftest.py runs)")
    config.option.noconftest = True


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path, parent):
    """Each folder named on the command line is a folder of submissions, graded as a whole."""
    config = parent.config
    if config.option.amp_grade is None:
        return None
    named = {Path(arg.split("::")[0]).resolve() for arg in config.args}
    if Path(path).resolve() in named:
        return Submissions.from_parent(parent, path=Path(path))
    return None


def _rows(args) -> list[dict]:
    """The rows the grader wrote: the gradebook (the items beside Canvas's), or Gradescope's
    tests for one submission."""
    out = Path(args.out)
    if args.format == "gradescope":
        results = json.loads(out.read_text(encoding="utf-8"))
        return [
            {
                "name": test["name"],
                "earned": test["status"] == "passed",
                "message": test.get("output", ""),
            }
            for test in results["tests"]
        ]
    items = out.with_name(f"{out.stem}-items.csv") if args.format == "canvas" else out
    with open(items, newline="", encoding="utf-8") as handle:
        return [
            {
                "name": f"{row['student']}/{row['lesson']}/{row['item']}",
                "earned": row["status"] in EARNED,
                "message": _said(row["status"], row["message"]),
            }
            for row in csv.DictReader(handle)
        ]


def _said(status: str, message: str) -> str:
    """The status, then the message (which may begin with the status already)."""
    if not message:
        return status
    return message if message.startswith(f"{status}:") else f"{status}: {message}"


class Submissions(pytest.Directory):
    """A folder of submissions: graded once by ``amp-course grade``, one test per row."""

    def collect(self):
        from .instructor_commands import grade

        args = _grade_arguments(self.config, self.path)
        code = grade(args)
        if code != 0:
            raise pytest.UsageError(f"amp-course grade stopped (status {code}); see above")
        for row in _rows(args):
            yield GradedItem.from_parent(self, name=row["name"], row=row)


class ItemLost(Exception):
    """An item that earned nothing: its message is the gradebook's."""


class GradedItem(pytest.Item):
    def __init__(self, *, row: dict, **kwargs):
        super().__init__(**kwargs)
        self.row = row

    def runtest(self):
        if not self.row["earned"]:
            raise ItemLost(self.row["message"])

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ItemLost):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name
