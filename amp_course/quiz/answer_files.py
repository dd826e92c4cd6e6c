"""Answer files: ``<lesson>.answers.json`` beside the notebook, read with clear errors, written
atomically (never half a file), and merged into one file to hand in (``export``)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from ..env_vars import ANSWERS_DIR
from .schema import FORMAT

ANSWERS_ENV = ANSWERS_DIR  # where answer files go (default: the notebook's folder)


class AnswerFileError(ValueError):
    """An answer file cannot be read; it is left untouched (and backed up before any rewrite)."""


def _new_file_mode() -> int:
    """The mode open() gives a new file (0o666 less the umask), read without os.umask, which
    would change the process's umask for a moment under other threads; 0o644 where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and os.replace: never half a file.
    The file keeps the mode it had, else gets a new file's (mkstemp's own is 0o600: published
    quiz files on a shared server would be unreadable to the learners)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else _new_file_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_answers(path) -> dict:
    """The answers in ``path`` ({} when absent); AnswerFileError when it is corrupt."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:  # nested past Python's stack
        raise AnswerFileError(f"{path} is not valid JSON ({error}).") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("lessons", {}), dict)
        or not all(isinstance(v, dict) for v in data.get("lessons", {}).values())
    ):
        raise AnswerFileError(f"{path} is not an answer file (expected {{'lessons': {{...}}}}).")
    return data


def write_answers(path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def default_answers_path(lesson: str) -> Path:
    """``<lesson>.answers.json`` beside the notebook (the kernel's working directory)."""
    folder = os.environ.get(ANSWERS_ENV)
    if not folder:
        session = os.environ.get("JPY_SESSION_NAME", "")  # set by Jupyter Server for notebooks
        folder = (
            str(Path(session).parent)
            if session.endswith(".ipynb") and Path(session).is_absolute()
            else os.getcwd()
        )
    return Path(folder) / f"{lesson}.answers.json"


def export(lesson: str | None = None, path=None) -> Path:
    """Collect answer files into one JSON to hand in; in Colab, also download it."""
    folder = Path(path).parent if path else default_answers_path("x").parent
    files = sorted(folder.glob(f"{lesson or '*'}.answers.json"))
    merged = {"format": FORMAT, "lessons": {}}
    for file in files:
        merged["lessons"].update(read_answers(file).get("lessons", {}))
    if not merged["lessons"]:
        raise FileNotFoundError(f"No answers to export in {folder}: answer a quiz first.")
    target = Path(path) if path else folder / "amp-course-answers.json"
    write_answers(target, merged)
    if "google.colab" in sys.modules:
        from google.colab import files  # type: ignore[import-not-found]

        files.download(str(target))
    print(f"Exported {sum(len(v) for v in merged['lessons'].values())} answer(s) to {target}")
    return target
