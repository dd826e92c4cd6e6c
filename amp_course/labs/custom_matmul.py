"""Lab 4 of the modern-stack labs: a custom matmul written with ``setup_context`` (its seeded
inputs, and a run that records the learner's output, gradients, the dtypes the backward's matrix
products ran in and the autograd nodes that ran them). ``modern_stack`` gives the notebook these
under ``lab.``."""

from __future__ import annotations

import torch

from ..autocast_trace.recorder import DtypeRecorder
from .failure_cases import AUTOCAST_CASES, attempt, autocast, returned_tensor, seeded


# ---- Lab 4: a custom autograd.Function written with setup_context -------------------------------
def mm_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp32 ``a`` [n, k] and ``b`` [k, m], and the weights of the loss sum(out * weights)."""
    generator = seeded(seed)
    n, k, m = (8, 16, 4) if seed == 0 else torch.randint(3, 24, (3,), generator=generator).tolist()
    a, b = torch.randn(n, k, generator=generator), torch.randn(k, m, generator=generator)
    return a, b, torch.randn(n, m, generator=generator)


_PRODUCTS = ("mm", "bmm", "addmm", "baddbmm", "addbmm")  # aten's matrix products


class _ProductRecorder(DtypeRecorder):
    """A DtypeRecorder that also notes, for each matrix product, the autograd node whose backward
    ran it (torch's own, such as MmBackward0, or a custom Function's)."""

    def __init__(self):
        super().__init__()
        self.nodes: list[torch.autograd.graph.Node | None] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.name().split("::")[-1].split(".")[0] in _PRODUCTS:
            # torch has no public call for the node that is running; this private one is what
            # torch.autograd.graph's own hooks read.
            self.nodes.append(torch._C._current_autograd_node())
        return super().__torch_dispatch__(func, types, args, kwargs)


def _weighted_backward(out, weights) -> tuple[list[str], list[str]]:
    """The backward; the dtypes its matrix products ran in (the gradients' values alone cannot
    tell a product computed in fp16 from one in bf16 or fp32 and rounded), and the built-in
    autograd nodes that ran any of them (none when a custom Function's backward ran them all)."""
    with _ProductRecorder() as recorder:
        (out.float() * weights).sum().backward()
    dtypes = {
        str(dtype).removeprefix("torch.")
        for row in recorder.rows
        if row.op in _PRODUCTS
        for dtype in row.input_dtypes
        if dtype.is_floating_point
    }
    builtin = {
        type(node).__name__
        for node in recorder.nodes
        if not isinstance(node, torch.autograd.function.BackwardCFunction)
    }
    return sorted(dtypes), sorted(builtin)


def run_mm(fn, seed: int = 0) -> dict:
    """``fn(a, b)`` in each autocast case, then backward (outside autocast, as a training loop
    runs it) through a weighted sum of the output: the output, the gradients of a and b, and the
    dtypes the backward's matrix products ran in."""
    observed = {}
    for case, dtype in AUTOCAST_CASES.items():
        a, b, weights = mm_inputs(seed)
        a.requires_grad_(), b.requires_grad_()
        with autocast(dtype):
            out, error = attempt(lambda *ab: returned_tensor(fn(*ab), "the product"), a, b)
        (products, builtin), stage = (None, None), "forward"
        if error is None:
            ran, error = attempt(_weighted_backward, out, weights)
            (products, builtin), stage = ran or (None, None), "backward"
        observed[case] = {"error": error, "stage": stage, "out": None if error else out.detach()}
        observed[case].update(grad_a=a.grad, grad_b=b.grad, backward_dtypes=products)
        observed[case]["builtin_product_nodes"] = builtin
        if error is None:
            observed[case]["grad_fn"] = type(out.grad_fn).__name__
            observed[case]["custom_function"] = _has_custom_function(out.grad_fn)
    return observed


def _has_custom_function(node) -> bool:
    """Whether the autograd graph under ``node`` holds a custom ``autograd.Function``'s node."""
    seen, stack = set(), [node]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            return True
        seen.add(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return False
