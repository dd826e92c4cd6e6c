"""The grader's side of a submission's kernel: what a hostile kernel can cost the grader."""

import csv
import re

import nbformat
from conftest import ROOT, has_tag
from test_grading import two_lesson_key
from test_grading_parts import MASTER

from amp_course import cli
from amp_course.tooling.grading import kernel

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
    return int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1))


def _grade(root, extra_cell):
    """Grade the toy lesson's master, with ``extra_cell`` before its first check, as a submission
    in ``root``: its exercise rows (item, status) and the grader's peak memory growth in
    bytes."""
    folder = root / "subs" / "ann"
    folder.mkdir(parents=True)
    nb = nbformat.read(MASTER, as_version=4)
    first_check = next(i for i, c in enumerate(nb.cells) if has_tag(c, "check"))
    nb.cells.insert(first_check, nbformat.v4.new_code_cell(extra_cell))
    nbformat.write(nb, folder / MASTER.name)
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
    rows, grown = _grade(tmp_path, FLOOD)
    assert rows == [("06.choose_dtype", "not done"), ("05.mfu", "not done")]
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
