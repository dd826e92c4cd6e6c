"""The numeric quiz answers that follow from torch, each computed here as the question states it:
a key that drifts from what torch does fails its test."""

import re

import nbformat
import pytest
import torch
import torchvision
from conftest import ROOT, quiz_question

from amp_course.exercises.solutions import lesson_10


def answer(lesson: str, question_id: str) -> float:
    return quiz_question(lesson, question_id)["answer"]


def _state_bytes_per_parameter(dtype: torch.dtype) -> float:
    """Weights, gradients and AdamW's state after one step, per parameter, all in ``dtype``."""
    weight = torch.nn.Parameter(torch.ones(1000, dtype=dtype))
    weight.grad = torch.full_like(weight, 0.1)
    optimizer = torch.optim.AdamW([weight])
    optimizer.step()
    state = [t for t in optimizer.state[weight].values() if t.numel() == weight.numel()]
    tensors = [weight, weight.grad, *state]
    return sum(t.numel() * t.element_size() for t in tensors) / weight.numel()


def test_bytes_per_parameter_of_adamw_in_fp32_and_in_pure_bf16():
    assert answer("00_scenario", "bytes-per-param") == _state_bytes_per_parameter(torch.float32)
    # AdamW keeps its two moments in the weights' dtype: bf16 here.
    assert answer("09_beyond_autocast", "bytes-pure-bf16") == _state_bytes_per_parameter(
        torch.bfloat16
    )


def test_the_recipe_calls_three_scaler_methods_a_step():
    """Lesson 00's five changes: the scaler made once, then the methods each step calls."""
    recipe = ROOT / "notebooks" / "00_scenario.ipynb"
    text = next(
        c.source
        for c in nbformat.read(recipe, as_version=4).cells
        if c.source.startswith("## 4. The AMP recipe")
    )
    per_step = re.findall(r"`scaler\.(\w+)\(", text)
    assert per_step == ["scale", "step", "update"]
    assert answer("00_scenario", "recipe-calls") == len(per_step)


def test_the_fp16_gap_above_1024():
    x = torch.tensor(1024.0, dtype=torch.float16)
    gap = (torch.nextafter(x, torch.tensor(float("inf"), dtype=torch.float16)) - x).item()
    assert answer("01_number_formats", "fp16-gap-at-1024") == gap == 1.0


def test_the_scale_after_twenty_clean_updates():
    scaler = torch.amp.GradScaler("cpu", init_scale=65536.0, growth_interval=10)
    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    for _ in range(20):
        optimizer.zero_grad()
        scaler.scale(weight.sum()).backward()
        scaler.step(optimizer)
        scaler.update()
    assert answer("03_grad_scaler", "growth-steps") == scaler.get_scale()


def test_clipping_the_scaled_gradients_shrinks_them_by_the_scale_too():
    """Clipping before unscale_ sees a norm of 2.0 times the scale."""
    weight = torch.nn.Parameter(torch.zeros(4))
    weight.grad = torch.tensor([1.0, 1.0, 1.0, 1.0]) * 65536  # a true norm of 2.0, scaled
    before = weight.grad.clone()
    torch.nn.utils.clip_grad_norm_([weight], max_norm=1.0)
    factor = (weight.grad / before)[0].item()
    question = quiz_question("04_training_loops", "clip-before-factor")
    assert factor == pytest.approx(question["answer"], abs=question["tolerance"])


def test_vit_b16_mlp_intensity_and_a_training_steps_flops():
    question = quiz_question("10_where_time_goes", "matmul-intensity")
    intensity = lesson_10.matmul_intensity(1, 12608, 768, 3072, "bf16")
    assert round(intensity) == question["answer"]
    # torchvision's own table: its "GFLOPS" are multiply-accumulates, 2 FLOPs each; 3 passes.
    macs = torchvision.models.ViT_B_16_Weights.IMAGENET1K_V1.meta["_ops"]
    assert (
        macs == 17.564
        and "17.56" in quiz_question("10_where_time_goes", "flops-not-macs")["prompt"]
    )
    assert round(macs * 2 * 3) == answer("10_where_time_goes", "flops-not-macs")


def test_a_bf16_sum_at_256_changes_only_for_a_loss_above_1():
    def add(total, loss):
        return (torch.tensor(total, dtype=torch.bfloat16) + loss).item()

    stuck = answer("labs_beyond_autocast", "bf16-sum-stuck")
    assert add(256.0, stuck) == 256.0  # the tie rounds to the even neighbour: 256
    assert add(256.0, stuck * 1.01) == 258.0
    assert (
        torch.nextafter(torch.tensor(256.0, dtype=torch.bfloat16), torch.tensor(512.0).bfloat16())
        - 256
        == 2
    )
