"""A learner who changes a lesson's parameters to a value the lesson cannot run with is told so by
the setting's name in the lesson's first cell (``ac.lesson.require``), before any cell spends time
on it: each of these once ended in a bare AssertionError, an IndexError or a ZeroDivisionError
cells later, or ran with a setting silently meaning something else."""

import pytest
from conftest import run_tagged
from cuda_double import FakeGpu

import amp_course as ac

REFUSED = [  # (lesson, setting, value, what the message says it needs)
    ("00_scenario", "GLOBAL_BATCH", 4, "splits it evenly over 8 GPUs"),
    ("00_scenario", "GLOBAL_BATCH", 100, "use a multiple of 8"),
    ("00_scenario", "GLOBAL_BATCH", None, "use a multiple of 8"),  # lesson 07 takes None
    ("00_scenario", "AMP_SMOKE_STEPS", 0, "at least 1 step"),
    ("01_number_formats", "SUM_LENGTH", 1000, "5,000 or more"),
    ("03_grad_scaler", "INJECT_INF_AT", 50, "one of the run's steps, 0 to 49"),
    ("03_grad_scaler", "INJECT_INF_AT", None, "one of the run's steps"),
    ("03_grad_scaler", "NUM_STEPS", 3, "the scheduler demo needs 4 steps"),
    ("04_training_loops", "ACCUMULATION_STEPS", 3, "splits BATCH_SIZE=64 into that many equal"),
    ("06_debugging_nan", "PLANT_LAYER", 4, "the tiny ViT has layers 0 to 3"),
    ("08_capstone", "NUM_SEEDS", 1, "2 or more"),
    ("08_capstone", "EPOCHS", 0, "more than 0"),
    ("08_capstone", "IMAGE_SIZE", 28, "a multiple of 16"),
    ("08_capstone", "NUM_LAYERS", 24, "1 to ViT-B/16's 12"),
    ("11_below_bf16", "HIDDEN", 200, "a multiple of 32"),
    ("11_below_bf16", "AMAX_HISTORY", 0, "1 step or more"),
]


def _settings(lesson: str, **changed) -> dict:
    """The lesson's parameters with ``changed`` on top, then its settings cell, on the CPU."""
    namespace = run_tagged(lesson, "parameters", namespace={"ac": ac})
    namespace.update({"SMOKE": True, "DEVICE": "cpu", **changed})
    return run_tagged(lesson, "settings", namespace=namespace)


@pytest.mark.parametrize(
    "lesson, setting, value, needs", REFUSED, ids=[f"{r[0][:2]}-{r[1]}={r[2]}" for r in REFUSED]
)
def test_a_setting_the_lesson_cannot_run_with_is_named_in_its_first_cell(
    lesson, setting, value, needs
):
    with pytest.raises(ValueError, match=rf"^{setting}={value!r}: .*{needs}"):
        _settings(lesson, **{setting: value})


@pytest.mark.parametrize("asked", ["bf16", "auto", "fp16", "float16", "half"])
def test_lesson_03_runs_fp16_whatever_amp_dtype_says(capsys, asked):
    """Its demos are fp16's with a GradScaler: the header said 'bf16' while fp16 ran. A note says
    so where AMP_DTYPE asks for anything else, and only there (every spelling of fp16 is fp16)."""
    settings = _settings("03_grad_scaler", AMP_DTYPE=asked)["settings"]
    printed = capsys.readouterr().out
    assert settings.precision is ac.precisions.FP16 and "AMP dtype: fp16" in printed
    note = f"AMP_DTYPE={asked!r}: this lesson runs fp16 whatever it says"
    assert (note in printed) == (asked in ("bf16", "auto"))


def test_lesson_11_says_when_its_digits_hold_fewer_steps_than_asked(capsys):
    assert _settings("11_below_bf16", BATCH_SIZE=256)["train_steps"] == 15
    assert "40 steps asked; the 4000 training digits hold 15 batches of 256" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize("gpus", [1, 2])
def test_lesson_07_launches_one_process_per_gpu_and_says_when_that_is_fewer(
    monkeypatch, capsys, gpus
):
    """On a GPU machine with fewer GPUs than NUM_PROCESSES the lesson launched the processes
    asked for, and NCCL cannot put two ranks on one GPU."""
    FakeGpu(monkeypatch, count=gpus)
    assert _settings("07_multi_gpu", DEVICE="cuda")["processes"] == gpus
    printed = capsys.readouterr().out
    note = "NUM_PROCESSES=2: this machine has 1 GPU, one process each"
    assert (note in printed) == (gpus == 1)
    assert f"{gpus} process{'es' if gpus > 1 else ''} over NCCL" in printed


@pytest.mark.parametrize("seed", ["x", 1.5, None, True])
def test_seeding_with_what_is_not_a_whole_number_names_the_seed(seed):
    """seed_everything, which lessons and labs call with their SEED: NumPy's own error for 'x'
    named a cast rule between dtypes."""
    with pytest.raises(ValueError, match=rf"SEED={seed!r}: a whole number"):
        ac.lesson.seed_everything(seed)
    ac.lesson.seed_everything("7")  # as papermill -p SEED 7 passes it
