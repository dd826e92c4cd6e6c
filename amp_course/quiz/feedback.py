"""What a learner is told after an answer, as text and as HTML.

The explanation of what the learner chose comes first. A wrong first attempt shows only that:
the explanations of the other choices (which would give the answer away) and the question's own
explanation follow after a right answer or a second attempt.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from .order import letter

GRADED = "Answer saved. This question is graded by your instructor."


@dataclass
class Item:
    """One choice in the feedback, as the learner sees it."""

    label: str  # its letter on screen
    text: str
    why: str
    chosen: bool
    right: bool | None  # None: not revealed yet


@dataclass
class FeedbackView:
    correct: bool | None  # None: a graded question
    items: list[Item] = field(default_factory=list)
    explanation: str = ""  # the question's own explanation, once revealed
    note: str = ""


def build(entry, order, notes, stored, correct, attempts, right) -> FeedbackView:
    """The feedback for ``stored`` (indices in the published file for choice questions).

    ``order`` maps positions on screen to published indices, ``notes`` are the revealed
    explanations, ``right`` the indices of the right choices.
    """
    if correct is None:
        return FeedbackView(None, note=GRADED)
    full = correct or attempts >= 2
    chosen = set(stored) if isinstance(stored, list) else {stored}
    items = [
        Item(
            letter(position),
            entry["choices"][index],
            notes["choices"][index],
            index in chosen,
            (index in right) if full and right is not None else None,
        )
        for position, index in enumerate(order)
    ]
    items = [i for i in items if i.chosen] + ([i for i in items if not i.chosen] if full else [])
    note = ""
    if not full:
        rest = "the other choices' explanations appear" if order else "the explanation appears"
        note = f"Try again: {rest} after a right answer or a second attempt."
    return FeedbackView(correct, items, notes["explanation"] if full else "", note)


def _mark(item: Item) -> str:
    marks = ["your choice"] if item.chosen else []
    if item.right is not None:
        marks.append("right" if item.right else "wrong")
    return f" ({', '.join(marks)})" if marks else ""


def to_text(view: FeedbackView) -> str:
    if view.correct is None:
        return view.note
    lines = ["✓ Correct." if view.correct else "✗ Not quite."]
    for item in view.items:
        lines.append(f"{'→' if item.chosen else ' '} {item.label}) {item.text}{_mark(item)}")
        lines.append(f"     {item.why}")
    lines += [text for text in (view.explanation, view.note) if text]
    return "\n".join(lines)


VERDICT_STYLE = {
    True: ("✓ Correct.", "#1e7e34", "#e6f4ea"),
    False: ("✗ Not quite.", "#b02a37", "#fbe9eb"),
}


def to_html(view: FeedbackView) -> str:
    """The feedback as HTML that wraps like prose (no fixed-width text)."""
    if view.correct is None:
        return f"<div class='amp-quiz-feedback'><p>{html.escape(view.note)}</p></div>"
    verdict, colour, background = VERDICT_STYLE[view.correct]
    parts = [
        f"<div class='amp-quiz-verdict' style='color:{colour};background:{background};"
        f"padding:2px 8px;border-radius:4px;font-weight:bold'>{verdict}</div>"
    ]
    rows = []
    for item in view.items:
        badge = ""
        if item.right is not None:
            badge = (
                "<span style='color:#1e7e34'>✓ right</span>"
                if item.right
                else "<span style='color:#b02a37'>✗ wrong</span>"
            )
        chosen = " <i>(your choice)</i>" if item.chosen else ""
        rows.append(
            f"<li><b>{item.label})</b> {html.escape(item.text)}{chosen} {badge}"
            f"<br><span style='color:#444'>{html.escape(item.why)}</span></li>"
        )
    if rows:
        parts.append(f"<ul style='padding-left:1.2em;margin:4px 0'>{''.join(rows)}</ul>")
    parts += [f"<p>{html.escape(text)}</p>" for text in (view.explanation, view.note) if text]
    style = "white-space:normal;overflow-wrap:break-word;word-break:normal;line-height:1.4"
    return f"<div class='amp-quiz-feedback' style='{style}'>{''.join(parts)}</div>"
