"""Write the site's sources (index, lesson pages, GPU run pages, guides) and render them with
Sphinx."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import nbformat

from ...paths import NOTEBOOKS, README, ROOT
from ...paths import SITE as SITE_DIR
from ..gpu_copies import full_copies
from . import guides, pages
from .gpu_page import figure_png, gpu_markdown
from .sources import Source, gpu_reports, select_all

SITE = ROOT / SITE_DIR  # conf.py and _static/ live here
BUILD = SITE / "_build"
INSTALL_HEADING = "Install and open the course"  # the README's section the index shows


def _write(path: Path, text: str | bytes, written: set[Path]) -> None:
    """Write only when the content changed, so Sphinx rebuilds only pages that changed."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if not path.exists() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    written.add(path)


def readme_section(heading: str, root: Path = ROOT) -> str:
    """The body of the README's ``## heading`` section."""
    text = (root / README).read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not found:
        raise ValueError(f"README.md has no '## {heading}' section")
    return found.group(1).strip()


def scenario(root: Path = ROOT) -> str:
    """The scenario, as lesson 00 states it (its first paragraph of prose)."""
    first = nbformat.read(root / NOTEBOOKS / "00_scenario.ipynb", as_version=4).cells[0].source
    for paragraph in first.split("\n\n"):
        if paragraph.strip() and not paragraph.lstrip().startswith(("#", "[![")):
            # On the index, not in the lesson: "This lesson checks..." is lesson 00.
            return re.sub(r"\bThis\s+lesson\b", "Lesson 00", paragraph.strip())
    raise ValueError("notebooks/00_scenario.ipynb opens with no paragraph of prose")


def index_markdown(sources: list[Source], root: Path = ROOT) -> str:
    """The entry page: the scenario, the lessons, how to run them, where the figures come from."""
    table = readme_section("Lessons", root)
    # ``sources`` come in course order (ac.paths.lesson_notebooks), the toc's order too.
    for source in sources:  # the notebook names in the table become links to their pages
        table = table.replace(
            f"`{source.lesson}.ipynb`", f"[{source.lesson}](lessons/{source.lesson}.ipynb)"
        )
    runs = []
    for source in sources:
        where = f"[the GPU run](gpu/{source.report.name}.md)" if source.on_gpu else "the test run"
        if source.note:
            where += " (the GPU run predates the lesson)"
        stamp = source.stamp
        runs.append(
            f"| [{source.lesson}](lessons/{source.lesson}.ipynb) | {pages.plain(stamp['device'])} "
            f"| {pages.plain(stamp['torch'])} | {pages.when(stamp)} | {stamp['mode']}, {where} |"
        )
    toc = [f"lessons/{s.lesson}" for s in sources]
    toc += [f"gpu/{folder.name}" for folder in sorted(gpu_reports(root))]
    guide_pages = [(guides.page_name(path), guides.title(path)) for path in guides.guides(root)]
    toc += [name for name, _ in guide_pages]
    return "\n".join(
        [
            "# amp-course: mixed precision training in PyTorch, hands on",
            "",
            "## The scenario",
            "",
            scenario(root),
            "",
            "## How long it takes",
            "",
            readme_section("How long it takes", root),
            "",
            "## Lessons",
            "",
            table,
            "",
            "## Run the course",
            "",
            readme_section(INSTALL_HEADING, root),
            "",
            "Every lesson page below also has an **Open in Colab** link and a link to download "
            "its notebook.",
            "",
            "## Where the outputs on these pages come from",
            "",
            "Each page shows a run of its notebook, stamped with the device, torch version, date "
            "and mode that produced it: the newest GPU run where one is published, else the "
            "course's test run in smoke mode (tiny sizes; its timings are not speed figures). "
            "Exercise blanks are shown as you get them.",
            "",
            "| lesson | device | torch | run | mode |",
            "|---|---|---|---|---|",
            *runs,
            "",
            *(
                ["## Guides", "", *(f"- [{t}]({name}.md)" for name, t in guide_pages), ""]
                if guide_pages
                else []
            ),
            "```{toctree}",
            ":hidden:",
            ":maxdepth: 1",
            "",
            *toc,
            "```",
            "",
        ]
    )


def write_sources(src: Path, root: Path = ROOT) -> list[Source]:
    """Every page's source under ``src`` (and nothing else); returns the lessons' sources."""
    sources, written = select_all(root), set()
    # Every GPU run has its page (its benchmark stays true when a lesson changes after it ran).
    reports = gpu_reports(root)
    for source in sources:
        committed = root / NOTEBOOKS / f"{source.lesson}.ipynb"
        _write(src / "notebooks" / committed.name, committed.read_bytes(), written)
        # The run shown, else the newest that ran an earlier version of the lesson; a run that
        # never ran it is not linked (its page would list the lesson as not run).
        gpu = source.report or next((c.folder for c in full_copies(source.lesson, reports)), None)
        page = pages.lesson_page(
            source,
            download=f"../notebooks/{committed.name}",
            gpu_page=f"../gpu/{gpu.name}.md" if gpu else None,
            root=root,
        )
        _write(src / "lessons" / committed.name, nbformat.writes(page) + "\n", written)
    for folder in reports:
        _write(src / "gpu" / f"{folder.name}.md", gpu_markdown(folder, sources, root), written)
        figure = figure_png(folder)
        if figure is not None:
            _write(src / "gpu" / f"{folder.name}-bench.png", figure, written)
    for path in guides.guides(root):
        _write(src / f"{guides.page_name(path)}.md", guides.site_markdown(path), written)
    _write(src / "index.md", index_markdown(sources, root), written)
    for old in [p for p in src.rglob("*") if p.is_file() and p not in written]:
        old.unlink()  # a page of a lesson or GPU run that is gone
    return sources


def build(out: Path = BUILD, root: Path = ROOT, quiet: bool = True) -> Path:
    """Build the HTML site into ``out/html``; returns the path of its index.html."""
    from sphinx.cmd.build import build_main

    start = time.perf_counter()
    src = out / "src"
    write_sources(src, root)
    args = ["-b", "html", "-c", str(SITE), "-d", str(out / "doctrees"), "-W"]
    # Sphinx rebuilds only the pages whose sources changed, so a page added or removed (a new
    # guide, a GPU run) would leave every other page's navigation without it: then all of them.
    pages, listing = sorted(str(p.relative_to(src)) for p in src.rglob("*")), out / "pages.txt"
    if not listing.is_file() or listing.read_text().splitlines() != pages:
        args += ["-E", "-a"]
    args += ["--keep-going", *(["-q"] if quiet else []), str(src), str(out / "html")]
    if build_main(args) != 0:
        raise RuntimeError(f"Sphinx could not build the site (see the messages above); {src}")
    listing.write_text("\n".join(pages) + "\n")
    print(f"Site built in {time.perf_counter() - start:.0f} s: {out / 'html' / 'index.html'}")
    return out / "html" / "index.html"


def clean(out: Path = BUILD) -> None:
    shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """``amp-course website``: the site in site/_build/html; 2 when a lesson lacks its copy."""
    import argparse
    import sys

    from .sources import MissingExecutedCopy

    argparse.ArgumentParser(prog="amp-course website", description=__doc__).parse_args(argv)
    try:
        build(quiet=False)
    except MissingExecutedCopy as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
