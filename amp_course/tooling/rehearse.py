"""``amp-course rehearse-cpu KIND -- COMMAND``: COMMAND run with torch's dispatch capped as on
another kind of CPU (``ac.cpu``'s rehearsals), so a machine with native bf16 rehearses one without:
torch in COMMAND, and in every process it starts, dispatches as there."""

from __future__ import annotations

import argparse
import os
import sys

from ..cpu import REHEARSALS, rehearsal_environment


def main(argv: list[str]) -> int:
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


def add_option(parser: argparse.ArgumentParser, runs: str) -> None:
    """A benchmark's ``--rehearse-cpu KIND`` option: ``runs`` (what it runs) with the dispatch
    caps of another kind of CPU."""
    parser.add_argument(
        "--rehearse-cpu",
        choices=sorted(REHEARSALS),
        default=None,
        help=f"run {runs} with the dispatch caps of another kind of CPU (ac.cpu): avx2, a CPU "
        "without native bf16",
    )


def record(key: str) -> dict:
    """What a benchmark's report keeps of rehearsal ``key``: its key, the CPU kind, its caps."""
    rehearsal = REHEARSALS[key]
    return {"key": key, "kind": rehearsal.kind, "caps": rehearsal.caps}


def report_name(bench: dict) -> str:
    """A benchmark report's file name: the machine's, and the CPU kind it rehearsed if any."""
    from ..device import device_slug  # torch with it: not for `rehearse-cpu`, which execs at once

    rehearsal = bench.get("rehearsal")
    return device_slug(bench["device"]) + (f"-rehearsing-{rehearsal['key']}" if rehearsal else "")


def paragraph(rehearsal: dict, where: str) -> str:
    """A report's words on the rehearsal it ran (``record``'s), its caps set in ``where``."""
    caps = ", ".join(f"`{k}={v}`" for k, v in rehearsal["caps"].items())
    return (
        f"Rehearsal: {caps} in {where}, so torch dispatches as on {rehearsal['kind']} and bf16 "
        "autocast is emulated. The caps change which kernels run, not this machine's clock, "
        "caches or memory: a slower machine of that kind takes longer."
    )
