"""The course's one notebook executor, for every run of a lesson: the tests' smoke run, the smoke
benchmark, the CUDA smoke pass and the GPU run. A lesson is written out with its exercise blanks
holding the reference solutions, or left as a learner gets them (``prepare``); papermill executes
it with the figures inline and the copy is stamped (``run_lesson``, ``tooling.executed``), or nbval
executes it in a fresh interpreter (``run_nbval``). The website shows the stamped copies.

Two other ways of running a notebook's code are deliberately not this one: the grader's kernel
(``tooling.grading.kernel``) runs a learner's untrusted notebook in a sandbox, swaps probes in
for the check cells and drops outputs on arrival, which papermill and nbval cannot; and the
tests run single tagged cells in their own process (``tests/conftest.py``'s ``run_tagged``)
because they inspect the objects those cells define, which a kernel cannot hand back.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
from pathlib import Path

from ... import env_vars
from ...paths import NOTEBOOKS, ROOT
from ..executed import stamp

# ipykernel draws figures inline only when MPLBACKEND is unset; a caller running with Agg (the
# tests, `make gpu`) would otherwise leave the executed copies without their figures.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


@contextlib.contextmanager
def environment(**values: str | None):
    """These environment variables set inside the block (a None value leaves one as it is), then
    put back; kernels and commands started inside inherit them."""
    old = {name: os.environ.get(name) for name in values}
    os.environ.update({name: value for name, value in values.items() if value is not None})
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


SAVE_EVERY_S = 5.0  # how often a run under way writes its copy (and always at its end)


@functools.cache
def _engine():
    """papermill's nbclient engine, its copy written every ``SAVE_EVERY_S`` seconds and at the
    end rather than at every cell's start and end. papermill writes the whole notebook each time
    (about 85 writes of lesson 00, 15 ms each: over a second of every timed run, which a learner's
    Run All never spends); a run killed midway still leaves its copy up to a few seconds before.
    papermill has no setting for this, so its engine API is used: an engine of its own kind."""
    from papermill.engines import NBClientEngine, NotebookExecutionManager

    class Manager(NotebookExecutionManager):
        def save(self, force: bool = False, **kwargs):
            last = getattr(self, "last_save_time", None)
            if force or last is None or (self.now() - last).total_seconds() >= SAVE_EVERY_S:
                super().save(**kwargs)

        def notebook_complete(self, **kwargs):
            super().notebook_complete(**kwargs)
            self.save(force=True)

    class Engine(NBClientEngine):
        @classmethod
        def execute_notebook(cls, nb, kernel_name, output_path=None, **kwargs):
            manager_keys = ("progress_bar", "log_output", "autosave_cell_every")
            nb_man = Manager(
                nb,
                output_path=output_path,
                **{key: kwargs.pop(key) for key in manager_keys if key in kwargs},
            )
            nb_man.notebook_start()
            try:
                cls.execute_managed_notebook(
                    nb_man, kernel_name, log_output=nb_man.log_output, **kwargs
                )
            finally:
                nb_man.cleanup_pbar()
                nb_man.notebook_complete()
            return nb_man.nb

    return Engine


ENGINE = "amp-course"


def _register_engine() -> None:
    from papermill.engines import papermill_engines

    papermill_engines.register(ENGINE, _engine())


def figures_inline():
    """Kernels started inside this block put their figures into the notebook."""
    return environment(MPLBACKEND=INLINE_BACKEND)


def prepare(path, folder, *, solved: bool = True, name: str | None = None) -> Path:
    """The lesson at ``path`` written into ``folder`` (as ``name``, else its own name), its
    exercise blanks holding the reference solutions (``exercises.fill_solutions``), or with
    ``solved=False`` as a learner gets them; the path written."""
    import nbformat

    from ...exercises import fill_solutions

    out = Path(folder) / (name or Path(path).name)
    nb = nbformat.read(path, as_version=4)
    nbformat.write(fill_solutions(nb) if solved else nb, out)
    return out


def run_lesson(
    path, out, *, smoke: bool, device, timeout_s: int, parameters=None, solved: bool = True
):
    """Execute the lesson at ``path`` with papermill into ``out``, figures inline, on ``device``;
    stamp the copy and return it (an nbformat node). Its exercise blanks hold the reference
    solutions, or with ``solved=False`` stay as a learner gets them (Run All before answering:
    checks say "Not done yet", later cells use the reference). ``parameters`` adds lesson
    parameters (``{"AMP_DTYPE": "fp16"}``). Papermill's errors propagate; ``timeout_s`` bounds
    each cell."""
    import tempfile

    import nbformat
    import papermill

    from .kernels import AsyncIpcKernelManager

    path, out = Path(path), Path(out)
    _register_engine()
    # Progress bars are for a live run: a copy would keep only their first frame ("0%").
    no_bars = environment(**{env_vars.PROGRESS: "0"})
    with tempfile.TemporaryDirectory() as tmp, figures_inline(), no_bars:
        papermill.execute_notebook(
            str(prepare(path, tmp, solved=solved)),
            str(out),
            parameters={**(parameters or {}), "SMOKE": smoke, "DEVICE": str(device)},
            cwd=str(path.parent),  # runs in the lesson's own folder, like the original
            kernel_name="python3",
            execution_timeout=timeout_s,
            progress_bar=False,
            kernel_manager_class=AsyncIpcKernelManager,  # no TCP port to race for (.kernels)
            engine_name=ENGINE,
            # The copy is whole once the last cell is done. A graceful shutdown then waits for the
            # kernel's interpreter to tear down (about 1.5 s with torch loaded, in every timed
            # run), which a learner's Run All never waits for. Immediate kills the kernel's
            # process group, and jupyter_client removes its connection file and sockets.
            shutdown_kernel="immediate",
        )
    stamp(out, device, smoke=smoke)
    return nbformat.read(out, as_version=4)


def run_notebooks(
    notebooks: list[Path],
    out_dir: Path,
    timeout_s: int,
    *,
    smoke: bool = False,
    device="cuda",
    parameters: dict | None = None,
) -> list[dict]:
    """Execute each notebook with ``run_lesson`` (full mode unless ``smoke``, ``parameters``
    added) on ``device``, one after another; keep the stamped copies in ``out_dir``. One result per
    notebook: its name, ``status`` ("passed"/"failed"), ``error`` and ``seconds``, papermill's
    duration of the run (kernel start included, the copy and the stamp not)."""
    import nbformat

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for path in notebooks:
        out = out_dir / path.name
        out.unlink(missing_ok=True)  # a failed run must not report an earlier run's copy
        status, error, seconds = "passed", "", None
        try:
            run_lesson(
                path, out, smoke=smoke, device=device, timeout_s=timeout_s, parameters=parameters
            )
        except Exception as exc:  # noqa: BLE001 - one failing lesson must not stop the others
            status, error = "failed", f"{type(exc).__name__}: {str(exc)[:500]}"
        if out.exists():  # papermill keeps a failed run's partial copy too
            duration = nbformat.read(out, as_version=4).metadata.get("papermill", {})
            seconds = round(duration.get("duration") or 0.0, 1) or None
        results.append(
            {"notebook": path.name, "status": status, "seconds": seconds, "error": error}
        )
        print(f"{path.name}: {status} in {seconds} s", flush=True)
    return results


def nbval_command(notebooks, cell_timeout_s: int, junitxml=None) -> list[str]:
    """The command that runs ``pytest --nbval-lax`` over ``notebooks`` in a fresh interpreter
    (this one), each cell bounded by ``cell_timeout_s``, with JUnit XML at ``junitxml`` if given."""
    from .kernels import PLUGIN

    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        PLUGIN,  # nbval's kernels on Unix sockets: no TCP port to race for
        "--nbval-lax",
        f"--nbval-cell-timeout={cell_timeout_s}",
        *([f"--junitxml={junitxml}"] if junitxml else []),
        *(str(path) for path in notebooks),
    ]


def run_nbval(
    notebooks, cell_timeout_s: int, *, junitxml=None, env=None, timeout_s: float | None = None
) -> tuple[int | None, str]:
    """``nbval_command`` run from the lessons' folder with ``env`` (default: this process's) and
    this checkout first on its path: its exit status (None: stopped after ``timeout_s``) and its
    output. It runs in a session of its own, so a timeout ends its kernels too, not only pytest;
    its output goes to a file, not a pipe, so a kernel left behind cannot keep this waiting."""
    import tempfile

    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(
            nbval_command(notebooks, cell_timeout_s, junitxml),
            cwd=ROOT / NOTEBOOKS,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=timeout_s)
            stopped = ""
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code, stopped = None, f"\nstopped after {timeout_s:.0f} s"
            process.wait()
        log.seek(0)
        return code, log.read() + stopped
