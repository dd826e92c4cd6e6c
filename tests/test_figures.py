"""Every figure with a unit in lesson prose or quizzes is cited, computed, or a quiz premise.

What is checked: every markdown cell of ``notebooks/*.ipynb`` and every text of
``quizzes/source/*.yaml`` (prompts, choices, explanations). A *figure* is a number followed by a
unit of time, memory, throughput, work, speed-up, share or GPU count: ``22 s``, ``0.05 ms``,
``4.5 GiB``, ``989.4 TFLOP/s``, ``105.15 GFLOP``, ``1.7x``, ``95%``, ``8 GPUs`` (the full list is
``UNITS``; ``x`` counts only when it sticks to the number, so ``4 x 4`` is a product, not a
speed-up). Bits, bytes, bare FLOPs ("6 FLOPs per parameter") and parameter counts are left out:
they are definitions the lessons derive.

How "printed by a cell" is established: it is not. A figure a cell measures (a time, a peak
memory, an MFU) depends on the machine, so it never appears in prose; the prose says what to look
for and the cell prints the number. Prose may state a figure only if ``notebooks/citations.yaml``
lists it, as one of:

- ``source`` + ``cite``: a fact from outside the course. ``source`` is its URL, and the ``cite``
  text (the source's name, as the reader sees it) must stand in the same markdown cell or quiz
  text as the figure, so a cited figure keeps its citation where it is read.
- ``code``: a value the course computes the same way on every machine (a FLOP count on the meta
  device, a default of its own code). The Python expression must give exactly the figure; if the
  code changes, the prose is caught.
- ``question``: a premise of one quiz question ("suppose a step takes 0.1 s") or a value it derives
  from its premises; allowed in that question only.
- ``premise``: a claim one lesson cell states in order to test it with code (lesson 00's "8 GPUs
  in fp32, 4 with AMP"); allowed in that cell only.

Figures in cells whose owner is rewriting them are listed in ``PENDING`` with the reason; the test
fails as soon as one of them disappears, so the list can only shrink.
"""

import functools
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import torch
import yaml
from conftest import ROOT

import amp_course as ac

CITATIONS = ROOT / "notebooks" / "citations.yaml"
QUIZ_SOURCES = sorted((ROOT / "quizzes" / "source").glob("*.yaml"))
# The lessons, not the hidden copies that notebook tests write beside them while they run.
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("*.ipynb") if not p.name.startswith("."))

UNITS = (
    "TFLOP/s GFLOP/s PFLOP/s TFLOPS GFLOPS PFLOP TFLOP GFLOP MFLOP "
    "TB/s GB/s TiB GiB MiB KiB TB GB MB seconds second sec ms µs us ns s % GPUs GPU"
).split()
_NUMBER = r"(?<![\w.^/#-])(\d+(?:,\d{3})*(?:\.\d+)?)"
_SPACED = "|".join(re.escape(u) for u in UNITS)
FIGURE = re.compile(_NUMBER + rf"(?:\s?({_SPACED})|([x×]))(?![\w/])")

# Figures in cells their owners are rewriting: (location, figure, why it is still here).
PENDING: list[tuple[str, str, str]] = []


@dataclass(frozen=True)
class Text:
    location: str  # "<notebook>:<cell id>" or "<lesson>#<question id>"
    text: str


def normalize(number: str, unit: str) -> str:
    return number.replace(",", "") + ("x" if unit == "×" else unit)


def find_figures(text: str) -> list[str]:
    """The figures with a unit in ``text``, normalized (``"22 s"`` -> ``"22s"``)."""
    return [normalize(m[1], m[2] or m[3]) for m in FIGURE.finditer(text)]


def notebook_texts(paths=NOTEBOOKS) -> list[Text]:
    texts = []
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown":
                texts.append(Text(f"{path.name}:{cell.get('id')}", cell.source))
    return texts


def quiz_texts(paths=QUIZ_SOURCES) -> list[Text]:
    texts = []
    for path in paths:
        for question in yaml.safe_load(path.read_text())["questions"]:
            fields = [question.get("prompt"), question.get("explanation")]
            for choice in question.get("choices") or []:
                fields += [choice.get("text"), choice.get("explanation")]
            location = f"{path.stem}#{question['id']}"
            texts += [Text(location, str(f)) for f in fields if f]
    return texts


def evaluate(expression: str) -> str:
    names = {"ac": ac, "torch": torch, "functools": functools, "inspect": inspect}
    return str(eval(expression, names))  # the expression comes from the repository's own file


def allowed(figure: str, text: Text, entries: list[dict]) -> bool:
    for entry in entries:
        if find_figures(entry["figure"]) != [figure]:
            continue
        if "source" in entry and entry["cite"] in text.text:
            return True
        if "code" in entry:
            return True
        if text.location in (entry.get("question"), entry.get("premise")):
            return True
    return False


def offenders(texts: list[Text], entries: list[dict]) -> list[tuple[str, str]]:
    """(location, figure) for every figure that no entry allows where it stands."""
    return [
        (text.location, figure)
        for text in texts
        for figure in find_figures(text.text)
        if not allowed(figure, text, entries)
    ]


def pending() -> set[tuple[str, str]]:
    return {(location, find_figures(figure)[0]) for location, figure, _ in PENDING}


@pytest.fixture(scope="module")
def entries():
    return yaml.safe_load(CITATIONS.read_text())["figures"]


@pytest.fixture(scope="module")
def texts():
    return notebook_texts() + quiz_texts()


def test_every_figure_in_prose_and_quizzes_is_cited_computed_or_a_premise(texts, entries):
    found = [o for o in offenders(texts, entries) if o not in pending()]
    assert not found, (
        "Figures with a unit that notebooks/citations.yaml does not allow where they stand "
        "(cite the source next to the figure and list it, or let a cell print it instead):\n"
        + "\n".join(f"  {location}: {figure}" for location, figure in found)
    )


def test_pending_figures_are_still_there(texts, entries):
    left = pending() & set(offenders(texts, entries))
    assert left == pending(), f"remove from PENDING, now fixed: {sorted(pending() - left)}"


def test_every_citation_entry_is_well_formed_and_used(texts, entries):
    quiz_locations = {t.location for t in quiz_texts()}
    for entry in entries:
        kinds = [k for k in ("source", "code", "question", "premise") if k in entry]
        assert len(kinds) == 1 and entry.get("what"), entry
        (figure,) = find_figures(entry["figure"])
        if "source" in entry:
            assert entry["source"].startswith("https://") and entry.get("cite"), entry
        if "question" in entry:
            assert entry["question"] in quiz_locations, entry
        if "premise" in entry:
            assert entry["premise"] in {t.location for t in notebook_texts()}, entry
        used = [t for t in texts if figure in find_figures(t.text) and allowed(figure, t, [entry])]
        assert used, f"citation entry used nowhere (remove it): {entry}"


def test_computed_figures_equal_what_the_code_computes(entries):
    for entry in (e for e in entries if "code" in e):
        assert find_figures(evaluate(entry["code"])) == find_figures(entry["figure"]), entry


# The guard must not be trivially satisfiable: planted figures.
PLANTED = Text("99_planted.ipynb:abc", "An epoch takes 42 s on a T4, 1.7x faster; a 4 x 4 matrix.")
CITED = {"figure": "42 s", "what": "planted", "source": "https://example.org", "cite": "Example"}


def test_a_planted_uncited_figure_is_caught():
    assert find_figures(PLANTED.text) == ["42s", "1.7x"]
    assert offenders([PLANTED], []) == [(PLANTED.location, "42s"), (PLANTED.location, "1.7x")]


def test_a_citation_counts_only_where_the_text_names_its_source():
    assert offenders([PLANTED], [CITED]) == [(PLANTED.location, "42s"), (PLANTED.location, "1.7x")]
    named = Text(PLANTED.location, PLANTED.text + " (Example benchmark)")
    assert offenders([named], [CITED]) == [(named.location, "1.7x")]


def test_a_premise_is_allowed_in_its_question_only():
    entry = {"figure": "0.1 s", "what": "premise", "question": "05_speed_memory#mfu-compute"}
    inside = Text("05_speed_memory#mfu-compute", "Suppose a step takes 0.1 s.")
    elsewhere = Text("05_speed_memory#other", "A step takes 0.1 s.")
    assert offenders([inside, elsewhere], [entry]) == [("05_speed_memory#other", "0.1s")]


def test_a_lesson_premise_is_allowed_in_its_cell_only():
    entry = {"figure": "8 GPUs", "what": "claim", "premise": "00_scenario.ipynb:intro"}
    inside = Text("00_scenario.ipynb:intro", "The job needs 8 GPUs in fp32, they say.")
    elsewhere = Text("00_scenario.ipynb:summary", "The job needs 8 GPUs.")
    assert offenders([inside, elsewhere], [entry]) == [("00_scenario.ipynb:summary", "8GPUs")]


def test_the_guard_reads_real_notebooks_and_quizzes(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("Each step takes 12.5 ms here.", id="planted")]
    path = tmp_path / "99_planted.ipynb"
    nbformat.write(nb, path)
    quiz = tmp_path / "99_planted.yaml"
    quiz.write_text(
        yaml.safe_dump(
            {"questions": [{"id": "q", "prompt": "Why 3.5 GiB?", "choices": [{"text": "8 GPUs"}]}]}
        )
    )
    found = offenders(notebook_texts([Path(path)]) + quiz_texts([quiz]), [])
    assert found == [
        ("99_planted.ipynb:planted", "12.5ms"),
        ("99_planted#q", "3.5GiB"),
        ("99_planted#q", "8GPUs"),
    ]
