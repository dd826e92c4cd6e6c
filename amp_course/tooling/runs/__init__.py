"""Running the course and reporting what it did: one home, above the lessons' library.

- ``execute``: the one notebook executor: a lesson written out with its solutions filled in (or
  its blanks as a learner gets them), executed with papermill (figures inline) and its copy
  stamped (``amp_course.tooling.executed``: device, torch, date, mode), a list of lessons run in
  turn, or executed by nbval in a fresh interpreter; the tests, the smoke benchmark, the CUDA smoke
  pass and the GPU run all run lessons through it;
- ``gpu``: the GPU run (every lesson in full mode, nbval, the benchmark matrix) under
  ``reports/gpu/<device>/``; ``parts``: a run made in parts merged into one report; ``plan``:
  what a run of the current notebooks lacks, as parts with their minutes, and the next ones run;
  ``gpu_smoke``: the CUDA smoke pass (every lesson at smoke sizes under nbval, plainly and
  T4-rehearsed, several at a time) under ``reports/gpu/<device>-smoke/``; ``gpu_cli``: their
  command line;
- ``smoke``: each lesson's smoke-mode time on this CPU (``reports/smoke/``);
- ``files``: a committed GPU run's files read as typed figures; ``results``: those figures
  rendered as the GPU guide's section (docs/gpu-run.md) and the website's GPU page;
- ``wheels``: the offline GPU machine's bootstrap.

Each module is a library of functions; the commands are thin shells (``amp-course gpu``,
``gpu-results``, ``smoke-bench``: rows of ``amp_course.cli.COMMANDS``) over their ``main``. The
library calls the benchmark as ``ac.bench.run(config, device)``, never through a command line, and
takes the checkout's root and the lessons from ``ac.paths``. Nothing below
this package imports it; the website, which renders its reports, does. The stamp
(``amp_course.tooling.executed``) and the committed runs' folders with each lesson's copies in them
(``amp_course.tooling.gpu_copies``) sit beside it, in the tooling: the website, the GPU guide's
results and the plan read them, and lesson 09 through ``amp_course.gpu_runs``.
"""
