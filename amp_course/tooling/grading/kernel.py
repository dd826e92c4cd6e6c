"""Run a rebuilt notebook in a sandboxed Jupyter kernel and collect what its probes observe.

The grader drives the kernel with nbclient from its own process; the kernel runs inside the
sandbox and talks over ZeroMQ sockets in the scratch folder (``ipc`` transport, so the sandbox
needs no network). Cells run in order; at each graded check cell the grader sends its own probe
(``amp_course.exercises.probe.report``) instead of the cell, with the secret seed, and keeps only
what the probe displays: plain data that the verdict side compares with the reference. Execution
stops after the last check, and the sandbox, with every process in it, is killed at the end.
Without a sandbox, one more cell then asks the kernel's guard to refuse a read (its ``canary``),
so that the grader can tell that the guard still answers.

This is not the course's executor (``tooling.runs.execute``, papermill and nbval), by design: a
submission is untrusted, so its kernel starts inside the sandbox through the kernel manager, its
check cells are replaced by probes, and its outputs are dropped as they arrive, none of which
papermill or nbval allow; the executor runs the course's own lessons.
"""

from __future__ import annotations

import subprocess
import time

import nbformat
import zmq
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from ...exercises.probe import MIME
from .sandbox import HOME, Sandbox, Scratch

MAX_MESSAGE = 64 * 2**20  # bytes; a larger message from the kernel drops the connection
# Messages each of the grader's sockets queues before the kernel's side holds the rest (ZeroMQ's
# default is 1,000): a kernel sending large messages faster than the grader reads them fills its
# own memory, inside the sandbox, not the grader's (at most this many times MAX_MESSAGE here).
QUEUED_MESSAGES = 4
KEPT_OUTPUTS = ("error",)
MAX_ERRORS = 5


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel command runs inside ``sandbox``."""

    def __init__(self, sandbox: Sandbox, scratch: Scratch, env: dict[str, str], **kwargs):
        super().__init__(**kwargs)
        self.sandbox, self.scratch, self.sandbox_env = sandbox, scratch, env

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        return self.sandbox.wrap(cmd, self.scratch, self.sandbox_env)

    def client(self, **kwargs):
        """A client whose sockets, made when its channels start, take the grader's bounds."""
        client = super().client(**kwargs)
        # Set on the context, before any socket connects: pyzmq hands them to each socket it makes.
        # Set on a socket after it had connected, they did not bound that connection (a 70 MiB
        # message got through).
        client.context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE)
        client.context.setsockopt(zmq.RCVHWM, QUEUED_MESSAGES)
        return client


class _Client(NotebookClient):
    """nbclient keeping only the last probe result and a few errors per cell.

    Everything else the kernel sends (prints, figures, widgets) is dropped on arrival, so a
    learner's output loop cannot fill the grader's memory.
    """

    def output(self, outs, msg, display_id, cell_index):
        kind = msg["msg_type"]
        if kind == "display_data" and MIME in msg["content"].get("data", {}):
            outs[:] = [o for o in outs if o.get("output_type") == "error"]
            return super().output(outs, msg, None, cell_index)
        if kind in KEPT_OUTPUTS and len(outs) < MAX_ERRORS:
            return super().output(outs, msg, None, cell_index)
        return None

    def handle_comm_msg(self, outs, msg, cell_index):
        return None  # widget state is not graded


def probe_source(name: str, symbol: str, seed: int) -> str:
    return (
        f'__import__("amp_course.exercises.probe", fromlist=["report"])'
        f".report({name!r}, {symbol!r}, {int(seed)})"
    )


def _payload(cell) -> dict:
    """What the probe sent back, or why nothing usable came back."""
    found = [o for o in cell.outputs if o.get("output_type") == "display_data"]
    found = [o["data"][MIME] for o in found if MIME in o.get("data", {})]
    if found:
        return found[-1] if isinstance(found[-1], dict) else {"error": "malformed observation"}
    errors = [o for o in cell.outputs if o.get("output_type") == "error"]
    if errors:
        return {
            "error": f"the grader's probe failed: {errors[-1]['ename']}: {errors[-1]['evalue']}"
        }
    return {"error": "the grader's probe returned nothing"}


def canary_source(path: str) -> str:
    return f"try:\n    open({path!r}).close()\nexcept BaseException:\n    pass"


async def run_notebook(
    nb, probes, sandbox, scratch: Scratch, env, cell_timeout, deadline, canary=None
) -> tuple[dict, bool]:
    """Execute ``nb`` up to its last probe: ({probe key: payload dict}, whether the canary ran).

    ``probes`` maps a cell index to (key, exercise name, symbol, seed). A payload is the probe's
    dict, or {"timeout": message} / {"error": message} when the probe could not run. ``canary``
    (a path the guard must refuse) is opened after the last probe, if the kernel still runs.
    """
    results: dict = {}
    answered = False
    last = max(probes)
    ipc = scratch.ipc
    km = SandboxedKernelManager(
        sandbox,
        scratch,
        env,
        kernel_name="python3",
        transport="ipc",
        ip=str(ipc / "kernel"),
        connection_file=str(ipc / "connection.json"),
    )
    km.kernel_spec.interrupt_mode = "message"  # a signal would reach bubblewrap, not the kernel
    client = _Client(
        nb,
        km=km,
        timeout=cell_timeout,
        startup_timeout=max(1, min(120, int(deadline - time.monotonic()))),
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={"ename": "Timeout", "evalue": "cell timed out", "traceback": []},
        kernel_name="python3",
        resources={"metadata": {"path": HOME}},
    )
    replies: list = []
    client.on_cell_executed = lambda cell, cell_index, execute_reply: replies.append(execute_reply)

    async def times_out(cell, index: int, remaining: float) -> bool:
        """Run ``cell`` for at most the cell limit and ``remaining`` s; True when it timed out."""
        client.timeout = int(min(cell_timeout, remaining))
        replies.clear()
        await client.async_execute_cell(cell, index)
        return any((r or {}).get("content", {}).get("ename") == "Timeout" for r in replies)

    try:
        # The kernel's own stdout and stderr are the learner's: they never reach the grader's.
        await client.async_start_new_kernel(
            cwd=str(scratch.home),
            env=sandbox.launch_env(env, scratch.home),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await client.async_start_new_kernel_client()
        stopped = None  # the last cell before a check that ran out of time: (its source, limit)
        for index in range(last + 1):
            cell = nb.cells[index]
            if cell.cell_type != "code":
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 1:
                break
            probe = probes.get(index)
            if probe is not None:
                key, name, symbol, seed = probe
                cell = nbformat.v4.new_code_cell(probe_source(name, symbol, seed))
            timed_out = await times_out(cell, index, remaining)
            if probe is None:
                stopped = (cell.source, client.timeout) if timed_out else stopped
            elif timed_out:
                results[key] = {"timeout": f"the check did not finish within {client.timeout} s"}
            else:
                results[key] = _undefined_after_a_stop(_payload(cell), symbol, stopped)
        if canary is not None and deadline - time.monotonic() > 1:
            cell = nbformat.v4.new_code_cell(canary_source(canary))
            # It ran: the guard must have logged it.
            answered = not await times_out(cell, 0, deadline - time.monotonic())
    except DeadKernelError:
        _fill(results, probes, {"error": "the notebook's kernel died (out of memory, or killed)"})
    except Exception as error:  # a kernel that cannot start or talk costs this lesson only
        why = f"{type(error).__name__}: {error}"
        _fill(results, probes, {"error": f"the notebook's kernel could not run: {why}"})
    finally:
        await _stop(client, km, sandbox)
    _fill(results, probes, {"timeout": "the submission's time ran out before this check ran"})
    return results, answered


def _undefined_after_a_stop(payload: dict, symbol: str, stopped) -> dict:
    """A check that found ``symbol`` undefined after an earlier cell was stopped at its time limit
    says so: a timeout, naming that cell by its first line (else the payload as it came)."""
    if "missing" not in payload or stopped is None:
        return payload
    source, limit = stopped
    first = next((line.strip() for line in source.splitlines() if line.strip()), "")
    shown = first if len(first) <= 60 else first[:57] + "..."
    return {
        "timeout": f"{symbol} was not defined when the check ran: a cell before it ({shown!r}) "
        f"did not finish within {limit} s and was stopped"
    }


def _fill(results: dict, probes: dict, payload: dict) -> None:
    for key, *_ in probes.values():
        results.setdefault(key, payload)


async def _stop(client, km, sandbox) -> None:
    """Kill the kernel's sandbox outright; with it goes every process the notebook started."""
    try:
        if client.kc is not None:
            client.kc.stop_channels()
        if km.has_kernel:
            await km.shutdown_kernel(now=True)
    except Exception:  # the kernel may be half started or already gone
        process = getattr(km.provisioner, "process", None)
        if process is not None and process.poll() is None:
            process.kill()
    finally:
        sandbox.cleanup()
