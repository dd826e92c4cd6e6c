"""Rendering a quiz: ipywidgets in a live Jupyter front end, plain text everywhere else."""

from __future__ import annotations

from ..display import widgets_available
from .answers import Quiz
from .feedback import to_html
from .order import letter
from .schema import QUIZ_DIR

# ipywidgets draws choice labels on one line and cuts long ones off ("Multiplying the loss by a
# scale such as..."); inside a quiz they wrap like prose instead. Shipped once per quiz display.
STYLE = """<style>
.amp-quiz-question .widget-html, .amp-quiz-question .widget-radio,
.amp-quiz-question .widget-checkbox { margin-left: 0; margin-right: 0; }
.amp-quiz-question .widget-html-content { line-height: 1.4; white-space: normal; }
.amp-quiz-question .widget-radio-box label,
.amp-quiz-question .widget-checkbox .widget-label-basic {
  display: flex !important; align-items: flex-start; justify-content: flex-start;
  gap: 0.4em; margin: 3px 0; width: 100%;
  height: auto !important; line-height: 1.4 !important; white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important;
}
.amp-quiz-question .widget-radio-box input, .amp-quiz-question .widget-checkbox input {
  float: none !important; flex: none; order: -1; height: auto !important;
  margin: 0.2em 0 0 1px !important;
}
.amp-quiz-question .widget-checkbox { align-items: flex-start; }
.amp-quiz-question .widget-checkbox, .amp-quiz-question .widget-checkbox span {
  height: auto !important; white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important;
}
</style>"""


# The attempts count beside the Check button, in the button's size and on its line.
ATTEMPTS_STYLE = (
    "font-size:var(--jp-widgets-font-size, 13px);line-height:var(--jp-widgets-inline-height, "
    "28px);margin-left:0.8em;color:var(--jp-ui-font-color1, #333)"
)


def _question_widget(quiz: Quiz, qid: str):
    import ipywidgets as w

    entry = quiz.entry(qid)
    saved = quiz.records.get(qid)
    order = quiz.order(qid)
    # Options carry their position on screen; quiz.answer translates it to the stored index.
    options = [(f"{letter(p)}) {text}", p) for p, text in enumerate(quiz.choices(qid))]
    full_width = w.Layout(width="100%")
    if entry["type"] == "single":
        chosen = order.index(saved["value"]) if saved else None
        field_ = w.RadioButtons(options=options, value=chosen, layout=full_width)
        read = lambda: field_.value  # noqa: E731
    elif entry["type"] == "multiple":
        chosen = {order.index(i) for i in saved["value"]} if saved else set()
        boxes = [
            w.Checkbox(value=p in chosen, description=label, indent=False, layout=full_width)
            for label, p in options
        ]
        field_ = w.VBox(boxes, layout=full_width)
        read = lambda: [p for p, box in enumerate(boxes) if box.value]  # noqa: E731
    elif entry["type"] == "numeric":
        # A text field, so that it starts empty: a number field would show 0, a value the learner
        # never typed. quiz.answer reads the text as a number and says so when it is none.
        shown = f"{saved['value']:.15g}" if saved else ""
        field_ = w.Text(value=shown, placeholder="a number, e.g. 0.5 or 1e-8")
        read = lambda: field_.value.strip()  # noqa: E731
    else:
        field_ = w.Text(value=saved["value"] if saved else "", placeholder="your answer")
        read = lambda: field_.value  # noqa: E731
    button = w.Button(description="Check", button_style="primary")
    feedback = w.HTML(layout=full_width)
    attempts = w.HTML()

    def show(view, count):
        feedback.value = to_html(view)
        attempts.value = f"<span style='{ATTEMPTS_STYLE}'>attempts: {count}</span>"

    if saved:
        stored, correct = saved["value"], saved.get("correct")
        show(quiz.feedback(qid, stored, correct, saved["attempts"]), saved["attempts"])

    def on_click(_):
        try:
            result = quiz.answer(qid, read(), show=False)
        except (ValueError, OSError) as error:
            feedback.value = f"<b>{_html_escape(str(error))}</b>"
            return
        show(result.view, result.attempts)

    button.on_click(on_click)
    tag = " <i>(graded)</i>" if entry["graded"] else ""
    header = w.HTML(f"<b>{_html_escape(entry['prompt'])}</b>{tag}", layout=full_width)
    box = w.VBox([header, field_, w.HBox([button, attempts]), feedback], layout=full_width)
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

        title = w.HTML(f"{STYLE}<h3>Quiz: {_html_escape(quiz.doc['title'])}</h3>")
        display(w.VBox([title] + [_question_widget(quiz, qid) for qid in ids]))
        if quiz.load_error:
            display(w.HTML(f"<b>⚠ {_html_escape(quiz.load_error)}</b>"))
    else:
        print(quiz.text(ids))
    return quiz
