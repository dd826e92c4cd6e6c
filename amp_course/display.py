"""What the front end running this kernel can show: whether ipywidgets render here; a progress
bar, where one is wanted; and how an exception is shown in one line (a learner's, in a check; a
timed function's, in a report).

The quizzes and the bit inspector ask it, and fall back to text (or HTML with a text rendering)
where widgets would show nothing. The exercise checks and the lab kit that runs a lab's code both
record errors with ``error_text``, so it sits here, below both.
"""

from __future__ import annotations

import os
import sys

from . import env_vars

MODE_ENV = env_vars.QUIZ_MODE  # "text" or "widgets" forces the rendering


def widgets_available() -> bool:
    """True only in a live front end that renders widgets; AMP_COURSE_QUIZ_MODE forces a mode.

    papermill, nbval and nbclient run a kernel with no front end (so widgets would show nothing);
    Jupyter Server sets JPY_SESSION_NAME for kernels it starts for a notebook, Colab and VS Code
    are recognised by their modules and variables.
    """
    forced = os.environ.get(MODE_ENV, "").strip().lower()
    if forced in ("text", "widgets"):
        return forced == "widgets"
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
        return False
    if "papermill" in sys.modules or "PAPERMILL_INPUT_PATH" in os.environ:
        return False
    if "google.colab" in sys.modules:
        return True
    if "__vsc_ipynb_file__" in shell.user_ns:
        return True
    return bool(os.environ.get("JPY_SESSION_NAME"))


def error_text(error: BaseException) -> str:
    """How an observation records an exception the learner's code raised (500 characters)."""
    said = str(error)
    if getattr(error, "said_whole", False):  # a lab kit's Returned: the whole phrase
        return said[:500]
    return f"{type(error).__name__}: {said}"[:500] if said else type(error).__name__


def with_article(noun: str) -> str:
    """``noun`` after "a" or "an", as it is read aloud: "an int", "an ndarray", "a uint8"."""
    spoken_vowel = noun[:1].lower() in "aeio" or noun.startswith("nd")
    return f"{'an' if spoken_vowel else 'a'} {noun}"


def kind_of(value) -> str:
    """How a message names what the learner's code gave where another kind was asked for: "None",
    or "a float", "an int", "a Tensor"..."""
    return "None" if value is None else with_article(type(value).__name__)


def repr_line(value, width: int = 80) -> str:
    """``value``'s repr on one line (a multi-line repr, a Measurement's, joined), cut at ``width``
    characters with " ..."."""
    text = repr(value)
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= width else text[: width - 4] + " ..."


def shown(value, width: int = 80) -> str:
    """A value the learner's code gave, as a message shows it: "None", or its repr on one line
    (``repr_line``) and its kind: "'23' (a str)"."""
    if value is None:
        return "None"
    return f"{repr_line(value, width)} ({kind_of(value)})"


def error_line(error: BaseException) -> str:
    """An exception as one line of a table or report: its type and its message's first line (200
    characters); an exception with no message gives its type alone."""
    first = (str(error).splitlines() or [""])[0]
    return f"{type(error).__name__}: {first[:200]}"


def progress(iterable=None, **kwargs):
    """A tqdm progress bar (``tqdm.auto``: a widget in Jupyter), off where ``AMP_COURSE_PROGRESS``
    is 0. The course's executor sets that: a bar is for a live run, and an executed copy would
    keep only its first frame, "0%", as the text a viewer without widgets shows. tqdm's own
    ``TQDM_DISABLE`` does not reach the notebook bar, which passes ``disable`` itself."""
    from tqdm.auto import tqdm

    off = os.environ.get(env_vars.PROGRESS, "").strip() == "0"
    return tqdm(iterable, **{**kwargs, "disable": kwargs.get("disable", False) or off})
