"""The checkout's layout and the lessons' order are named once, in ``ac.paths``, and every reader
(the runs, the website, the tests) agrees with them."""

import ast
import re

from conftest import ROOT

from amp_course import paths
from amp_course.tooling.website import sources as site_sources
from amp_course.tooling.website.build import index_markdown

# Folder and file names of the checkout that only ac.paths may spell.
LAYOUT = {"executed", "reports", "site", "quizzes", "README.md", "docs"}
BY_HAND = re.compile(r'\b(ROOT|root|Path\(root\))\s*/\s*"notebooks"')


def test_the_readme_table_lists_every_lesson_once_and_is_the_course_order():
    stems = [p.stem for p in paths.notebooks_in(ROOT / paths.NOTEBOOKS)]
    order = paths.readme_order()
    twice = sorted({name for name in order if order.count(name) > 1})
    assert not twice, f"listed more than once in the README's table: {twice}"
    assert sorted(order) == sorted(stems)  # every notebook is in the table; nothing else is
    assert [p.stem for p in paths.lesson_notebooks()] == order


def test_the_website_lists_the_lessons_in_the_same_order():
    assert site_sources.lessons() == [p.stem for p in paths.lesson_notebooks()]
    stamp = {"device": "cpu", "torch": "2", "date": "2026-01-01T00:00:00+00:00", "mode": "smoke"}
    given = [site_sources.Source(name, ROOT, stamp) for name in site_sources.lessons()]
    toc = re.findall(r"^lessons/(\S+)$", index_markdown(given), re.M)
    assert toc == site_sources.lessons()  # the index keeps the course order it is given


def test_a_lesson_the_readme_does_not_list_comes_last_by_name(tmp_path):
    (tmp_path / paths.NOTEBOOKS).mkdir()
    for name in ("00_a", "01_b", "labs_c", "zz_new", ".hidden"):
        (tmp_path / paths.NOTEBOOKS / f"{name}.ipynb").write_text("{}")
    (tmp_path / paths.README).write_text(
        "# c\n\n## Lessons\n\n| `01_b.ipynb` |\n| `labs_c.ipynb` |\n| `00_a.ipynb` |\n\n"
        "## Next\n\n`zz_new.ipynb` is mentioned outside the table.\n"
    )
    assert [p.stem for p in paths.lesson_notebooks(tmp_path)] == [
        "01_b",
        "labs_c",
        "00_a",
        "zz_new",
    ]
    (tmp_path / paths.README).unlink()  # no README: the names' order
    assert [p.stem for p in paths.lesson_notebooks(tmp_path)] == [
        "00_a",
        "01_b",
        "labs_c",
        "zz_new",
    ]


def test_no_module_composes_the_checkout_layout_by_hand():
    found = []
    for path in sorted((ROOT / "amp_course").rglob("*.py")):
        if path.name == "paths.py":
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{path.name}: {m.group(0)}" for m in BY_HAND.finditer(text)]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                first = node.value.split("/")[0]
                if first in LAYOUT and (node.value == first or "/" in node.value):
                    found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert found == [], "use ac.paths' names"
