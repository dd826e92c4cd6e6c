"""Each lesson's main path fits its stated time: its prose outside the folded "Deeper" blocks
at about 150 words a minute, plus its exercises, is within the **Time:** under its title. The
asides (kernels, dispatch, allocators, internals) sit in ``<details>`` blocks that JupyterLab,
Colab, GitHub and the website show folded."""

import re

import nbformat
import pytest
from conftest import DEEPER, NOTEBOOKS, ROOT

LESSONS = [path.stem for path in NOTEBOOKS]
WORDS_PER_MINUTE = 150
MINUTES_PER_EXERCISE = 5  # reading the task, writing a few lines, running the check


def main_path_words(cells) -> int:
    prose = [DEEPER.sub("", c.source) for c in cells if c.cell_type == "markdown"]
    return sum(len(text.split()) for text in prose)


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_main_path_fits_the_stated_time(lesson):
    cells = nbformat.read(ROOT / "notebooks" / f"{lesson}.ipynb", as_version=4).cells
    stated = int(re.search(r"\*\*Time:\*\* about (\d+) minutes", cells[0].source).group(1))
    exercises = sum("exercise" in c.metadata.get("tags", []) for c in cells)
    minutes = main_path_words(cells) / WORDS_PER_MINUTE + MINUTES_PER_EXERCISE * exercises
    assert minutes <= stated, f"{lesson}: {minutes:.1f} minutes of main path, {stated} stated"


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_fold_is_a_deeper_block(lesson):
    """A ``<details>`` block is a Deeper aside, with its summary, its content apart by blank lines
    (so Markdown inside it renders) and its end."""
    for cell in nbformat.read(ROOT / "notebooks" / f"{lesson}.ipynb", as_version=4).cells:
        if cell.cell_type == "markdown":
            opened = cell.source.count("<details>")
            assert opened == cell.source.count("</details>") == len(DEEPER.findall(cell.source))
            # A summary is raw HTML: Markdown there shows as typed (`LossScaler`, backticks too).
            summaries = re.findall(r"<summary>(.*?)</summary>", cell.source, flags=re.S)
            assert not [s for s in summaries if "`" in s or "**" in s], summaries


def test_a_deeper_block_is_left_out_of_the_count():
    text = "one two\n\n<details>\n<summary><b>Deeper:</b> why</summary>\n\nthree four\n\n</details>"
    assert main_path_words([nbformat.v4.new_markdown_cell(text)]) == 2
