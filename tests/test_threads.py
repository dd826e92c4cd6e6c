"""Every GitHub thread the course cites is in notebooks/threads.yaml, read, with its title, state
and a quote that supports the sentence citing it; no thread is cited by a bare number."""

import re
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "notebooks" / "threads.yaml"
# owner/repo#N, owner/repo PR #N, owner/repo issue #N (a line break may sit before the number).
REPO = r"(?<![\w/.-])([A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)"
CITATION = re.compile(REPO + r"(?:\s+(?:PR|issue|pull request))?\s*#(\d+)\b")
BARE = re.compile(r"#\d{2,}\b")  # "#1234" or "PR #1234" with no repository before it
FIELDS = {"kind", "title", "state", "quote", "by"}


def course_texts():
    """(where, text, prose) for each text a learner or instructor reads: notebook cells, quiz
    sources, docs and README (prose), and the package's sources (its messages and comments)."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            yield f"{path.name} cell {index}", cell.source, True
    for path in sorted((ROOT / "quizzes" / "source").glob("*.yaml")):
        yield path.name, path.read_text(), True
    for path in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        yield path.name, path.read_text(), True
    for path in sorted((ROOT / "amp_course").rglob("*.py")):  # CSS colours (#333) are not threads
        yield str(path.relative_to(ROOT)), path.read_text(), False


def cited():
    found, bare = {}, []
    for where, text, prose in course_texts():
        spans = []
        for match in CITATION.finditer(text):
            found.setdefault(f"{match.group(1)}#{match.group(2)}", []).append(where)
            spans.append(match.span())
        if prose:
            for match in BARE.finditer(text):
                if not any(start <= match.start() < end for start, end in spans):
                    bare.append(f"{where}: ...{text[max(0, match.start() - 40) : match.end()]}")
    return found, bare


REGISTERED = yaml.safe_load(REGISTRY.read_text())
CITED, BARE_CITATIONS = cited()


def test_every_cited_thread_is_registered():
    missing = {key: places for key, places in CITED.items() if key not in REGISTERED}
    assert not missing, f"not in {REGISTRY.name} (read the thread, then add it): {missing}"


def test_every_registered_thread_is_cited():
    assert not sorted(set(REGISTERED) - set(CITED))


def test_no_thread_is_cited_by_a_bare_number():
    assert not BARE_CITATIONS, BARE_CITATIONS


@pytest.mark.parametrize("key", sorted(REGISTERED))
def test_each_entry_has_a_title_a_state_and_a_quote(key):
    entry = REGISTERED[key]
    assert set(entry) == FIELDS, key
    assert entry["kind"] in ("issue", "pull request")
    assert entry["state"] in ("open", "closed", "merged")
    assert entry["state"] != "merged" or entry["kind"] == "pull request"
    assert all(isinstance(entry[f], str) and entry[f].strip() for f in FIELDS), key
    assert len(entry["quote"]) <= 400, "a short quote, not the thread"


def test_the_scan_finds_each_way_the_course_writes_a_citation():
    text = "see pytorch/pytorch#1, pytorch/ao PR #2, NVIDIA/Megatron-LM PR\n#3 and (PR #4)."
    spans = [m.group(1) + "#" + m.group(2) for m in CITATION.finditer(text)]
    assert spans == ["pytorch/pytorch#1", "pytorch/ao#2", "NVIDIA/Megatron-LM#3"]
    assert [m.group() for m in BARE.finditer("(PR #44), color #333, #1f77b4")] == ["#44", "#333"]


def test_a_pull_request_is_cited_as_one_in_the_prose():
    """Learners read "owner/repo PR #N" for a pull request; "owner/repo#N" (GitHub's form for
    both) is kept for issues."""
    loose = []
    for where, text, prose in course_texts():
        for match in CITATION.finditer(text) if prose else ():
            key = f"{match.group(1)}#{match.group(2)}"
            says_pr = re.search(r"\s(?:PR|pull request)\s*#", match.group()) is not None
            if (REGISTERED.get(key, {}).get("kind") == "pull request") != says_pr:
                loose.append(f"{where}: {match.group()}")
    assert not loose
