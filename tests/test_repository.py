"""The repository's own promises: stripped notebooks with one parameters cell, matching env
files."""

import re
import subprocess

import nbformat
import pytest
import yaml
from conftest import NOTEBOOKS, ROOT, tagged

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the course itself runs on 3.10 too


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no lessons"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stripped_and_has_one_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), (
        f"{path.name} is committed with outputs"
    )
    params = tagged(nb, "parameters")
    assert len(params) == 1, f"{path.name} has {len(params)} parameters cells"
    for name in ("SMOKE", "DEVICE", "SEED"):
        assert re.search(rf"^{name}\s*=", params[0].source, re.M), f"{name} missing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_follows_the_skeleton(path):
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert nb.cells[0].source.startswith("# "), "title first"
    assert "colab.research.google.com" in nb.cells[0].source and path.name in nb.cells[0].source
    assert "Where the figures come from" in nb.cells[0].source, (
        "the opening names the figures' device"
    )
    for needed in ("**Time:**", "## Summary", "pitfalls", "## Quiz"):
        assert needed in text, f"{path.name} lacks {needed!r}"
    assert any("import amp_course as ac" in c.source for c in nb.cells if c.cell_type == "code")


LABS = [path for path in NOTEBOOKS if path.stem.startswith("labs_")]


@pytest.mark.parametrize("path", LABS, ids=[p.stem for p in LABS])
def test_a_labs_fixes_wait_behind_a_folded_heading(path):
    """A lab's summary and pitfalls state the fixes: they sit in a section that opens folded in
    JupyterLab, "After you have fixed the labs", not straight under the last check."""
    cells = nbformat.read(path, as_version=4).cells
    last_check = max(i for i, cell in enumerate(cells) if "check" in cell.metadata.get("tags", []))
    at = last_check + 1
    # The last lab's cause may follow its check, as every lab's does: one "Why it broke" cell
    # and the code cells that show it.
    if cells[at].source.startswith("**Why it broke**"):
        at += 1
        while cells[at].cell_type == "code":
            at += 1
    after = cells[at]
    assert after.cell_type == "markdown", path.name
    assert after.source.startswith("## After you have fixed the labs\n"), path.name
    assert after.metadata.get("jp-MarkdownHeadingCollapsed") is True, path.name
    section = []  # the section's cells: up to the next heading of its level
    for cell in cells[at + 1 :]:
        if cell.cell_type == "markdown" and re.match(r"#{1,2} ", cell.source):
            break
        section.append(cell.source)
    text = "\n".join(section)
    assert re.search(r"^### Summary$", text, re.M) and re.search(r"^### .*pitfalls", text, re.M)
    # JupyterLab's button under the folded heading names how many cells it hides.
    hidden = f"{len(section)} cell{'s' if len(section) > 1 else ''} hidden"
    assert f'click "{hidden}"' in after.source, (path.name, hidden)
    before = "\n".join(c.source for c in cells[:at] if c.cell_type == "markdown")
    assert "Summary" not in before and "pitfalls" not in before.lower(), path.name


def _names(requirements):
    return {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0].lower() for r in requirements}


def test_environment_yml_agrees_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = set(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted |= set(extra)
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_deps = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {d for d in pip_deps if not d.startswith("-e")}
    assert listed == wanted, (
        f"only in pyproject: {wanted - listed}; only in environment.yml: {listed - wanted}"
    )


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make course" in readme
    assert re.search(r"^make test\b", ci, re.M)


README_LIMIT = 15_000  # characters: an entrance, the rest in the guides it links
GUIDES = ("instructors", "gpu-run", "helper-package", "contributing")


def test_the_readme_is_an_entrance_that_links_every_guide():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme) <= README_LIMIT, f"README.md has {len(readme)} characters"
    on_disk = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert set(GUIDES) <= on_disk
    for stem in on_disk:
        assert f"](docs/{stem}.md)" in readme, f"README.md does not link docs/{stem}.md"
    # Moved, not dropped: each guide holds the README's former section by its heading.
    headings = {
        "instructors": ("## Quizzes (for learners)", "## Grading (for instructors)"),
        "gpu-run": ("# Benchmarks and the GPU run",),
        "helper-package": ("# The helper package",),
        "contributing": ("## Notebook conventions", "## Tests", "## The course as a website"),
    }
    for stem, wanted in headings.items():
        lines = (ROOT / "docs" / f"{stem}.md").read_text(encoding="utf-8").splitlines()
        assert all(h in lines for h in wanted), stem


def test_the_readme_installs_for_a_cpu_laptop_and_a_gpu_side_by_side():
    """A learner on a CPU laptop gets the CPU build's line, not only the 5.5 GB CUDA build's; the
    learner's next step is lesson 00 in the workspace, JupyterLab comes with the course extra, and
    `make test` is offered to instructors, not to them."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = readme.split("## Install and open the course\n", 1)[1].split("\n## ", 1)[0]
    cpu = install.index("`make course TORCH_INDEX=https://download.pytorch.org/whl/cpu`")
    assert cpu < install.index("| `make course` |")  # the two in one table row, CPU first
    assert "5.5 GB" in install and "CPU build" in install and "124 MB" in install
    assert "no GPU needed" not in readme.lower()
    assert "Then open `00_scenario.ipynb`" in install and "Colab" in install
    assert "Your copy of the lessons is `workspace/`" in install and "make fresh LESSON=" in install
    assert '`pip install ".[course]"`' in install and "installs no JupyterLab" in install
    assert "make test" not in install
    makefile = (ROOT / "Makefile").read_text()
    assert "TORCH_INDEX ?=" in makefile and "$(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))" in (
        makefile
    )
    guide = readme.split("## For instructors and contributors\n", 1)[1]
    assert re.search(r"^make test\b", guide, re.M)


def test_make_test_lints_and_format_checks_before_pytest():
    # `make -n` prints the commands `make test` would run without running them.
    commands = subprocess.run(
        ["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    steps = ("/ruff check .", "/ruff format --check .", "-m pytest")
    found = [next((i for i, c in enumerate(commands) if step in c), None) for step in steps]
    assert None not in found and found == sorted(found), (steps, commands)
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["test"]
    assert any(re.fullmatch(r"ruff==[0-9.]+", r) for r in test_extra), "ruff is not pinned"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_setup_cell_is_the_canonical_one(path):
    from amp_course.lesson import SETUP_CELL

    nb = nbformat.read(path, as_version=4)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert first_code.source == SETUP_CELL, (
        f"{path.name}: setup cell differs from amp_course.lesson.SETUP_CELL"
    )
