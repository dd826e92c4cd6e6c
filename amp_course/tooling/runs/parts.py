"""A GPU run made in parts (``--tag``): each part's file names, and the parts merged into the run's
``report.json`` (``amp-course gpu --merge FOLDER``, on any machine)."""

from __future__ import annotations

import json
from pathlib import Path


def part_name(stem: str, tag: str, suffix: str) -> str:
    """``report.json``, or ``report-<tag>.json`` for a tagged part of the run."""
    return f"{stem}-{tag}{suffix}" if tag else f"{stem}{suffix}"


def nbval_results(folder: Path) -> dict[str, str]:
    """Each notebook's nbval verdict ("passed"/"failed") from the JUnit files of every part; a
    notebook failing in any part failed."""
    import xml.etree.ElementTree as ET

    verdicts: dict[str, str] = {}
    for xml in sorted(Path(folder).glob("nbval*.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            # classname: reports.gpu.<device>.notebooks.<lesson>.ipynb
            name = case.get("classname", "").rsplit(".notebooks.", 1)[-1]
            failed = any(child.tag in ("failure", "error") for child in case)
            if failed or verdicts.get(name) != "failed":
                verdicts[name] = "failed" if failed else "passed"
    return verdicts


def merge_reports(folder: Path) -> dict:
    """One ``report.json`` for a run made in parts: the newest part's machine record, each
    notebook's newest papermill result with its nbval verdict, and which checks are missing."""
    folder = Path(folder)
    parts = [json.loads(p.read_text()) for p in sorted(folder.glob("report-*.json"))]
    if not parts:
        raise FileNotFoundError(f"no report-*.json in {folder}: nothing to merge")
    parts.sort(key=lambda record: record.get("date", ""))
    notebooks: dict[str, dict] = {}
    for record in parts:
        for run in record.get("notebooks", []):
            notebooks[run["notebook"]] = dict(run)
    verdicts = nbval_results(folder)
    for name, run in notebooks.items():
        run["nbval"] = verdicts.get(name, "not run")
    unchecked = {
        verdict: [name for name, run in sorted(notebooks.items()) if run["nbval"] == verdict]
        for verdict in ("failed", "not run")
    }
    merged = {k: v for k, v in parts[-1].items() if k not in ("notebooks", "nbval", "bench")}
    merged["parts"] = len(parts)
    merged["notebooks"] = sorted(notebooks.values(), key=lambda run: run["notebook"])
    merged["nbval"] = (
        "; ".join(
            f"{verdict} for {', '.join(names)}" for verdict, names in unchecked.items() if names
        )
        or "passed"
    )
    benches = sorted(p.parent.name for p in folder.glob("bench*/bench.json"))
    merged["bench"] = ", ".join(benches) if benches else "not run"
    (folder / "report.json").write_text(json.dumps(merged, indent=2) + "\n")
    return merged
