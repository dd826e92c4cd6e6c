"""Calling a learner's code in a check: the wrapper that tells the blank (its bare ``raise
NotImplementedError``) from torch's own NotImplementedError, each call's time limit, and the
errors and warnings a call raised, as an observation records them."""

from __future__ import annotations

import contextlib
import signal
import threading
import warnings

from ..display import error_text, repr_line


def is_blank(error: BaseException) -> bool:
    """Whether ``error`` is an exercise cell's blank: the bare ``raise NotImplementedError`` each
    stub ends in. torch raises NotImplementedError too, with its reason, for an op a dtype lacks
    (clamp of a float8 tensor on a CPU): that is the learner's code failing, not a blank."""
    return isinstance(error, NotImplementedError) and not error.args


def is_blank_text(text: object) -> bool:
    """``is_blank`` for an error as an observation records it (``error_text``)."""
    return isinstance(text, str) and text == error_text(NotImplementedError())


# The longest one call of a learner's function may run in a check cell (a check whose own limit
# is shorter keeps it): a loop that never ends would leave the cell busy with no word. Generous:
# the checks' lab loops take seconds on a CPU that emulates bf16.
ANSWER_LIMIT_S = 120.0


class Answer:
    """The learner's function, noting whether it still raises NotImplementedError (the blank),
    each call stopped after ANSWER_LIMIT_S (``time_limit``)."""

    def __init__(self, fn):
        self.fn, self.not_done = fn, False

    def __call__(self, *args, **kwargs):
        try:
            with time_limit(ANSWER_LIMIT_S):
                return self.fn(*args, **kwargs)
        except AnswerStopped as stopped:
            stopped.call = call_text(getattr(self.fn, "__name__", "your function"), args, kwargs)
            raise
        except NotImplementedError as error:
            self.not_done = self.not_done or is_blank(error)
            raise


def call_text(name: str, args: tuple, kwargs: dict, width: int = 40) -> str:
    """A call as a message shows it: ``name(1000, 'bf16', amp=True)``, each argument as
    ``repr_line`` gives it, cut at ``width`` characters."""
    given = [repr_line(a, width) for a in args]
    given += [f"{k}={repr_line(v, width)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(given)})"


def call_answer(fn, *args, **kwargs) -> tuple[object, str | None]:
    """``(fn(*args, **kwargs), None)``, or ``(None, "ErrorType: message")`` if fn raised."""
    try:
        return fn(*args, **kwargs), None
    except Exception as error:  # the learner's code: any error is part of the observation
        return None, error_text(error)


def call_noting_warnings(fn, *args, **kwargs) -> tuple[object, str | None, list[str]]:
    """``call_answer(fn, ...)`` and the text of every warning raised meanwhile."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, error = call_answer(fn, *args, **kwargs)
    return result, error, [" ".join(str(w.message).split())[:200] for w in caught]


class AnswerStopped(BaseException):
    """Raised inside the learner's call when it runs past a check's time limit: not an Exception,
    so the answer's own ``except Exception`` does not swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Stop the code inside with AnswerStopped after ``seconds``: a check whose answer never
    returns would otherwise leave its cell busy with no word. The standard library's interval
    timer does it in the kernel's own thread (the stdlib offers no call-with-timeout; a thread or
    process around the call would lose the learner's globals). Without SIGALRM (Windows), off
    the main thread, or where another timer is already set (pytest-timeout's), no limit."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        yield
        return

    def stop(signum, frame):
        raise AnswerStopped(seconds)

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
