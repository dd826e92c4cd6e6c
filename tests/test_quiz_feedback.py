"""Feedback teaches without handing over the answer: the chosen option's explanation first, the
rest only after a right answer or a second attempt; HTML that wraps, right and wrong marked."""

import pytest
import yaml

from amp_course import quiz
from amp_course.quiz import answers as quiz_answers
from amp_course.quiz.order import choice_order

SOURCE = {
    "lesson": "98_feedback",
    "title": "Feedback",
    "questions": [
        {
            "id": "scale",
            "type": "single",
            "prompt": "Why scale the loss?",
            "choices": [
                {
                    "text": "To keep small gradients representable.",
                    "correct": True,
                    "explanation": "EXPLAIN-RIGHT",
                },
                {
                    "text": "To speed up the matmuls.",
                    "correct": False,
                    "explanation": "EXPLAIN-SPEED",
                },
                {"text": "To save memory.", "correct": False, "explanation": "EXPLAIN-MEMORY"},
            ],
            "explanation": "EXPLAIN-QUESTION",
        },
        {
            "id": "shrinks",
            "type": "multiple",
            "prompt": "What does AMP shrink?",
            "choices": [
                {"text": "Activations", "correct": True, "explanation": "EXPLAIN-ACT"},
                {"text": "Adam state", "correct": False, "explanation": "EXPLAIN-ADAM"},
                {
                    "text": "Weight copies for matmuls",
                    "correct": True,
                    "explanation": "EXPLAIN-COPY",
                },
            ],
        },
        {
            "id": "bytes",
            "type": "numeric",
            "prompt": "Bytes per parameter with AdamW?",
            "answer": 16,
            "explanation": "EXPLAIN-16",
        },
        {
            "id": "later",
            "type": "single",
            "prompt": "Graded later.",
            "graded": True,
            "choices": [
                {"text": "yes", "correct": True, "explanation": "y"},
                {"text": "no", "correct": False, "explanation": "n"},
            ],
        },
    ],
}
ALL_CHOICES = ("EXPLAIN-RIGHT", "EXPLAIN-SPEED", "EXPLAIN-MEMORY")


def _quiz(folder):
    (folder / "source").mkdir()
    (folder / "source" / "98_feedback.yaml").write_text(yaml.safe_dump(SOURCE))
    quiz.publish(folder / "source", folder / "quizzes")
    return quiz.Quiz("98_feedback", quiz_dir=folder / "quizzes", answers_path=folder / "a.json")


@pytest.fixture
def q(tmp_path):
    return _quiz(tmp_path)


def test_wrong_first_attempt_explains_only_the_chosen_option(q):
    result = q.answer("scale", "To speed up the matmuls.")
    assert result.correct is False and result.message.startswith("✗ Not quite.")
    assert "EXPLAIN-SPEED" in result.message
    for hidden in ("EXPLAIN-RIGHT", "EXPLAIN-MEMORY", "EXPLAIN-QUESTION"):
        assert hidden not in result.message
    assert "Try again" in result.message


def test_second_attempt_shows_every_explanation_chosen_first(q):
    q.answer("scale", "To save memory.")
    result = q.answer("scale", "To speed up the matmuls.")
    assert result.correct is False and result.attempts == 2
    assert all(text in result.message for text in ALL_CHOICES + ("EXPLAIN-QUESTION",))
    assert result.message.index("EXPLAIN-SPEED") < result.message.index("EXPLAIN-RIGHT")
    assert result.message.index("EXPLAIN-SPEED") < result.message.index("EXPLAIN-MEMORY")
    (speed,) = [item for item in result.view.items if item.why == "EXPLAIN-SPEED"]
    assert speed.chosen and speed.right is False
    (right,) = [item for item in result.view.items if item.why == "EXPLAIN-RIGHT"]
    assert not right.chosen and right.right is True


def test_right_answer_shows_everything_chosen_first(q):
    result = q.answer("scale", "To keep small gradients representable.")
    assert result.correct is True and result.message.startswith("✓ Correct.")
    assert result.view.items[0].why == "EXPLAIN-RIGHT" and result.view.items[0].right is True
    assert all(text in result.message for text in ALL_CHOICES + ("EXPLAIN-QUESTION",))
    assert "Try again" not in result.message


def test_letters_in_feedback_are_the_learners_letters(tmp_path, monkeypatch):
    # A shuffle seed that moves the published third choice off the third place on screen: with a
    # random one, the letter of the published place would still be "c" about one run in three.
    count = len(SOURCE["questions"][0]["choices"])
    seed = next(
        f"seed-{i}"
        for i in range(100)
        if choice_order(f"seed-{i}", "98_feedback", "scale", count)[2] != 2
    )
    monkeypatch.setattr(quiz_answers, "new_seed", lambda: seed)
    q = _quiz(tmp_path)
    shown = q.choices("scale")
    result = q.answer("scale", "c")
    assert result.view.items[0].label == "c" and result.view.items[0].text == shown[2]


def test_multiple_choice_wrong_first_attempt_shows_the_chosen_options_only(q):
    result = q.answer("shrinks", ["Activations", "Adam state"])
    assert result.correct is False
    assert "EXPLAIN-ACT" in result.message and "EXPLAIN-ADAM" in result.message
    assert "EXPLAIN-COPY" not in result.message
    assert all(item.right is None for item in result.view.items)  # nothing marked yet
    result = q.answer("shrinks", ["Activations", "Weight copies for matmuls"])
    assert result.correct is True
    marks = {item.text: item.right for item in result.view.items}
    assert marks == {"Activations": True, "Weight copies for matmuls": True, "Adam state": False}


def test_numeric_explanation_waits_for_a_right_answer_or_a_second_attempt(q):
    first = q.answer("bytes", 12)
    assert first.correct is False and "EXPLAIN-16" not in first.message
    assert "EXPLAIN-16" in q.answer("bytes", 14).message
    assert "EXPLAIN-16" in q.answer("bytes", 16).message


def test_graded_questions_only_say_saved(q):
    result = q.answer("later", "yes")
    assert result.correct is None and "graded by your instructor" in result.message
    assert "y" not in [item.why for item in result.view.items]


def test_text_and_html_read_as_prose(q):
    result = q.answer("scale", "To speed up the matmuls.")
    assert ".:" not in result.message  # explanations sit on their own line, not after "text.:"
    page = quiz.feedback.to_html(result.view)
    assert "<pre" not in page and "white-space:normal" in page
    assert "Not quite" in page and "EXPLAIN-SPEED" in page and "EXPLAIN-RIGHT" not in page
    right = quiz.feedback.to_html(q.answer("scale", "To keep small gradients representable.").view)
    assert "✓ Correct." in right and "✓ right" in right and "✗ wrong" in right
    assert right.index("EXPLAIN-RIGHT") < right.index("EXPLAIN-SPEED")
    escaped = quiz.feedback.to_html(quiz.feedback.FeedbackView(True, explanation="a < b & c"))
    assert "a &lt; b &amp; c" in escaped


def test_widget_flow_wrong_then_right(q):
    widgets = pytest.importorskip("ipywidgets")
    box = quiz._question_widget(q, "scale")
    radio, buttons, feedback = box.children[1], box.children[2], box.children[3]
    assert isinstance(radio, widgets.RadioButtons)
    labels = [label for label, _ in radio.options]
    assert labels == [f"{chr(97 + i)}) {text}" for i, text in enumerate(q.choices("scale"))]
    radio.value = q.choices("scale").index("To save memory.")
    buttons.children[0].click()
    assert "Not quite" in feedback.value and "EXPLAIN-MEMORY" in feedback.value
    assert "EXPLAIN-RIGHT" not in feedback.value
    radio.value = q.choices("scale").index("To keep small gradients representable.")
    buttons.children[0].click()
    assert "Correct" in feedback.value and all(t in feedback.value for t in ALL_CHOICES)
    assert "attempts: 2" in buttons.children[1].value
    again = quiz._question_widget(q, "scale")  # the cell runs again: choice and feedback restored
    assert again.children[1].value == radio.value and "Correct" in again.children[3].value
