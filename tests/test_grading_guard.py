"""Grading without a sandbox, piece by piece: the guard's audit hook in a plain Python process
(no kernel, no torch: a fraction of a second), what the grader reads from its log, and the check
of the instructor's files. The whole run, in kernels, is in test_grading.py."""

import dis
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from amp_course.tooling.grading import guard, sandbox, unsandboxed

REFERENCE = 'SOLUTIONS = {"06.choose_dtype": lambda capability, flags: "the reference"}\n'

# Each route prints "<name>: REACHED" when it gets through, "<name>: refused ..." when not.
ATTEMPTS = r"""
import ctypes, gc, importlib, os, shutil, socket, sqlite3, subprocess, sys, tempfile, types
CHECKOUT, OUTSIDE, INSTRUCTOR, KEY, LINKED = sys.argv[1:6]
SOLUTIONS = CHECKOUT + "/amp_course/exercises/solutions"
FILE = SOLUTIONS + "/lesson_06.py"

def attempt(name, action):
    try:
        action()
        print(f"{name}: REACHED", flush=True)
    except Exception as error:
        print(f"{name}: refused {type(error).__name__}: {error}", flush=True)

def import_by_statement():
    sys.path.insert(0, CHECKOUT)
    import amp_course.exercises.solutions.lesson_06  # noqa: F401

def import_by_importlib():
    for name in [m for m in sys.modules if m.startswith("amp_course")]:
        del sys.modules[name]
    importlib.import_module("amp_course.exercises.solutions.lesson_06")

def reload_from_the_checkout():
    import amp_course.exercises
    importlib.reload(amp_course.exercises)
    importlib.import_module("amp_course.exercises.solutions")

def exec_the_file():
    found = {}
    exec(open(FILE).read(), found)

def relative_after_chdir():
    os.chdir(CHECKOUT + "/amp_course/exercises")
    try:
        open("solutions/lesson_06.py").read()
    finally:
        os.chdir(os.environ["HOME"])

class Sneaky:
    def __fspath__(self):
        return FILE

def hook_itself():
    hook = next(f for f in gc.get_objects() if type(f) is types.FunctionType
                and f.__name__ == "hook" and f.__module__ in ("__main__", "guard"))
    hook.__defaults__ = ()

def write(path):
    with open(path, "w") as handle:
        handle.write("tampered")

attempt("import statement", import_by_statement)
attempt("importlib", import_by_importlib)
attempt("reload", reload_from_the_checkout)
attempt("exec file", exec_the_file)
attempt("bytes path", lambda: open(FILE.encode()).read())
attempt("pathlike", lambda: open(Sneaky()).read())
attempt("proc root", lambda: open("/proc/self/root" + FILE).read())
attempt("dotdot", lambda: open(SOLUTIONS + "/../solutions/lesson_06.py").read())
attempt("hard link", lambda: open(LINKED).read())
attempt("listdir", lambda: os.listdir(SOLUTIONS))
attempt("scandir", lambda: list(os.scandir(SOLUTIONS)))
attempt("chdir", relative_after_chdir)
attempt("dir fd", lambda: os.open(CHECKOUT + "/amp_course/exercises", os.O_RDONLY))
attempt("git", lambda: open(CHECKOUT + "/.git/HEAD").read())
attempt("key", lambda: open(KEY).read())
attempt("grader proc", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read())
attempt("subprocess", lambda: subprocess.run(["cat", FILE], check=True))
attempt("os.system", lambda: os.system("true"))
attempt("fork", os.fork)
attempt("symlink", lambda: os.symlink(FILE, "link.py"))
attempt("write outside", lambda: write(OUTSIDE))
attempt("write instructor", lambda: write(INSTRUCTOR))
attempt("rename out", lambda: (write("mine.txt"), os.rename("mine.txt", OUTSIDE)))
attempt("sqlite outside", lambda: sqlite3.connect(OUTSIDE + ".db"))
attempt("socket", lambda: socket.socket().connect(("127.0.0.1", 9)))
attempt("ctypes system", lambda: ctypes.CDLL(None).system)
attempt("ctypes memory", lambda: ctypes.c_char.from_address(id(attempt)))
attempt("hook", hook_itself)
# What a kernel may do.
attempt("write home", lambda: write("mine.txt"))
attempt("temp file", lambda: tempfile.NamedTemporaryFile().close())
attempt("devnull", lambda: write(os.devnull))
attempt("read course", lambda: open(CHECKOUT + "/amp_course/exercises/lesson_06.py").read())
attempt("listdir course", lambda: os.listdir(CHECKOUT + "/amp_course/exercises"))
"""

FLAGGED = [
    "import statement",
    "importlib",
    "reload",
    "exec file",
    "bytes path",
    "proc root",
    "dotdot",
    "hard link",
    "listdir",
    "scandir",
    "chdir",
    "git",
    "key",
    "grader proc",
    "write instructor",
    "ctypes system",
    "ctypes memory",
    "hook",
]
NOTED = [
    "pathlike",
    "dir fd",
    "subprocess",
    "os.system",
    "fork",
    "symlink",
    "write outside",
    "rename out",
    "sqlite outside",
    "socket",
]
ALLOWED = ["write home", "temp file", "devnull", "read course", "listdir course"]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """ATTEMPTS run once under the guard, against a look-alike checkout."""
    root = tmp_path_factory.mktemp("guard")
    checkout = root / "checkout"
    solutions = checkout / "amp_course" / "exercises" / "solutions"
    solutions.mkdir(parents=True)
    for folder in (checkout / "amp_course", checkout / "amp_course" / "exercises", solutions):
        (folder / "__init__.py").write_text("")
    (solutions / "lesson_06.py").write_text(REFERENCE)
    (checkout / "amp_course" / "exercises" / "lesson_06.py").write_text("NO_FLAGS = ()\n")
    (checkout / ".git").mkdir()
    (checkout / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    instructor = root / "instructor"
    instructor.mkdir()
    key = instructor / "key.json"
    key.write_text("{}")
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    os.link(solutions / "lesson_06.py", elsewhere / "innocent.py")  # made before grading
    home = root / "scratch" / "home"
    (home / "tmp").mkdir(parents=True)
    (home / "attempts.py").write_text(ATTEMPTS)
    hidden = [solutions, *solutions.iterdir(), key]
    config = {
        "home": str(home.resolve()),
        "log": str(root / "scratch" / "guard.log"),
        "protected": [str(key)],
        "instructor": [str(instructor), str(checkout)],
        "inodes": sorted(
            {(p.stat().st_dev, p.stat().st_ino, p.stat().st_ctime_ns) for p in hidden}
        ),
    }
    (root / "scratch" / "guard.json").write_text(json.dumps(config))
    env = {"HOME": str(home), "TMPDIR": str(home / "tmp"), "PYTHONPATH": str(home)}
    env.update(unsandboxed.GUARD_ENV, TMPDIR=str(home / "tmp"))
    env["PATH"] = os.environ["PATH"]
    args = [str(checkout), str(root / "outside.txt"), str(instructor / "x.txt"), str(key)]
    args.append(str(elsewhere / "innocent.py"))
    cmd = [sys.executable, str(sandbox.GUARD), str(root / "scratch" / "guard.json")]
    result = subprocess.run(
        [*cmd, "-m", "attempts", *args], cwd=home, env=env, capture_output=True, text=True
    )
    said = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    log = unsandboxed.read_findings(root / "scratch" / "guard.log")
    return {"result": result, "said": said, "log": log, "root": root, "key": key}


def test_the_guarded_process_ran_every_attempt(guarded):
    assert guarded["result"].returncode == 0, guarded["result"].stderr[-2000:]
    assert set(guarded["said"]) == set(FLAGGED + NOTED + ALLOWED)


@pytest.mark.parametrize("name", FLAGGED + NOTED)
def test_every_route_is_refused(guarded, name):
    assert guarded["said"][name].startswith("refused PermissionError"), guarded["said"][name]


@pytest.mark.parametrize("name", ALLOWED)
def test_the_kernels_own_work_is_allowed(guarded, name):
    assert guarded["said"][name] == "REACHED"


def test_reaching_the_references_or_the_instructor_is_flagged_and_the_rest_noted(guarded):
    flags, notes = " | ".join(guarded["log"].flags), " | ".join(guarded["log"].notes)
    for words in (
        "importing amp_course.exercises.solutions",
        "solutions/lesson_06.py",
        ".git/HEAD",
    ):
        assert words in flags
    for words in (
        "key.json",
        "environ",
        "instructor/x.txt",
        "elsewhere/innocent.py",  # a hard link to a reference, made before grading
        "/exercises/solutions | ",  # listed (os.listdir and os.scandir)
        "ctypes reaching the C function system",
        "ctypes reaching memory by address",
        "changing the grader's hook",
    ):
        assert words in flags + " | ", words
    # What reaches the references or the instructor is never only noted.
    for kind in ("reading ", "listing ", "importing ", "loading native code", "ctypes"):
        assert not [n for n in guarded["log"].notes if n.startswith(kind)], kind
    for words in ("starting a process (cat)", "starting a process (true)", "outside.txt"):
        assert words in notes
    assert "network use" in notes and "making a link" in notes
    assert not (guarded["root"] / "outside.txt").exists()
    assert guarded["key"].read_text() == "{}"


def _lookups(code) -> set[str]:
    """Global, builtin and closure names a code object (and the code nested in it) looks up."""
    kinds = ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF")
    found = {i.argval for i in dis.get_instructions(code) if i.opname in kinds}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _lookups(const)
    return found


def test_the_hook_holds_no_changeable_state(tmp_path):
    """Whatever it uses is bound in default arguments (changing those is an audited event): no
    closure cell (writable without one) and no global or builtin looked up when it runs."""
    config = {"home": str(tmp_path), "protected": [], "instructor": [], "inodes": []}
    functions, seen = [], [guard.make_hook(config, 2)]
    while seen:
        value = seen.pop()
        if isinstance(value, types.FunctionType) and value.__code__.co_filename != guard.__file__:
            continue  # pathlib's methods: compared by identity, never called
        if isinstance(value, types.FunctionType):
            functions.append(value)
            assert value.__closure__ is None, value.__name__
            assert _lookups(value.__code__) == set(), value.__name__
            seen += value.__defaults__ or ()
        elif isinstance(value, (tuple, frozenset)):
            seen += value
        else:  # nothing that can change in place
            immutable = (str, bytes, int, type, types.BuiltinFunctionType, types.CodeType)
            immutable += (types.WrapperDescriptorType, types.MethodDescriptorType)  # DirEntry
            assert isinstance(value, immutable), value
    assert {f.__name__ for f in functions} == {
        "hook",
        "resolve",
        "text_of",
        "reads_protected",
        "check_write",
        "report",
    }


def test_findings_flag_or_note_and_the_canary_must_answer(tmp_path):
    log = tmp_path / "guard.log"
    lines = [["flag", "reading /x/amp_course/exercises/solutions/canary-abc.py"]]
    lines += [["note", "starting a process (git)"]]
    log.write_text("".join("\t".join(line) + "\n" for line in lines) + "no level\n")
    found = unsandboxed.read_findings(log, canary="canary-abc")
    assert found.notes == ["starting a process (git)"]
    assert found.flags == ["an unreadable line in the guard's log"]
    silent = unsandboxed.read_findings(log, canary="canary-other")
    assert any("did not answer its final check" in f for f in silent.flags)
    status, message = found.amend("passed", "")
    assert status == "flagged" and "unreadable line" in message  # and so earns no points
    noted = unsandboxed.Findings(notes=["starting a process (git)"])
    assert noted.amend("passed", "") == (
        "passed",
        "(refused without a sandbox: starting a process (git))",
    )


def test_watch_puts_back_changed_files_and_removes_planted_ones(tmp_path):
    kept, copy, stated = tmp_path / "course", tmp_path / "copy", tmp_path / "subs"
    for folder in (kept, copy / "__pycache__", stated):
        folder.mkdir(parents=True)
    (kept / "lesson.py").write_text("right")
    (copy / "__pycache__" / "x.pyc").write_bytes(b"code")
    (stated / "nb.ipynb").write_text("{}")
    watch = unsandboxed.Watch([kept], copy, [stated])  # snapshotted as the kernel starts
    assert watch.check() == []
    (kept / "lesson.py").write_text("tampered")
    (copy / "__pycache__" / "x.pyc").write_bytes(b"planted")
    (copy / "sitecustomize.py").write_text("import evil")
    (stated / "nb.ipynb").write_text('{"changed": 1}')
    changes = " | ".join(watch.check(keep=tmp_path / "changed"))
    found = tmp_path / "changed" / (kept / "lesson.py").relative_to("/")
    assert f"changed {kept / 'lesson.py'} (put back; as changed, in {found})" in changes
    assert found.read_text() == "tampered"  # someone's edit, or the evidence
    assert f"added {copy / 'sitecustomize.py'} (removed)" in changes
    assert f"changed {copy / '__pycache__' / 'x.pyc'} (put back)" in changes
    assert f"changed {stated / 'nb.ipynb'}" in changes
    assert (kept / "lesson.py").read_text() == "right"
    assert (copy / "__pycache__" / "x.pyc").read_bytes() == b"code"
    assert not (copy / "sitecustomize.py").exists()
    watch.snapshot()  # before the next kernel
    assert watch.check() == []


def test_the_course_copy_has_a_decoy_in_place_of_the_references(tmp_path):
    root = unsandboxed.course_copy(tmp_path / "course")
    decoy = root / "amp_course" / "exercises" / "solutions"
    assert [p.name for p in decoy.iterdir()] == ["__init__.py"]
    assert "Not the reference solutions" in (decoy / "__init__.py").read_text()
    assert (root / "amp_course" / "exercises" / "lesson_06" / "__init__.py").is_file()
    for path in [root, *root.rglob("*")]:
        assert not path.stat().st_mode & 0o222, path
        if path.is_dir():
            path.chmod(0o755)  # so that pytest can remove it


def test_without_a_sandbox_the_kernel_starts_under_the_guard(tmp_path):
    box = sandbox.Sandbox("none", why="bubblewrap (bwrap) is not installed")
    scratch = sandbox.Scratch(tmp_path)
    cmd = box.wrap([sys.executable, "-m", "ipykernel_launcher", "-f", "c.json"], scratch, {})
    at = cmd.index(str(sandbox.GUARD))
    assert cmd[at - 1] == sandbox.interpreter(sys.executable)
    assert cmd[at + 1 :] == [str(scratch.guard_config), "-m", "ipykernel_launcher", "-f", "c.json"]
    assert box.label.startswith(sandbox.NOT_ISOLATED) and "bwrap) is not installed" in box.label
    assert "audit hook" in box.label and "WITHOUT a sandbox" in sandbox.warning(box)
    assert Path(sandbox.GUARD).read_text().count("import amp_course") == 0
