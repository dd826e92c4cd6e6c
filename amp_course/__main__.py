"""``python -m amp_course ...``: the ``amp-course`` command where the course is not installed."""

from .cli import main

raise SystemExit(main())
