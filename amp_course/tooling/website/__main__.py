"""``python -m amp_course.website``: build the site into site/_build/html."""

import sys

from .build import build
from .sources import MissingExecutedCopy

try:
    build(quiet=False)
except MissingExecutedCopy as error:
    print(f"error: {error}", file=sys.stderr)
    raise SystemExit(2) from None
