"""A GPU run made in parts (``--tag``): each part's file names, and the parts merged into the run's
``report.json`` (``amp-course gpu --merge FOLDER``, on any machine)."""

from __future__ import annotations

import json
from pathlib import Path


def part_name(stem: str, tag: str, suffix: str) -> str:
    """``report.json``, or ``report-<tag>.json`` for a tagged part of the run."""
    return f"{stem}-{tag}{suffix}" if tag else f"{stem}{suffix}"


# What a part's report.json holds of the machine it ran on (device.machine_record), and its runs.
PART_KEYS = ("device", "date", "notebooks")


def read_part(path: Path) -> dict:
    """One part's ``report-<tag>.json``, refused (ValueError naming the file) unless it is a run's
    record: a merged report takes its machine record from the newest part."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{path.name} is not JSON ({error})") from None
    missing = [k for k in PART_KEYS if k not in record] if isinstance(record, dict) else PART_KEYS
    runs = record.get("notebooks") if isinstance(record, dict) else None
    if missing or not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise ValueError(
            f"{path.name} is not a part's report (it lacks {', '.join(missing) or 'its runs'})"
        )
    if not all(isinstance(run.get("notebook"), str) for run in runs):
        raise ValueError(f"{path.name}: a run without the notebook it ran")
    return record


def nbval_results(folder: Path) -> dict[str, str]:
    """Each notebook's nbval verdict ("passed"/"failed") from the JUnit files of every part; a
    notebook failing in any part failed."""
    import xml.etree.ElementTree as ET

    verdicts: dict[str, str] = {}
    for xml in sorted(Path(folder).glob("nbval*.xml")):
        try:
            cases = list(ET.parse(xml).getroot().iter("testcase"))
        except ET.ParseError as error:
            raise ValueError(f"{xml.name} is not nbval's JUnit XML ({error})") from None
        for case in cases:
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
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    parts = [read_part(p) for p in sorted(folder.glob("report-*.json"))]
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
