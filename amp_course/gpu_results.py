"""``python -m amp_course.gpu_results reports/gpu/<device> [--write]``: the README's GPU results
from a run's files (``amp_course.runs.results``)."""

from .runs.results import main

if __name__ == "__main__":
    raise SystemExit(main())
