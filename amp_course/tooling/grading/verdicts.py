"""The trusted side: secret seeds, reference observations, and the verdict on what came back.

Runs only in the grader's process. The learner's kernel sends plain data (``exercises.plain``),
never code or pickles; the reference is observed here, with the reference solution, at a seed
derived from the instructor's secret and the submitted notebook, so a submission can only pass by
producing the reference's results for inputs it could not know in advance, and the inputs that one
submission's feedback shows are not those of any other (a resubmission included).
"""

from __future__ import annotations

import hashlib
import hmac

from ... import exercises
from ...exercises import plain
from .notebooks import CheckItem
from .reports import bounded


def secret_seed(secret: str, name: str, submission: str = "") -> int:
    """A seed for exercise ``name`` in ``submission`` (the notebook's digest) that only the key's
    holder can compute (never 0)."""
    label = f"exercise-seed:{name}:{submission}".encode()
    digest = hmac.new(secret.encode(), label, hashlib.sha256).digest()
    return 1 + int.from_bytes(digest[:4], "big") % (2**31 - 2)


def decide(item: CheckItem, payload, seed: int) -> tuple[str, str]:
    """(status, message) for one check, from the probe's payload (its points follow from the
    status: ``reports.Row``)."""
    exercise = exercises.get(item.name)
    if not isinstance(payload, dict):
        return "error", "the grader's probe returned nothing"
    for status in ("timeout", "error"):
        if isinstance(payload.get(status), str) and "observation" not in payload:
            if payload.get("not_done") is True:
                return "not done", "the exercise cell still raises NotImplementedError."
            prefix = "" if status == "timeout" else "running your answer failed: "
            return status, bounded(f"{prefix}{payload[status]}")
    if "missing" in payload:
        why = f"{item.symbol} was not defined when the check ran (did its cell raise an error?)"
        return "not done", why
    try:
        mine = plain.loads(payload.get("observation"))
    except plain.PlainDataError as error:
        return "failed", bounded(f"your answer's results could not be read: {error}")
    try:
        reference = exercises.reference_observation(item.name, seed)
    except Exception as error:  # the course's own reference failed: not the learner's fault
        return "error", bounded(f"the grader could not compute the reference: {error}")
    status, message = exercises.judge(
        exercise, mine, reference, seed, payload.get("not_done") is True
    )
    return status, bounded(message)
