"""Where a submission's kernel runs: bubblewrap (default), Docker/Podman, or, failing all, nowhere.

The sandbox sees the grader's Python and the course read-only, with the reference solutions
masked by an empty directory, and one scratch folder read-write; nothing else of the instructor's
(not the key, not the gradebook's folder, not other submissions, not the repository's history).
It has its own process namespace, so every process the notebook starts dies with it, detached or
not, and no network. bubblewrap is a maintained, unprivileged tool (Flatpak's sandbox); writing
our own namespace code would be worse. Memory is bounded with ``prlimit --as`` (address space per
process) under bubblewrap and with ``--memory`` (the whole container) under Docker/Podman; the
wall clock is bounded by the grader, which kills the sandbox. With no sandbox (``none``) the kernel
runs under ``guard.py``, an audit hook (``unsandboxed`` says what else that run does).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import amp_course

from ...paths import DATA, QUIZZES
from . import guard

PACKAGE = Path(amp_course.__file__).resolve().parent
GUARD = Path(guard.__file__).resolve()  # run as a script: the kernel's launcher without a sandbox
HIDDEN = "exercises/solutions"  # relative to a copy of the package
HOME = "/home/learner"  # the scratch folder, as the notebook sees it
KINDS = ("auto", "bwrap", "docker", "podman", "none")
NOT_ISOLATED = "none (NOT isolated"  # how the gradebook's isolation column starts without one
DEFAULT_MEMORY = 8 * 2**30  # torch alone maps about 3.6 GB of address space
DEFAULT_IMAGE = "debian:bookworm-slim"
TMPFS_BYTES = 512 * 2**20
# What the kernel needs of /etc: the loader's cache, users, time zone, fonts and alternatives.
ETC = ("ld.so.cache", "passwd", "group", "nsswitch.conf", "localtime", "fonts", "alternatives")


class SandboxUnavailable(RuntimeError):
    """The sandbox asked for cannot run on this machine."""


def data_path() -> Path | None:
    """The course's data folder as the grader finds it (None if it has none)."""
    from ...data import DataIntegrityError, data_dir

    try:
        return data_dir().resolve()
    except DataIntegrityError:
        return None


def interpreter(path: str = sys.executable) -> str:
    """``path`` (a Python) as the sandbox sees it: its folder resolved, its name kept.

    The sandbox binds only resolved folders, so a venv reached through a link (a worktree's
    ``.venv``, say) would be missing there; the name stays, since a venv's ``bin/python`` is
    itself a link and Python finds its venv from the name it was started by.
    """
    if not Path(path).is_absolute():  # found on the sandbox's PATH
        return path
    return str(Path(path).parent.resolve() / Path(path).name)


def course_paths() -> list[Path]:
    """What the sandbox sees read-only: the Python in use, this package, the data and quizzes."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), PACKAGE}
    paths.update({PACKAGE.parent / QUIZZES, data_path() or PACKAGE.parent / DATA})
    return sorted(p for p in paths if p.exists())


def hidden_paths() -> list[Path]:
    """Every copy of the reference solutions under a path the sandbox sees."""
    seen = course_paths()
    found = {PACKAGE / HIDDEN}
    for entry in sys.path:
        candidate = Path(entry or ".").resolve() / "amp_course" / HIDDEN
        if candidate.is_dir() and any(candidate.is_relative_to(p) for p in seen):
            found.add(candidate)
    return sorted(p for p in found if p.is_dir())


@dataclass(frozen=True)
class Scratch:
    """One kernel's folders: its home (the only place it may write), its sockets, the guard's."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def ipc(self) -> Path:
        return self.root / "ipc"

    @property
    def guard_config(self) -> Path:
        return self.root / "guard.json"

    @property
    def guard_log(self) -> Path:
        return self.root / "guard.log"


@dataclass
class Sandbox:
    """How to wrap a kernel command; ``kind`` is bwrap, docker, podman or none (``why``)."""

    kind: str
    memory: int = DEFAULT_MEMORY
    image: str = DEFAULT_IMAGE
    why: str = ""  # why there is no sandbox (kind none)
    names: list[str] = field(default_factory=list)  # containers started, for cleanup

    def fresh(self) -> Sandbox:
        """The same sandbox for another submission (containers are cleaned up per submission)."""
        return Sandbox(self.kind, self.memory, self.image, self.why)

    @property
    def label(self) -> str:
        """The gradebook's isolation column."""
        if self.kind != "none":
            return self.kind
        return f"{NOT_ISOLATED}: {self.why}; kernel guarded by an audit hook)"

    def wrap(self, cmd: list[str], scratch: Scratch, env: dict[str, str]) -> list[str]:
        """``cmd`` (a kernel command line) run inside this sandbox."""
        cmd = [interpreter(cmd[0]), *cmd[1:]]
        if self.kind == "bwrap":
            return bwrap_command(cmd, scratch.home, scratch.ipc, env, self.memory)
        if self.kind in ("docker", "podman"):
            name = f"amp-grade-{uuid.uuid4().hex[:12]}"
            self.names.append(name)
            return container_command(self.kind, name, cmd, scratch.home, scratch.ipc, env, self)
        guarded = [cmd[0], str(GUARD), str(scratch.guard_config), *cmd[1:]]
        return prlimit(guarded, self.memory)

    def launch_env(self, env: dict[str, str], home: Path) -> dict[str, str]:
        """The environment the wrapped command is started with (the sandbox sets its own)."""
        if self.kind == "none":  # the kernel runs here, with the scratch folder as its home
            return {key: value.replace(HOME, str(home)) for key, value in env.items()}
        keep = ("PATH", "DOCKER_HOST", "DOCKER_CONFIG", "CONTAINER_HOST", "XDG_RUNTIME_DIR")
        return {key: os.environ[key] for key in keep if key in os.environ}

    def cleanup(self) -> None:
        """Remove the containers this sandbox started (their processes die with them)."""
        while self.names:
            name = self.names.pop()
            subprocess.run([self.kind, "rm", "-f", name], capture_output=True, timeout=60)


def _bind_system(args: list[str]) -> None:
    args += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    for name in ETC:
        if (Path("/etc") / name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    if Path("/sys/devices/system/cpu").is_dir():  # torch reads the CPU's topology here
        args += ["--ro-bind", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]


def bwrap_command(cmd, home: Path, ipc: Path, env: dict[str, str], memory: int) -> list[str]:
    args = [shutil.which("bwrap") or "bwrap"]
    # A user namespace with no capabilities, and every other namespace: pid (all processes die
    # with the sandbox's init), network (none), ipc, uts, cgroup.
    args += ["--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000"]
    args += ["--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    _bind_system(args)
    # /tmp and /dev/shm live in memory that prlimit does not count: give them a fixed size.
    size = str(TMPFS_BYTES)
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm"]
    for path in course_paths():
        args += ["--ro-bind", str(path), str(path)]
    for path in hidden_paths():  # an empty, read-only directory in place of the references
        args += ["--tmpfs", str(path), "--remount-ro", str(path)]
    args += ["--bind", str(home), HOME, "--bind", str(ipc), str(ipc), "--chdir", HOME]
    args += ["--clearenv"]
    for key, value in sorted(env.items()):
        args += ["--setenv", key, value]
    return [*args, "--", *prlimit(cmd, memory)]


def prlimit(cmd: list[str], memory: int) -> list[str]:
    """``cmd`` with its address space bounded (util-linux prlimit; Linux only, else unbounded)."""
    tool = shutil.which("prlimit")
    return [tool, f"--as={memory}", "--", *cmd] if tool else list(cmd)


def container_command(engine, name, cmd, home: Path, ipc: Path, env, sandbox) -> list[str]:
    """``docker run`` (or podman) for ``cmd``: the host's /usr, Python and course read-only."""
    args = [engine, "run", "--rm", "--name", name, "--network", "none"]
    args += ["--memory", str(sandbox.memory), "--memory-swap", str(sandbox.memory)]
    args += ["--pids-limit", "1024", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    args += ["--read-only", "--tmpfs", f"/tmp:size={TMPFS_BYTES}"]
    args += ["--user", f"{os.getuid()}:{os.getgid()}"]
    for path in [Path("/usr"), *course_paths()]:
        args += ["-v", f"{path}:{path}:ro"]
    for path in hidden_paths():
        args += ["--mount", f"type=tmpfs,destination={path},tmpfs-mode=0555"]
    args += ["-v", f"{home}:{HOME}", "-v", f"{ipc}:{ipc}", "-w", HOME]
    for key, value in sorted(env.items()):
        args += ["-e", f"{key}={value}"]
    return [*args, sandbox.image, *cmd]


@functools.lru_cache(maxsize=1)
def bwrap_works() -> str | None:
    """None when bubblewrap can start a sandbox here, else why not."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    home = Path(os.environ.get("TMPDIR", "/tmp"))
    probe = bwrap_command([interpreter(), "-c", "pass"], home, home, {}, DEFAULT_MEMORY)
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap failed to start: {error}"
    if result.returncode != 0:
        return f"bubblewrap failed: {(result.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


def container_works(kind: str, image: str) -> str | None:
    """None when ``kind`` (docker or podman) can run ``image`` here, else why not: without a
    daemon, or with the image missing, every kernel would fail to start and every student lose
    points for it."""
    if shutil.which(kind) is None:
        return f"{kind} is not installed"
    for args, why in (
        (["info"], f"{kind} cannot reach its daemon"),
        (["image", "inspect", image], f"the image {image} is not here (`{kind} pull {image}`)"),
    ):
        try:
            result = subprocess.run([kind, *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"{why}: {error}"
        if result.returncode != 0:
            said = (result.stderr.strip().splitlines() or ["?"])[-1]
            return f"{why}: {said}"
    return None


def choose(kind: str = "auto", memory: int = DEFAULT_MEMORY, image: str = DEFAULT_IMAGE) -> Sandbox:
    """The sandbox to grade with. ``auto``: bubblewrap, else none (guarded; grading without one
    prints ``warning`` first and last)."""
    if kind not in KINDS:
        raise ValueError(f"unknown sandbox {kind!r}; choose one of {', '.join(KINDS)}")
    if kind in ("docker", "podman"):
        why = container_works(kind, image)
        if why is not None:
            raise SandboxUnavailable(f"--sandbox {kind}: {why}")
        return Sandbox(kind, memory, image)
    if kind in ("auto", "bwrap"):
        why = bwrap_works()
        if why is None:
            return Sandbox("bwrap", memory, image)
        if kind == "bwrap":
            raise SandboxUnavailable(f"--sandbox bwrap: {why}")
    else:
        why = "--sandbox none was asked for"
    return Sandbox("none", memory, image, why)  # grading warns where it runs (run.grade_all)


def warning(box: Sandbox) -> str:
    """What grading without a sandbox means, in plain words (printed first and last)."""
    line = "!" * 78
    return (
        f"{line}\nWARNING: grading WITHOUT a sandbox ({box.why}).\n"
        "Students' code runs with your permissions, one submission at a time. An audit hook in\n"
        "each kernel refuses reading the reference solutions, the key or the repository's\n"
        "history, writing outside the kernel's own folder and starting processes, and flags\n"
        "the submission that tries; your files are compared before and after each notebook. But\n"
        "native code (a C library opening files itself) gets past the hook, and what it changes\n"
        "outside the course, the masters, the key and the submissions goes unseen. Install\n"
        "bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) or use --sandbox docker.\n"
        f"The gradebook's isolation column reads: {box.label}\n{line}"
    )


def warn(box: Sandbox) -> None:
    print(warning(box), file=sys.stderr, flush=True)
