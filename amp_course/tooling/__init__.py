"""The course's tooling, apart from what lessons call: running the course and reporting it
(``runs``: the GPU run in parts, the CUDA smoke pass, the smoke benchmark, the GPU guide's results,
the GPU machine's bootstrap), grading submissions (``grading``) and the website (``website``).
A lesson reaches it only through ``amp_course.gpu_runs`` (what a committed GPU run printed). Its
commands run as ``amp-course gpu``, ``gpu-results``, ``smoke-bench``, ``website``, ``grade``,
``autograder`` and ``quiz`` (``instructor_commands``): rows of the one table of subcommands,
``amp_course.cli.COMMANDS``, each a thin shell over a module's ``main``. The committed GPU runs
are read here (``gpu_copies``), as are the executed copies' stamps (``executed``)."""
