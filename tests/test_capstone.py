"""The capstone's plan and sentences: modes per device, the batch that fits, the run length that
fits the budget, and verdicts that follow the numbers (GPU paths simulated on the CPU)."""

import pytest
import torch
from cuda_double import FakeGpu

from amp_course import capstone, memory, models, precisions, stats, timing
from amp_course.recipe import AmpRecipe

GIB = 2**30


def test_upscaled_vit_is_a_vit_b16_on_digits():
    with torch.device("meta"):
        model = models.UpscaledViT("b16", image_size=64)
        reference = models.build_vit("b16", num_classes=10, image_size=64)
    # The same encoder as the scenario's ViT-B/16; only the 1-channel patch embedding differs.
    difference = models.count_parameters(reference) - models.count_parameters(model)
    assert difference == 2 * 768 * 16 * 16
    digits = torch.randn(3, 1, 28, 28)
    tiny = models.UpscaledViT("tiny", image_size=28)
    assert isinstance(tiny.upscale, torch.nn.Identity)
    assert tiny(digits).shape == (3, 10)
    small = models.UpscaledViT("tiny", image_size=56, patch_size=14)
    assert small.upscale(digits).shape == (3, 1, 56, 56)
    assert small(digits).shape == (3, 10)


def test_every_mode_on_a_cpu_and_a_bf16_gpu(monkeypatch):
    modes, note = capstone.modes_for("cpu")
    assert list(modes) == ["fp32", "fp16 + GradScaler", "bf16"]
    monkeypatch.setattr(capstone, "pick_precision", lambda device, warn: precisions.get("bfloat16"))
    assert list(capstone.modes_for("cuda")[0]) == list(modes)


def test_a_gpu_without_bf16_tensor_cores_leaves_bf16_out(monkeypatch):
    monkeypatch.setattr(capstone, "pick_precision", lambda device, warn: precisions.get("float16"))
    FakeGpu(monkeypatch, name="Tesla T4", capability=(7, 5), total=15 * GIB)
    modes, note = capstone.modes_for("cuda")
    assert list(modes) == ["fp32", "fp16 + GradScaler"]
    assert "7.5" in note and "bf16 is left out" in note


def build_small():
    return models.UpscaledViT("tiny", image_size=28)


def test_batch_on_a_cpu_is_the_one_asked_for():
    choice = capstone.choose_batch(build_small, 48, "cpu")
    assert choice.batch_size == 48 and "CPU" in choice.reason
    assert "BATCH_SIZE" not in choice.reason  # smoke mode's batch is not the learner's setting


@pytest.mark.parametrize("available, expected", [(40 * GIB, 512), (4 * GIB, 344)])
def test_batch_on_a_gpu_fits_its_memory(monkeypatch, available, expected):
    per_sample = 10 * 2**20  # what the simulated forward saves per digit
    recipes = []

    def count_saved_bytes(build, shape, *, recipe, input_dtype=torch.float32, gpu=None):
        recipes.append(recipe)
        return memory.SavedBytes(per_sample, 0)

    monkeypatch.setattr(memory, "count_saved_bytes", count_saved_bytes)
    monkeypatch.setattr(memory, "usable_cuda_bytes", lambda device: available)
    choice = capstone.choose_batch(build_small, 512, "cuda")
    with torch.device("meta"):
        fixed = 16 * models.count_parameters(build_small())
    assert choice.batch_size == expected
    assert fixed + choice.batch_size * per_sample <= 0.85 * available
    assert ("fits" in choice.reason) == (expected == 512)
    assert recipes == [AmpRecipe("cuda")]  # counted on the GPU in fp32, which keeps the most


def test_plan_keeps_the_designed_length_within_the_budget():
    plan = capstone.plan_training({"fp32": 0.1, "bf16": 0.02}, 5, 300, 100, budget_s=200)
    assert (plan.steps, plan.shortened, plan.epochs) == (300, False, 3.0)
    assert plan.seconds == pytest.approx(180)
    assert "300 steps" in plan.reason and "within" in plan.reason


def test_plan_shortens_runs_on_a_slow_device_and_says_so():
    plan = capstone.plan_training({"fp32": 1.0, "fp16": 0.25}, 5, 351, 117, budget_s=330)
    assert plan.steps == 52 and plan.shortened
    assert plan.seconds <= 330
    assert "instead" in plan.reason and "TRAIN_BUDGET_S" in plan.reason
    with pytest.raises(ValueError, match="BATCH_SIZE"):
        capstone.plan_training({"fp32": 1.0}, 2, 10, 0, budget_s=10)


def test_scaling_sentence_follows_the_timings():
    assert "launch-bound" in capstone.scaling_sentence("m", 0.010, 0.012, 8, "cuda")
    assert "overhead" in capstone.scaling_sentence("m", 0.010, 0.012, 8, "cpu")
    # The lesson's own CPU run: 8.24 ms at batch 8, 24.2 ms at 64, over sqrt(8) times the time
    # and yet mostly fixed cost at the batch the modes are compared at.
    cpu = capstone.scaling_sentence("m", 8.24e-3, 24.2e-3, 8, "cpu")
    assert "72% of the small batch's step and 25% of the large one's" in cpu
    assert "cannot shorten it much" in cpu
    mostly_work = capstone.scaling_sentence("m", 0.010, 0.070, 8, "cuda")
    assert (
        "14% of the small batch's step" in mostly_work and "most of the step is work" in mostly_work
    )
    assert "No fixed cost shows" in capstone.scaling_sentence("m", 0.010, 0.085, 8, "cuda")
    # A launch-bound step whose 8x batch timed a little faster: no split into shares (it printed
    # "95% of the small batch's step and 100% of the large one's", the clamp's figures).
    faster = capstone.scaling_sentence("m", 0.010, 0.0095, 8, "cuda")
    assert "The larger batch was no slower" in faster and "%" not in faster


def _runs(*seconds):
    spec = torch.utils.benchmark.utils.common.TaskSpec("fn()", "pass")
    return torch.utils.benchmark.Measurement(1, list(seconds), spec)


FP32_RUNS = (1.0, 1.02, 1.04, 1.06, 1.08)


@pytest.mark.parametrize(
    "bf16_runs, said, not_said",
    [
        ((0.2, 0.21, 0.22, 0.23, 0.24), "(4.7x faster, outside", "slower"),
        ((1.3, 1.31, 1.32, 1.33, 1.34), "(slower than fp32, outside", "faster"),
        # 1.3x the median, but the middle halves overlap: no verdict (the old +-5% said slower)
        ((0.9, 1.05, 1.35, 1.6, 2.0), "not distinguishable", "slower than"),
        # 3% apart with tight spreads: told apart (the old +-5% said "within 5%")
        ((1.06, 1.065, 1.07, 1.075, 1.08), "slower than fp32", "not distinguishable"),
    ],
)
def test_speed_sentence_reads_the_verdict_of_timing_compare(bf16_runs, said, not_said):
    speed = timing.compare(_runs(*FP32_RUNS), _runs(*bf16_runs), ("fp32", "bf16"))
    sentence = capstone.speed_sentence("bf16", speed)
    assert sentence.startswith(f"bf16 took {speed.ratio:.2f}x the fp32 step time")
    assert said in sentence and not_said not in sentence, sentence


def test_interval_note_only_past_the_range_of_an_accuracy():
    assert capstone.interval_bounds_note(0.95, 0.99) is None
    assert "runs past" in capstone.interval_bounds_note(-0.361, 0.830)
    assert "runs past" in capstone.interval_bounds_note(0.9, 1.02)


def test_paired_runs_that_agree_on_every_seed_are_not_called_equivalent():
    """Runs too short to learn score the same in every mode (chance level at every seed): the
    t interval is [+0, +0], inside any margin, and said nothing about equivalence."""
    for candidate in ([14.84, 10.94], [15.84, 11.94]):
        paired = stats.paired_difference([14.84, 10.94], candidate)
        verdict = capstone.paired_verdict("bf16 - fp32", paired, 0.5, " points")
        assert "no width" in verdict and "equivalent" not in verdict, verdict
        assert "includes 0" not in verdict and "excludes 0" not in verdict


@pytest.mark.parametrize(
    "candidate, phrase",
    [
        ([98.7, 98.9, 98.5, 98.8, 98.6], "lies inside"),  # tight and near 0: equivalent here
        ([99.5, 98.1, 99.6, 97.9, 98.6], "cannot rule out"),  # wide around 0: inconclusive
        ([97.9, 98.1, 97.7, 98.0, 97.8], "scored lower"),  # clearly below
        ([99.6, 99.9, 99.4, 99.7, 99.5], "scored higher"),
    ],
)
def test_paired_verdict_follows_the_interval(candidate, phrase):
    reference = [98.7, 98.9, 98.6, 98.8, 98.7]
    verdict = capstone.paired_verdict(
        "bf16 - fp32", stats.paired_difference(reference, candidate), 0.5, " points"
    )
    assert phrase in verdict
    assert verdict.count("includes 0") + verdict.count("excludes 0") == 1
    if phrase == "lies inside":  # what these runs show, not a claim beyond their settings
        assert "at these settings" in verdict and "every purpose" not in verdict
