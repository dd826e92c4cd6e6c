"""The beyond-autocast labs' kit: their device and dtype, seeded inputs and blocks, a custom kernel,
a real pure-bf16 run, and functions that run a lab's code and record what autocast did in it.

Every lab runs on the CPU under bf16 autocast, so its symptom shows on any machine. Seed 0 is what
the notebook shows; other seeds (the grader's) draw other sizes. The checks that judge a fix are in
``amp_course.exercises.labs_beyond_autocast``.
"""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..data import load_mnist
from ..display import error_text, kind_of
from ..memory import saved_tensor_bytes
from ..recipe import AmpRecipe
from ..scaling import mlp, mnist_batches
from .failure_cases import DEVICE_TYPE, Returned, returned_tensor, seeded

RECIPE = AmpRecipe(DEVICE_TYPE, "bf16")
AMP_DTYPE = RECIPE.autocast_dtype


def lab_block(seed: int = 0, width: int = 32) -> nn.Sequential:
    """A seeded MLP block (Linear, GELU, Linear), the shape of a transformer block's MLP."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))


# ---- Lab 1: a checkpoint whose recompute runs outside autocast -----------------------------------
class _Applied(nn.Module):
    """``fn(block, x)`` as a module, so ac.memory can measure what it keeps for backward."""

    def __init__(self, fn, block):
        super().__init__()
        self.fn, self.block = fn, block

    def forward(self, x):
        return returned_tensor(self.fn(self.block, x), "the block's output")


class Residual(nn.Module):
    """``x + mlp(x)``, a transformer block's shape: under autocast its output is fp32 (the add
    promotes the 16-bit branch to the fp32 input's dtype), unlike the bare MLP's."""

    def __init__(self, mlp: nn.Sequential):
        super().__init__()
        self.mlp = mlp

    def forward(self, x):
        return x + self.mlp(x)


def run_checkpointed(fn, seed: int = 0, recipe: AmpRecipe = RECIPE, residual: bool = False) -> dict:
    """Run ``fn(block, x)`` under ``recipe``'s autocast (bf16 unless told), backward outside it;
    record the dtypes of the block's Linear outputs in the forward and in backward (a recompute),
    the bytes the forward kept for backward, the output and the gradients. ``residual`` wraps
    the MLP block in a :class:`Residual`."""
    generator = seeded(seed)
    width = 32 if seed == 0 else 16 * int(torch.randint(1, 4, (), generator=generator))
    mlp = lab_block(seed, width)
    block = Residual(mlp) if residual else mlp
    x = torch.randn(8, width, generator=generator, requires_grad=True)
    phase = ["forward"]
    dtypes = {"forward": [], "backward": []}
    for layer in (mlp[0], mlp[2]):
        layer.register_forward_hook(lambda m, a, out: dtypes[phase[0]].append(str(out.dtype)))
    observed = {"error": None}
    try:
        applied = _Applied(fn, block)
        saved = saved_tensor_bytes(applied, x, recipe=recipe)
        with recipe.autocast():
            out = returned_tensor(fn(block, x), "the block's output")
        phase[0] = "backward"
        out.float().square().mean().backward()
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed.update(
        output=out.detach(),
        dtypes=dtypes,
        saved_bytes=saved.activations,
        grads=[x.grad.clone(), *(p.grad.clone() for p in block.parameters())],
    )
    return observed


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


def run_fused_op(fn, seed: int = 0) -> dict:
    """Build a fresh op with ``fn(name, kernel)`` (its kernel records the dtypes it receives) and
    call it with and without autocast."""
    generator = seeded(seed)
    rows = 4 if seed == 0 else int(torch.randint(2, 9, (), generator=generator))
    x, weight, bias = (torch.randn(s, generator=generator) for s in ((rows, 16), (8, 16), (8,)))
    received = []

    def kernel(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        received.append([str(t.dtype) for t in (x, weight, bias)])
        return numpy_linear_gelu(x, weight, bias)

    name = f"amp_course_labs::linear_gelu_{seed}_{next(_op_ids)}"
    observed = {"error": None, "name": name.replace("::", "."), "autocast": None, "plain": None}
    if not hasattr(torch.library, "register_autocast"):
        observed["error"] = f"torch {torch.__version__} has no torch.library.register_autocast"
        return observed
    try:
        op = fn(name, kernel)
        if not callable(op):
            raise Returned(f"returned {kind_of(op)}; the lab calls what it returns, the op")
        # Also by its name, as compiled and exported code calls it: the op itself, not whatever
        # Python function was returned, must carry the autocast rule.
        namespace, op_name = name.split("::")
        by_name = getattr(getattr(torch.ops, namespace), op_name)
        calls = (("autocast", op, True), ("plain", op, False), ("by name", by_name, True))
        for label, callable_op, enabled in calls:
            received.clear()
            with torch.autocast(DEVICE_TYPE, dtype=AMP_DTYPE, enabled=enabled):
                out = callable_op(x, weight, bias)
            observed[label] = {"received": list(received), "output": out}
        # A kernel for autocast's dispatch key: where the dispatcher casts for the op, whoever
        # calls it (a Python wrapper that casts, or custom_fwd around the kernel, has none, and
        # under torch.compile its kernel received fp32 again).
        observed["autocast_kernel"] = torch._C._dispatch_has_kernel_for_dispatch_key(
            name, "AutocastCPU"
        )
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
    return observed


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
    """Losses shaped like a long pure-bf16 run's, drawn from the seed (thousands of steps, too
    many to train in a check): 0-dim bf16 tensors, around 2.3 falling towards 0.3."""
    generator = seeded(seed)
    steps = 3000 if seed == 0 else int(torch.randint(1500, 4000, (), generator=generator))
    trend = torch.linspace(2.3, 0.3 + 0.2 * torch.rand((), generator=generator).item(), steps)
    noisy = trend * (1 + 0.1 * torch.randn(steps, generator=generator))
    return [value.to(torch.bfloat16) for value in noisy.clamp(min=0.01)]


PLATEAU = 1 + 2**-7  # the bf16 number above 1: a sum of three is a tie that bf16 rounds


def plateau_losses(seed: int) -> list[torch.Tensor]:
    """The losses of a run that has settled: every one PLATEAU, as a 0-dim bf16 tensor. A sum
    kept in bf16 rounds the same way at every few additions here, whatever its length, where
    ``lab_losses``' noise can cancel its roundings (a bf16 sum reset every 10 steps passed a
    third of the drawn seeds)."""
    steps = 2000 if seed == 0 else int(torch.randint(1000, 3000, (), generator=seeded(seed)))
    return [torch.tensor(PLATEAU, dtype=torch.bfloat16) for _ in range(steps)]


def alternating_losses(seed: int) -> list[torch.Tensor]:
    """The losses of a run settled between 1 and PLATEAU, the two bf16 numbers around its loss,
    one then the other. Sums of PLATEAU over 2, 4 or 8 steps are exact in bf16, so a bf16 sum
    reset that often passed some seeds; here every pair is a tie that bf16 rounds down to 2, and
    a bf16 sum of any length above one step loses."""
    steps = 2 * int(torch.randint(500, 1500, (), generator=seeded(seed + 1)))
    return [torch.tensor((1.0, PLATEAU)[step % 2], dtype=torch.bfloat16) for step in range(steps)]


def thirds_losses(seed: int) -> list[torch.Tensor]:
    """The losses of a run settled a third of the way from 1 to PLATEAU: 1, 1, PLATEAU, over and
    over. Their mean, 1 + 2^-7 / 3, is no float16 number (the nearest is 3e-4 away), where the
    other settled runs' means are: a mean formed or rounded in float16 passed the seeds whose
    long run rounded close enough (about one in seventy)."""
    steps = 3 * int(torch.randint(300, 1000, (), generator=seeded(seed + 2)))
    values = (1.0, 1.0, PLATEAU)
    return [torch.tensor(values[step % 3], dtype=torch.bfloat16) for step in range(steps)]


# ---- Lab 4: autocast entered in one thread, the forward run in another ---------------------------
def run_in_workers(fn, seed: int = 0) -> dict:
    """Call ``fn(model, batches)``; record the outputs, how many forwards ran in the calling
    thread and under which autocast state, and the model's parameter dtypes afterwards and which
    of them changed value (by how much, at most), counting a round trip through 16 bits."""
    generator = seeded(seed)
    count = 4 if seed == 0 else int(torch.randint(2, 7, (), generator=generator))
    model = lab_block(seed)
    batches = [torch.randn(4, 32, generator=generator) for _ in range(count)]
    caller = threading.get_ident()
    threads = []
    # Each batch known by its first value (a copy of it too); the later a batch, the sooner its
    # forward ends, so results collected as they complete come back out of order at every run.
    # One forward in each precision first, so no first-call setup makes a forward late.
    index_of = {float(batch[0, 0]): index for index, batch in enumerate(batches)}
    with torch.no_grad():
        for enabled in (True, False):
            with torch.autocast(DEVICE_TYPE, dtype=AMP_DTYPE, enabled=enabled):
                model(batches[0])

    states = set()  # the CPU autocast state each forward ran under: "on (torch.bfloat16)", "off"

    def note_thread_and_wait(module, args):
        threads.append(threading.get_ident())
        on = torch.is_autocast_enabled(DEVICE_TYPE)
        states.add(f"on ({torch.get_autocast_dtype(DEVICE_TYPE)})" if on else "off")
        index = index_of.get(float(args[0].flatten()[0]))
        if index is not None:
            time.sleep(0.03 * (count - index))

    model.register_forward_pre_hook(note_thread_and_wait)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    observed = {"error": None, "count": count}
    try:
        returned = fn(model, batches)
        if isinstance(returned, torch.Tensor) or not hasattr(returned, "__iter__"):
            raise Returned(
                f"returned {kind_of(returned)}; the lab takes the outputs, one per batch"
            )
        outputs = [returned_tensor(output, "each output") for output in returned]
    except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
        observed["error"] = error_text(error)
        return observed
    observed["outputs"] = [o.detach() for o in outputs]
    observed["in_caller_thread"] = sum(t == caller for t in threads)
    observed["autocast"] = sorted(states)
    observed["param_dtypes"] = sorted({str(p.dtype) for p in model.parameters()})
    observed["param_changes"] = {
        name: (p.detach().double() - before[name].double()).abs().max().item()
        for name, p in model.named_parameters()
        if p.shape == before[name].shape and not torch.equal(p.detach().double(), before[name])
    }
    return observed
