"""The guard of a learner's kernel graded without a sandbox: a Python audit hook (PEP 578).

``python guard.py CONFIG -m ipykernel_launcher -f CONNECTION`` installs the hook and then starts
the kernel, so the hook sees everything the kernel's Python does from its first import on, and no
Python code can remove it. It refuses (PermissionError in the learner's code) and writes one line
to the log named in CONFIG, which only the grader reads:

- ``flag``: reaching the reference solutions (a ``*.exercises.solutions`` module; a file or folder
  in an ``amp_course/exercises/solutions`` folder, or the same file under another name), a
  ``.git`` folder, another process's ``/proc`` entries or a file CONFIG protects (the key, the
  gradebook); writing where CONFIG says the instructor's files are; ctypes' ways to the C
  library's process, file and memory functions; changing the hook itself;
- ``note``: writing, renaming, removing or linking anything else outside the kernel's scratch
  folder; starting or forking a process (the standard library's own probes, quietly); connecting
  a socket; opening a folder outside the scratch folder with ``os.open`` (a directory descriptor
  would let a relative path escape the checks).

It cannot see native code that opens files by itself (``torch.from_file``, ``torch.save``'s
writer) or memory written through ctypes, which ``unsandboxed`` answers as it can; a sandbox stops
all of it. Standard library only; all the hook uses is bound when it is made (default arguments:
changing them is audited), so replacing ``os.stat`` or ``builtins.str`` later changes nothing.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
import sys

FLAG, NOTE = "flag", "note"
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# ctypes symbols that start processes, touch files or memory behind the hook's back, or reach
# the interpreter's internals (its audit hooks among them).
C_DENIED = frozenset(
    "system popen execv execve execvp execvpe execl execle execlp fexecve posix_spawn "
    "posix_spawnp fork vfork clone clone3 syscall ptrace process_vm_readv process_vm_writev "
    "open open64 openat openat64 openat2 creat creat64 fopen fopen64 freopen freopen64 rename "
    "renameat renameat2 unlink unlinkat remove rmdir mkdir mkdirat link linkat symlink symlinkat "
    "chmod fchmod fchmodat chown fchown lchown fchownat truncate truncate64 ftruncate ftruncate64 "
    "mmap mmap64 mprotect dlopen kill killpg tgkill prctl setrlimit prlimit prlimit64 chdir".split()
)
# Programs the standard library runs to probe the system (ctypes.util.find_library, platform):
# refused like any other, but not reported, since importing torch alone runs them.
QUIET_PROGRAMS = frozenset("ldconfig gcc cc ld objdump uname".split())
PROCESS_EVENTS = frozenset(
    "subprocess.Popen os.system os.exec os.posix_spawn os.spawn os.fork os.forkpty pty.spawn "
    "os.startfile".split()
)
# Events that change a file: (event, indices of its path arguments, of its dir_fd arguments).
# Tuples and frozensets only, here and below: the hook's state must be unchangeable.
CHANGE_EVENTS = (
    ("os.rename", (0, 1), (2, 3)),
    ("os.remove", (0,), (1,)),
    ("os.rmdir", (0,), (1,)),
    ("os.mkdir", (0,), (2,)),
    ("os.chmod", (0,), (2,)),
    ("os.chown", (0,), (3,)),
    ("os.utime", (0,), (3,)),
    ("os.truncate", (0,), ()),
    ("os.setxattr", (0,), ()),
    ("os.removexattr", (0,), ()),
    ("os.chflags", (0,), ()),
    ("os.lchflags", (0,), ()),
    ("shutil.rmtree", (0,), (1,)),
    ("sqlite3.connect", (0,), ()),
    ("os.symlink", (0, 1), (2,)),
    ("os.link", (0, 1), (2, 3)),
)
CHANGES = frozenset(name for name, _, _ in CHANGE_EVENTS)
SOCKET_EVENTS = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg")
SIGNAL_EVENTS = ("os.kill", "os.killpg", "resource.prlimit")
CTYPES_EVENTS = ("ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.dlopen", "ctypes.cdata")
OTHER_EVENTS = ("open", "os.listdir", "os.scandir", "import", "object.__setattr__")
HANDLED = (
    CHANGES
    | PROCESS_EVENTS
    | frozenset(SOCKET_EVENTS + SIGNAL_EVENTS + CTYPES_EVENTS + OTHER_EVENTS)
)


def make_hook(config: dict, log_fd: int):
    """The audit hook for ``config`` (``unsandboxed.Guard.prepare`` writes it), logging to
    ``log_fd``."""
    types = (pathlib.PurePosixPath, pathlib.PosixPath, type(next(os.scandir("/"))))
    code = type(make_hook.__code__)
    return _hook_factory(
        config["home"].rstrip("/") + "/",
        tuple(p.rstrip("/") + "/" for p in config["protected"]),
        tuple(p.rstrip("/") + "/" for p in config["instructor"]),
        frozenset(tuple(identity) for identity in config["inodes"]),
        tuple((t, t.__fspath__, t.__str__) for t in types),
        frozenset(c for c in _hook_factory.__code__.co_consts if type(c) is code),
        log_fd,
    )


# Below, no function looks up a global or builtin name when it runs: whatever it uses is a
# default argument, bound when the hook is made (builtins in ``_b``, unpacked first).
def _hook_factory(home, protected, instructor, inodes, path_types, codes, log_fd):
    errors = (OSError, ValueError, TypeError)
    bound = (type, str, bytes, int, errors, os.stat, os.lstat, os.readlink, os.getcwd, os.getpid)
    bound += (PermissionError,)

    def resolve(path, _b=bound, _islink=stat.S_ISLNK):
        """``path`` absolute, with every link followed (as far as it exists)."""
        _, _, _, _, _errors, _, _lstat, _readlink, _getcwd, _, _ = _b
        if not path.startswith("/"):
            path = _getcwd() + "/" + path
        parts = [p for p in path.split("/") if p and p != "."]
        done, hops = "", 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                done = done[: done.rfind("/")] if done else ""
                continue
            candidate = done + "/" + part
            try:
                info = _lstat(candidate)
            except _errors:
                done = candidate
                continue
            if _islink(info.st_mode) and hops < 40:
                hops += 1
                target = _readlink(candidate)
                done = "" if target.startswith("/") else done
                parts = [p for p in target.split("/") if p and p != "."] + parts
                continue
            done = candidate
        return done or "/"

    def report(level, what, _b=bound, _write=os.write, _fd=log_fd, _len=len):
        """Log the refusal, one ``level<TAB>what`` line (never fails; not the quiet ones), then
        refuse."""
        try:
            if level != "quiet":
                said = what if _len(what) <= 500 else what[:500] + " [… cut]"  # never silently
                line = level + "\t" + said.replace("\n", " ").replace("\t", " ") + "\n"
                _write(_fd, line.encode("utf-8", "replace"))
        except _b[4]:
            pass
        raise _b[10](f"refused by the grader (no sandbox): {what}")

    def text_of(path, _b=bound, _types=path_types, _report=report):
        """The path as text (a descriptor: the file it names, or None); odd objects refused."""
        _type, _str, _bytes, _int, _errors, _, _, _readlink, _, _, _ = _b
        kind = _type(path)
        if kind is _str:
            return path
        if kind is _bytes:
            return path.decode("utf-8", "surrogateescape")
        if kind is _int:
            try:
                return _readlink(f"/proc/self/fd/{path}")
            except _errors:
                return None
        for known, fspath, as_str in _types:
            if kind is known and kind.__fspath__ is fspath and kind.__str__ is as_str:
                text = path.__fspath__()
                if _type(text) is _str:
                    return text
        return _report("note", f"a path of type {kind.__name__} (use str or pathlib)")

    def reads_protected(real, raw, _b=bound, _protected=protected, _inodes=inodes):
        _, _str, _, _, _errors, _stat, _, _, _, _getpid, _ = _b
        slashed = real + "/"
        if "/amp_course/exercises/solutions/" in slashed or "/.git/" in slashed:
            return True
        if slashed.startswith(_protected):
            return True
        if slashed.startswith("/proc/"):
            pid = slashed[6 : slashed.find("/", 6)]
            if pid.isdigit() and pid != _str(_getpid()):
                return True
        try:
            info = _stat(raw)
        except _errors:
            return False
        return (info.st_dev, info.st_ino, info.st_ctime_ns) in _inodes

    def check_write(real, _home=home, _instructor=instructor, _report=report):
        slashed = real + "/"
        if slashed.startswith(_home) or real == "/dev/null":
            return
        level = "flag" if slashed.startswith(_instructor) else "note"
        _report(level, f"writing {real} (only the scratch folder is writable)")

    helpers = (resolve, text_of, reads_protected, check_write, report, type(report))
    sets = (PROCESS_EVENTS, QUIET_PROGRAMS, CHANGES, CHANGE_EVENTS, C_DENIED, SOCKET_EVENTS)
    sets += (SIGNAL_EVENTS,)

    def hook(
        event,
        args,
        _b=bound,
        _h=helpers,
        _s=sets,
        _home=home,
        _codes=codes,
        _isdir=stat.S_ISDIR,
        _getpgid=os.getpgid,
        _write_flags=WRITE_FLAGS,
        _handled=HANDLED,
    ):
        if event not in _handled:  # most events (attribute reads, id(), exec...): at once
            return
        _type, _str, _bytes, _int, _errors, _stat, _, _, _, _getpid, _ = _b
        _resolve, _text_of, _reads_protected, _check_write, _report, _function = _h
        _processes, _quiet, _changes, _change_events, _denied, _, _ = _s
        if event == "open":
            path, mode, flags = args
            if _type(path) is _int:
                return  # a descriptor already open: checked when it was opened
            text = _text_of(path)
            real = _resolve(text)
            if _reads_protected(real, text):
                _report("flag", f"reading {real}")
            if _type(flags) is _int and flags & _write_flags:
                _check_write(real)
            elif mode is None and not (real + "/").startswith(_home):
                try:
                    folder = _isdir(_stat(text).st_mode)
                except _errors:
                    folder = False
                if folder:
                    _report("note", f"opening the folder {real} with os.open")
        elif event == "os.listdir" or event == "os.scandir":
            text = _text_of(args[0]) if args and args[0] is not None else "."
            if text is not None and _reads_protected(_resolve(text), text):
                _report("flag", f"listing {_resolve(text)}")
        elif event == "import":
            name, filename = args[0], args[1]
            if ".exercises.solutions" in "." + name:
                _report("flag", f"importing {name}")
            if filename is not None:
                text = _text_of(filename)
                real = _resolve(text)
                if _reads_protected(real, text):
                    _report("flag", f"importing {real}")
                if (real + "/").startswith(_home) and not real.endswith((".py", ".pyc")):
                    _report("flag", f"loading native code {real}")
        elif event in _changes:
            index = 0
            while _change_events[index][0] != event:
                index += 1
            _, paths, fds = _change_events[index]
            if event == "os.symlink" or event == "os.link":
                _report("note", f"making a link to {args[0]!s:.200}")
            for index in fds:
                if args[index] != -1 and args[index] is not None:
                    _report("note", f"{event} relative to a folder descriptor")
            for index in paths:
                text = _text_of(args[index])
                if text is None or text == ":memory:" or text == "":
                    continue
                _check_write(_resolve(text))
        elif event in _processes:
            program = args[1] if event == "os.spawn" else args[0] if args else "fork"
            if event == "subprocess.Popen" and program is None:
                program = args[1] if _type(args[1]) in (_str, _bytes) else (args[1] or ["?"])[0]
            if _type(program) is _bytes:
                program = program.decode("utf-8", "replace")
            name = (f"{program!s}".split() or ["?"])[0].rsplit("/", 1)[-1]
            _report("quiet" if name in _quiet else "note", f"starting a process ({name:.100})")
        elif event in _s[5]:  # sockets
            _report("note", f"network use ({event} {args[1]!s:.100})")
        elif event in _s[6]:  # signals, limits
            target, me = args[0], _getpid()
            if target not in (0, me, -_getpgid(0)) and not (
                event == "os.killpg" and target == _getpgid(0)
            ):
                _report("note", f"{event} on another process ({target!s:.20})")
        elif event == "ctypes.dlsym" or event == "ctypes.dlsym/handle":
            name = args[1] if _type(args[1]) is _str else f"{args[1]!s:.100}"
            if name in _denied or name.startswith("_Py") or "Audit" in name:
                _report("flag", f"ctypes reaching the C function {name}")
        elif event == "ctypes.dlopen":
            text = _text_of(args[0]) if args[0] is not None else None
            if text is not None and "/" in text:
                real = _resolve(text)
                if (real + "/").startswith(_home):
                    _report("flag", f"loading native code {real}")
        elif event == "ctypes.cdata":
            _report("flag", "ctypes reaching memory by address (from_address)")
        elif event == "object.__setattr__" and _type(args[0]) is _function:
            if args[0].__code__ in _codes:
                _report("flag", "changing the grader's hook")

    return hook


def install(config_path: str) -> None:
    """Install the hook described in ``config_path`` (a JSON file the grader wrote)."""
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    log_fd = os.open(config["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    sys.addaudithook(make_hook(config, log_fd))


def main(argv: list[str]) -> None:
    """``guard.py CONFIG -m MODULE ARGS...``: install the hook, then run MODULE as ``__main__``."""
    import runpy

    config, flag, module, *rest = argv
    if flag != "-m":
        raise SystemExit("usage: guard.py CONFIG -m MODULE [ARGS...]")
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # this file's folder is the grader's package, not the learner's path
    install(config)
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
