"""The CPU autocast lists in ``ac.autocast_trace`` are exactly what the installed torch autocasts.

Every aten op with a CPU autocast kernel is found in torch's dispatcher; each one is then called
under ``torch.autocast("cpu")`` with bf16 and with fp16, and the casts autocast makes of its input
tensors give its policy. Ops without such a kernel fall through autocast and run in their inputs'
dtype, so "unlisted" is checked for every other op at once.
"""

import itertools

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from amp_course import autocast_trace


class _Stop(Exception):
    pass


class _InputCasts(TorchDispatchMode):
    """Records the dtypes the call's own input tensors are cast to, up to the first other op."""

    def __init__(self, inputs):
        super().__init__()
        self.inputs, self.casts = inputs, set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._to_copy.default and any(args[0] is t for t in self.inputs):
            out = func(*args, **(kwargs or {}))
            self.casts.add(out.dtype)
            return out
        raise _Stop  # the op itself (or its first decomposed op): autocast's casts are all done


def _placeholder(argument, dtypes):
    """Some valid value for a schema argument; tensors take their dtype from ``dtypes``."""
    kind = argument.type.kind()
    if kind == "OptionalType" or argument.has_default_value():
        return argument.default_value if argument.has_default_value() else None
    if kind == "TensorType":
        return torch.ones(2, 2, dtype=next(dtypes))
    if kind == "ListType":
        inner = argument.type.getElementType().kind()
        if inner == "TensorType":
            return [torch.ones(2, 2, dtype=next(dtypes)) for _ in range(2)]
        return [{"FloatType": 1.0, "BoolType": False}.get(inner, 1)]
    return {"FloatType": 1.0, "BoolType": False, "StringType": "none"}.get(kind, 1)


def _casts(op, dtypes, autocast_dtype):
    """The dtypes autocast casts ``op``'s inputs to (we stop before the op: values never matter)."""
    args = [_placeholder(a, dtypes) for a in op._schema.arguments if not a.kwarg_only]
    tensors = [t for a in args for t in (a if isinstance(a, list) else [a])]
    mode = _InputCasts([t for t in tensors if isinstance(t, torch.Tensor)])
    try:
        with torch.autocast("cpu", dtype=autocast_dtype, enabled=autocast_dtype is not None), mode:
            op(*args)
    except Exception:  # noqa: BLE001 - _Stop, or placeholder values the op itself rejects later
        pass
    return mode.casts


def _policy(op, low):
    """ "lower", "float32" or "widest": what CPU autocast does to ``op``'s floating inputs."""

    def by_autocast(dtypes):
        # Casts the op makes itself (e.g. a math kernel upcasting bf16) happen without autocast too.
        made = _casts(op, dtypes(), low)
        return set() if made == _casts(op, dtypes(), None) else made

    if by_autocast(lambda: itertools.repeat(torch.float32)) == {low}:
        return "lower"
    if by_autocast(lambda: itertools.repeat(low)) == {torch.float32}:
        return "float32"
    if by_autocast(lambda: itertools.cycle([low, torch.float32])) == {torch.float32}:
        return "widest"
    return None


@pytest.fixture(scope="module")
def cpu_autocast_ops():
    """Every aten overload with a CPU autocast kernel, as (op name, OpOverload)."""
    ops = []
    for name in torch._C._dispatch_get_all_op_names():
        if name.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(
            name, "AutocastCPU"
        ):
            base, _, overload = name.removeprefix("aten::").partition(".")
            ops.append((base, getattr(getattr(torch.ops.aten, base), overload or "default")))
    return ops


def test_the_cpu_lists_name_exactly_the_ops_torch_autocasts(cpu_autocast_ops):
    registered = {name for name, _ in cpu_autocast_ops}
    listed = set().union(*autocast_trace.DOCUMENTED_OPS["cpu"].values())
    assert sorted(registered - listed) == [], "autocast on the CPU but missing from the lists"
    assert sorted(listed - registered) == [], "listed, but torch has no CPU autocast kernel"


@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_every_listed_cpu_op_has_the_policy_torch_applies(cpu_autocast_ops, low):
    wrong = {
        f"{op}: torch {policy}, listed {autocast_trace.documented_policy(name, 'cpu')}"
        for name, op in cpu_autocast_ops
        if (policy := _policy(op, low)) != autocast_trace.documented_policy(name, "cpu")
    }
    assert sorted(wrong) == []


@pytest.mark.parametrize(
    "name, policy", [("mm", "lower"), ("mse_loss", "float32"), ("cat", "widest"), ("add", None)]
)
def test_the_policy_probe_tells_the_three_lists_and_unlisted_ops_apart(name, policy):
    # The probe itself can fail: an unlisted op (add) gets no policy, each list its own.
    for low in (torch.bfloat16, torch.float16):
        op = getattr(torch.ops.aten, name)
        assert _policy(op.Tensor if name == "add" else op.default, low) == policy
