"""Choice order: shuffled per learner and stable for that learner; answers stored by identity;
the position of the right answer across the bank is not guessable, as written or as shown."""

import json
from collections import Counter

import pytest
import yaml
from conftest import ROOT

from amp_course import quiz
from amp_course.quiz.order import SEED_KEY, choice_order

QUIZ_DIR = ROOT / "quizzes"
MAX_SHARE = 0.40  # no position may hold more of the right answers than this


def single_choice_questions():
    """(lesson, id, number of choices, index of the right choice) for the whole bank."""
    found = []
    for path in quiz.source_paths():
        source = quiz.load_source(path)
        for q in source.questions:
            if q.type == "single":
                right = [c.correct for c in q.choices].index(True)
                found.append((source.lesson, q.id, len(q.choices), right))
    return found


def shares(positions):
    counts = Counter(positions)
    return {position: n / len(positions) for position, n in sorted(counts.items())}


def test_sources_spread_the_right_answer_over_the_positions():
    # What an author wrote is what the published files, the website and a printed quiz list.
    bank = single_choice_questions()
    assert len(bank) >= 20
    by_position = shares([right for *_, right in bank])
    assert max(by_position.values()) <= MAX_SHARE, by_position


def test_learners_see_the_right_answer_anywhere():
    bank = single_choice_questions()
    seeds = [f"learner-{n}" for n in range(300)]
    seen = [
        choice_order(seed, lesson, qid, k).index(right)
        for seed in seeds
        for lesson, qid, k, right in bank
    ]
    by_position = shares(seen)
    assert max(by_position.values()) <= MAX_SHARE, by_position
    # Each question on its own: over many learners its right answer is on every position about
    # equally often (1/k each), so no question is "always c" for everyone.
    for lesson, qid, k, right in bank:
        per_question = shares([choice_order(seed, lesson, qid, k).index(right) for seed in seeds])
        assert len(per_question) == k, (lesson, qid, per_question)
        assert all(abs(share - 1 / k) < 0.15 for share in per_question.values()), (
            lesson,
            qid,
            per_question,
        )


def test_one_learner_gets_different_orders_for_different_questions():
    orders = {
        tuple(choice_order("one learner", lesson, qid, k))
        for lesson, qid, k, _ in single_choice_questions()
    }
    assert len(orders) > 4  # not one permutation applied to every question


# Nor may its length give the right choice away: while the right choices carried their reasons,
# a learner who always picked the longest choice was right in 83 of the 105 single-choice
# questions. A choice states its claim; the reasons go in its explanation.
MAX_LENGTH_RATIO = 1.5  # the right choice against the longest wrong one
MAX_LONGEST_SHARE = 1 / 3  # of single-choice questions whose right choice is the longest


def test_the_right_choice_is_not_told_by_its_length():
    too_long, longest, singles = [], [], 0
    for path in quiz.source_paths():
        source = quiz.load_source(path)
        for q in source.questions:
            right = [len(c.text) for c in q.choices if c.correct]
            wrong = [len(c.text) for c in q.choices if not c.correct]
            if not (right and wrong):
                continue
            ratio = max(right) / max(wrong)
            if ratio > MAX_LENGTH_RATIO:
                too_long.append(f"{source.lesson}/{q.id}: {ratio:.2f} x")
            if q.type == "single":
                singles += 1
                if max(right) > max(wrong):
                    longest.append(f"{source.lesson}/{q.id}")
    assert not too_long, too_long
    assert len(longest) <= MAX_LONGEST_SHARE * singles, (len(longest), singles, longest)


@pytest.fixture
def learners(tmp_path):
    """Two learners' quizzes of lesson 01 (four-choice questions), each with its answer file."""

    def make(name):
        return quiz.Quiz("01_number_formats", quiz_dir=QUIZ_DIR, answers_path=tmp_path / name)

    return make


def test_order_is_per_learner_and_survives_a_restart(learners):
    ann, bob = learners("ann.json"), learners("bob.json")
    qids = [qid for qid, e in ann.questions.items() if len(e.get("choices", [])) >= 3]
    ann_orders = [ann.order(qid) for qid in qids]
    assert ann_orders != [bob.order(qid) for qid in qids]
    for qid, order in zip(qids, ann_orders, strict=True):
        assert sorted(order) == list(range(len(ann.entry(qid)["choices"])))
    # Showing the quiz saved the seed: a new kernel reading the same file sees the same order.
    assert SEED_KEY in json.loads(ann.answers_path.read_text())
    assert [learners("ann.json").order(qid) for qid in qids] == ann_orders


def test_answers_by_letter_position_or_text_are_stored_by_identity(learners):
    q = learners("ann.json")
    qid = "fp16-max"
    published = q.entry(qid)["choices"]
    right = published.index("65504")
    letter_of_right = chr(97 + q.order(qid).index(right))
    assert q.choices(qid)[q.order(qid).index(right)] == "65504"
    assert q.answer(qid, letter_of_right).correct is True
    assert q.records[qid]["value"] == right
    assert q.answer(qid, q.order(qid).index(right)).correct is True  # 0-based position shown
    assert q.answer(qid, "65504").correct is True  # text: the same for every learner
    wrong_letter = "a" if letter_of_right != "a" else "b"
    assert q.answer(qid, wrong_letter).correct is False
    # The text view lists the choices as this learner sees them.
    listed = q.text([qid]).splitlines()
    assert f"   {letter_of_right}) 65504" in listed


def test_grading_and_hashes_ignore_the_order(learners, tmp_path):
    # The same right answer, picked by two learners at different letters, is stored the same
    # way and is right against the published hashes, as the grader checks it.
    ann, bob = learners("ann.json"), learners("bob.json")
    for learner in (ann, bob):
        learner.answer("fp16-max", "65504")
    stored = {
        json.loads(p.read_text())["lessons"]["01_number_formats"]["fp16-max"]["value"]
        for p in (tmp_path / "ann.json", tmp_path / "bob.json")
    }
    assert len(stored) == 1
    doc = yaml.safe_load((QUIZ_DIR / "01_number_formats.yaml").read_text())
    (entry,) = [e for e in doc["questions"] if e["id"] == "fp16-max"]
    assert quiz.is_correct(entry, "01_number_formats", "fp16-max", stored.pop(), ann.salt)


def test_a_damaged_answer_file_is_not_rewritten_to_save_the_seed(tmp_path, capsys):
    path = tmp_path / "a.json"
    path.write_text("{not json")
    q = quiz.Quiz("01_number_formats", quiz_dir=QUIZ_DIR, answers_path=path)
    first = q.order("fp16-max")
    assert path.read_text() == "{not json" and q.order("fp16-max") == first
    q.answer("fp16-max", "65504")  # the first answer backs the file up, then saves the seed too
    assert (tmp_path / "a.json.bak").read_text() == "{not json"
    assert SEED_KEY in json.loads(path.read_text())
