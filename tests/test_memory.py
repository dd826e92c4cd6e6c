import gc

import pytest
import torch
from cuda_double import FakeGpu
from torch import nn

from amp_course import checkpointing, memory, models
from amp_course.recipe import AmpRecipe


def test_adam_state_is_16_bytes_per_parameter_whatever_the_dtype():
    m = memory.training_memory(1000, activation_bytes=0, optimizer="adamw")
    assert m.parameters + m.gradients + m.optimizer_state == 16 * 1000
    assert memory.training_memory(1000, 0, optimizer="sgd").total == 8 * 1000


def test_unknown_optimizer():
    with pytest.raises(ValueError, match="adamw"):
        memory.training_memory(10, 0, optimizer="lion")


@pytest.mark.parametrize(
    "call, words",
    [
        # A count typed as text made an account of repeated strings ('10101010' bytes).
        (lambda: memory.training_memory("10", 0), "num_params must be a number, not '10' (a str)"),
        (lambda: memory.training_memory(None, 0), "num_params must be a number, not None"),
        (lambda: memory.training_memory(10, -1), "activation_bytes must be at least 0, not -1"),
        (lambda: memory.training_memory(10, 0, optimizer=None), "Unknown optimizer None"),
        (lambda: memory.gpus_needed(1, 1, "8", 80), "global_batch must be a whole number, not '8'"),
        (lambda: memory.gpus_needed(1, 1, 8.0, 80), "global_batch must be a whole number, not 8.0"),
        (lambda: memory.gpus_needed(1, 1, 0, 80), "global_batch must be at least 1, not 0"),
        (lambda: memory.gpus_needed(1, 1, 8, None), "gpu_bytes must be a number, not None"),
        (lambda: memory.gpus_needed(1, 1, 8, 80, 90), "usable_fraction must be in (0, 1], not 90"),
        (lambda: memory.gpus_needed(1, float("nan"), 8, 80), "must be at least 0, not nan"),
    ],
)
def test_an_account_of_what_is_not_a_count_says_which_argument(call, words):
    with pytest.raises((TypeError, ValueError)) as raised:
        call()
    assert words in str(raised.value), raised.value


def test_saved_bytes_of_a_linear_stack_match_hand_count():
    # Linear(64->128) saves its input; ReLU saves its output; Linear(128->10) saves its input.
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    x = torch.randn(32, 64)
    saved = memory.saved_tensor_bytes(model, x, recipe=AmpRecipe("cpu"))
    assert saved.weight_copies == 0
    assert saved.activations == 4 * (32 * 64 + 32 * 128)  # ReLU output is the 2nd Linear's input


def test_autocast_halves_matmul_activations_and_adds_weight_copies():
    model = nn.Sequential(nn.Linear(64, 128), nn.Linear(128, 128))
    x = torch.randn(32, 64)
    fp32 = memory.saved_tensor_bytes(model, x, recipe=AmpRecipe("cpu"))
    bf16 = memory.saved_tensor_bytes(model, x, recipe=AmpRecipe("cpu", torch.bfloat16))
    assert bf16.activations == fp32.activations // 2
    # Only the second layer keeps its bf16 weight: it needs it for the gradient of its input.
    # The first layer's input needs no gradient, so autograd does not save that weight copy.
    assert bf16.weight_copies == 2 * 128 * 128


def test_vit_activations_shrink_under_autocast():
    model = models.build_vit("tiny")
    x = torch.randn(4, 1, 28, 28)
    fp32 = memory.saved_tensor_bytes(model, x, recipe=AmpRecipe("cpu"))
    bf16 = memory.saved_tensor_bytes(model, x, recipe=AmpRecipe("cpu", torch.bfloat16))
    assert 0.4 < bf16.activations / fp32.activations < 0.8


def test_gpus_needed():
    gib = 2**30
    # 10 GiB static, 1 GiB per sample, 80 GiB GPU at 90% -> 62 samples per GPU.
    assert memory.gpus_needed(10 * gib, gib, 124, 80 * gib) == 2
    assert memory.gpus_needed(10 * gib, gib, 125, 80 * gib) == 3
    assert memory.gpus_needed(80 * gib, gib, 1, 80 * gib) is None


def test_peak_cuda_memory_refuses_cpu():
    with pytest.raises(RuntimeError, match="CUDA"):
        memory.peak_cuda_memory(lambda: None, "cpu")


@pytest.mark.gpu
def test_peak_cuda_memory_sees_an_allocation():
    peak = memory.peak_cuda_memory(lambda: torch.empty(2**28, dtype=torch.uint8, device="cuda"))
    assert peak >= 2**28


@pytest.mark.parametrize(
    "fits_up_to, limit, expected",
    [
        (300, 4096, 296),
        (5000, 1024, 1024),
        (4, 4096, 0),
        (8, 4096, 8),
        (2500, 3000, 2496),
        (5000, 3000, 3000),
    ],
)
def test_largest_batch_bisects_on_out_of_memory(fits_up_to, limit, expected, monkeypatch):
    # Nothing is allocated here: the garbage collection after each try (a third of a second in a
    # process holding the whole test suite) frees nothing.
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    tried = []

    def try_batch(n):
        tried.append(n)
        if n > fits_up_to:
            raise memory.OutOfMemoryError("CUDA out of memory (simulated)")

    assert memory.largest_batch(try_batch, limit) == expected
    assert all(n % 8 == 0 for n in tried) and len(tried) < 20


def test_gpus_needed_shards_state_across_the_gpus():
    gib = 2**30
    # 100 GiB of AdamW state cannot sit on one 80 GiB GPU; split over the GPUs it fits.
    assert memory.gpus_needed(100 * gib, gib, 64, 80 * gib) is None
    # 2 GPUs: 50 + 32 = 82 GiB > 72 usable; 3 GPUs: 33.3 + 22 = 55.3 GiB fits.
    assert memory.gpus_needed(0, gib, 64, 80 * gib, sharded_bytes=100 * gib) == 3
    # Unsharded, the count is the fewest GPUs whose batch share fits: the closed form.
    for batch in (1, 61, 62, 63, 124, 125, 4096):
        per_gpu = (72 * gib - 10 * gib) // gib
        assert memory.gpus_needed(10 * gib, gib, batch, 80 * gib) == -(-batch // per_gpu)


@pytest.mark.parametrize("preset", ["tiny", "l16"])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16, torch.float16])
def test_counting_without_data_gives_the_bytes_of_a_real_forward(preset, dtype):
    # One block of ViT-L/16's width on 64 px images keeps the real forward cheap.
    shape = {"num_layers": 1} if preset == "tiny" else {"num_layers": 1, "image_size": 64}
    model = models.build_vit(preset, **shape)
    x = models.example_input(model, 2)
    real = memory.saved_tensor_bytes(model, x, recipe=AmpRecipe("cpu", dtype))
    with torch.device("meta"):
        meta_model = models.build_vit(preset, **shape)
    counted = memory.saved_tensor_bytes_without_data(
        meta_model, x.shape, recipe=AmpRecipe("cpu", dtype)
    )
    assert counted == real
    assert counted.activations > 0 and (counted.weight_copies > 0) == (dtype is not None)
    assert all(p.is_meta for p in meta_model.parameters())  # the caller's model is untouched


@pytest.mark.parametrize("checkpointed", [False, True])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_count_saved_bytes_on_a_cpu_gives_the_bytes_of_a_real_forward(checkpointed, dtype):
    # Lessons 00, 07 and 09 count ViT-L/16 this way; lesson 09 also checkpointed, whose own
    # saved-tensor hooks run inside the counting ones.
    def build():
        model = models.build_vit("l16", num_layers=2, image_size=64)
        return checkpointing.checkpoint_blocks(model) if checkpointed else model

    model = build()
    x = models.example_input(model, 2)
    real = memory.saved_tensor_bytes(model, x, recipe=AmpRecipe("cpu", dtype))
    assert memory.count_saved_bytes(build, x.shape, recipe=AmpRecipe("cpu", dtype)) == real


def test_peak_leaves_out_what_earlier_cells_hold(monkeypatch):
    gib = 2**30
    # Earlier cells hold 5 GiB; a larger peak before the measurement must not count either.
    gpu = FakeGpu(monkeypatch, allocated=5 * gib)
    gpu.release(gpu.allocate(6 * gib))  # an earlier cell's peak: 11 GiB

    def takes_two_more():  # the measured function's own working set: 2 GiB, freed on return
        gpu.release(gpu.allocate(2 * gib))

    assert memory.peak_cuda_memory(takes_two_more, "cuda") == 2 * gib
    assert memory.peak_cuda_memory(takes_two_more, "cuda", count_held=True) == 7 * gib
    assert ("synchronize", 0) in gpu.calls  # the peak is read after the queued work ran


def test_a_step_peak_leaves_out_the_build_and_the_warm_up(monkeypatch):
    gib = 2**30
    gpu = FakeGpu(monkeypatch)

    def make_step():
        gpu.release(gpu.allocate(9 * gib))  # building: a transient 9 GiB
        weights = gpu.allocate(gib)

        def step():
            gpu.release(gpu.allocate(3 * gib))

        return step, weights

    held = []

    def build():
        step, weights = make_step()
        held.append(weights)
        return step

    assert memory.step_peak_memory(build, "cuda") == 4 * gib  # the weights and the step's 3


def test_usable_memory_follows_the_per_process_cap(monkeypatch):
    gib = 2**30
    # An 80 GiB card with 70 GiB free, capped at 15 GiB (a T4's) with 3 GiB reserved, 1 cached.
    FakeGpu(
        monkeypatch,
        allocated=2 * gib,
        free=70 * gib,
        total=80 * gib,
        reserved=3 * gib,
        fraction=15 / 80,
    )
    assert memory.usable_cuda_bytes("cuda") == 13 * gib  # 15 - 3 reserved + 1 cached
    FakeGpu(monkeypatch, allocated=2 * gib, free=4 * gib, total=80 * gib, reserved=3 * gib)
    assert memory.usable_cuda_bytes("cuda") == 5 * gib  # the card's free memory is smaller


def test_fit_batch_keeps_a_batch_that_fits_and_shrinks_one_that_does_not():
    gib = 2**30
    kept = memory.fit_batch(
        32, bytes_per_sample=gib // 4, fixed_bytes=gib, available_bytes=40 * gib
    )
    assert kept.batch_size == 32 and "fits" in kept.reason
    # 15 GiB at 85% = 12.75 GiB; minus 1 GiB fixed leaves 11.75 GiB: 47 quarter-GiB samples.
    assert memory.fit_batch(32, gib // 4, gib, 15 * gib).batch_size == 32
    assert memory.fit_batch(48, gib // 4, gib, 15 * gib).batch_size == 40
    tight = memory.fit_batch(
        64, bytes_per_sample=gib // 2, fixed_bytes=gib, available_bytes=15 * gib
    )
    assert tight.batch_size == 16  # 23 samples fit, rounded down to a multiple of 8
    assert "BATCH_SIZE=64" in tight.reason and "batch 16" in tight.reason


def test_fit_batch_names_the_setting_when_nothing_fits():
    gib = 2**30
    with pytest.raises(MemoryError, match="GPU_BATCH lower"):
        memory.fit_batch(8, gib, 14 * gib, 15 * gib, setting="GPU_BATCH")


@pytest.mark.gpu
def test_clean_peaks_on_a_gpu():
    held = torch.empty(2**30, dtype=torch.uint8, device="cuda")  # an earlier cell's tensor
    peak = memory.peak_cuda_memory(lambda: torch.empty(2**28, dtype=torch.uint8, device="cuda"))
    assert 2**28 <= peak < 2**28 + 2**24

    def make_step():
        model = nn.Linear(1024, 1024).cuda()
        optimizer = torch.optim.AdamW(model.parameters())
        x = torch.randn(256, 1024, device="cuda")

        def step():
            optimizer.zero_grad(set_to_none=True)
            model(x).sum().backward()
            optimizer.step()

        return step

    step_bytes = memory.step_peak_memory(make_step)
    weights = 1024 * 1025 * 4
    assert 4 * weights <= step_bytes < 2**30  # weights, grads and two Adam moments at least
    del held


@pytest.mark.parametrize(
    "per_sample, fixed", [(-16 * 2**20, 6 * 2**30), (0, 6 * 2**30), (2**20, -(2**30))]
)
def test_fit_batch_refuses_sizes_no_step_has(per_sample, fixed):
    """A measurement gone wrong (a first step's one-time allocations made one H200 run's bytes
    per image negative) is refused with the setting named, never planned as a batch below 1."""
    with pytest.raises(ValueError, match="Cannot plan VIT_GPU_BATCH.*set VIT_GPU_BATCH by hand"):
        memory.fit_batch(32, per_sample, fixed, 139 * 2**30, setting="VIT_GPU_BATCH")


def test_fit_batch_never_plans_below_one_sample():
    gib = 2**30
    with pytest.raises(ValueError, match="BATCH=0: a batch holds at least one sample"):
        memory.fit_batch(0, gib, gib, 40 * gib, setting="BATCH")
    # Room for 3 samples (fewer than a multiple of 8): the batch is 3, not rounded down to 0.
    assert memory.fit_batch(32, gib, gib, int(4.8 * gib)).batch_size == 3
