"""``python -m amp_course.gpu_run``, as the README and Makefile give it: a shell over
``amp_course.tooling.runs.gpu_cli``."""

from .tooling.runs.gpu_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
