"""Every quiz question's key is read by a test that checks it (tests/test_quiz_keys_*.py, the
quiz-fact tests, a lesson's tests), or is listed here with the reason no computation on a CPU can
decide it: a key no test reads can teach a wrong fact unnoticed (mutating every key found 100 such
keys on 2026-12-07)."""

from pathlib import Path

import yaml
from conftest import ROOT

HERE = Path(__file__)
UNCHECKED = {  # question id: why no test decides its key
    "validation": "advice: no_grad and autocast for validation, no scaler",
    "unsynchronised-timer": "needs CUDA's asynchronous launches",
    "first-iteration": "warm-up shows in GPU or compile timings only",
    "small-batch-no-speedup": "launch-bound steps need GPU timings",
    "multiples-of-8": "tensor-core speeds need a GPU",
    "scaler-per-process": "design advice across DDP processes",
    "same-weights": "about DDP replicas across processes; one process restates the arithmetic",
    "bf16-true": "Lightning's precision flag: Lightning is not installed",
    "full-eval": "Hugging Face Trainer's bf16_full_eval: transformers is not installed",
    "high-precision": "torchao.float8's recipe: torchao is not in the test environment",
    "t4-dtype": "a text answer: its accepted spellings",
    "fsdp-policy": "a text answer: its accepted spellings",
    "register-autocast": "a text answer: its accepted spellings",
    "accumulation-error": "a text answer: its accepted spellings",
}


def _questions() -> dict[str, str]:
    """Every question id of the course's quiz sources -> its lesson."""
    found = {}
    for source in sorted((ROOT / "quizzes" / "source").glob("*.yaml")):
        doc = yaml.safe_load(source.read_text(encoding="utf-8"))
        for question in doc["questions"]:
            found[question["id"]] = doc["lesson"]
    return found


def _tests_text() -> str:
    return "\n".join(
        p.read_text(encoding="utf-8") for p in sorted(HERE.parent.glob("*.py")) if p != HERE
    )


def test_every_quiz_key_is_read_by_a_test_or_says_why_not():
    questions, tests = _questions(), _tests_text()
    unread = sorted(
        f"{lesson}: {qid}"
        for qid, lesson in questions.items()
        if f'"{qid}"' not in tests and qid not in UNCHECKED
    )
    assert not unread, f"no test reads these keys (check each, or say why here): {unread}"
    assert set(UNCHECKED) <= set(questions), set(UNCHECKED) - set(questions)  # none stale
    read_now = sorted(qid for qid in UNCHECKED if f'"{qid}"' in tests)
    assert not read_now, f"a test reads these now: take them off UNCHECKED: {read_now}"
