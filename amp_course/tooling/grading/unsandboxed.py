"""What grading without a sandbox adds: the guard's setup, what it found, and the files' check.

Without bubblewrap or a container, a learner's kernel runs with the instructor's permissions. For
such a run the grader (``Guard``):

- gives the kernels a private, read-only copy of the course without the reference solutions
  (``amp_course`` and ``quizzes``), so the course they import has no references in it and nothing
  they write there reaches the instructor's checkout;
- starts each kernel under ``guard.py`` (an audit hook), told which folder is the kernel's own,
  which files are the instructor's and which are the references, and reads back what it refused;
- keeps the instructor's files (the course package, the copy, the master notebooks, the key) and
  the submissions under watch: a file changed while a kernel ran flags that submission and is
  put back as it was (the changed one kept beside the gradebook, in ``<gradebook>-changed/``);
- grades one submission at a time, so that whatever changed is traced to the one that changed it.
"""

from __future__ import annotations

import json
import shutil
import stat
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ...paths import QUIZZES
from . import guard, sandbox
from .reports import bounded

MAX_LOG_LINES = 10_000  # a kernel that floods its log is flagged for it
# The environment a guarded kernel adds: no bytecode written anywhere (the import system would
# otherwise try to write into the read-only course), temporary files in its own folder.
GUARD_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": f"{sandbox.HOME}/tmp"}


DECOY = '''"""Not the reference solutions: this is the course copy a kernel graded without a sandbox
sees, and opening this file flags the submission for review."""
'''


@dataclass
class Findings:
    """What the guard and the files' check found while one notebook ran."""

    flags: list[str] = field(default_factory=list)  # the submission is flagged for review
    notes: list[str] = field(default_factory=list)  # refused, reported, not held against it

    def amend(self, status: str, message: str) -> tuple[str, str]:
        """One check's (status, message), with what was refused said plainly (a flag earns no
        points: ``reports.EARNED``)."""
        if self.flags:
            said = f"{status}: {message}" if message else status
            why = bounded("; ".join(dict.fromkeys(self.flags)), 1000)
            return "flagged", f"flagged for review, refused without a sandbox: {why} [{said}]"
        if self.notes:
            refused = bounded("; ".join(dict.fromkeys(self.notes)), 1000)
            message = f"{message} (refused without a sandbox: {refused})".strip()
        return status, message


def read_findings(log: Path, canary: str | None = None) -> Findings:
    """The guard's log, read: flags and notes, the final check (``canary``) taken out."""
    found = Findings()
    seen = False
    try:
        with open(log, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle):
                if number >= MAX_LOG_LINES:
                    found.flags.append(f"over {MAX_LOG_LINES} refusals")
                    break
                level, _, what = line.rstrip("\n").partition("\t")
                if level not in (guard.FLAG, guard.NOTE) or not what:
                    found.flags.append("an unreadable line in the guard's log")
                    continue
                if canary and canary in str(what):
                    seen = True
                    continue
                kept = found.flags if level == guard.FLAG else found.notes
                kept.append(bounded(str(what), 500))
    except OSError:
        pass
    if canary and not seen:
        found.flags.append("the guard did not answer its final check (was it disabled?)")
    return found


def course_copy(folder: Path) -> Path:
    """A read-only copy of the course (package and quizzes) without the references: the root.

    In place of the references, a decoy package: the guard flags whoever opens it."""
    package = sandbox.PACKAGE
    hidden = package / sandbox.HIDDEN

    def skip(directory, names):
        return [n for n in names if Path(directory, n) == hidden]

    shutil.copytree(package, folder / package.name, ignore=skip, symlinks=False)
    decoy = folder / package.name / sandbox.HIDDEN  # importing it, even by importlib, opens it
    decoy.mkdir()
    (decoy / "__init__.py").write_text(DECOY)
    quizzes = package.parent / QUIZZES
    if quizzes.is_dir():
        shutil.copytree(quizzes, folder / QUIZZES, symlinks=False)
    for path in [*sorted(folder.rglob("*"), reverse=True), folder]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return folder


def _files(paths, caches: bool = False) -> list[Path]:
    found = []
    for path in paths:
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    return sorted({p for p in found if caches or "__pycache__" not in p.parts})


class Watch:
    """The instructor's files, snapshotted before each kernel and checked after it.

    ``kept``: kept in memory, compared byte for byte and put back when changed (the course package,
    the masters, the key); ``copy``: the kernels' course with its bytecode, also rid of files added
    to it; ``stated``: compared by size and time only (the submissions, which may be large).
    """

    def __init__(self, kept, copy: Path, stated):
        self.roots, self.copy, self.stated_roots = list(kept), copy, list(stated)
        self.snapshot()

    def _kept_files(self) -> list[Path]:
        return _files(self.roots) + _files([self.copy], caches=True)

    def _stats(self) -> dict:
        return {p: (s.st_size, s.st_mtime_ns) for p in _files(self.stated_roots) if (s := _stat(p))}

    def snapshot(self) -> None:
        self.kept = {p: p.read_bytes() for p in self._kept_files()}
        self.stats = self._stats()

    def check(self, keep: Path | None = None) -> list[str]:
        """What changed since the snapshot, in plain words; what can be put back, is (a changed
        file of the instructor's is kept in ``keep`` first: evidence, or someone's edit)."""
        changes = []
        for path in sorted(set(self._kept_files()) - set(self.kept)):
            if path.is_relative_to(self.copy):
                path.unlink()
                changes.append(f"added {path} (removed)")
            else:
                changes.append(f"added {path}")
        for path, data in self.kept.items():
            try:
                same = path.read_bytes() == data
            except OSError:
                same = False
            if not same:
                kept = ""
                if keep is not None and path.exists() and not path.is_relative_to(self.copy):
                    copy = keep / path.relative_to(path.anchor)
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, copy)
                    kept = f"; as changed, in {copy}"
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.exists():
                    path.chmod(path.stat().st_mode | stat.S_IWUSR)
                path.write_bytes(data)
                changes.append(f"changed {path} (put back{kept})")
        stats = self._stats()
        for path in sorted(set(stats) | set(self.stats)):
            if stats.get(path) != self.stats.get(path):
                changes.append(f"changed {path}")
        return changes


class Guard:
    """The no-sandbox side of one grading run: the course's copy, the watch, the guard's config."""

    def __init__(self, scratch: Path, key: Path, out: Path, feedback: Path, masters, submissions):
        package = sandbox.PACKAGE
        self.changed = out.with_name(f"{out.stem}-changed")  # what the watch put back, as found
        self.course = course_copy(scratch / "course")
        home = Path.home().resolve()
        instructor = [package.parent, package, key.parent, out.parent, feedback, submissions]
        instructor += [m.parent for m in masters] + ([home] if home != Path("/") else [])
        self.instructor = sorted({p.resolve() for p in instructor} | {scratch.resolve()})
        protected = [key, out, out.with_name(f"{out.name}.bak"), feedback]
        self.protected = sorted({p.resolve() for p in protected})
        # Meanwhile the grader keeps its bytecode in a folder of its own: a .pyc planted in the
        # package's caches never runs in the grader.
        self.bytecode, sys.pycache_prefix = sys.pycache_prefix, str(scratch / "grader-bytecode")
        self.watch = Watch([package, *masters, key], self.course, [submissions])

    def env(self) -> dict[str, str]:
        """What a guarded kernel's environment adds: the course's copy first on its path."""
        return {**GUARD_ENV, "PYTHONPATH": str(self.course)}

    def prepare(self, scratch: sandbox.Scratch) -> str:
        """Write the guard's config for one kernel; returns the path of its final check."""
        (scratch.home / "tmp").mkdir(parents=True, exist_ok=True)
        hidden = sorted({sandbox.PACKAGE / sandbox.HIDDEN, *sandbox.hidden_paths()})
        paths = [*hidden, *_files(hidden, caches=True), *self.protected]
        config = {
            "home": str(scratch.home.resolve()),
            "log": str(scratch.guard_log),
            "protected": [str(p) for p in self.protected],
            "instructor": [str(p) for p in self.instructor],
            # A file's identity: an inode freed since (the gradebook, rewritten) and given to a
            # new file has another ctime.
            "inodes": sorted(
                {(s.st_dev, s.st_ino, s.st_ctime_ns) for p in paths if (s := _stat(p))}
            ),
        }
        scratch.guard_config.write_text(json.dumps(config))
        return str(hidden[0] / f"canary-{uuid.uuid4().hex}.py")

    def close(self) -> None:
        """Make the copy writable again, so that the run's scratch folder can be removed."""
        sys.pycache_prefix = self.bytecode
        for path in [self.course, *self.course.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _stat(path: Path):
    try:
        return path.stat()
    except OSError:
        return None
