"""Record the dtypes every aten op runs in, with a dispatch mode."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..recipe import AmpRecipe
from .op_lists import ATEN_TO_DOCUMENTED


@dataclass(frozen=True)
class TracedOp:
    """One aten op as it ran: name, the dtypes of its tensor inputs and of its (first) output."""

    name: str  # aten overload, e.g. "addmm.default"
    input_dtypes: tuple[torch.dtype, ...]
    output_dtype: torch.dtype | None

    @property
    def op(self) -> str:
        """The op without its overload: "addmm"."""
        return self.name.split(".")[0]

    @property
    def documented_name(self) -> str:
        return ATEN_TO_DOCUMENTED.get(self.op, self.op)

    @property
    def is_cast(self) -> bool:
        """autocast's own casts of inputs (and weights) show up as _to_copy."""
        return self.op == "_to_copy"


class DtypeRecorder(TorchDispatchMode):
    """A dispatch mode that records every aten op run inside it as a ``TracedOp`` in ``rows``."""

    def __init__(self):
        super().__init__()
        self.rows: list[TracedOp] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = [
            a.dtype for a in tree_flatten((args, kwargs or {}))[0] if isinstance(a, torch.Tensor)
        ]
        outputs = [o.dtype for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        name = func.name().split("::")[-1] if hasattr(func, "name") else str(func)
        self.rows.append(TracedOp(name, tuple(inputs), outputs[0] if outputs else None))
        return out


def trace_op_dtypes(module, inputs, *, recipe: AmpRecipe) -> list[TracedOp]:
    """Run ``module(*inputs)`` under ``recipe``'s autocast and record every aten op.

    An fp32 recipe traces plain fp32. Only the forward pass is traced: the
    documented lists govern forward ops, and backward ops run in the dtypes their forward ops
    chose.
    """
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    recorder = DtypeRecorder()
    with recorder:
        with recipe.autocast():
            module(*inputs)
    return recorder.rows
