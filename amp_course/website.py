"""``python -m amp_course.website``, as `make site` runs it: a shell over
``amp_course.tooling.website``."""

import runpy

if __name__ == "__main__":
    runpy.run_module("amp_course.tooling.website", run_name="__main__", alter_sys=True)
