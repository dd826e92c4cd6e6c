"""What the grader runs in the learner's kernel at each graded exercise: observe, send plain data.

The grader sends ``report(name, symbol, seed)`` with a seed of its own choosing; the result is
displayed as one output of type ``MIME`` holding JSON text (``plain.py``). Nothing here decides
anything: the grader compares what it receives with the reference it computes itself, so a
learner who replaces this module only changes what the grader receives.
"""

from __future__ import annotations

from . import Answer, AnswerStopped, error_text, get, is_blank, plain

MIME = "application/vnd.amp-course.observation+json"


def observation_payload(name: str, answer, seed: int) -> dict:
    """{"observation": JSON text, "not_done": bool}, or {"error": ...} if observing failed."""
    item = get(name)
    watched = Answer(answer) if callable(answer) else answer
    try:
        text = plain.dumps(item.observe(watched, seed))
    except AnswerStopped as stopped:
        call = getattr(stopped, "call", "a call")
        return {"error": f"{call} ran for {stopped.args[0]:g} s and was stopped", "not_done": False}
    except Exception as error:  # the learner's answer broke observe itself
        not_done = is_blank(error) or bool(getattr(watched, "not_done", False))
        return {"error": error_text(error), "not_done": not_done}
    return {"observation": text, "not_done": bool(getattr(watched, "not_done", False))}


def report(name: str, symbol: str, seed: int) -> None:
    """Observe the notebook's ``symbol`` for exercise ``name`` and display it for the grader."""
    from IPython import get_ipython
    from IPython.display import display

    shell = get_ipython()
    namespace = shell.user_ns if shell is not None else {}
    if symbol not in namespace:
        payload = {"missing": symbol}
    else:
        payload = observation_payload(name, namespace[symbol], seed)
    display({MIME: payload}, raw=True)
