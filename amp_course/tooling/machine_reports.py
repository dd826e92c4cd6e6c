"""A benchmark's report for the machine it ran on: ``<device>.json`` (the record) and
``<device>.md`` (its Markdown), side by side in one folder; the smoke, suite and grading
throughput benchmarks write theirs through it. ``provenance`` records what a run measured: the
course's commit and the CPU's vector flags."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .. import cpu
from ..device import device_slug
from ..paths import ROOT

# The CPU flags that decide torch's vector and 16-bit paths (``ac.cpu``): enough to tell a report
# of an AVX2 laptop from one of a server with AVX512-BF16 or AMX.
_VECTOR_FLAGS = ("avx", "amx", "fma", "f16c")


def write(record: dict, markdown: str, out: Path, *, name: str | None = None) -> list[Path]:
    """``<device>.json`` and ``<device>.md`` in ``out``, for the machine ``record`` names (or
    ``<name>.json`` and ``.md``)."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / (name or device_slug(record["device"]))
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md")]
    paths[0].write_text(json.dumps(record, indent=2) + "\n")
    paths[1].write_text(markdown)
    return paths


def provenance(root: Path = ROOT) -> dict:
    """What a benchmark measured: the course's commit (None outside a git checkout), whether its
    tracked files differed from that commit, and this CPU's vector flags as Linux reports them
    (a rehearsal's caps are recorded beside them, not subtracted)."""
    commit, changed = None, None
    try:
        git = ["git", "-C", str(root)]
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
        if head.returncode == 0:
            commit = head.stdout.strip()
            status = [*git, "status", "--porcelain", "--untracked-files=no"]
            changed = bool(subprocess.run(status, capture_output=True, text=True).stdout.strip())
    except OSError:  # no git on this machine
        pass
    flags = sorted(f for f in cpu.flags() if f.startswith(_VECTOR_FLAGS))
    return {"commit": commit, "uncommitted_changes": changed, "cpu_flags": flags}


def provenance_line(record: dict) -> str:
    """The Markdown sentence for ``provenance``'s fields ("" for a report written before them)."""
    if "commit" not in record:
        return ""
    tree = "not a git checkout" if record["commit"] is None else f"commit {record['commit'][:12]}"
    if record.get("uncommitted_changes"):
        tree += " with uncommitted changes"
    flags = ", ".join(record["cpu_flags"]) or "none reported"
    return f"Measured from {tree}. CPU vector flags: {flags}."
