"""The CUDA and CPU lists in ``ac.autocast_trace`` are exactly what the installed torch autocasts.

Every aten op with an autocast kernel for the device is found in torch's dispatcher; each one is
then called under autocast with fp16 and with bf16, and the casts autocast makes of its input
tensors (or, for ops that pass ``dtype=torch.float32`` on instead of casting, the dtype of the
output) give its policy. CUDA ops are called on fake CUDA tensors (shapes and dtypes, no data), so
the CUDA lists are checked on a machine without a GPU. Ops without such a kernel fall through
autocast and run in their inputs' dtype, so "unlisted" is checked for every other op at once.
"""

import contextlib
import itertools

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from amp_course import autocast_trace
from amp_course.autocast_trace.registry import registered_ops

LISTS_TORCH = "2.14"  # the torch whose registrations AUTOCAST_OPS holds
# A custom kernel (AutocastRNN.cpp) that checks cuDNN's flat weight buffer before it casts: no
# placeholder reaches its casts, so only its registration is checked.
UNPROBED = {("cuda", "_cudnn_rnn")}


class _Stop(Exception):
    pass


class _FirstCall(TorchDispatchMode):
    """Records the dtypes the call's own inputs are cast to, and the first other op's dtype args."""

    def __init__(self, inputs, stop=True):
        super().__init__()
        self.inputs, self.stop, self.casts, self.dtype_args = inputs, stop, set(), None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        cast = func is torch.ops.aten._to_copy.default and any(args[0] is t for t in self.inputs)
        if self.stop and not cast and func.namespace != "prim":
            # The op itself (or its first decomposed op): autocast's casts are all done.
            self.dtype_args = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.dtype)]
            raise _Stop
        out = func(*args, **kwargs)
        if cast:
            self.casts.add(out.dtype)
        return out


@contextlib.contextmanager
def _autocast(device, dtype):
    """Autocast on ``device`` with ``dtype`` (None: off), without torch.autocast's GPU check."""
    before = torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)
    torch.set_autocast_enabled(device, dtype is not None)
    torch.set_autocast_dtype(device, dtype or before[1])
    try:
        yield
    finally:
        torch.set_autocast_enabled(device, before[0])
        torch.set_autocast_dtype(device, before[1])


class _Probe:
    """Calls one op with placeholder arguments on ``device`` (fake tensors for CUDA)."""

    def __init__(self, device):
        self.device = device
        self.fake = FakeTensorMode(allow_non_fake_inputs=True) if device == "cuda" else None

    def tensor(self, dtype):
        with self.fake or contextlib.nullcontext():
            return torch.ones(2, 2, dtype=dtype, device=self.device)

    def placeholder(self, argument, dtypes):
        """Some valid value for a schema argument; tensors take their dtype from ``dtypes``."""
        kind = argument.type.kind()
        if argument.has_default_value():
            return argument.default_value
        if kind == "OptionalType":
            return None
        if kind == "TensorType":
            return self.tensor(next(dtypes))
        if kind == "ListType":
            inner = argument.type.getElementType().kind()
            if inner in ("TensorType", "OptionalType"):  # Tensor[] and Tensor?[] (index_put)
                return [self.tensor(next(dtypes)) for _ in range(2)]
            return [{"FloatType": 1.0, "BoolType": False}.get(inner, 1)]
        return {"FloatType": 1.0, "BoolType": False, "StringType": "none"}.get(kind, 1)

    def call(self, op, dtypes, autocast_dtype, stop=True):
        """The _FirstCall record of ``op`` under autocast (stopped before the op when ``stop``)."""
        args = [self.placeholder(a, dtypes) for a in op._schema.arguments if not a.kwarg_only]
        tensors = [t for a in args for t in (a if isinstance(a, list) else [a])]
        mode = _FirstCall([t for t in tensors if isinstance(t, torch.Tensor)], stop)
        mode.error, mode.output = None, None
        try:
            with self.fake or contextlib.nullcontext(), _autocast(self.device, autocast_dtype):
                with mode:
                    mode.output = op(*args)
        except _Stop:
            pass
        except Exception as error:  # noqa: BLE001 - placeholder values the op itself rejects
            mode.error = str(error)
        return mode

    def policy(self, op, low):
        """What autocast does to ``op``'s floating inputs, as the lists name it (None: nothing)."""

        def calls(dtypes):
            """(under autocast, without): casts the op makes itself happen in both."""
            return self.call(op, dtypes(), low), self.call(op, dtypes(), None)

        made, plain = calls(lambda: itertools.repeat(torch.float32))
        if "unsafe to autocast" in (made.error or ""):
            return "refused"
        if made.casts == {low} != plain.casts:
            return "lower"
        made, plain = calls(lambda: itertools.repeat(low))
        if made.casts == {torch.float32} != plain.casts:
            return "float32"
        if torch.float32 in (made.dtype_args or []) and not plain.dtype_args:
            return "float32"  # fp32 passed on as the op's dtype argument instead of a cast
        made, plain = calls(lambda: itertools.cycle([low, torch.float32]))
        if made.casts == {torch.float32} != plain.casts:
            return "widest"
        # Composite ops that decompose before any cast (softmax into _softmax): run to the end.
        ran, plain = (self.call(op, itertools.repeat(low), d, stop=False) for d in (low, None))
        out, plain_out = (
            r.output[0] if isinstance(r.output, tuple) else r.output for r in (ran, plain)
        )
        if getattr(out, "dtype", None) == torch.float32 != getattr(plain_out, "dtype", None):
            return "float32"
        return None


def _ops(device):
    """Every aten overload with an autocast kernel for ``device``, as (op name, OpOverload)."""
    key = autocast_trace.registry.DISPATCH_KEYS[device]
    ops = []
    for name in torch._C._dispatch_get_all_op_names():
        if name.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(name, key):
            base, _, overload = name.removeprefix("aten::").partition(".")
            ops.append((base, getattr(getattr(torch.ops.aten, base), overload or "default")))
    return ops


def _require_answers(device):
    """Skip, saying why, where this torch cannot answer for ``device`` as torch 2.14+cu does."""
    if not torch.__version__.startswith(LISTS_TORCH):
        pytest.skip(f"the lists are torch {LISTS_TORCH}'s; this is torch {torch.__version__}")
    if registered_ops(device) is None:
        pytest.skip("this torch's dispatcher cannot be asked (no torch._C._dispatch_* functions)")
    if device == "cuda" and torch.version.cuda is None:
        pytest.skip("a CPU-only torch build lacks the cuDNN autocast kernels (_cudnn_rnn)")


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_the_lists_name_exactly_the_ops_torch_autocasts(device):
    _require_answers(device)
    drift = autocast_trace.drift_from_lists(device)
    assert drift == {"registered, not listed": [], "listed, not registered": []}, device


@pytest.mark.parametrize("device", ["cuda", "cpu"])
@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_every_listed_op_has_the_policy_torch_applies(device, low):
    _require_answers(device)
    probe = _Probe(device)
    wrong = {
        f"{op}: torch {policy}, listed {autocast_trace.autocast_policy(name, device)}"
        for name, op in _ops(device)
        if (device, name) not in UNPROBED
        and (policy := probe.policy(op, low)) != autocast_trace.autocast_policy(name, device)
    }
    assert sorted(wrong) == []


@pytest.mark.parametrize("device", ["cuda", "cpu"])
@pytest.mark.parametrize(
    "name, overload, policy",
    [("mm", "default", "lower"), ("mse_loss", "default", "float32"), ("add", "Tensor", None)],
)
def test_the_policy_probe_tells_the_lists_and_unlisted_ops_apart(device, name, overload, policy):
    # The probe itself can fail: an unlisted op (add) gets no policy, each list its own.
    probe = _Probe(device)
    for low in (torch.bfloat16, torch.float16):
        assert probe.policy(getattr(getattr(torch.ops.aten, name), overload), low) == policy


def test_the_probe_finds_the_widest_and_the_pass_on_dtype_policies():
    cpu, cuda = _Probe("cpu"), _Probe("cuda")
    assert cpu.policy(torch.ops.aten.cat.default, torch.bfloat16) == "widest"
    assert cuda.policy(torch.ops.aten.atan2.default, torch.float16) == "widest"
    assert cuda.policy(torch.ops.aten.sum.default, torch.float16) == "float32"  # dtype passed on
    assert cuda.policy(torch.ops.aten.binary_cross_entropy.default, torch.float16) == "refused"
    assert cpu.policy(torch.ops.aten.binary_cross_entropy.default, torch.float16) == "float32"


def test_cuda_lists_hold_the_ops_the_docs_page_omits():
    """SDPA, einsum, linalg_vecdot and conv_tbc autocast to 16 bits on CUDA; the page omits them."""
    gaps = autocast_trace.docs_page_gaps("cuda")
    for op in ("scaled_dot_product_attention", "einsum", "linalg_vecdot", "conv_tbc"):
        assert autocast_trace.autocast_policy(op, "cuda") == "lower"
        assert op in gaps["lower"]
    assert "rms_norm" in gaps["float32"] and "layer_norm" not in gaps.get("float32", [])
    assert autocast_trace.docs_page_stale("cpu") == {"float32": ["qr"]}
    assert autocast_trace.docs_page_stale("cuda") == {}
