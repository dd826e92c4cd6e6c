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
