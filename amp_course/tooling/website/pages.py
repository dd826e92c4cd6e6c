"""A lesson's web page: its executed copy with the learner's exercise blanks put back, a stamp under
the title naming what produced the outputs, Colab and download links, and its quiz's questions."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import nbformat

from ...paths import NOTEBOOKS, QUIZZES, ROOT, SITE
from .sources import Source

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
COLAB_URL = re.compile(r"https://colab\.research\.google\.com/github/[^)\s\"']+")
# The notebook's "Open In Colab" badge: an image from Colab's site; the stamp links Colab instead.
COLAB_BADGE = re.compile(
    r"^\[!\[[^\]]*\]\([^)]*\)\]\(https://colab\.research\.google\.com/[^)]*\)\s*$", re.M
)
# Characters that Markdown or MyST would read as markup in a quiz's plain text.
MARKUP = re.compile(r"([\\`*_{}\[\]<>|~$#])")


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def _markdown(text: str, cell_id: str):
    cell = nbformat.v4.new_markdown_cell(text)
    cell.id = cell_id  # fixed ids keep an unchanged page byte-identical, so Sphinx skips it
    return cell


def plain(text: str) -> str:
    """``text`` escaped so Markdown shows it as written."""
    return MARKUP.sub(r"\\\1", str(text))


def colab_url(committed) -> str | None:
    """The Colab link of the lesson's badge (the first cell names it)."""
    found = COLAB_URL.search(committed.cells[0].source) if committed.cells else None
    return found.group(0) if found else None


def when(stamp: dict) -> str:
    """The stamp's date as ``2025-01-31 14:05 UTC``."""
    date = dt.datetime.fromisoformat(stamp["date"]).astimezone(dt.timezone.utc)
    return date.strftime("%Y-%m-%d %H:%M UTC")


def stamp_markdown(source: Source, colab: str | None, download: str, gpu_page: str | None) -> str:
    """The box every lesson page opens with: device, torch version, date and mode, why a newer GPU
    run is not shown (if so), then links."""
    stamp = source.stamp
    lines = [
        ":::{admonition} Where the outputs on this page come from",
        ":class: amp-stamp",
        "",
        f"**Device:** {plain(stamp['device'])} · **torch** {plain(stamp['torch'])} · "
        f"**run:** {when(stamp)} · **mode:** {stamp['mode']}",
        "",
        f"<small>{plain(stamp['hardware'])}</small>",
        "",
    ]
    if stamp["mode"] == "smoke":
        lines.append(
            "**Smoke mode:** the course's test run executed this lesson with tiny sizes to prove "
            "that every cell works. Its timings are **not speed figures**: tiny sizes say nothing "
            "about how fast mixed precision is at full size on a GPU."
        )
        if gpu_page is None:
            lines.append(
                " No GPU run of this lesson yet: run the notebook on a GPU (Colab has one) to "
                "measure your own."
            )
        elif source.note:  # the run is of an earlier version of the lesson (the note says so)
            lines.append(f" An earlier version of this lesson ran on a GPU: [its run]({gpu_page}).")
        else:
            lines.append(f" Measured on a GPU: [the GPU run]({gpu_page}).")
    else:
        lines.append(f"**Full mode** on the GPU named above. [The GPU run]({gpu_page}).")
    if source.note:
        lines += ["", f"**Not the GPU run:** {plain(source.note)}"]
    links = [f"[Open in Colab]({colab})"] if colab else []
    links.append(f"{{download}}`Download the notebook <{download}>`")
    lines += ["", " · ".join(links), ":::"]
    return "\n".join(lines)


def quiz_markdown(lesson: str, root: Path = ROOT) -> str:
    """The lesson's quiz as its questions and choices, without answers, and where to answer it."""
    from ...quiz import Quiz

    # No answer file is read or written: the path names nothing, and nothing is answered.
    quiz = Quiz(lesson, quiz_dir=root / QUIZZES, answers_path=root / SITE / ".no-answers")
    kinds = {
        "single": "one answer",
        "multiple": "all that apply",
        "numeric": "a number",
        "text": "a word or short text",
    }
    lines = [
        f":::{{admonition}} Quiz: {plain(quiz.doc['title'])}",
        ":class: amp-quiz",
        "",
        "The quiz runs in the notebook: open the lesson in Colab or JupyterLab and run the cell "
        "above to answer with widgets (or in code, `quiz.answer(...)`). Self-check questions tell "
        "you at once whether you are right and explain every choice; *graded* questions are "
        "marked by your instructor. The answers are not on this page. The notebook shows each "
        "learner the choices in an order of their own, so this page gives them no letters.",
        "",
    ]
    for number, entry in enumerate(quiz.questions.values(), 1):
        graded = " **(graded)**" if entry.get("graded") else ""
        prompt = plain(entry["prompt"]).replace("\n", " ")
        lines.append(f"{number}. {prompt} *({kinds.get(entry['type'], entry['type'])})*{graded}")
        for choice in entry.get("choices", []):
            lines.append(f"   - {plain(choice)}")
    lines.append(":::")
    return "\n".join(lines)


def _blanks(committed) -> tuple[dict, dict]:
    by_id, by_name = {}, {}
    for cell in committed.cells:
        if cell.cell_type == "code" and "exercise" in _tags(cell):
            by_id[cell.get("id")] = cell
            by_name[cell.metadata.get("exercise", {}).get("name")] = cell
    return by_id, by_name


# Where the run filled the blank with the reference (the GPU run does), its check printed a pass;
# a run that left the blank as it is (the tests' smoke run) shows "Not done yet", as Run All does.
SOLVED_NOTE = (
    ":::{note}\nThe output of the check below is what it prints once the exercise is solved: the "
    "run that made this page filled the blank above with the course's reference solution. Run "
    "the notebook to check your own.\n:::"
)


def lesson_page(source: Source, download: str, gpu_page: str | None, root: Path = ROOT):
    """The page notebook of ``source.lesson`` (nbformat), ready for MyST-NB to render as is."""
    committed = nbformat.read(root / NOTEBOOKS / f"{source.lesson}.ipynb", as_version=4)
    executed = nbformat.read(source.path, as_version=4)
    by_id, by_name = _blanks(committed)
    cells, solved_above = [], False
    for cell in executed.cells:
        if "injected-parameters" in _tags(cell):  # papermill's settings: the stamp says them
            continue
        if cell.cell_type == "code" and "exercise" in _tags(cell):
            name = cell.metadata.get("exercise", {}).get("name")
            blank = by_id.get(cell.get("id")) or by_name.get(name)
            if blank is None:
                raise ValueError(f"{source.lesson}: exercise {name!r} is not in the notebook")
            cells.append(blank)  # the learner's blank: its code, no output
            solved_above = cell.source != blank.source  # the run filled it with the reference
            continue
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if WIDGET_MIME not in o.get("data", {})]
            if solved_above:
                cells.append(_markdown(SOLVED_NOTE, f"site-solved-{len(cells)}"))
            solved_above = False
        cells.append(cell)
        if "quiz" in _tags(cell):
            cell.outputs = []  # its text rendering ends in "answer in code"; the box says more
            cells.append(_markdown(quiz_markdown(source.lesson, root), "site-quiz"))
    stamp = stamp_markdown(source, colab_url(committed), download, gpu_page)
    title, _, rest = cells[0].source.partition("\n") if cells else ("", "", "")
    if cells and cells[0].cell_type == "markdown" and title.startswith("# "):
        cells[0].source = COLAB_BADGE.sub("", rest).lstrip("\n")
        cells[:0] = [_markdown(title, "site-title"), _markdown(stamp, "site-stamp")]
    else:
        cells.insert(0, _markdown(stamp, "site-stamp"))
    page = nbformat.v4.new_notebook(cells=cells)
    page.metadata = {
        key: executed.metadata[key]
        for key in ("kernelspec", "language_info")
        if key in executed.metadata
    }
    return page
