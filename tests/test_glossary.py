"""The terms the course uses without stopping to explain them: each has an entry in the glossary
(docs/glossary.md, a page of the website), and where the core lessons use one first, read in
order, that first use links to the glossary."""

import re

import nbformat
import pytest
from conftest import DEEPER, ROOT

GLOSSARY = ROOT / "docs" / "glossary.md"
LINK = re.compile(r"\[([^\]]+)\]\(\.\./docs/glossary\.md\)")
# The core path in reading order: where a newcomer meets these terms first.
CORE = [
    "00_scenario",
    "01_number_formats",
    "02_autocast",
    "03_grad_scaler",
    "04_training_loops",
    "08_capstone",
]
# {glossary entry (its bold title): how the lessons write the term}
TERMS = {
    "Autocast's op lists": r"autocast's (?:CPU and CUDA |float32 |lower-precision )?lists?"
    r"|\bop lists",
    "Binade": r"\bbinades?\b",
    "Compute capability": r"compute capability",
    "Epsilon (eps)": r"\beps\b|epsilon",
    "FSDP / ZeRO-3": r"\bZeRO-3\b|\bFSDP\b",
    "Fake tensors (`FakeTensorMode`)": r"FakeTensorMode|fake tensors?",
    "GEMM": r"\bGEMMs?\b",
    "Interquartile range (IQR)": r"interquartile|\bIQR\b",
    "Logsumexp": r"\blogsumexp\b",
    "Subnormal number": r"\bsubnormals?\b",
    "Tensor cores": r"\btensor cores?\b",
    "TF32": r"\bTF32\b",
}


def first_use(pattern: str, folds: bool):
    """(lesson, cell index, the text searched, the match) of the term's first use in the core
    lessons' prose, the Deeper folds included or left out (the main path), or None."""
    for lesson in CORE:
        cells = nbformat.read(ROOT / "notebooks" / f"{lesson}.ipynb", as_version=4).cells
        for index, cell in enumerate(cells):
            if cell.cell_type == "markdown":
                text = cell.source if folds else DEEPER.sub("", cell.source)
                found = re.search(pattern, text, re.IGNORECASE)
                if found:
                    return lesson, index, text, found
    return None


def test_every_term_has_its_entry_and_nothing_else_is_listed():
    entries = re.findall(r"^\*\*(.+?)\.\*\*", GLOSSARY.read_text(encoding="utf-8"), re.MULTILINE)
    assert sorted(entries) == sorted(TERMS)


@pytest.mark.parametrize("folds", [True, False], ids=["with the folds", "main path"])
@pytest.mark.parametrize("term", sorted(TERMS))
def test_the_first_use_in_the_core_lessons_links_to_the_glossary(term, folds):
    """Read with the Deeper folds open or closed, the term's first use links to the glossary."""
    used = first_use(TERMS[term], folds)
    if used is None:
        pytest.skip(f"{term}: not used in the core lessons' prose")
    lesson, index, text, found = used
    linked = any(link.start(1) <= found.start() < link.end(1) for link in LINK.finditer(text))
    assert linked, f"{lesson} cell {index}: {text[max(0, found.start() - 80) : found.end() + 40]!r}"


def test_the_check_catches_an_unlinked_first_use():
    text = "Tensor cores run it. [tensor cores](../docs/glossary.md)"
    found = re.search(TERMS["Tensor cores"], text, re.IGNORECASE)
    assert not any(m.start(1) <= found.start() < m.end(1) for m in LINK.finditer(text))
