"""The tooling's commands, run as ``amp-course <command>`` (``python -m amp_course <command>`` in a
checkout that is not installed, as on a GPU machine): each is a module's ``main(argv)``, imported
only when its command runs, so ``amp-course info`` never loads papermill or Sphinx."""

from __future__ import annotations


def _gpu(argv: list[str]) -> int:
    from .runs.gpu_cli import main

    return main(argv)


def _gpu_results(argv: list[str]) -> int:
    from .runs.results import main

    return main(argv)


def _smoke_bench(argv: list[str]) -> int:
    from .runs.smoke import main

    return main(argv)


def _grading_bench(argv: list[str]) -> int:
    from .grading.throughput import main

    return main(argv)


def _rehearse_cpu(argv: list[str]) -> int:
    import argparse
    import os
    import sys

    from ..cpu import REHEARSALS, rehearsal_environment

    parser = argparse.ArgumentParser(
        prog="amp-course rehearse-cpu",
        description="Run COMMAND with the dispatch caps of another kind of CPU (ac.cpu), e.g. "
        "`amp-course rehearse-cpu avx2 -- python -m pytest`: torch in COMMAND and in every process "
        "it starts dispatches as on that CPU.",
    )
    parser.add_argument("kind", choices=sorted(REHEARSALS), help="avx2: a CPU without native bf16")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run after --")
    os.environ.update(rehearsal_environment(args.kind))
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"amp-course rehearse-cpu: cannot run {command[0]!r}: {error}", file=sys.stderr)
        return 127


def _workspace(argv: list[str]) -> int:
    from .workspace import main

    return main(argv)


def _site(argv: list[str]) -> int:
    from .website.build import main

    return main(argv)


# {command: (what it does, for ``amp-course --help``; its main)}
COMMANDS = {
    "gpu": (
        "the GPU run: every lesson in full mode, nbval, the benchmark matrix (reports/gpu/)",
        _gpu,
    ),
    "gpu-results": (
        "a committed GPU run's figures as docs/gpu-run.md's results section",
        _gpu_results,
    ),
    "smoke-bench": ("each lesson's smoke-mode time on this CPU (reports/smoke/)", _smoke_bench),
    "grading-bench": (
        "grading throughput: generated submissions, sandboxed, per --jobs (reports/grading/)",
        _grading_bench,
    ),
    "rehearse-cpu": (
        "run a command as on another kind of CPU (avx2: no native bf16), e.g. the tests",
        _rehearse_cpu,
    ),
    "workspace": (
        "your copy of the lessons in workspace/ (make course); --fresh LESSON gets one back",
        _workspace,
    ),
    "website": ("the course's website from the executed copies (site/_build/html)", _site),
}


def run(command: str, argv: list[str]) -> int:
    """Run ``command`` with the arguments after its name; its exit status."""
    return COMMANDS[command][1](argv)
