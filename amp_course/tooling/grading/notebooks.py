"""Rebuilding a learner's notebook around the master's protected cells (pure nbformat).

The learner's copy keeps its own cells in order; the master's check, parameters and setup cells
(matched by ``metadata.grading.id``, else by the exercise a check names) replace the learner's, so
editing or deleting a check cell gains nothing, as nbgrader does with its master copy.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import nbformat

_CHECK_CALL = re.compile(r"""exercises\.check\(\s*["']([^"']+)["']""")


@dataclass(frozen=True)
class CheckItem:
    key: str  # the protected cell's id ("check:<exercise>" unless metadata says otherwise)
    name: str  # the exercise name, the gradebook item
    symbol: str  # the name the learner's answer is bound to

    @property
    def points(self) -> float:
        """The check's worth: the ``points`` its exercise module registers, the one place it is
        set, so the gradebook gives what the notebook's ✓ line promised."""
        from ... import exercises

        return float(exercises.get(self.name).points)


def cell_key(cell) -> str | None:
    """The stable id of a protected cell (check, parameters, setup), or None for other cells."""
    if cell.cell_type != "code":
        return None
    grading = cell.metadata.get("grading")
    if isinstance(grading, dict) and isinstance(grading.get("id"), str):
        return grading["id"]
    tags = cell.metadata.get("tags", [])
    if "check" in tags:
        found = _CHECK_CALL.search(cell.source)
        return f"check:{found.group(1)}" if found else None
    if "parameters" in tags:
        return "parameters"
    if "import amp_course as ac" in cell.source and "sys.path" in cell.source:
        return "setup"
    return None


def is_check(cell) -> bool:
    return cell.cell_type == "code" and (
        "check" in cell.metadata.get("tags", []) or bool(_CHECK_CALL.search(cell.source))
    )


def check_items(master) -> list[CheckItem]:
    """The graded check cells of a master notebook, in order."""
    from ... import exercises

    symbols = {
        cell.metadata["exercise"].get("name"): cell.metadata["exercise"].get("symbol")
        for cell in master.cells
        if isinstance(cell.metadata.get("exercise"), dict)
    }
    items = []
    for cell in master.cells:
        if cell.cell_type != "code" or "check" not in cell.metadata.get("tags", []):
            continue
        found = _CHECK_CALL.search(cell.source)
        key = cell_key(cell)
        if not found or key is None:
            raise ValueError(
                f"check cell without an ac.exercises.check(...) call: {cell.source[:80]!r}"
            )
        name = found.group(1)
        if "points" in (cell.metadata.get("grading") or {}):  # a second worth, never the first
            raise ValueError(
                f"the check cell of {name} sets grading.points; an exercise's points are set "
                "only where it is registered (register(..., points=) in amp_course/exercises)"
            )
        exercises.get(name)  # an unknown exercise stops the run before any kernel starts
        items.append(CheckItem(key, name, symbols.get(name) or _symbol_of(cell.source)))
    return items


def _symbol_of(source: str) -> str:
    found = re.search(r"""exercises\.check\(\s*["'][^"']+["']\s*,\s*([A-Za-z_]\w*)""", source)
    if not found:
        raise ValueError(f"cannot tell which name a check cell checks: {source[:80]!r}")
    return found.group(1)


def _copy(cell):
    return nbformat.from_dict(json.loads(json.dumps(cell)))


def restore(master, learner):
    """The learner's notebook with the master's protected cells put back (a new notebook).

    Learner cells are kept in order; a cell whose id matches a protected master cell is replaced
    by the master's; check cells the master does not have are dropped; protected cells the learner
    deleted are re-inserted after their exercise (checks) or at the top (setup, parameters).
    """
    protected = {}
    for cell in master.cells:
        key = cell_key(cell)
        if key is not None and key not in protected:
            protected[key] = cell
    cells, used = [], set()
    for cell in learner.cells:
        key = cell_key(cell)
        if key in protected:
            if key not in used:
                cells.append(_copy(protected[key]))
                used.add(key)
        elif not is_check(cell):
            cells.append(cell)
    top = 0
    for key, cell in protected.items():
        if key in used:
            continue
        name = _CHECK_CALL.search(cell.source)
        if name:
            after = [
                i
                for i, c in enumerate(cells)
                if (c.metadata.get("exercise") or {}).get("name") == name.group(1)
            ]
            position = after[-1] + 1 if after else len(cells)
        else:
            position, top = top, top + 1
        cells.insert(position, _copy(cell))
    out = nbformat.v4.new_notebook()
    out.metadata = master.metadata
    out.cells = cells
    for number, cell in enumerate(out.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cell["id"] = f"graded-{number}"  # unique ids; learners' copies may repeat the master's
    return out


def probe_plan(rebuilt, items: list[CheckItem]) -> dict[int, CheckItem]:
    """{cell index in the rebuilt notebook: the check item graded there}."""
    by_key = {item.key: item for item in items}
    return {
        index: by_key[cell_key(cell)]
        for index, cell in enumerate(rebuilt.cells)
        if cell_key(cell) in by_key
    }
