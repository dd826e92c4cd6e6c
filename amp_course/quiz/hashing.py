"""Hidden answers: salted SHA-256 hashes of canonical answers, and obfuscated explanations.

This only *deters* peeking: the public salt is in the learner file, so a determined learner can
test guesses. The instructor key uses the same hashes made with the instructor's own secret.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import math

from .schema import Question

PUBLIC_SALT_PREFIX = "amp-course public quiz salt v1"
# Numeric answers are hashed by buckets of tolerance / NUMERIC_BUCKETS: every value within the
# tolerance is accepted, and values up to tolerance * (1 + 1/NUMERIC_BUCKETS) away may be too.
NUMERIC_BUCKETS = 8


def normalize_text(value) -> str:
    return " ".join(str(value).split()).casefold()


def _digest(salt: str, lesson: str, qid: str, canonical: str) -> str:
    return hashlib.sha256(f"{salt}\x00{lesson}\x00{qid}\x00{canonical}".encode()).hexdigest()


def _bucket(value: float, tolerance: float) -> str:
    if tolerance == 0:
        return repr(float(value))
    return str(math.floor(value / (tolerance / NUMERIC_BUCKETS)))


def answer_hashes(question: Question, lesson: str, salt: str) -> list[str]:
    """Hashes of every canonical form that counts as a right answer."""
    if question.type == "single":
        forms = [str(next(i for i, c in enumerate(question.choices) if c.correct))]
    elif question.type == "multiple":
        forms = [",".join(str(i) for i, c in enumerate(question.choices) if c.correct)]
    elif question.type == "text":
        forms = sorted({normalize_text(a) for a in question.accept})
    elif question.tolerance == 0:
        forms = [_bucket(question.answer, 0)]
    else:
        width = question.tolerance / NUMERIC_BUCKETS
        low = math.floor((question.answer - question.tolerance) / width)
        high = math.floor((question.answer + question.tolerance) / width)
        forms = [str(k) for k in range(low, high + 1)]
    return sorted(_digest(salt, lesson, question.id, form) for form in forms)


def canonical_answer(qtype: str, value, tolerance: float = 0.0) -> str:
    """The canonical form of a learner's (already normalised) answer, as hashed."""
    if qtype == "single":
        return str(value)
    if qtype == "multiple":
        return ",".join(str(i) for i in sorted(set(value)))
    if qtype == "text":
        return normalize_text(value)
    return _bucket(float(value), tolerance)


def is_correct(entry: dict, lesson: str, qid: str, value, salt: str) -> bool:
    """Check ``value`` against a published entry's hashes (learner file or instructor key)."""
    canonical = canonical_answer(entry["type"], value, entry.get("tolerance", 0.0))
    return _digest(salt, lesson, qid, canonical) in entry["hashes"]


def right_choices(entry: dict, lesson: str, qid: str, salt: str) -> set[int] | None:
    """The indices of a choice question's right choices, found by testing its hashes (what the
    public salt allows anyone); None for a graded question, which has no hashes."""
    if "hashes" not in entry:
        return None
    indices = range(len(entry["choices"]))
    sizes = (1,) if entry["type"] == "single" else range(1, len(indices) + 1)
    for size in sizes:
        for combo in itertools.combinations(indices, size):
            value = combo[0] if entry["type"] == "single" else list(combo)
            if is_correct(entry, lesson, qid, value, salt):
                return set(combo)
    return set()


def _keystream(salt: str, label: str, length: int) -> bytes:
    out, counter = b"", 0
    while len(out) < length:
        out += hashlib.sha256(f"{salt}\x00{label}\x00{counter}".encode()).digest()
        counter += 1
    return out[:length]


def obfuscate(text: str, salt: str, label: str) -> str:
    """XOR with a salted SHA-256 keystream, then base64: hides text from a glance, nothing more."""
    data = text.encode()
    return base64.b64encode(
        bytes(a ^ b for a, b in zip(data, _keystream(salt, label, len(data)), strict=True))
    ).decode()


def reveal(blob: str, salt: str, label: str) -> str:
    data = base64.b64decode(blob)
    return bytes(
        a ^ b for a, b in zip(data, _keystream(salt, label, len(data)), strict=True)
    ).decode()


def public_salt(lesson: str) -> str:
    return hashlib.sha256(f"{PUBLIC_SALT_PREFIX}\x00{lesson}".encode()).hexdigest()[:32]
