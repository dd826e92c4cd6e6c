"""The order a learner sees a question's choices in: shuffled per learner, the same every time.

Each answer file keeps a random ``shuffle_seed``; a question's order is derived from it and the
question id, so it survives kernel restarts and differs between learners and between questions.
Answers are stored as the index of the choice in the published file (the choice's identity), so
hashes, grading and the instructor key never see the shuffled order.
"""

from __future__ import annotations

import hashlib
import secrets

SEED_KEY = "shuffle_seed"  # top-level field of an answer file


def new_seed() -> str:
    return secrets.token_hex(8)


def choice_order(seed: str, lesson: str, qid: str, n_choices: int) -> list[int]:
    """Position on screen -> index in the published file: a permutation fixed by the seed.

    Sorting by a hash instead of ``random.shuffle`` keeps the order the same on every Python.
    """

    def rank(index: int) -> str:
        return hashlib.sha256(f"{seed}\x00{lesson}\x00{qid}\x00{index}".encode()).hexdigest()

    return sorted(range(n_choices), key=rank)


def letter(position: int) -> str:
    """``0 -> "a"``: the label of a position on screen."""
    return chr(ord("a") + position)
