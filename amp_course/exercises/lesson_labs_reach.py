"""Labs beyond autocast, part 2: what autocast does not cover (custom ops, bf16 bookkeeping).

Same three pieces per lab as ``lesson_labs_state``: ``observe``, ``compare`` and the reference fix;
the check is ``compare(observe(answer, 0), observe(solution, 0), 0)``.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
import torch.nn.functional as F

from ..data import load_mnist
from ..scaling import mlp, mnist_batches
from . import ExerciseFailed, register
from .answers import error_text
from .autocast_labkit import AMP_DTYPE, DEVICE_TYPE, seeded

# ---- Lab 2: a custom op that autocast never casts ------------------------------------------------
_op_ids = itertools.count()


def numpy_linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """A fused linear + GELU in NumPy: like a CUDA or Triton kernel, autocast cannot see inside.

    It computes in its inputs' dtype (float16 stays float16) and upcasts bfloat16, which NumPy
    lacks, to float32 inside, returning bfloat16: the behaviour of fused kernels with fp32
    accumulators.
    """
    compute = torch.float32 if x.dtype == torch.bfloat16 else x.dtype
    a, w, b = (t.detach().to(compute).numpy() for t in (x, weight, bias))
    y = a @ w.T + b
    y = 0.5 * y * (1.0 + np.tanh(0.7978845608 * (y + 0.044715 * y**3)))
    return torch.from_numpy(y).to(x.dtype)


def observe_fused_op(fn, seed: int) -> dict:
    """Build a fresh op with fn (its kernel records the dtypes it receives), call it with and
    without autocast."""
    generator = seeded(seed)
    rows = 4 if seed == 0 else int(torch.randint(2, 9, (), generator=generator))
    x, weight, bias = (torch.randn(s, generator=generator) for s in ((rows, 16), (8, 16), (8,)))
    received = []

    def kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        received.append([str(t.dtype) for t in (x, weight, bias)])
        return numpy_linear_gelu(x, weight, bias)

    name = f"amp_course_labs::linear_gelu_{seed}_{next(_op_ids)}"
    observed = {"error": None, "autocast": None, "plain": None}
    if not hasattr(torch.library, "register_autocast"):
        observed["error"] = f"torch {torch.__version__} has no torch.library.register_autocast"
        return observed
    try:
        op = fn(name, kernel)
        for label, enabled in (("autocast", True), ("plain", False)):
            received.clear()
            with torch.autocast(DEVICE_TYPE, dtype=AMP_DTYPE, enabled=enabled):
                out = op(x, weight, bias)
            observed[label] = {"received": list(received), "output": out}
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
    return observed


def compare_fused_op(mine: dict, reference: dict, seed: int) -> None:
    if reference["error"]:
        raise ExerciseFailed(reference["error"])
    if mine["error"]:
        raise ExerciseFailed(f"building or calling your op raised {mine['error']}")
    for label, where in (("autocast", "inside torch.autocast"), ("plain", "outside autocast")):
        got, want = mine[label], reference[label]
        if got["received"] != want["received"]:
            raise ExerciseFailed(
                f"{where} the kernel received inputs in {got['received'] or 'nothing'}; it "
                f"should receive {want['received']}."
            )
        if got["output"].dtype != want["output"].dtype:
            raise ExerciseFailed(
                f"{where} the op returned {got['output'].dtype}, expected {want['output'].dtype}."
            )
        if not torch.allclose(got["output"].float(), want["output"].float(), atol=1e-2):
            raise ExerciseFailed(f"{where} the op's values differ from the reference.")


register("labs.custom_op_autocast", observe_fused_op, compare_fused_op)


# ---- Lab 3: a running bf16 loss sum that stops growing -------------------------------------------


def pure_bf16_losses(steps: int, seed: int = 0) -> list[torch.Tensor]:
    """Per-step losses of a real pure-bf16 run: the labs' MLP in bf16, SGD, real MNIST digits.

    With bf16 weights the logits and so the loss are bf16 tensors, as they are under XLA_USE_BF16
    or Lightning's precision="bf16-true".
    """
    batches = mnist_batches(50, batch_size=32, seed=seed, data=load_mnist(source="subset"))
    model = mlp(seed, hidden=32).to(torch.bfloat16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(steps):
        images, labels = batches[step % len(batches)]
        loss = F.cross_entropy(model(images.to(torch.bfloat16)), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return losses


def lab_losses(seed: int) -> list[torch.Tensor]:
    """A pure-bf16 run's per-step losses: 0-dim bf16 tensors, around 2.3 falling towards 0.3."""
    generator = seeded(seed)
    steps = 3000 if seed == 0 else int(torch.randint(1500, 4000, (), generator=generator))
    trend = torch.linspace(2.3, 0.3 + 0.2 * torch.rand((), generator=generator).item(), steps)
    noisy = trend * (1 + 0.1 * torch.randn(steps, generator=generator))
    return [value.to(torch.bfloat16) for value in noisy.clamp(min=0.01)]


def observe_mean_loss(fn, seed: int) -> dict:
    losses = lab_losses(seed)
    observed = {"steps": len(losses), "error": None, "exact": float(sum(float(x) for x in losses))}
    observed["exact"] /= len(losses)
    try:
        result = fn(losses)
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed["type"] = "float" if isinstance(result, float) else type(result).__name__
    observed["value"] = float(result) if isinstance(result, (float, int, torch.Tensor)) else None
    return observed


def compare_mean_loss(mine: dict, reference: dict, seed: int) -> None:
    if mine["error"]:
        raise ExerciseFailed(f"your function raised {mine['error']}")
    if mine["type"] != "float":
        raise ExerciseFailed(
            f"return a Python float (what a logger records), not a {mine['type']}."
        )
    exact, value = reference["exact"], mine["value"]
    if abs(value - exact) > 1e-4 * abs(exact):
        raise ExerciseFailed(
            f"over {reference['steps']} steps the mean loss is {exact:.5f}; yours is "
            f"{value:.5f}. A bf16 (or fp16) running sum stops growing once the spacing of its "
            "numbers exceeds twice a loss value; accumulate in float32 or in Python floats."
        )


register("labs.bf16_loss_sum", observe_mean_loss, compare_mean_loss)
