"""The course's tooling, apart from what lessons call: running the course and reporting it
(``runs``: the GPU run in parts, the CUDA smoke pass, the smoke benchmark, the README's results,
the GPU machine's bootstrap), grading submissions (``grading``), the website (``website``) and
the committed runs they read (``committed_runs``). No lesson imports it; its commands run as
``amp-course gpu``, ``gpu-results``, ``smoke-bench`` and ``site`` (``commands``), thin shells over
it."""
