"""One call of a lesson 08 answer on one case, within a time limit, its error as the end of a
sentence; once a case was stopped the rest are not run."""

from __future__ import annotations

from ...display import error_text
from ..calling import AnswerStopped, time_limit

# How long one call may run: the reference answers each case within a millisecond, and a search
# over n that does not stop (ac.stats.t_quantile's cost grows with the degrees of freedom) would
# leave the check cell busy with no word.
CALL_LIMIT_S = 20.0
STOPPED = f"was stopped after {CALL_LIMIT_S:g} s; the reference returns within a millisecond."


def call_case(fn, args: tuple, rows: list[dict]) -> tuple[object, str | None]:
    """``(fn(*args), None)`` within CALL_LIMIT_S, or (None, what happened, as the end of a
    sentence). Once a case was stopped the rest are not run: each would wait again."""
    if any(row["error"] == STOPPED for row in rows):
        return None, "was not run: an earlier case was stopped."
    try:
        with time_limit(CALL_LIMIT_S):
            return fn(*args), None
    except AnswerStopped:
        return None, STOPPED
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        text = error_text(error)
        return None, f"raised {text}{'' if text.endswith('.') else '.'}"
