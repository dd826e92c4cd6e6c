"""Where the instructor's commands may write: never over what they read (``overwrites``: the key,
the quiz sources, a master notebook, a student's folder), and only where writing can succeed,
found before the work starts (``unwritable``), so that no slip of a path costs a file or a
class's grading."""

from __future__ import annotations

import os
from pathlib import Path


def overwrites(path, option: str, inputs: dict) -> str | None:
    """Why writing ``path`` (given as ``option``) would destroy or mix with an input, or None.

    ``inputs`` maps how each input was given (an option) to its path: a file, which ``path`` must
    not be, or a folder, which ``path`` must neither be nor lie inside.
    """
    if path is None:
        return None
    target = Path(path).expanduser().resolve()
    for given, source in inputs.items():
        if source is None:
            continue
        folder = Path(source).expanduser().resolve()
        if target == folder:
            return (
                f"{option} {path} names the same place as {given} ({source}): writing there "
                "would replace it; choose another path"
            )
        if target.is_relative_to(folder):  # a folder, or one still to be made (--out)
            return (
                f"{option} {path} is inside {given} ({source}): writing there could replace or "
                "join what it holds; choose another path"
            )
    return None


def unwritable(out: str, feedback: str | None) -> str | None:
    """Why the gradebook or the feedback folder could not be written, found before grading
    (else a whole class is graded and then lost to a path's mistake), or None."""
    if Path(out).is_dir():
        return f"--out {out} is a folder; it names the gradebook file to write"
    folder = Path(out).absolute().parent
    while not folder.exists():  # the folders still to be made are made when it is written
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        return f"--out {out}: cannot write in {folder} (a file, or no permission)"
    if feedback is not None and Path(feedback).exists() and not Path(feedback).is_dir():
        return f"--feedback {feedback} is a file; it names the folder of feedback files"
    return None
