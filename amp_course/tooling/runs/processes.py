"""Where a suite pass's CPU time goes, process by process: the suite benchmark's account of every
process a pass starts, and of those that import torch (each import costs seconds of CPU, and the
suite starts dozens: its pytest workers, the lessons' and the graders' kernels, torchrun's ranks,
the fresh interpreters some tests need).

psutil reads the processes; this module samples them while the pass runs, since psutil (like the
operating system) answers only for processes still alive, and a kernel that ends takes its CPU time
with it. A process counts as importing torch once its memory maps libtorch (read from Linux's
``/proc/PID/maps``: psutil's ``memory_maps`` parses the much longer ``smaps``); elsewhere the
account gives processes and CPU time only. Each process's CPU time is its last sample's, so a
little short.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import threading
from pathlib import Path

INTERVAL_S = 0.5  # no process that imports torch lives less: the import alone takes longer
LIBRARY = "libtorch_cpu"  # in every torch build, CPU or CUDA
PROC_MAPS = Path("/proc/self/maps").exists()  # Linux's: which libraries a process has loaded
TORCHRUN = "torch.distributed.run"
RANKS = "torchrun launchers and ranks"
KINDS = (  # (kind, a word of its command line), first match wins
    ("Jupyter kernels", "ipykernel"),
    (RANKS, TORCHRUN),
    ("pytest processes", " -m pytest"),
    ("pytest processes", "sys.stdin.readline"),  # pytest-xdist's workers, started by execnet
)
OTHER = "other Python processes"


def kind_of(command: str, parent: str = "") -> str:
    """A process's kind, from its command line (a rank's, from its parent's: torchrun)."""
    kind = next((kind for kind, word in KINDS if word in command), OTHER)
    return RANKS if kind == OTHER and TORCHRUN in parent else kind


def _maps_torch(pid: int) -> bool | None:
    """Whether process ``pid`` has loaded torch's library (None: this system cannot tell)."""
    if not PROC_MAPS:
        return None
    try:
        return LIBRARY in Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except OSError:  # ended, or not ours to read
        return False


class Account:
    """``with Account() as account:`` samples every descendant of this process while the block
    runs; ``account.summary()`` then adds them up."""

    def __init__(self, interval_s: float = INTERVAL_S):
        import psutil  # the test extra's, as the suite's own runs need

        self._psutil = psutil
        self._root = psutil.Process()
        self._interval = interval_s
        self._seen: dict[tuple[int, float], dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Account:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self._interval):
                return

    def sample(self) -> None:
        gone = (self._psutil.NoSuchProcess, self._psutil.AccessDenied, self._psutil.ZombieProcess)
        for process in self._root.children(recursive=True):
            try:
                with process.oneshot():  # one read of its stat file for all of the below
                    key = (process.pid, process.create_time())
                    times, name = process.cpu_times(), process.name()
                    entry = self._seen.get(key)
                    if entry is None:
                        parent = process.parent()
                        entry = self._seen[key] = {
                            "torch": False,
                            "parent": " ".join(parent.cmdline()) if parent else "",
                            "name": None,
                            "command": None,
                        }
                    entry["cpu_s"] = times.user + times.system
                    # A child seen between fork and exec has its parent's command line and maps
                    # (torch's, in a pytest worker): it is settled only once it runs its own.
                    forked = entry["command"] == entry["parent"]
                    if entry["torch"] and not forked:
                        continue
                    if entry["name"] != name or forked:  # new, exec'd, or not yet exec'd
                        entry["name"], entry["command"] = name, " ".join(process.cmdline())
                    if "python" in name.lower():  # it may import torch at any time
                        entry["torch"] = _maps_torch(process.pid)
            except gone:
                continue

    def summary(self) -> dict:
        """The processes seen and their CPU time; those that imported torch, by kind."""
        seen = list(self._seen.values())
        record = {
            "interval_s": self._interval,
            "processes": len(seen),
            "cpu_s": round(sum(e.get("cpu_s", 0.0) for e in seen), 1),
        }
        if any(e["torch"] is None for e in seen):
            return record  # no /proc maps here: which imported torch is unknown
        kinds: dict[str, dict] = {}
        for entry in (e for e in seen if e["torch"]):
            name = kind_of(entry["command"], entry["parent"])
            kind = kinds.setdefault(name, {"processes": 0, "cpu_s": 0.0})
            kind["processes"] += 1
            kind["cpu_s"] += entry.get("cpu_s", 0.0)
        record["torch"] = {
            "processes": sum(k["processes"] for k in kinds.values()),
            "cpu_s": round(sum(k["cpu_s"] for k in kinds.values()), 1),
            "kinds": {
                name: {**kind, "cpu_s": round(kind["cpu_s"], 1)}
                for name, kind in sorted(kinds.items(), key=lambda item: -item[1]["cpu_s"])
            },
        }
        return record


def _children_cpu_s() -> float:
    """The CPU time of this process's children that have ended and been waited for (not a pass's
    account: a kernel whose server is killed first is reaped by another process)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def torch_import_cpu_s(tries: int = 3) -> float:
    """The CPU time (user and system) of a fresh ``python -c "import torch"``, the least of
    ``tries``: what every process that imports torch pays before it does anything."""
    least = float("inf")
    for _ in range(tries):
        before = _children_cpu_s()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        least = min(least, _children_cpu_s() - before)
    return round(least, 2)


def sentence(account: dict, seconds: float, cores: int, import_s: float | None) -> str:
    """The account as the report says it, for a pass of ``seconds`` on ``cores`` cores."""
    busy = account["cpu_s"] / (seconds * cores)
    said = (
        f"{account['processes']} processes under pytest used {account['cpu_s']:.0f} core-s of "
        f"CPU, {busy:.0%} of {cores} cores over its {seconds:.0f} s"
    )
    torch = account.get("torch")
    if torch is None:
        return said + " (which of them imported torch is not known on this system)."
    kinds = ", ".join(
        f"{kind['processes']} {name} ({kind['cpu_s']:.0f} core-s)"
        for name, kind in torch["kinds"].items()
    )
    said += (
        f". {torch['processes']} of them imported torch and used {torch['cpu_s']:.0f} core-s: "
        f"{kinds}."
    )
    if import_s and account["cpu_s"]:
        spent = torch["processes"] * import_s
        said += (
            f" A fresh `import torch` takes {import_s:.1f} core-s here, so importing it took "
            f"about {spent:.0f} core-s, {spent / account['cpu_s']:.0%} of the pass's CPU time."
        )
    return said
