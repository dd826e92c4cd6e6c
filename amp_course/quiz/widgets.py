"""Rendering a quiz: ipywidgets in a live Jupyter front end, plain text everywhere else."""

from __future__ import annotations

import os
import sys

from .answers import Quiz
from .schema import QUIZ_DIR

MODE_ENV = "AMP_COURSE_QUIZ_MODE"  # "text" or "widgets" forces the rendering


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


def _question_widget(quiz: Quiz, qid: str):
    import ipywidgets as w

    entry = quiz.entry(qid)
    saved = quiz.records.get(qid)
    options = [(f"{chr(97 + i)}) {c}", i) for i, c in enumerate(entry.get("choices", []))]
    if entry["type"] == "single":
        field_ = w.RadioButtons(
            options=options, value=saved["value"] if saved else None, layout=w.Layout(width="auto")
        )
        read = lambda: field_.value  # noqa: E731
    elif entry["type"] == "multiple":
        boxes = [
            w.Checkbox(value=bool(saved and i in saved["value"]), description=label, indent=False)
            for label, i in options
        ]
        field_ = w.VBox(boxes)
        read = lambda: [i for i, box in enumerate(boxes) if box.value]  # noqa: E731
    elif entry["type"] == "numeric":
        field_ = w.FloatText(value=saved["value"] if saved else 0.0)
        read = lambda: field_.value  # noqa: E731
    else:
        field_ = w.Text(value=saved["value"] if saved else "", placeholder="your answer")
        read = lambda: field_.value  # noqa: E731
    button = w.Button(description="Check", button_style="primary")
    feedback = w.HTML()
    attempts = w.HTML()

    def show(message, count):
        feedback.value = f"<pre style='white-space: pre-wrap'>{_html_escape(message)}</pre>"
        attempts.value = f"<small>attempts: {count}</small>"

    if saved:
        show(quiz.feedback_text(qid, saved["value"], saved.get("correct")), saved["attempts"])

    def on_click(_):
        try:
            result = quiz.answer(qid, read())
        except (ValueError, OSError) as error:
            feedback.value = f"<b>{_html_escape(str(error))}</b>"
            return
        show(result.message, result.attempts)

    button.on_click(on_click)
    tag = " <i>(graded)</i>" if entry["graded"] else ""
    header = w.HTML(f"<b>{_html_escape(entry['prompt'])}</b>{tag}")
    box = w.VBox([header, field_, w.HBox([button, attempts]), feedback])
    box.add_class("amp-quiz-question")
    return box


def _html_escape(text: str) -> str:
    import html

    return html.escape(text)


def show(lesson: str, question: str | None = None, *, quiz_dir=QUIZ_DIR, answers_path=None) -> Quiz:
    """Render a lesson's quiz (or one question); return the Quiz for ``quiz.answer(...)``."""
    quiz = Quiz(lesson, quiz_dir=quiz_dir, answers_path=answers_path)
    ids = [question] if question else list(quiz.questions)
    for qid in ids:
        quiz.entry(qid)
    if widgets_available():
        import ipywidgets as w
        from IPython.display import display

        title = w.HTML(f"<h3>Quiz: {_html_escape(quiz.doc['title'])}</h3>")
        display(w.VBox([title] + [_question_widget(quiz, qid) for qid in ids]))
        if quiz.load_error:
            display(w.HTML(f"<b>⚠ {_html_escape(quiz.load_error)}</b>"))
    else:
        print(quiz.text(ids))
    return quiz
