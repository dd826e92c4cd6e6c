"""``python -m amp_course.gpu_results``, as the README and Makefile give it: a shell over
``amp_course.tooling.runs.results``."""

from .tooling.runs.results import main

if __name__ == "__main__":
    raise SystemExit(main())
