"""``python -m amp_course.gpu_run``: the course's GPU run (``amp_course.runs.gpu``; ``--help``)."""

from .runs.gpu_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
