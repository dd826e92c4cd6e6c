"""The course's tooling, apart from what lessons call: running the course and reporting it
(``runs``: the GPU run in parts, the CUDA smoke pass, the smoke benchmark, the README's results,
the GPU machine's bootstrap), grading submissions (``grading``), the website (``website``) and
the committed runs they read (``committed_runs``). No lesson imports it; the command lines
(``amp-course``, ``python -m amp_course.gpu_run``, ``amp_course.gpu_results``,
``amp_course.smoke_bench``, ``amp_course.website``) are thin shells over it."""
