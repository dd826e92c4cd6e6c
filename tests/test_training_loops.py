"""Lesson 04's loops (executed from the notebook): accumulation equals one large batch; resume is
exact."""

import io

import pytest
import torch
import torch.nn.functional as F
from conftest import run_tagged

from amp_course import scaling

DEVICE = torch.device("cpu")


def notebook_code(*tags, **namespace):
    """Execute the notebook cells carrying ``tags`` (in order) and return their namespace."""
    namespace = {
        "torch": torch,
        "F": F,
        "ac": __import__("amp_course"),
        "device": DEVICE,
        "amp_dtype": torch.float16,
        **namespace,
    }
    return run_tagged("04_training_loops", *tags, namespace=namespace)


@pytest.fixture(scope="module")
def batches():
    return scaling.mnist_batches(12, 64, seed=0)


def _step(amp_step, micro, dtype):
    model = scaling.mlp(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", enabled=dtype == torch.float16)
    norms = [
        amp_step(model, optimizer, scaler, m, device=DEVICE, autocast_dtype=dtype, max_norm=1.0)
        for m in micro
    ]
    return model, norms


# Tolerances: fp32 sums the same numbers in another order (float rounding, ~1e-7); fp16 autocast
# rounds each micro-batch's matmuls to fp16 (10-bit mantissa), so weights agree to ~1e-3 after
# 3 steps.
@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-6), (torch.float16, 2e-3)])
def test_accumulation_equals_the_large_batch(batches, dtype, atol):
    amp_step = notebook_code("amp-step")["amp_step"]
    large = [[b] for b in batches[:3]]
    micro = [list(zip(x.chunk(4), y.chunk(4), strict=True)) for x, y in batches[:3]]
    (a, norms_a), (b, norms_b) = _step(amp_step, large, dtype), _step(amp_step, micro, dtype)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=atol, rtol=0)
    torch.testing.assert_close(
        torch.stack(norms_a),
        torch.stack(norms_b),
        rtol=1e-2 if dtype == torch.float16 else 1e-5,
        atol=0,
    )
    # the check is not vacuous: stepping on each micro-batch is a different result
    c, _ = _step(amp_step, [[m] for group in micro for m in group][:3], dtype)
    assert not torch.allclose(next(c.parameters()), next(a.parameters()), atol=atol, rtol=0)


def test_resume_with_scaler_state_matches_uninterrupted_run_exactly(batches):
    ns = notebook_code("amp-step", "resume")
    run_batches = [(x * 1e6, y) if i in (2, 7) else (x, y) for i, (x, y) in enumerate(batches)]
    model, optimizer, scaler = ns["fresh_run"](0, 3)
    uninterrupted = ns["train"](model, optimizer, scaler, run_batches)
    assert (
        min(uninterrupted) < 2.0**16 and max(uninterrupted) >= 2.0**16
    )  # skips and regrowth happen

    def resume(keep_scaler):
        m, o, s = ns["fresh_run"](0, 3)
        scales = ns["train"](m, o, s, run_batches[:4])
        checkpoint = ns["save_checkpoint"](m, o, s)
        if not keep_scaler:
            del checkpoint["scaler"]
        buffer = io.BytesIO()
        torch.save(checkpoint, buffer)
        buffer.seek(0)
        m, o, s = ns["fresh_run"](1, 3)
        ns["load_checkpoint"](torch.load(buffer, weights_only=True), m, o, s)
        return scales + ns["train"](m, o, s, run_batches[4:]), m

    scales, resumed = resume(True)
    assert scales == uninterrupted  # exact: same scale after every step
    assert scaling.same_parameters(resumed, model)  # exact: bitwise-equal weights
    scales, resumed = resume(False)
    assert scales != uninterrupted
