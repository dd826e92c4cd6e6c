"""What one submission's notebook costs the grader as it is read and run: a hostile kernel's
output, a notebook from an older Jupyter."""

import csv
import json
import re
import warnings
from pathlib import Path

import nbformat
from conftest import ROOT, has_tag
from test_grading import two_lesson_key
from test_grading_parts import MASTER

from amp_course import cli
from amp_course.tooling.grading import kernel

# The toy master's exercises as shipped: each raises NotImplementedError, as the probe observes.
UNANSWERED = [("06.choose_dtype", "not done"), ("05.mfu", "not done")]
MESSAGES, MESSAGE_BYTES = 32, 16 * 2**20
# A cell that sends large output messages straight down the kernel's output socket, signed as the
# kernel signs its own, as fast as the kernel can: faster than the grader reads them.
FLOOD = f"""
import hmac
session, socket = get_ipython().kernel.session, get_ipython().kernel.iopub_socket
header, parent, metadata = session.pack(session.msg_header("stream")), b"{{}}", b"{{}}"
prefix = b'{{"name": "stdout", "text": "' + b"A" * {MESSAGE_BYTES}
for i in range({MESSAGES}):
    content = prefix + b"%08d" % i + b'"}}'
    signature = hmac.new(session.key, digestmod=session.digest_mod)
    for part in (header, parent, metadata, content):
        signature.update(part)
    parts = [b"kernel.stream", b"<IDS|MSG>", signature.hexdigest().encode(), header, parent]
    socket.send_multipart([*parts, metadata, content], copy=False)
"""


def _peak_kib() -> int:
    return int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def _flooded(extra_cell) -> str:
    """The toy lesson's master with ``extra_cell`` before its first check, as a notebook's text."""
    nb = nbformat.read(MASTER, as_version=4)
    first_check = next(i for i, c in enumerate(nb.cells) if has_tag(c, "check"))
    nb.cells.insert(first_check, nbformat.v4.new_code_cell(extra_cell))
    return nbformat.writes(nb)


def _grade(root, notebook: str):
    """Grade ``notebook`` (its text) as the toy lesson of one submission in ``root``: its exercise
    rows (item, status) and the grader's peak memory growth in bytes."""
    folder = root / "subs" / "ann"
    folder.mkdir(parents=True)
    (folder / MASTER.name).write_text(notebook, encoding="utf-8")
    key, out = two_lesson_key(root), root / "gb.csv"
    args = [root / "subs", "--key", key, "--out", out, "--masters", MASTER.parent]
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # from here, VmHWM is this grading's peak
    before = _peak_kib()
    assert cli.main(["grade", *map(str, args), "--lessons", "99_toy", "--sandbox", "none"]) == 0
    grown = (_peak_kib() - before) * 2**10
    with open(out, newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if not r["item"].startswith("quiz:")]
    return [(r["item"], r["status"]) for r in rows], grown


def test_a_kernel_flooding_its_output_costs_the_grader_a_few_messages_and_loses_no_verdict(
    tmp_path,
):
    """A learner's cell can send output messages faster than the grader reads them: the grader
    holds a few of them (kernel.QUEUED_MESSAGES, each up to kernel.MAX_MESSAGE), the rest wait in
    the kernel's memory, and the checks after the flood are graded (the master's unanswered
    exercises: "not done", as the probe observed them)."""
    rows, grown = _grade(tmp_path, _flooded(FLOOD))
    assert rows == UNANSWERED
    sent = MESSAGES * MESSAGE_BYTES
    assert grown < sent / 2, f"the grader grew by {grown / 2**20:.0f} MiB of {sent / 2**20:.0f}"
    assert kernel.QUEUED_MESSAGES * MESSAGE_BYTES < sent / 4


def test_the_instructors_guide_states_the_graders_bounds_on_a_kernels_messages():
    guide = " ".join((ROOT / "docs" / "instructors.md").read_text(encoding="utf-8").split())
    queued, size = kernel.QUEUED_MESSAGES, kernel.MAX_MESSAGE // 2**20
    assert (
        f"at most {queued} of the kernel's messages at a time, each of at most {size} MiB" in guide
    )
    assert f"one message over {size} MiB" in guide


def test_a_notebook_whose_cells_have_no_ids_is_graded_without_a_warning(tmp_path, capsys):
    """An older Jupyter saves cells without ids; nbformat adds them as it reads, and its warning
    would name no student: the grader reads such a notebook quietly and grades it."""
    nb = json.loads(MASTER.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        del cell["id"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows, _ = _grade(tmp_path, json.dumps(nb))
    assert rows == UNANSWERED
    assert not [w for w in caught if "id" in str(w.message)], [str(w.message) for w in caught]
    assert "MissingIDField" not in capsys.readouterr().err
