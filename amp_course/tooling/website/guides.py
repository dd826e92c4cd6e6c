"""The course's guides as website pages: each ``docs/<name>.md`` (the instructors' guide, the GPU
run's, the helper package's, the contributors') becomes the page ``docs/<name>`` of the site, with
its own entry in the navigation. The README links the same files, so a guide reads the same on
GitHub and on the site; only its links to the README are pointed at the site's index.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...paths import DOCS, README, ROOT

# A guide's link to the README, from docs/: on the site, the index (which shows the README's
# install section and lesson table) stands where the README stands in the repository.
README_LINK = re.compile(rf"\]\(\.\./{re.escape(README.as_posix())}\)")
SITE_INDEX = "](../index.md)"


def guides(root: Path = ROOT) -> list[Path]:
    """Every guide in ``root/docs``: in the order the README first links them, then any guide it
    does not link, by name (the navigation's order)."""
    readme = root / README
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    linked = re.findall(rf"\]\({re.escape(DOCS.as_posix())}/([^)#/]+\.md)\)", text)
    order = {name: i for i, name in enumerate(dict.fromkeys(linked))}
    found = sorted((root / DOCS).glob("*.md"))
    return sorted(found, key=lambda p: (p.name not in order, order.get(p.name, 0), p.name))


def title(path: Path) -> str:
    """A guide's title: its ``# `` heading, which must open it."""
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    if not first.startswith("# "):
        raise ValueError(f"{path} must open with a '# Title' line, not {first!r}")
    return first[2:].strip()


def site_markdown(path: Path) -> str:
    """The guide's Markdown as the site shows it: the README's links lead to the site's index."""
    return README_LINK.sub(SITE_INDEX, path.read_text(encoding="utf-8"))


def page_name(path: Path) -> str:
    """The guide's page in the site's sources (and its toctree entry, without ``.md``)."""
    return f"{DOCS.as_posix()}/{path.stem}"
