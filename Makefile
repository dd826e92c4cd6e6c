# amp-course: `make course` sets up and opens the course; `make test` sets up, lints and runs
# every test; `make site` builds the course's website from the executed copies `make test` leaves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Pinned for this course's local and CI installs; the package itself accepts a range
# (pyproject.toml) because Colab and GPU machines bring their own torch.
TORCH_PIN ?= torch==2.14.1 torchvision==0.29.1
# Where pip looks for torch and torchvision. Empty: PyPI, whose Linux torch is the CUDA build
# (with NVIDIA's CUDA libraries, about 5.5 GB on disk). A CPU-only machine can take the CPU build:
# make course TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
STAMP := $(VENV)/.amp-course-installed
PORT ?= 8888
# No browser without a screen to show it (servers, containers, CI); set HEADLESS=0 to force one.
HEADLESS ?= $(if $(or $(DISPLAY),$(WAYLAND_DISPLAY),$(filter Darwin,$(shell uname -s))),0,1)
JUPYTER_ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist workers: one per logical core (tests/conftest.py gives each its share of threads).
TEST_WORKERS ?= logical
# Another kind of CPU to rehearse on this one (amp_course/cpu.py): `make test REHEARSE_CPU=avx2`
# and `make bench-smoke REHEARSE_CPU=avx2` run as on a CPU without native bf16.
REHEARSE_CPU ?=
AS_CPU := $(if $(REHEARSE_CPU),$(BIN)/amp-course rehearse-cpu $(REHEARSE_CPU) --)

.PHONY: setup course fresh test executed bench-smoke bench-suite bench-grading site gpu lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) $(TORCH_PIN)
	$(BIN)/python -m pip install -e ".[course,test,site,bench]"
	touch $(STAMP)

# JupyterLab opens on workspace/, the learner's git-ignored copy of notebooks/ (made on the first
# run; a lesson the course adds arrives on the next one; nothing there is ever overwritten).
course: setup
	$(BIN)/amp-course workspace --root $(CURDIR)
	@echo "Opening JupyterLab on workspace/ (the URL with its token follows; Ctrl-C stops it)."
	$(BIN)/jupyter lab --notebook-dir=workspace --ip=127.0.0.1 --port=$(PORT) \
		$(if $(filter 1,$(HEADLESS)),--no-browser) $(if $(filter 0,$(shell id -u)),--allow-root) \
		$(JUPYTER_ARGS)

# One lesson back as the course ships it, in workspace/ (your copy moves to workspace/old/):
# make fresh LESSON=03
fresh: setup
	$(BIN)/amp-course workspace --root $(CURDIR) --fresh $(LESSON)

# Lint and format-check first (fast), then every test. PYTHONDONTWRITEBYTECODE is cleared so that
# the test modules and the package are compiled once, not in every run's processes (the suite
# benchmark, amp_course/tooling/runs/suite.py, sets the same environment).
test: lint
	AMP_COURSE_OFFLINE=1 MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE= $(AS_CPU) \
		$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# Only the lessons' smoke run (part of `make test`): stamped executed copies in executed/.
executed: setup
	AMP_COURSE_OFFLINE=1 MPLBACKEND=Agg $(BIN)/python -m pytest tests/test_notebooks.py -k papermill

# Benchmark: each lesson's smoke-mode time on this CPU, one after another in three passes, against
# the targets (30 s each, 240 s in all); reports/smoke/<device>.json and .md, or
# <device>-rehearsing-<kind> with REHEARSE_CPU (the tests only guard against hanging cells).
bench-smoke: setup
	AMP_COURSE_OFFLINE=1 MPLBACKEND=Agg $(BIN)/amp-course smoke-bench \
		$(if $(REHEARSE_CPU),--rehearse-cpu $(REHEARSE_CPU))

# Benchmark: the test suite's pytest time on this CPU (the target: 240 s on 2 cores without native
# bf16), SUITE_PASSES passes; with REHEARSE_CPU, each beside a pass of this machine as it is.
SUITE_PASSES ?= 2
bench-suite: setup
	$(BIN)/amp-course suite-bench --passes $(SUITE_PASSES) \
		$(if $(REHEARSE_CPU),--rehearse-cpu $(REHEARSE_CPU))

# Benchmark: grading throughput, GRADING_SUBMISSIONS generated submissions (every exercise answered)
# graded in bubblewrap with --jobs 1 and 2; submissions per hour per core in reports/grading/<cpu>.
GRADING_SUBMISSIONS ?= 4
bench-grading: setup
	AMP_COURSE_OFFLINE=1 MPLBACKEND=Agg $(BIN)/amp-course grading-bench \
		--submissions $(GRADING_SUBMISSIONS) --jobs 1,2

# The website in site/_build/html, from any GPU run under reports/gpu/ and the up-to-date smoke
# copies in executed/ that `make test` (or `make executed` alone) writes; it names the lessons whose
# copy is missing or older than the notebook. No lesson is executed here.
site: setup
	$(BIN)/amp-course website

# Every notebook in full mode on the GPU it finds, then the benchmark matrix; reports/gpu/<device>/.
# Refuses to run without a CUDA GPU. On a GPU machine that already has torch, run
# `python -m amp_course gpu` directly instead.
gpu: setup
	MPLBACKEND=Agg $(BIN)/amp-course gpu

# ruff is pinned in the test extra (pyproject.toml), so a new ruff release cannot fail the build.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) executed .pytest_cache site/_build  # never workspace/: the learner's work
