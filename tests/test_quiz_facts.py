"""The keys of quizzes 00, 01 and 02 agree with the installed torch and the course's helpers."""

import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT

from amp_course import memory, quiz


def _question(lesson, qid):
    source = quiz.load_source(ROOT / "quizzes" / "source" / f"{lesson}.yaml")
    return next(q for q in source.questions if q.id == qid)


def _correct(question):
    return [c.text for c in question.choices if c.correct]


def test_stays_fp32_has_one_true_choice_and_torch_agrees_with_it():
    question = _question("00_scenario", "stays-fp32")
    assert _correct(question) == ["Loss functions and batch norm statistics"]
    x = torch.randn(8, 4)
    bn = torch.nn.BatchNorm1d(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.nn.Linear(4, 4)(x)  # a matmul output: 16-bit, so that choice is false
        loss = F.mse_loss(y, torch.zeros_like(y))
        bn(y)
    assert y.dtype is torch.bfloat16 and loss.dtype is torch.float32
    assert bn.running_mean.dtype is torch.float32 and bn.running_var.dtype is torch.float32


def test_half_weights_reasons_hold_in_torch():
    assert "eps" in _correct(_question("00_scenario", "half-weights"))[0]
    assert torch.tensor(1e-8, dtype=torch.float16).item() == 0.0
    # Adam on fp16 weights: where the second moment is 0, the step divides by an eps of 0.
    weight = torch.nn.Parameter(torch.ones(2, dtype=torch.float16))
    weight.grad = torch.tensor([0.0, 1.0], dtype=torch.float16)
    torch.optim.Adam([weight], lr=1e-3).step()
    assert weight[0].isnan() and weight[1].isfinite()


def test_gpus_with_amp_is_what_gpus_needed_computes():
    question = _question("00_scenario", "gpus-with-amp")
    # In units of a fifth of an fp32 image: room for 300 fp32 images = 1500, an AMP image = 3.
    assert memory.gpus_needed(0, 3, 4096, 1500, usable_fraction=1.0) == question.answer
    fp32 = memory.gpus_needed(0, 5, 4096, 1500, usable_fraction=1.0)
    assert fp32 == 14 and 2 * question.answer > fp32  # fewer GPUs with AMP, but not half


def test_fp16_65520_is_inf_in_torch():
    assert _correct(_question("01_number_formats", "fp16-65520")) == ["inf"]
    assert torch.tensor(65520.0).to(torch.float16).isinf()
    assert torch.tensor(65519.0).to(torch.float16).item() == 65504.0


def test_tf32_api_answer_is_an_attribute_of_this_torch():
    question = _question("01_number_formats", "tf32-api")
    assert question.graded and "fp32_precision" in question.accept
    assert torch.backends.cuda.matmul.fp32_precision in ("none", "ieee", "tf32")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cpu_autocast_runs_the_losses_in_fp32(dtype):
    assert _correct(_question("02_autocast", "loss-cpu"))[0].startswith("float32")
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
