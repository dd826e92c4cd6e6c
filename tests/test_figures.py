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

The executed GPU copies under ``reports/gpu/`` are held to the same rule, and to one more that only
an executed copy can be checked against: prose that quotes a measured effect (``+20%``, ``1.8x``,
``15% less``, "roughly a third more") must agree with an effect of the same kind printed by the
code cells right before or after it, where those print any (``EFFECT_TOLERANCE``). Cited and
computed figures are facts, not this page's measurement, and are left out. A contradiction in a
copy that the next GPU run replaces is listed under ``contradictions`` in ``citations.yaml`` with
the reason; the test fails on any other, and on a listed one that is gone.
"""

import functools
import inspect
import math
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import torch
import yaml
from conftest import ROOT

import amp_course as ac

CITATIONS = ROOT / "notebooks" / "citations.yaml"
GPU_COPIES = sorted((ROOT / "reports" / "gpu").glob("*/notebooks/*.ipynb"))
QUIZ_SOURCES = sorted((ROOT / "quizzes" / "source").glob("*.yaml"))
# The lessons, not the hidden copies that notebook tests write beside them while they run.
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("*.ipynb") if not p.name.startswith("."))

UNITS = (
    "TFLOP/s GFLOP/s PFLOP/s TFLOPS GFLOPS PFLOP TFLOP GFLOP MFLOP "
    "TB/s GB/s TiB GiB MiB KiB TB GB MB seconds second sec ms µs us ns s % GPUs GPU SMs"
).split()
_NUMBER = r"(?<![\w.^/#-])(\d+(?:,\d{3})*(?:\.\d+)?)"
_SPACED = "|".join(re.escape(u) for u in UNITS)
FIGURE = re.compile(_NUMBER + rf"(?:\s?({_SPACED})|([x×]))(?![\w/])")


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


@pytest.fixture(scope="module")
def entries():
    return yaml.safe_load(CITATIONS.read_text())["figures"]


@pytest.fixture(scope="module")
def acknowledged():
    """(page, cell id, prose) of the contradictions listed in citations.yaml, with their reasons."""
    listed = yaml.safe_load(CITATIONS.read_text()).get("contradictions") or []
    for entry in listed:
        assert set(entry) == {"page", "cell", "prose", "why"} and entry["why"], entry
    return {(e["page"], e["cell"], e["prose"]) for e in listed}


@pytest.fixture(scope="module")
def texts():
    return notebook_texts() + quiz_texts()


def test_every_figure_in_prose_and_quizzes_is_cited_computed_or_a_premise(texts, entries):
    found = offenders(texts, entries)
    assert not found, (
        "Figures with a unit that notebooks/citations.yaml does not allow where they stand "
        "(cite the source next to the figure and list it, or let a cell print it instead):\n"
        + "\n".join(f"  {location}: {figure}" for location, figure in found)
    )


def test_every_citation_entry_is_well_formed_and_used(texts, entries):
    quiz_locations = {t.location for t in quiz_texts()}
    everywhere = texts + notebook_texts(GPU_COPIES)  # a committed GPU copy may predate prose
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
        used = [
            t for t in everywhere if figure in find_figures(t.text) and allowed(figure, t, [entry])
        ]
        assert used, f"citation entry used nowhere (remove it): {entry}"


def test_computed_figures_equal_what_the_code_computes(entries):
    for entry in (e for e in entries if "code" in e):
        assert find_figures(evaluate(entry["code"])) == find_figures(entry["figure"]), entry


def _number(figure: str) -> float:
    """The number of a figure as citations.yaml writes it: ``"989.4 TFLOP/s"`` -> 989.4."""
    (normalized,) = find_figures(figure)
    return float(re.match(r"[\d.]+", normalized)[0])


def _from_nvidia(entry: dict) -> bool:
    host = urllib.parse.urlparse(entry.get("source", "")).hostname or ""
    return host == "nvidia.com" or host.endswith(".nvidia.com")


def test_datasheet_figures_are_read_from_the_table_of_gpus(entries):
    """A GPU's datasheet figure in prose is the table's: its entry reads it from ac.gpus."""
    for entry in entries:
        if _from_nvidia(entry):
            assert "table" in entry, f"read this NVIDIA figure from ac.gpus (`table`): {entry}"
        if "table" in entry:
            value = float(evaluate(entry["table"]))
            assert "source" in entry, entry
            assert value == _number(entry["figure"]), (
                f"{entry['table']} gives {value:g}; the prose says {entry['figure']}"
            )


def datasheet_numbers(text: Text, entries: list[dict]) -> list[str]:
    """The numbers in ``text`` that equal a datasheet figure (a dense peak or the bandwidth, in
    ac.gpus; its SM count where the text speaks of SMs) of a card the text names, unit or not
    ("A100 19.5 fp32", "a T4 has 40"), and that no entry with a ``table`` allows there (its cite
    in the same text). Small whole numbers (the H100 PCIe's 2.0 TB/s) are left out: "2 bytes"
    beside "H100" is no datasheet figure."""
    cited = {_number(e["figure"]) for e in entries if "table" in e and e["cite"] in text.text}
    speaks_of_sms = re.search(r"\bSMs?\b", text.text)
    figures = set()
    for gpu in ac.gpus.GPUS.values():
        if re.search(rf"\b{gpu.model.split()[0]}\b", text.text):  # "H100 SXM" -> "H100"
            values = (*gpu.peak_tflops.values(), gpu.bandwidth_tbs)
            values += (gpu.sms,) if speaks_of_sms and gpu.sms else ()
            figures |= {v for v in values if v >= 10 or not float(v).is_integer()}
    numbers = [m[1] for m in re.finditer(_NUMBER, text.text)]
    return [n for n in numbers if float(n.replace(",", "")) in figures - cited]


def test_no_card_s_datasheet_figure_is_typed_in_prose_uncited(texts, entries):
    found = [(t.location, n) for t in texts for n in datasheet_numbers(t, entries)]
    assert not found, (
        "GPU datasheet figures typed in prose without a citation that reads them from ac.gpus "
        "(let a cell print them from the table, or cite them with `table`):\n"
        + "\n".join(f"  {location}: {number}" for location, number in found)
    )


def test_a_planted_datasheet_figure_is_caught(entries):
    typed = Text("01_planted.ipynb:x", "**A100** 19.5 fp32, 156 TF32, 312 fp16/bf16; T4 64 GB")
    assert datasheet_numbers(typed, entries) == ["19.5", "156", "312"]
    quoted = "On an H100 SXM FP8 doubles the bf16 peak (1978.9 against 989.4 TFLOP/s"
    assert datasheet_numbers(Text("11_planted.ipynb:y", quoted + ")"), entries) == [
        "1978.9",
        "989.4",
    ]
    assert datasheet_numbers(Text("11_planted.ipynb:y", quoted + ", NVIDIA)"), entries) == []
    assert datasheet_numbers(Text("x", "19.5 fp32, 156 TF32 (no card named)"), entries) == []
    sms = Text("10_planted.ipynb:z", "tiles shared out over an H100 SXM's 132 SMs; a T4 has 40")
    assert datasheet_numbers(sms, entries) == ["132", "40"]
    # An SM count counts where the text speaks of SMs: "0.4, not 40" beside a T4 is no SM count.
    assert datasheet_numbers(Text("05_planted.ipynb:w", "a T4: 0.4, not 40"), entries) == []


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


# ---- Measured effects in the prose of executed GPU copies, against what the page printed --------
EFFECT_TOLERANCE = 1.15  # a quoted effect agrees with a printed one within this ratio either way
FRACTIONS = {
    "a tenth": 0.1,
    "a fifth": 0.2,
    "a quarter": 0.25,
    "a third": 1 / 3,
    "half": 0.5,
    "two thirds": 2 / 3,
    "three quarters": 0.75,
}
MORE, LESS = ("more", "longer", "larger", "higher"), ("less", "shorter", "smaller", "lower")
_DIRECTION = "|".join(MORE + LESS)
WORDED = re.compile(rf"\b({'|'.join(FRACTIONS)})\s+({_DIRECTION})\b", re.I)
PERCENT = re.compile(
    rf"(?<![\w.^/#])([+\-−])?(\d+(?:,\d{{3}})*(?:\.\d+)?)\s?%(?:\s+({_DIRECTION})\b)?"
)
FACTOR = re.compile(rf"{_NUMBER}[x×](?![\w/])")


def effects(text: str, words: bool = True) -> list[tuple[str, float]]:
    """(as written, ratio) for each effect ``text`` quotes: ``+63%`` is 1.63, ``15% less`` 0.85,
    ``1.8x`` 1.8, "a third more" 1.33 (worded fractions only when ``words``). A bare percentage
    says no direction (a share, a threshold) and is left out."""
    found = []
    if words:
        for m in WORDED.finditer(text):
            share = FRACTIONS[m[1].lower()]
            found.append((m[0], 1 + share if m[2].lower() in MORE else 1 - share))
    for m in PERCENT.finditer(text):
        sign, share, direction = m[1], float(m[2].replace(",", "")) / 100, (m[3] or "").lower()
        if sign or direction:
            more = sign == "+" if sign else direction in MORE
            found.append((m[0], 1 + share if more else 1 - share))
    found += [(m[0], float(m[1].replace(",", ""))) for m in FACTOR.finditer(text)]
    return found


def printed_text(cell) -> str:
    """What a code cell printed or displayed as text (not the plain-text twin of an HTML table)."""
    parts = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        parts += [output.get("text", ""), data.get("text/markdown", "")]
        if "text/html" not in data:
            parts.append(data.get("text/plain", ""))
    return "\n".join(parts)


def neighbouring_code(cells, index: int) -> list:
    """The code cells right before and right after markdown cell ``index`` (up to other prose)."""
    near = []
    for step in (-1, 1):
        i = index + step
        while 0 <= i < len(cells) and cells[i].cell_type == "code":
            near.append(cells[i])
            i += step
    return near


def contradictions(path: Path, entries: list[dict]) -> list[tuple[str, str, str, str]]:
    """(page, cell id, prose, what the cells beside it printed) where the two disagree."""
    page = f"{path.parent.parent.name}/{path.name}"
    cells = nbformat.read(path, as_version=4).cells
    found = []
    for index, cell in enumerate(cells):
        if cell.cell_type != "markdown":
            continue
        text = Text(f"{path.name}:{cell.get('id')}", cell.source)
        printed = [
            effect
            for code in neighbouring_code(cells, index)
            for effect in effects(printed_text(code), words=False)
        ]
        if not printed:
            continue  # nothing printed beside it to check against
        for prose, ratio in effects(cell.source):
            figures = find_figures(prose)
            if figures and allowed(figures[0], text, entries):
                continue  # a cited fact or a computed constant, not this page's measurement
            if not any(
                value > 0 and abs(math.log(value / ratio)) <= math.log(EFFECT_TOLERANCE)
                for _, value in printed
            ):
                shown = ", ".join(written for written, _ in printed)
                found.append((page, cell.get("id"), prose, shown))
    return found


def test_gpu_copies_hold_no_uncited_figure(entries):
    assert GPU_COPIES, "no executed GPU copy under reports/gpu/"
    assert offenders(notebook_texts(GPU_COPIES), entries) == []


def test_gpu_copies_prose_agrees_with_the_effects_they_printed(entries, acknowledged):
    found = [c for path in GPU_COPIES for c in contradictions(path, entries)]
    new = [c for c in found if c[:3] not in acknowledged]
    assert not new, (
        "Prose quotes an effect that the cells beside it contradict (read it from the printed "
        "numbers, or list it under contradictions in notebooks/citations.yaml with the reason):\n"
        + "\n".join(
            f"  {page}:{cell}: {prose!r}, printed: {shown}" for page, cell, prose, shown in new
        )
    )
    gone = acknowledged - {c[:3] for c in found}
    assert not gone, f"remove from contradictions in citations.yaml, now gone: {sorted(gone)}"


def _executed_page(tmp_path, prose, printed):
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("print(...)", id="timed")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    nb.cells = [nbformat.v4.new_markdown_cell(prose, id="claim"), code]
    path = tmp_path / "gpu-x" / "notebooks" / "99_planted.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize(
    "prose, printed, caught",
    [
        ("Expect roughly a third more time.", "checkpointing costs +63% time", True),
        ("Expect roughly a third more time.", "checkpointing costs +31% time", False),
        ("bf16 is 2.5x faster here.", "bf16: 0.84x the fp32 time; tf32 2.01x", True),
        ("bf16 is 2x faster here.", "speed-up 2.1x", False),
        ("It uses 15% less memory.", "peak memory -40%", True),
        ("Expect a third more time.", "no effect printed here", False),
        ("An epoch takes 42 s, 1.7x faster (Example).", "speed-up 0.8x", False),  # cited
    ],
)
def test_a_planted_contradiction_is_caught(tmp_path, prose, printed, caught):
    cited = {
        "figure": "1.7x",
        "what": "planted",
        "source": "https://example.org",
        "cite": "Example",
    }
    found = contradictions(_executed_page(tmp_path, prose, printed), [cited])
    assert bool(found) is caught, found
    if caught:
        assert found[0][:2] == ("gpu-x/99_planted.ipynb", "claim")
