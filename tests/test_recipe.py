"""The AMP recipe (``ac.recipe.AmpRecipe``) and the AMP step (``ac.training.amp_step``), checked
against torch.autocast, torch.amp.GradScaler and a step written out by hand."""

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

from amp_course import device, lesson, precisions, scaling, training
from amp_course.bench import Variant
from amp_course.data import load_mnist
from amp_course.recipe import AmpRecipe

CPU = torch.device("cpu")
# Written out here, not read from the package: every spelling and the dtype it must mean.
SPELLINGS = {
    torch.float32: ("fp32", "float32", "float", "tf32", "FP32", "torch.float32"),
    torch.float16: ("fp16", "float16", "half", "torch.float16"),
    torch.bfloat16: ("bf16", "bfloat16", "BF16", "torch.bfloat16"),
}
SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


@pytest.mark.parametrize("dtype", SPELLINGS)
def test_one_table_names_each_dtype(dtype):
    for spelling in SPELLINGS[dtype]:
        assert precisions.get(spelling).dtype is dtype
        assert AmpRecipe(CPU, spelling).autocast_dtype is dtype
    assert precisions.name_of(dtype) == SHORT[dtype] == AmpRecipe(CPU, dtype).name


def test_the_table_holds_every_spelling_and_no_other():
    expected = {
        name.lower(): dtype
        for dtype, names in SPELLINGS.items()
        for name in names
        if not name.startswith("torch.")
    }
    table = {name: p.dtype for p in precisions.PRECISIONS.values() for name in p.names}
    assert table == expected


def test_a_name_outside_the_table_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="Valid choices: fp32, float32"):
        AmpRecipe(CPU, "fp8")
    with pytest.raises(ValueError, match="Valid choices"):
        AmpRecipe(CPU, torch.float64)
    assert precisions.name_of(torch.float64) == "float64"  # outside the table: torch's own name


@pytest.mark.parametrize(
    "autocast_dtype, enabled, needs_scaler",
    [
        (None, False, False),
        (torch.float32, False, False),
        ("tf32", False, False),
        (torch.bfloat16, True, False),
        (torch.float16, True, True),
    ],
)
def test_autocast_is_on_for_16_bits_and_the_scaler_for_fp16_only(
    autocast_dtype, enabled, needs_scaler
):
    recipe = AmpRecipe("cpu", autocast_dtype)
    assert recipe.device == CPU
    assert (recipe.enabled, recipe.needs_scaler) == (enabled, needs_scaler)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with recipe.autocast():
        assert torch.is_autocast_enabled("cpu") is enabled
        product = a @ b
    # torch itself says which dtype the matmul ran in: the recipe's, or fp32 with autocast off.
    assert product.dtype is (recipe.autocast_dtype if enabled else torch.float32)
    scaler = recipe.scaler(init_scale=2.0**8)
    assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled() is needs_scaler
    assert scaler.get_scale() == (2.0**8 if needs_scaler else 1.0)
    # Notebooks call the recipe's own: training keeps no second autocast or scaler helper that
    # could drift from it.
    assert not hasattr(training, "make_scaler") and not hasattr(training, "autocast")


def test_on_a_gpu_the_recipe_asks_torch_for_cuda_autocast_and_a_cuda_scaler():
    """Checked without a GPU: what the recipe hands torch (torch disables both here, and warns)."""
    recipe = AmpRecipe("cuda:1", "fp16")
    assert recipe.device == torch.device("cuda", 1) and recipe.needs_scaler
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CUDA is not available": expected without a GPU
        context, scaler = recipe.autocast(), recipe.scaler()
    assert (context.device, context.fast_dtype) == ("cuda", torch.float16)
    assert scaler._device == "cuda"  # GradScaler keeps the device type it was made for


def test_bench_configurations_and_lesson_settings_carry_the_recipe():
    names = ("fp32", "tf32", "fp16", "bf16")
    recipes = {name: Variant.matrix(name).recipe("cpu") for name in names}
    assert {n: (r.enabled, r.needs_scaler) for n, r in recipes.items()} == {
        "fp32": (False, False),
        "tf32": (False, False),
        "fp16": (True, True),
        "bf16": (True, False),
    }
    settings = lesson.start(smoke=True, device="cpu", autocast_dtype="fp16", verbose=False)
    assert settings.recipe == AmpRecipe("cpu", torch.float16)
    assert settings.precision is precisions.FP16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this CPU may emulate bf16: lesson.start says so
        auto = lesson.start(smoke=True, device="cpu", verbose=False)
    assert auto.precision is device.pick_precision("cpu", warn=False) is precisions.BF16
    assert settings.device == CPU and settings.autocast_dtype is torch.float16


@pytest.mark.parametrize("asked", ["bf16", "fp16"])
def test_a_lessons_precision_is_read_once_on_its_way_to_autocast(monkeypatch, asked):
    """The parameters cell's name is parsed once, into the row the recipe carries to autocast:
    no dtype is turned back into a precision on the way. (A lesson refuses tf32, which turns
    autocast off: test_lesson.py; the bench's tf32 rows keep their name, above.)"""
    read = []
    parse = precisions.get
    monkeypatch.setattr(precisions, "get", lambda name: read.append(name) or parse(name))
    settings = lesson.start(smoke=True, device="cpu", autocast_dtype=asked, verbose=False)
    with settings.recipe.autocast():
        assert torch.is_autocast_enabled("cpu")
        assert (torch.randn(2, 2) @ torch.randn(2, 2)).dtype is parse(asked).dtype
    names = [name for name in read if not isinstance(name, precisions.Precision)]
    assert names == [asked] and settings.precision is parse(asked)
    assert settings.recipe.name == asked


@pytest.fixture(scope="module")
def batches():
    return scaling.mnist_batches(3, 16, seed=0, data=load_mnist(source="subset"))


def hand_written_step(model, optimizer, scaler, autocast_dtype, batch, max_norm):
    """PyTorch's AMP recipe, spelled out with torch's own calls."""
    images, labels = batch
    optimizer.zero_grad(set_to_none=True)
    enabled = autocast_dtype != torch.float32
    with torch.autocast("cpu", dtype=autocast_dtype, enabled=enabled):
        loss = F.cross_entropy(model(images), labels)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss, norm


@pytest.mark.parametrize("autocast_dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_amp_step_is_the_hand_written_step(batches, autocast_dtype):
    recipe = AmpRecipe(CPU, autocast_dtype)
    model = scaling.mlp(0)
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    scaler, ref_scaler = recipe.scaler(init_scale=2.0**10), recipe.scaler(init_scale=2.0**10)
    for batch in batches:
        step = training.amp_step(model, optimizer, scaler, recipe, batch, max_grad_norm=1.0)
        loss, norm = hand_written_step(
            reference, ref_optimizer, ref_scaler, autocast_dtype, batch, 1.0
        )
        assert torch.equal(step.loss, loss.detach()) and torch.equal(step.grad_norm, norm)
        assert step.skipped is False and not step.loss.requires_grad
        assert all(p.grad is None for p in model.parameters())  # the next step starts clean
    assert scaler.get_scale() == ref_scaler.get_scale()
    assert scaling.same_parameters(model, reference)


def test_amp_step_reports_a_skipped_fp16_step_and_leaves_the_weights(batches):
    recipe = AmpRecipe(CPU, torch.float16)
    model = scaling.mlp(0)
    before = copy.deepcopy(model)
    scaler = recipe.scaler()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def overflowing(logits, labels):
        return F.cross_entropy(logits, labels) * float("inf")

    step = training.amp_step(model, optimizer, scaler, recipe, batches[0], loss_fn=overflowing)
    assert step.skipped is True and step.grad_norm is None
    assert scaler.get_scale() == 2.0**16 * 0.5  # update() backed off
    assert scaling.same_parameters(model, before)
    # Unchecked (a timed step), the same step is taken and the flag is not read.
    unchecked = training.amp_step(
        model, optimizer, scaler, recipe, batches[0], loss_fn=overflowing, check_skipped=False
    )
    assert unchecked.skipped is None and scaler.get_scale() == 2.0**16 * 0.25
