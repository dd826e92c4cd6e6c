"""What each operator of a step costs: its FLOPs and the bytes it reads and writes.

``record_ops(fn)`` runs ``fn`` under a ``TorchDispatchMode`` that sees every ATen operator after
autograd and autocast have done their work (the casts autocast inserts, the backward's matmuls,
the optimizer's foreach kernels), so each record is roughly one kernel of an eager step. FLOPs
come from ``torch.utils.flop_counter``'s formulas, the ones ``FlopCounterMode`` uses; bytes are
the sizes of the tensors the operator reads and writes, each counted once, as if nothing stayed
in a cache: the traffic a roofline charges. Views move no data and are left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils import flop_counter
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .precisions import name_of

aten = torch.ops.aten

# Operators that allocate, reinterpret or query without moving tensor data.
NO_TRAFFIC = {
    "_unsafe_view",
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "_local_scalar_dense",
    "lift_fresh",
    "set_",
    "resize_",
}
# In-place operators that overwrite their first argument without reading it.
WRITE_ONLY = {"copy_", "fill_", "zero_", "normal_", "uniform_"}


def _cpu_sdpa_flops(query, key, value, *args, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query.shape, key.shape, value.shape)


def _cpu_sdpa_backward_flops(grad_out, query, key, value, *args, **kwargs) -> int:
    return flop_counter.sdpa_backward_flop_count(
        grad_out.shape, query.shape, key.shape, value.shape
    )


# FlopCounterMode has no formula for the CPU's fused attention kernels (it counts them as 0);
# torch's own SDPA formulas count them as it counts the CUDA kernels.
EXTRA_FLOP_FORMULAS = {
    name: formula
    for name, formula in (
        ("_scaled_dot_product_flash_attention_for_cpu", _cpu_sdpa_flops),
        ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_sdpa_backward_flops),
    )
    if hasattr(aten, name)
}


@dataclass
class OpCost:
    """One operator call: its name, FLOPs, bytes read and written, and its compute dtype."""

    name: str  # the ATen overload, e.g. "mm.default"
    flops: int
    bytes_read: int
    bytes_written: int
    dtype: str  # "fp32", "bf16", ...: the dtype of its first floating-point input or output
    elements_written: int
    shapes: tuple = ()  # the shapes of the tensors it read

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity: FLOPs per byte moved (0 for an operator with no counted FLOPs)."""
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def family(self) -> str:
        """ "attention", "matmul" (any other operator with counted FLOPs) or "other"."""
        if "attention" in self.name:
            return "attention"
        return "matmul" if self.flops else "other"


def _tensors(values) -> list[torch.Tensor]:
    flat, _ = tree_flatten(values)
    seen, tensors = set(), []
    for value in flat:
        if isinstance(value, torch.Tensor) and id(value) not in seen:
            seen.add(id(value))
            tensors.append(value)
    return tensors


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _flops(func, args, kwargs, out) -> int:
    packet = func._overloadpacket
    if packet in flop_counter.flop_registry:
        return int(flop_counter.flop_registry[packet](*args, **kwargs, out_val=out))
    extra = EXTRA_FLOP_FORMULAS.get(packet.__name__)
    return int(extra(*args, **kwargs)) if extra else 0


def _compute_dtype(tensors) -> str:
    for t in tensors:
        if t.is_floating_point():
            return name_of(t.dtype)
    return name_of(tensors[0].dtype) if tensors else "none"


class OpRecorder(TorchDispatchMode):
    """Records an ``OpCost`` for every data-moving ATen operator that runs inside it."""

    def __init__(self):
        super().__init__()
        self.ops: list[OpCost] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._overloadpacket.__name__
        if func.namespace != "aten" or func.is_view or name in NO_TRAFFIC:
            return out
        inputs = _tensors((args, kwargs))
        mutated = _tensors(
            [
                value
                for argument, value in zip(func._schema.arguments, args, strict=False)
                if argument.alias_info is not None and argument.alias_info.is_write
            ]
        )
        written = _tensors((out, mutated))
        overwritten = {id(t) for t in mutated} if name in WRITE_ONLY else set()
        read = [t for t in inputs if id(t) not in overwritten]
        self.ops.append(
            OpCost(
                name=f"{name}.{func._overloadname}",
                flops=_flops(func, args, kwargs, out),
                bytes_read=_nbytes(read),
                bytes_written=_nbytes(written),
                dtype=_compute_dtype(inputs + written),
                elements_written=sum(t.numel() for t in written),
                shapes=tuple(tuple(t.shape) for t in read),
            )
        )
        return out


def record_ops(fn: Callable[[], object]) -> list[OpCost]:
    """Run ``fn()`` once and return the cost of every operator it ran, in order."""
    with OpRecorder() as recorder:
        fn()
    return recorder.ops


def summarise(ops: list[OpCost]) -> list[dict]:
    """Per operator name: calls, FLOPs and bytes, largest traffic first."""
    table: dict[str, dict] = defaultdict(lambda: {"calls": 0, "flops": 0, "bytes": 0})
    for op in ops:
        row = table[op.name]
        row["calls"] += 1
        row["flops"] += op.flops
        row["bytes"] += op.bytes
    rows = [{"name": name, **row} for name, row in table.items()]
    return sorted(rows, key=lambda row: -row["bytes"])
