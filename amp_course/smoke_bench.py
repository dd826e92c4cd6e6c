"""``python -m amp_course.smoke_bench``: each lesson's smoke-mode time on this CPU
(``amp_course.runs.smoke``)."""

from .runs.smoke import main

if __name__ == "__main__":
    raise SystemExit(main())
