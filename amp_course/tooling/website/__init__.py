"""The course as a static website (``make site``, or ``amp-course website``).

Each lesson's page is its executed copy (the newest GPU run's under ``reports/gpu/<device>/``, else
the one the tests' smoke run writes to ``executed/``) with the learner's exercise blanks put back,
a stamp naming the device, torch version, date and mode, links to Colab and to the notebook, and
the lesson's quiz as questions without answers. The guides in ``docs/*.md`` (for instructors,
contributors...) are pages beside them, listed on the entry page. Sphinx with MyST-NB renders the
pages into
``site/_build/html`` without executing anything.
"""

from .build import BUILD, build, write_sources
from .sources import MissingExecutedCopy, Source, select, select_all

__all__ = [
    "BUILD",
    "MissingExecutedCopy",
    "Source",
    "build",
    "select",
    "select_all",
    "write_sources",
]
