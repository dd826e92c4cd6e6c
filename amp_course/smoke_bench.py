"""``python -m amp_course.smoke_bench``, as the README and Makefile give it: a shell over
``amp_course.tooling.runs.smoke``."""

from .tooling.runs.smoke import main

if __name__ == "__main__":
    raise SystemExit(main())
