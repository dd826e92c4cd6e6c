"""The course's website: each lesson's page rebuilt from an executed copy (the newest passing GPU
run, else the tests' smoke run) with the learner's blanks and a stamp; the built site in Chromium.

The site shows the copies in ``executed/`` that tests/test_notebooks.py's papermill run writes.
"""

import base64
import contextlib
import functools
import http.server
import io
import json
import re
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from conftest import (
    CHROMIUM,
    CHROMIUM_ARGS,
    NOTEBOOKS,
    ROOT,
    free_port,
    has_tag,
    lessons_executed_here,
    require,
    require_chromium,
    tagged,
)

from amp_course.bench import plot_report
from amp_course.quiz import Quiz
from amp_course.tooling import website
from amp_course.tooling.executed import STAMP_KEY
from amp_course.tooling.runs.execute import prepare
from amp_course.tooling.website import guides, pages
from amp_course.tooling.website.build import write_sources

SCREENSHOT_OF = "05_speed_memory"
# The committed GPU run the GPU guide quotes (a benchmark and its profile beside the lessons).
MAIN_RUN = next(
    p.parent.parent for p in sorted((ROOT / "reports/gpu").glob("*/bench-vit_b16/bench.json"))
)  # timings and plots: the page a reviewer should look at


# ---------------------------------------------------------------- choosing and assembling pages


def _course(tmp_path, lessons=("00_scenario", "01_number_formats")) -> Path:
    """A course checkout holding only ``lessons``, the README, its guides and the published
    quizzes."""
    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    for lesson in lessons:
        shutil.copy(ROOT / "notebooks" / f"{lesson}.ipynb", root / "notebooks")
    shutil.copy(ROOT / "README.md", root)
    (root / "docs").symlink_to(ROOT / "docs")
    (root / "quizzes").symlink_to(ROOT / "quizzes")
    return root


def _run_copy(root, lesson, dest, *, mode, device, date, solved=True):
    """An executed copy as a run leaves it: solutions in the blanks (unless not ``solved``: the
    blanks as they are), outputs, the stamp."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    prepare(root / "notebooks" / f"{lesson}.ipynb", dest.parent, solved=solved, name=dest.name)
    nb = nbformat.read(dest, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            output = nbformat.v4.new_output("stream", name="stdout", text=f"ran on {device}\n")
            cell.outputs = [output]
    nb.metadata[STAMP_KEY] = {
        "device": device,
        "hardware": f"{device}, as described by the run",
        "torch": "2.11.0",
        "date": date,
        "mode": mode,
    }
    nbformat.write(nb, dest)


def _gpu_run(
    root, name, device, date, status="passed", lesson="01_number_formats", report=True, **extra
):
    folder = root / "reports" / "gpu" / name
    _run_copy(
        root,
        lesson,
        folder / "notebooks" / f"{lesson}.ipynb",
        mode="full",
        device=device,
        date=date,
    )
    if report:
        runs = [{"notebook": f"{lesson}.ipynb", "status": status, "seconds": 12.5}]
        record = {"device": device, "torch": "2.11.0", "date": date, "notebooks": runs, **extra}
        (folder / "report.json").write_text(json.dumps(record))
    return folder


def _smoke_copy(root, lesson, solved=True):
    dest = root / "executed" / f"{lesson}.ipynb"
    _run_copy(
        root,
        lesson,
        dest,
        mode="smoke",
        device="CPU Test (AVX2)",
        date="2025-01-05T10:00:00",
        solved=solved,
    )


def test_without_a_gpu_run_the_smoke_copy_is_shown(tmp_path):
    root = _course(tmp_path)
    _smoke_copy(root, "01_number_formats")
    source = website.select("01_number_formats", root)
    assert source.path == root / "executed" / "01_number_formats.ipynb" and not source.on_gpu
    stamp = pages.stamp_markdown(source, "https://colab.example/x", "../x.ipynb", None)
    assert "CPU Test (AVX2)" in stamp and "2025-01-05 10:00 UTC" in stamp and "smoke" in stamp
    assert "not speed figures" in stamp and "No GPU run of this lesson yet" in stamp
    assert "Not the GPU run" not in stamp
    # The notebook edited after the run: its copy is refused, not shown under the new text.
    _edit(root, "01_number_formats")
    with pytest.raises(website.MissingExecutedCopy, match=r"older than the notebook \(1 cell"):
        website.select("01_number_formats", root)


def _edit(root, lesson, kind="markdown"):
    """Change one cell of ``kind`` in the committed notebook, as a later fix to the lesson would."""
    path = root / "notebooks" / f"{lesson}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in reversed(nb.cells) if c.cell_type == kind)
    cell.source += "\nA sentence fixed after the run."
    nbformat.write(nb, path)


@pytest.mark.parametrize("kind", ["markdown", "code"])
def test_a_gpu_copy_older_than_the_lesson_falls_back_to_the_test_run(tmp_path, kind):
    root = _course(tmp_path)
    _gpu_run(root, "nvidia-h100", "NVIDIA H100", "2025-01-01T00:00:00+00:00")
    assert website.select("01_number_formats", root).on_gpu
    _edit(root, "01_number_formats", kind)
    _smoke_copy(root, "01_number_formats")  # the test run of the lesson as it is now
    source = website.select("01_number_formats", root)
    assert not source.on_gpu and source.path.parent.name == "executed"
    assert "NVIDIA H100 (2025-01-01) is not shown" in source.note
    assert "1 cell(s) of markdown or code differ" in source.note
    _smoke_copy(root, "00_scenario")
    write_sources(tmp_path / "src", root)  # the page links that run as an earlier version's
    stamp = nbformat.read(tmp_path / "src/lessons/01_number_formats.ipynb", 4).cells[1].source
    assert "**Not the GPU run:**" in stamp and "CPU Test (AVX2)" in stamp
    assert (
        "An earlier version of this lesson ran on a GPU: [its run](../gpu/nvidia-h100.md)" in stamp
    )
    # The exercise blanks and papermill's injected parameters are not differences.
    gpu_copy = root / "reports/gpu/nvidia-h100/notebooks/01_number_formats.ipynb"
    _run_copy(root, "01_number_formats", gpu_copy, mode="full", device="H100", date="2025-02-01")
    ran = nbformat.read(gpu_copy, as_version=4)
    injected = nbformat.v4.new_code_cell('DEVICE = "cuda"')
    injected.metadata["tags"] = ["injected-parameters"]
    ran.cells.insert(2, injected)
    nbformat.write(ran, gpu_copy)
    assert website.select("01_number_formats", root).on_gpu


def test_the_newest_passing_gpu_copy_wins(tmp_path):
    root = _course(tmp_path)
    _smoke_copy(root, "01_number_formats")
    _gpu_run(root, "nvidia-h100", "NVIDIA H100", "2025-01-01T00:00:00+00:00")
    _gpu_run(root, "tesla-t4", "Tesla T4", "2025-02-01T00:00:00+00:00")
    _gpu_run(root, "nvidia-a100", "NVIDIA A100", "2025-03-01T00:00:00+00:00", status="failed")
    _gpu_run(root, "nvidia-l4", "NVIDIA L4", "2025-04-01T00:00:00+00:00", report=False)
    # A T4 rehearsed on an H100 (ac.emulation) has the H100's timings: never a lesson's GPU run.
    _gpu_run(root, "h100-t4", "NVIDIA H100", "2025-05-01T00:00:00+00:00", emulated="Tesla T4")
    source = website.select("01_number_formats", root)
    assert source.on_gpu and source.report.name == "tesla-t4"
    assert source.stamp["device"] == "Tesla T4" and source.stamp["mode"] == "full"


def test_pages_name_their_run_and_link_only_a_gpu_run_of_their_lesson(tmp_path):
    root = _course(tmp_path)
    _smoke_copy(root, "00_scenario")
    _gpu_run(root, "tesla-t4", "Tesla T4", "2025-02-01T00:00:00+00:00")
    src = tmp_path / "src"
    sources = write_sources(src, root)
    assert [s.on_gpu for s in sources] == [False, True]
    gpu_page = nbformat.read(src / "lessons" / "01_number_formats.ipynb", as_version=4)
    assert "Tesla T4" in gpu_page.cells[1].source and "Full mode" in gpu_page.cells[1].source
    smoke_page = nbformat.read(src / "lessons" / "00_scenario.ipynb", as_version=4)
    assert "not speed figures" in smoke_page.cells[1].source
    # The GPU run did not run lesson 00: its page is not linked as 00's GPU run.
    assert "No GPU run of this lesson yet" in smoke_page.cells[1].source
    assert "../gpu/" not in smoke_page.cells[1].source
    assert "Tesla T4" in (src / "gpu" / "tesla-t4.md").read_text()
    index = (src / "index.md").read_text()
    assert "lessons/00_scenario.ipynb" in index and "gpu/tesla-t4" in index
    # The index is no lesson, and the section the lessons' table refers to is on it, above.
    assert "This lesson" not in index.split("## Lessons")[0]
    assert index.index("## How long it takes") < index.index("## Lessons")
    # Sphinx renders them (warnings are errors: a broken link or toctree entry fails the build).
    html = website.build(out=tmp_path, root=root).parent
    assert (
        'href="../gpu/tesla-t4.html"' in (html / "lessons" / "01_number_formats.html").read_text()
    )
    assert "Tesla T4" in (html / "gpu" / "tesla-t4.html").read_text()


def test_every_guide_is_a_page_in_the_navigation_and_its_readme_link_leads_home(tmp_path):
    """The guides the README links (docs/*.md) are pages of the site, each an entry of the
    navigation and of the index; a guide's link to the README leads to the site's index."""
    root = _course(tmp_path)
    for lesson in ("00_scenario", "01_number_formats"):
        _smoke_copy(root, lesson)
    names = {p.stem: guides.title(p) for p in sorted((ROOT / "docs").glob("*.md"))}
    assert {"instructors", "gpu-run", "helper-package", "contributing"} <= set(names)
    src = tmp_path / "src"
    write_sources(src, root)
    index = (src / "index.md").read_text()
    toc = index.split("```{toctree}", 1)[1]
    # The navigation lists them in the order the README links them.
    linked = re.findall(r"\]\(docs/([^)]+)\.md\)", (ROOT / "README.md").read_text())
    in_toc = re.findall(r"^docs/(\S+)$", toc, re.M)
    assert in_toc == list(dict.fromkeys(linked)) and set(in_toc) == set(names)
    for stem, title in names.items():
        page = (src / "docs" / f"{stem}.md").read_text()
        assert page.startswith(f"# {title}\n") and "](../README.md)" not in page
        assert "](../index.md)" in page  # each guide opens with a link to the course
        assert f"\ndocs/{stem}\n" in toc and f"- [{title}](docs/{stem}.md)" in index
    html = website.build(out=tmp_path, root=root).parent
    home = (html / "index.html").read_text()
    for stem, title in names.items():
        built = (html / "docs" / f"{stem}.html").read_text()
        assert f"<h1>{title}" in built and 'href="../index.html"' in built
        assert f'href="docs/{stem}.html"' in home  # the navigation and the index list it
    # A guide is a page with a title, or the build says which file lacks one.
    untitled = tmp_path / "notes.md"
    untitled.write_text("no title here\n")
    with pytest.raises(ValueError, match=r"notes\.md must open with a '# Title' line"):
        guides.title(untitled)
    gpu_guide = (html / "docs" / "gpu-run.html").read_text()
    assert "Results on an" in gpu_guide and "Against the course" in gpu_guide


@pytest.mark.parametrize("solved", [True, False], ids=["solved", "blanks-untouched"])
def test_pages_show_the_learners_blank_the_check_and_the_quiz_without_answers(tmp_path, solved):
    root = _course(tmp_path)
    _smoke_copy(root, "01_number_formats", solved=solved)
    ran = nbformat.read(root / "executed" / "01_number_formats.ipynb", as_version=4)
    injected = nbformat.v4.new_code_cell('# Parameters\nSMOKE = True\nDEVICE = "cpu"\n')
    injected.metadata["tags"] = ["injected-parameters"]  # as papermill inserts it
    ran.cells.insert(2, injected)
    nbformat.write(ran, root / "executed" / "01_number_formats.ipynb")
    source = website.select("01_number_formats", root)
    page = pages.lesson_page(source, "../notebooks/01_number_formats.ipynb", None, root)
    committed = nbformat.read(root / "notebooks" / "01_number_formats.ipynb", as_version=4)
    blanks = tagged(committed, "exercise")
    assert blanks
    assert page.cells[0].source.startswith("# 01") and "amp-stamp" in page.cells[1].source
    for blank in blanks:
        at = next(i for i, c in enumerate(page.cells) if c.get("id") == blank.id)
        assert page.cells[at].source == blank.source and "NotImplementedError" in blank.source
        assert not page.cells[at].get("outputs")
        if solved:  # the check's output is a pass: a note says that the run filled the blank
            assert "once the exercise is solved" in page.cells[at + 1].source
        check = page.cells[at + 2 if solved else at + 1]
        assert has_tag(check, "check") and check.outputs
    notes = [c for c in page.cells if "once the exercise is solved" in c.source]
    assert len(notes) == (len(blanks) if solved else 0)
    assert not any("exercises.solution" in c.source for c in page.cells)
    quiz_cell = next(i for i, c in enumerate(page.cells) if has_tag(c, "quiz"))
    assert page.cells[quiz_cell].outputs == []
    box = page.cells[quiz_cell + 1].source
    quiz = Quiz("01_number_formats", answers_path=tmp_path / "none.json")
    assert "runs in the notebook" in box
    # No letters: the notebook shuffles each learner's choices, so a letter read here would name
    # another choice there.
    assert not re.search(r"^   - [a-z]\) ", box, re.M) and "no letters" in box
    # Papermill's injected settings are the stamp's; the page does not show them as a cell.
    assert not any(has_tag(c, "injected-parameters") for c in page.cells)
    for entry in quiz.questions.values():
        assert pages.plain(entry["prompt"]) in box
        assert not entry.get("feedback") or entry["feedback"] not in box
        assert not any(h in box for h in entry.get("hashes", []))


def test_missing_executed_copies_are_named(tmp_path):
    root = _course(tmp_path)
    _smoke_copy(root, "00_scenario")
    unstamped = root / "executed" / "01_number_formats.ipynb"
    shutil.copy(root / "notebooks" / "01_number_formats.ipynb", unstamped)
    with pytest.raises(website.MissingExecutedCopy, match=r"executed/01_number_formats\.ipynb"):
        website.select_all(root)
    unstamped.write_text('{"cells": [')  # a damaged copy is said apart from a missing one
    with pytest.raises(website.MissingExecutedCopy, match="not a stamped, readable executed"):
        website.select(unstamped.stem, root)
    unstamped.unlink()
    with pytest.raises(website.MissingExecutedCopy, match=r"01_number_formats\.ipynb: none$"):
        website.select(unstamped.stem, root)


def test_a_gpu_page_shows_the_results_and_targets_and_a_figure_of_what_ran(tmp_path):
    from amp_course.tooling.website import gpu_page

    root = _course(tmp_path)
    run = root / "reports" / "gpu" / MAIN_RUN.name
    shutil.copytree(MAIN_RUN, run)
    for lesson in ("00_scenario", "01_number_formats"):
        _smoke_copy(root, lesson)
    sources = website.select_all(root)
    text = gpu_page.gpu_markdown(run, sources, root)
    report = json.loads((run / "report.json").read_text())
    assert text.startswith(f"# GPU run: {report['device']}\n")
    assert "## Results on an" in text and "Against the course's targets" in text
    fp32 = next(
        r
        for r in json.loads((run / "bench-vit_b16/bench.json").read_text())["results"]["vit_b16"]
        if r["mode"] == "fp32"
    )
    assert f"| {fp32['peak_memory_bytes'] / 2**30:.2f} GiB |" in text  # the peak-memory column
    assert "```text" not in text  # no printed table: it is cut off on a page
    assert "[no](../lessons/00_scenario.ipynb)" in text or "[yes](../lessons/00_scenario" in text
    assert f"]({run.name}-bench.png)" in text
    png = gpu_page.figure_png(run)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    bench = json.loads((run / "bench-vit_b16/bench.json").read_text())
    figure = plot_report(bench)  # the ViT matrix alone: one panel, no empty ones
    assert [ax.get_title() for ax in figure.axes if ax.axison] == ["ViT training step"]
    # A run without the benchmark's files (the fp16 pass) has its page without them.
    _gpu_run(root, "tesla-t4", "Tesla T4", "2025-02-01T00:00:00+00:00", amp_dtype="fp16")
    bare = gpu_page.gpu_markdown(root / "reports/gpu/tesla-t4", sources, root)
    assert "Tesla T4, lesson 01 with AMP\\_DTYPE=fp16" in bare and "Results" not in bare


# ---------------------------------------------------------------- the built site in Chromium


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(request, executed_lesson):
    """The site built from this checkout's executed copies, served on loopback. The lessons this
    session executes (tests/test_notebooks.py, on any xdist worker) are waited for, or run here if
    no worker has started them; others' copies are those an earlier run left."""
    require_chromium()
    for path in lessons_executed_here(request.session):
        executed_lesson(path)
    missing = [p.name for p in NOTEBOOKS if not (ROOT / "executed" / p.name).exists()]
    require(not missing, f"executed/ lacks {missing}: run `make executed` or `make test`")
    try:
        sources = website.select_all()
    except website.MissingExecutedCopy as error:
        require(False, str(error))
    start = time.perf_counter()
    html = website.build().parent
    print(f"site built in {time.perf_counter() - start:.1f} s")
    with _served(html) as base:
        yield base, html, sources


@contextlib.contextmanager
def _served(html: Path):
    """The built site in ``html`` on loopback; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _broken_links(hrefs, base, html, anchors) -> list[str]:
    """Internal links whose page or anchor does not exist in the built site."""
    broken = []
    for href in hrefs:
        if not href.startswith(base):
            continue  # Colab and other sites are not part of the build
        parts = urlsplit(href)
        target = html / unquote(parts.path).lstrip("/")
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            broken.append(href)
        elif parts.fragment and target.suffix == ".html":
            if target not in anchors:
                anchors[target] = set(re.findall(r'id="([^"]+)"', target.read_text("utf-8")))
            if unquote(parts.fragment) not in anchors[target]:
                broken.append(href)
    return broken


STAMP_OPENS_PAGE = """() => {
  const stamp = document.querySelector('article .amp-stamp');
  const title = document.querySelector('article h1');
  const cell = document.querySelector('article div.cell');
  return !!(stamp && title && cell
    && (title.compareDocumentPosition(stamp) & Node.DOCUMENT_POSITION_FOLLOWING)
    && (stamp.compareDocumentPosition(cell) & Node.DOCUMENT_POSITION_FOLLOWING));
}"""
FIGURES = "imgs => imgs.map(i => i.complete && i.naturalWidth > 0)"
# For each image: is it shown narrower than drawn, with no link to its full size (amp.js)?
SCALED_DOWN_UNLINKED = (
    "imgs => imgs.map(i => i.naturalWidth > i.clientWidth + 1 && !i.closest('a[href]'))"
)
TABLES_CUT = "tables => tables.map(t => t.scrollWidth > t.parentElement.clientWidth + 1)"
# Printed sentences wider than their block: a line a reader sees cut at the column's edge (a
# table's row, .amp-row, keeps its columns and scrolls).
OUTPUT_CUT = """blocks => blocks.map(b => [...b.childNodes].some(node => {
    if (node.nodeType !== Node.TEXT_NODE || !node.textContent.trim()) return false;
    const range = document.createRange();
    range.selectNodeContents(node);
    return range.getBoundingClientRect().right > b.getBoundingClientRect().right + 1;
}))"""
# Rows of a printed table wrapped onto the next line: a column read as a row of its own.
ROWS_WRAPPED = """blocks => blocks.map(b => [...b.querySelectorAll('.amp-row')].some(
    row => row.getClientRects().length > 1))"""


def _has_figure(source) -> bool:
    nb = nbformat.read(source.path, as_version=4)
    return any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


@pytest.mark.browser
@pytest.mark.timeout(300, func_only=True)  # the site's build waits for the lessons' runs
def test_every_page_in_chromium(site):
    from playwright.sync_api import sync_playwright

    base, html, sources = site
    lessons = {s.lesson: s for s in sources}
    guide_titles = {path.stem: guides.title(path) for path in guides.guides()}
    seen_guides = set()
    # Every page; _static/ holds the theme's template macros, which are not pages.
    every_page = sorted(p for p in html.rglob("*.html") if "_static" not in p.parts)
    assert len(every_page) > len(lessons)
    start, anchors, seen_lessons = time.perf_counter(), {}, set()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            failures = []
            page.on("pageerror", lambda error: failures.append(f"script error: {error}"))
            page.on("requestfailed", lambda request: failures.append(f"failed: {request.url}"))
            for path in every_page:
                url = f"{base}/{path.relative_to(html).as_posix()}"
                page.goto(url, wait_until="load")
                text = page.inner_text("body")
                assert "Traceback (most recent call last)" not in text, url
                assert "|---|" not in text, f"{url}: a Markdown table shown as text"
                assert not page.query_selector_all(".output.traceback, .output.error"), url
                hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
                assert not _broken_links(hrefs, base, html, anchors), url
                if path.parent.name == "gpu":  # tables of figures, every column in view
                    wide = page.eval_on_selector_all("article table", TABLES_CUT)
                    assert not any(wide), f"{url}: a table is wider than the text column"
                figures = page.eval_on_selector_all("article img", FIGURES)
                assert all(figures), f"{url}: an image does not load"
                scaled = page.eval_on_selector_all("article img", SCALED_DOWN_UNLINKED)
                assert not any(scaled), f"{url}: a figure shown scaled down has no full-size link"
                # Every page's navigation leads to every guide (docs/*.md) but itself.
                wanted = {f"{base}/docs/{stem}.html" for stem in guide_titles} - {url}
                assert wanted <= set(hrefs), f"{url}: guides missing: {wanted - set(hrefs)}"
                if path.parent.name == "docs":
                    seen_guides.add(path.stem)
                    title = page.inner_text("article h1")
                    assert title.startswith(guide_titles[path.stem]), url
                source = lessons.get(path.stem) if path.parent.name == "lessons" else None
                if source is None:
                    continue
                seen_lessons.add(source.lesson)
                cut = page.eval_on_selector_all("div.cell_output pre", OUTPUT_CUT)
                assert not any(cut), f"{url}: {sum(cut)} printed outputs cut at the column's edge"
                wide = page.eval_on_selector_all("div.cell_output table", TABLES_CUT)
                assert not any(wide), f"{url}: a table a cell displays is wider than the column"
                wrapped = page.eval_on_selector_all("div.cell_output pre", ROWS_WRAPPED)
                assert not any(wrapped), f"{url}: {sum(wrapped)} printed tables' rows wrapped"
                assert page.evaluate(STAMP_OPENS_PAGE), f"{url}: no stamp opens the page"
                stamp = page.inner_text("article .amp-stamp")
                run = source.stamp
                for value in (run["device"], run["torch"], pages.when(run), f"mode: {run['mode']}"):
                    assert value in stamp, f"{url}: the stamp lacks {value!r}"
                if run["mode"] == "smoke":
                    assert "not speed figures" in stamp
                if source.lesson[:2].isdigit() or _has_figure(source):
                    assert figures, f"{url}: no figure"
                committed = nbformat.read(ROOT / "notebooks" / f"{source.lesson}.ipynb", 4)
                for cell in committed.cells:
                    if has_tag(cell, "exercise"):
                        assert cell.source.splitlines()[0] in text, f"{url}: a blank is missing"
                # A blank filled by the tests' reference solution (exercises.solution_source);
                # teaching cells that call ac.exercises.solution to show a fixed run may stay.
                assert "filled in by the course's tests" not in text, (
                    f"{url}: shows a reference solution in place of a blank"
                )
                assert page.query_selector_all(".amp-quiz li"), f"{url}: no quiz questions"
                # Quotes as the sources write them: a question's code copies and runs.
                assert not re.search("[“”‘’]", page.inner_text(".amp-quiz")), url
                # Formulas render (MathJax, from the site's own files: the page loads offline).
                if any("$" in c.source for c in committed.cells if c.cell_type == "markdown"):
                    page.wait_for_selector("mjx-container", timeout=15_000)
                    assert "$$" not in page.inner_text("article"), f"{url}: a raw formula"
                if source.lesson == SCREENSHOT_OF:
                    shot = website.BUILD / "screenshots" / f"{source.lesson}.png"
                    shot.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(shot), full_page=True)
            assert not failures, failures
        finally:
            browser.close()
    assert seen_lessons == set(lessons), f"pages missing: {set(lessons) - seen_lessons}"
    assert seen_guides == set(guide_titles), f"guides missing: {set(guide_titles) - seen_guides}"
    assert (website.BUILD / "screenshots" / f"{SCREENSHOT_OF}.png").stat().st_size > 10_000
    print(f"{len(every_page)} pages checked in {time.perf_counter() - start:.1f} s")


@pytest.mark.browser
def test_a_figure_shown_scaled_down_opens_at_full_size(tmp_path):
    """A two-panel figure drawn wider than the text column links to its full size; one that fits
    does not."""
    import matplotlib.pyplot as plt
    from playwright.sync_api import sync_playwright

    require_chromium()
    root = _course(tmp_path)
    _smoke_copy(root, "00_scenario")
    _smoke_copy(root, "01_number_formats")
    copy = root / "executed" / "01_number_formats.ipynb"
    nb = nbformat.read(copy, as_version=4)
    figures = []
    for width in (12, 4):  # inches at 100 dpi: 1,200 and 400 pixels wide
        figure = plt.figure(figsize=(width, 3), dpi=100)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        plt.close(figure)
        figures.append(base64.b64encode(buffer.getvalue()).decode())
    plain_code = [c for c in nb.cells if c.cell_type == "code" and not c.metadata.get("tags")]
    for cell, png in zip(plain_code[-2:], figures, strict=True):
        cell.outputs.append(nbformat.v4.new_output("display_data", data={"image/png": png}))
    nbformat.write(nb, copy)
    html = website.build(out=tmp_path / "build", root=root).parent
    with _served(html) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{base}/lessons/01_number_formats.html", wait_until="load")
            images = page.locator("div.cell_output img")
            assert images.count() == 2
            wide, narrow = images.nth(0), images.nth(1)
            page.wait_for_selector("a.amp-full-size img", timeout=10_000)
            shown = wide.evaluate("img => [img.naturalWidth, img.clientWidth]")
            assert shown[0] == 1200 and shown[1] < 1000, shown
            link = wide.evaluate("img => img.closest('a') && img.closest('a').href")
            assert link == wide.evaluate("img => img.src"), link
            assert narrow.evaluate("img => img.closest('a')") is None
        finally:
            browser.close()
