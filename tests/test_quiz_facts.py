"""The keys of quiz questions about torch behaviour, checked against the installed torch."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from conftest import quiz_answers as correct
from conftest import quiz_key as key
from conftest import quiz_question as question

from amp_course import memory


def fp16(value: float) -> float:
    return torch.tensor(value, dtype=torch.float64).half().item()


def test_fp16_limits_follow_round_to_nearest():
    marks = key("03_grad_scaler", "fp16-limits")
    smallest_normal = torch.finfo(torch.float16).smallest_normal
    facts = {
        "2e-8 becomes 0.": fp16(2e-8) == 0,
        "4e-8 becomes 0.": fp16(4e-8) == 0,
        "Scaled by 2^16, a gradient of 1e-8 lands in fp16's normal range.": fp16(1e-8 * 2**16)
        >= smallest_normal,
        "It has 8 exponent bits like fp32.": torch.finfo(torch.float16).bits - 11 == 8,
        # Subnormals there: the gap is 2^-24 throughout, so 1.5 * 2^-24 is not kept.
        "Between 2^-24 and 2^-14 values keep full 11-bit precision.": fp16(1.5 * 2.0**-24)
        == 1.5 * 2.0**-24,
    }
    for text, truth in facts.items():
        assert marks[text] is truth, text
    # The threshold itself: exactly 2^-25 ties to even (0), anything above rounds up to 2^-24.
    assert fp16(2.0**-25) == 0 and fp16(2.0**-25 * (1 + 2**-20)) == 2.0**-24


def steps_with_scheduler(skip_at, num_steps=5):
    """Warnings of a loop that steps a scheduler after every scaler.step; ``skip_at`` overflow."""
    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    scaler = torch.amp.GradScaler("cpu")
    warned = []
    for step in range(num_steps):
        optimizer.zero_grad()
        scaler.scale(weight.sum() * (float("inf") if step in skip_at else 1.0)).backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
        warned.append(any("lr_scheduler.step()" in str(w.message) for w in caught))
    return warned


def test_scheduler_warning_fires_only_for_a_skipped_first_step():
    marks = key("03_grad_scaler", "scheduler-warning")
    assert marks["Only at the first iteration."] is True
    assert steps_with_scheduler({0, 3}) == [True, False, False, False, False]
    assert steps_with_scheduler({3}) == [False] * 5


def test_a_fused_optimizer_is_always_called_and_skips_inside():
    """Lesson 03 and quiz 05 fused-adamw: GradScaler hands unscaling to fused optimizers."""
    assert correct("05_speed_memory", "fused-adamw")[0].startswith("One kernel for the whole")
    for fused, hook_runs in ((False, False), (True, True)):
        weight = torch.nn.Parameter(torch.ones(3))
        optimizer = torch.optim.AdamW([weight], fused=fused)
        assert getattr(optimizer, "_step_supports_amp_scaling", False) is fused
        ran = []
        optimizer.register_step_post_hook(lambda *args, ran=ran: ran.append(True))
        scaler = torch.amp.GradScaler("cpu")
        scaler.scale(weight.sum() * float("inf")).backward()
        scaler.step(optimizer)
        scaler.update()
        assert bool(ran) is hook_runs
        assert torch.equal(weight, torch.ones(3))  # skipped either way
        assert scaler.get_scale() == 2.0**15


def test_mfu_key_follows_from_its_premises():
    q = question("05_speed_memory", "mfu-compute")
    flops, batch, seconds, peak = 105.15e9, 64, 0.1, 989.4e12
    assert q["answer"] == pytest.approx(100 * flops * batch / seconds / peak, abs=q["tolerance"])


def test_tf32_is_not_a_dtype():
    assert correct("08_capstone", "tf32-storage")[0].startswith("As float32")
    assert not hasattr(torch, "tf32") and torch.finfo(torch.bfloat16).eps == 2.0**-7


def test_stays_fp32_has_one_true_choice_and_torch_agrees_with_it():
    assert correct("00_scenario", "stays-fp32") == ["Loss functions and batch norm statistics"]
    x = torch.randn(8, 4)
    bn = torch.nn.BatchNorm1d(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.Linear(4, 4)(x)  # a matmul output: 16-bit, so that choice is false
        loss = F.mse_loss(y, torch.zeros_like(y))
        bn(y)
    assert y.dtype is torch.bfloat16 and loss.dtype is torch.float32
    assert bn.running_mean.dtype is torch.float32 and bn.running_var.dtype is torch.float32


def test_half_weights_reasons_hold_in_torch():
    assert correct("00_scenario", "half-weights") == [
        "Adam's eps of 1e-8 is 0 in fp16, and small updates and gradients round away"
    ]
    assert fp16(1e-8) == 0.0
    # Adam on fp16 weights: where the second moment is 0, the step divides by an eps of 0.
    weight = torch.nn.Parameter(torch.ones(2, dtype=torch.float16))
    weight.grad = torch.tensor([0.0, 1.0], dtype=torch.float16)
    torch.optim.Adam([weight], lr=1e-3).step()
    assert weight[0].isnan() and weight[1].isfinite()


def test_gpus_with_amp_is_what_gpus_needed_computes():
    answer = question("00_scenario", "gpus-with-amp")["answer"]
    # In units of a fifth of an fp32 image: room for 300 fp32 images = 1500, an AMP image = 3.
    assert memory.gpus_needed(0, 3, 4096, 1500, usable_fraction=1.0) == answer
    fp32 = memory.gpus_needed(0, 5, 4096, 1500, usable_fraction=1.0)
    assert fp32 == 14 and 2 * answer > fp32  # fewer GPUs with AMP, but not half


def test_fp16_65520_is_inf_in_torch():
    assert correct("01_number_formats", "fp16-65520") == ["inf"]
    assert fp16(65520.0) == float("inf") and fp16(65519.0) == 65504.0


def test_tf32_api_answer_is_an_attribute_of_this_torch():
    q = question("01_number_formats", "tf32-api")
    assert q["graded"] and "fp32_precision" in q["accept"]
    assert torch.backends.cuda.matmul.fp32_precision in ("none", "ieee", "tf32")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cpu_autocast_runs_the_losses_in_fp32(dtype):
    assert correct("02_autocast", "loss-cpu")[0].startswith("float32")
    logits, target = torch.randn(4, 5).to(dtype), torch.randn(4, 5).to(dtype)
    labels = torch.randint(0, 5, (4,))
    with torch.autocast("cpu", dtype=dtype):
        losses = [
            F.cross_entropy(logits, labels),
            F.mse_loss(logits, target),
            F.nll_loss(logits, labels),
            F.l1_loss(logits, target),
            F.kl_div(logits, target, reduction="batchmean"),
            F.smooth_l1_loss(logits, target),
            F.huber_loss(logits, target),
            F.binary_cross_entropy_with_logits(logits, target.sigmoid()),
        ]
        followers = [logits.softmax(-1), F.layer_norm(logits, (5,)), logits.sum()]
    assert all(loss.dtype is torch.float32 for loss in losses)
    assert all(t.dtype is dtype for t in followers)  # unlisted on the CPU: follow the input
