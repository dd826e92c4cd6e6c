"""An executed copy's stamp: which device and torch version produced its outputs, when, and in
which mode, kept in the notebook's metadata. ``amp_course.tooling.runs.execute`` stamps every
copy it makes; the website, and whatever shows a committed run's outputs, reads it. Whether a
copy ran the lesson as it is now (``cells_differing``) is decided here too, for the website and
the GPU run's plan alike, and what a cell printed (``printed``) is read here for every reader."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

STAMP_KEY = "amp_course"  # notebook metadata key
STAMP_FIELDS = ("device", "hardware", "torch", "date", "mode")


def stamp_record(device, smoke: bool) -> dict:
    """The stamp for a run on ``device`` in smoke or full mode, dated now (UTC), naming the GPU it
    rehearsed if the run was emulated."""
    import torch

    from ..device import describe_hardware, device_name
    from ..emulation import active

    device = torch.device(device)
    record = {
        "device": device_name(device),  # the GPU's name, or the CPU's model and instruction set
        "hardware": describe_hardware(device),
        "torch": torch.__version__,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "mode": "smoke" if smoke else "full",
    }
    emulated = active() if device.type == "cuda" else None
    if emulated is not None:  # the lesson kernels rehearsed a smaller GPU (ac.emulation)
        record["emulated"] = emulated.name
    return record


def stamp(path, device, smoke: bool) -> dict:
    """Stamp the executed notebook at ``path`` in place; returns the stamp."""
    import nbformat

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    record = stamp_record(device, smoke)
    # The lesson's own entries (its id, which the grader reads) stay beside the stamp.
    nb.metadata[STAMP_KEY] = {**(nb.metadata.get(STAMP_KEY) or {}), **record}
    nbformat.write(nb, path)
    return record


def read_stamp(nb) -> dict:
    """The stamp of an executed notebook (nbformat node or dict); ValueError when it has none."""
    record = nb.get("metadata", {}).get(STAMP_KEY) or {}
    missing = [f for f in STAMP_FIELDS if not record.get(f)]
    if missing:
        raise ValueError(
            f"the executed notebook has no stamp (metadata.{STAMP_KEY} lacks "
            f"{', '.join(missing)}): it was not made by the course's test run or GPU run"
        )
    return dict(record)


def cell_source(cell) -> str:
    """A cell's source as one string: the file's JSON may store it as a list of lines, and a
    learner's hand-edited file as anything else (then its text, never an exception)."""
    source = cell.get("source", "")
    if isinstance(source, str):
        return source
    return "".join(source) if isinstance(source, list) else str(source)


def printed(cell, streams=("stdout", "stderr")) -> str:
    """What a code cell of an executed notebook printed on ``streams``, in order (figures, rich
    displays and errors aside). The cell is an nbformat node or the file's JSON, where a stream's
    text may be a list of lines."""
    return "".join(
        "".join(output.get("text", ""))
        for output in cell.get("outputs", [])
        if output.get("output_type") == "stream" and output.get("name") in streams
    )


def shown_cells(nb) -> list[tuple[str, str]]:
    """What a page shows of a notebook as written: each cell's type and source, exercise cells
    (blanks in the notebook, solutions in a run) and the parameters papermill injects aside."""
    aside = {"exercise", "injected-parameters"}
    return [
        (cell.cell_type, cell.source)
        for cell in nb.cells
        if not aside & set(cell.get("metadata", {}).get("tags", []))
    ]


def cells_differing(committed, executed) -> int:
    """How many cells of the notebook and of the run's copy differ in markdown or code (0: the
    copy ran the lesson as it is now)."""
    import difflib

    matcher = difflib.SequenceMatcher(None, shown_cells(committed), shown_cells(executed), False)
    return sum(
        max(end_a - start_a, end_b - start_b)  # a changed cell counts once, not removed and added
        for tag, start_a, end_a, start_b, end_b in matcher.get_opcodes()
        if tag != "equal"
    )
