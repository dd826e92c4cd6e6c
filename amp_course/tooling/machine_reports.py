"""A benchmark's report for the machine it ran on: ``<device>.json`` (the record) and
``<device>.md`` (its Markdown), side by side in one folder; the smoke benchmark and the grading
throughput benchmark write theirs through it."""

from __future__ import annotations

import json
from pathlib import Path

from ..device import device_slug


def write(record: dict, markdown: str, out: Path, *, name: str | None = None) -> list[Path]:
    """``<device>.json`` and ``<device>.md`` in ``out``, for the machine ``record`` names (or
    ``<name>.json`` and ``.md``)."""
    out.mkdir(parents=True, exist_ok=True)
    stem = out / (name or device_slug(record["device"]))
    paths = [stem.with_suffix(".json"), stem.with_suffix(".md")]
    paths[0].write_text(json.dumps(record, indent=2) + "\n")
    paths[1].write_text(markdown)
    return paths
