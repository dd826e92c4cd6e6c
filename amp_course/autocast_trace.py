"""Trace the dtype each op runs in under autocast; compare it with PyTorch's documented op lists."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .training import autocast

DOCS_URL = "https://docs.pytorch.org/docs/stable/amp.html#autocast-op-reference"

# PyTorch's "Autocast Op Reference" (DOCS_URL; docs/source/amp.md in pytorch/pytorch), as data.
# The CPU lists are the ops torch 2.14 registers for CPU autocast (aten/src/ATen/autocast_mode.cpp),
# which the docs page lags: tests/test_autocast_lists.py derives them from the installed torch's
# dispatcher and fails on any difference.
# "lower": ops that autocast to the lower precision dtype (float16, or bfloat16 on CPU);
# "float32": ops autocast runs in float32; "widest": ops that promote to the widest input type.
DOCUMENTED_OPS = {
    "cuda": {
        "lower": {
            "__matmul__",
            "addbmm",
            "addmm",
            "addmv",
            "addr",
            "baddbmm",
            "bmm",
            "multi_dot",
            "conv1d",
            "conv2d",
            "conv3d",
            "conv_transpose1d",
            "conv_transpose2d",
            "conv_transpose3d",
            "GRUCell",
            "linear",
            "LSTMCell",
            "matmul",
            "mm",
            "mv",
            "prelu",
            "RNNCell",
        },
        "float32": {
            "__pow__",
            "__rdiv__",
            "__rpow__",
            "__rtruediv__",
            "acos",
            "asin",
            "binary_cross_entropy_with_logits",
            "cosh",
            "cosine_embedding_loss",
            "cdist",
            "cosine_similarity",
            "cross_entropy",
            "cumprod",
            "cumsum",
            "dist",
            "erfinv",
            "exp",
            "expm1",
            "group_norm",
            "hinge_embedding_loss",
            "kl_div",
            "l1_loss",
            "layer_norm",
            "log",
            "log_softmax",
            "log10",
            "log1p",
            "log2",
            "margin_ranking_loss",
            "mse_loss",
            "multilabel_margin_loss",
            "multi_margin_loss",
            "nll_loss",
            "norm",
            "normalize",
            "pdist",
            "poisson_nll_loss",
            "pow",
            "prod",
            "reciprocal",
            "rsqrt",
            "sinh",
            "smooth_l1_loss",
            "soft_margin_loss",
            "softmax",
            "softmin",
            "softplus",
            "sum",
            "renorm",
            "tan",
            "triplet_margin_loss",
        },
        "widest": {
            "addcdiv",
            "addcmul",
            "atan2",
            "bilinear",
            "cross",
            "dot",
            "grid_sample",
            "index_put",
            "scatter_add",
            "tensordot",
        },
    },
    "cpu": {  # "float16 shares the lists of bfloat16" on CPU
        "lower": {
            "conv1d",
            "conv2d",
            "conv3d",
            "bmm",
            "mm",
            "linalg_vecdot",
            "baddbmm",
            "addmm",
            "_addmm_activation",
            "addbmm",
            "linear",
            "matmul",
            "_convolution",
            "conv_tbc",
            "mkldnn_rnn_layer",
            "conv_transpose1d",
            "conv_transpose2d",
            "conv_transpose3d",
            "prelu",
            "scaled_dot_product_attention",
            "_native_multi_head_attention",
        },
        "float32": {
            "avg_pool3d",
            "binary_cross_entropy",
            "grid_sampler",
            "grid_sampler_2d",
            "_grid_sampler_2d_cpu_fallback",
            "grid_sampler_3d",
            "polar",
            "prod",
            "quantile",
            "nanquantile",
            "stft",
            "cdist",
            "trace",
            "view_as_complex",
            "cholesky_inverse",
            "cholesky_solve",
            "inverse",
            "lu_solve",
            "orgqr",
            "ormqr",
            "pinverse",
            "max_pool3d",
            "max_unpool2d",
            "max_unpool3d",
            "adaptive_avg_pool3d",
            "reflection_pad1d",
            "reflection_pad2d",
            "replication_pad1d",
            "replication_pad2d",
            "replication_pad3d",
            "mse_loss",
            "cosine_embedding_loss",
            "nll_loss",
            "nll_loss2d",
            "hinge_embedding_loss",
            "poisson_nll_loss",
            "cross_entropy_loss",
            "l1_loss",
            "huber_loss",
            "smooth_l1_loss",
            "margin_ranking_loss",
            "soft_margin_loss",
            "triplet_margin_loss",
            "multi_margin_loss",
            "ctc_loss",
            "kl_div",
            "multilabel_margin_loss",
            "binary_cross_entropy_with_logits",
            "fft_fft",
            "fft_ifft",
            "fft_fft2",
            "fft_ifft2",
            "fft_fftn",
            "fft_ifftn",
            "fft_rfft",
            "fft_irfft",
            "fft_rfft2",
            "fft_irfft2",
            "fft_rfftn",
            "fft_irfftn",
            "fft_hfft",
            "fft_ihfft",
            "linalg_cond",
            "linalg_matrix_rank",
            "linalg_solve",
            "linalg_cholesky",
            "linalg_svdvals",
            "linalg_eigvals",
            "linalg_eigvalsh",
            "linalg_inv",
            "linalg_householder_product",
            "linalg_tensorinv",
            "linalg_tensorsolve",
            "fake_quantize_per_tensor_affine",
            "geqrf",
            "_lu_with_info",
            "svd",
            "triangular_solve",
            "fractional_max_pool2d",
            "fractional_max_pool3d",
            "adaptive_max_pool3d",
            "multilabel_margin_loss_forward",
            "linalg_qr",
            "linalg_cholesky_ex",
            "linalg_svd",
            "linalg_eig",
            "linalg_eigh",
            "linalg_lstsq",
            "linalg_inv_ex",
            "linalg_matrix_sqrth",
        },
        "widest": {"cat", "stack", "index_copy"},
    },
}

# A dispatch mode sees ops after autocast and after composite ops decompose, so it reports
# aten names (native_layer_norm, _softmax...); these are the documented names they implement.
ATEN_TO_DOCUMENTED = {
    "native_layer_norm": "layer_norm",
    "native_group_norm": "group_norm",
    "_softmax": "softmax",
    "_log_softmax": "log_softmax",
    "_scaled_dot_product_flash_attention_for_cpu": "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention": "scaled_dot_product_attention",
    "_scaled_dot_product_efficient_attention": "scaled_dot_product_attention",
    "_scaled_dot_product_cudnn_attention": "scaled_dot_product_attention",
    "convolution": "_convolution",
    "binary_cross_entropy_with_logits": "binary_cross_entropy_with_logits",
    "nll_loss_forward": "nll_loss",
    "nll_loss2d_forward": "nll_loss",
}


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


class _DtypeRecorder(TorchDispatchMode):
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


def trace_op_dtypes(module, inputs, *, device, dtype) -> list[TracedOp]:
    """Run ``module(*inputs)`` under ``torch.autocast(device, dtype)`` and record every aten op.

    dtype None or float32 traces plain fp32. Only the forward pass is traced: the documented lists
    govern forward ops, and backward ops run in the dtypes their forward ops chose.
    """
    device = torch.device(device)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    recorder = _DtypeRecorder()
    with recorder:
        with autocast(device, dtype):
            module(*inputs)
    return recorder.rows


def documented_policy(op: str, device_type: str) -> str | None:
    """``"lower"``, ``"float32"`` or ``"widest"`` from the docs' lists for ``device_type``.

    None if ``op`` is in none of them.
    """
    lists = DOCUMENTED_OPS.get(device_type)
    if lists is None:
        raise ValueError(
            f"No documented autocast lists for {device_type!r}; known: {', '.join(DOCUMENTED_OPS)}."
        )
    for policy, names in lists.items():
        if op in names:
            return policy
    return None


def expected_dtype(
    row: TracedOp, device_type: str, autocast_dtype: torch.dtype
) -> torch.dtype | None:
    """The dtype the docs say ``row`` should compute in; None for casts and non-float ops.

    Unlisted ops "run in the type defined by their inputs": the promotion of their float inputs.
    """
    floats = [d for d in row.input_dtypes if d.is_floating_point]
    if row.is_cast or not floats or row.output_dtype is None:
        return None
    policy = documented_policy(row.documented_name, device_type)
    if policy == "lower":
        return autocast_dtype
    if policy == "float32":
        return torch.float32
    widest = floats[0]
    for d in floats[1:]:
        widest = torch.promote_types(widest, d)
    return widest


def compare_with_docs(rows, device_type: str, autocast_dtype: torch.dtype) -> list[str]:
    """Ops whose traced dtype disagrees with the documented lists, as sentences (empty: all agree).

    A listed op must both take its inputs in and produce the documented dtype; an unlisted one
    must produce the promotion of its inputs.
    """
    problems = []
    for row in rows:
        want = expected_dtype(row, device_type, autocast_dtype)
        if want is None:
            continue
        policy = documented_policy(row.documented_name, device_type)
        got = (
            {row.output_dtype}
            if policy is None
            else {row.output_dtype, *[d for d in row.input_dtypes if d.is_floating_point]}
        )
        if got != {want}:
            problems.append(
                f"{row.name}: ran in {sorted(map(str, got))}, the docs "
                f"({policy or 'unlisted'} on {device_type}) say {want}"
            )
    return problems


def summarise(
    rows, device_type: str, autocast_dtype: torch.dtype, include_views: bool = False
) -> list[dict]:
    """Table rows for display: op, documented name and list, input/output dtypes, expected dtype."""
    views = {
        "view",
        "t",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "select",
        "detach",
        "_unsafe_view",
        "clone",
        "expand",
        "slice",
        "split",
        "alias",
    }

    def short(dtype):
        return str(dtype).replace("torch.", "")

    table = []
    for row in rows:
        if not include_views and row.op in views:
            continue
        want = expected_dtype(row, device_type, autocast_dtype)
        listed = documented_policy(row.documented_name, device_type) or "unlisted"
        table.append(
            {
                "op": row.name,
                "documented as": row.documented_name,
                "docs list": "cast" if row.is_cast else listed,
                "inputs": ", ".join(short(d) for d in row.input_dtypes),
                "output": short(row.output_dtype),
                "expected": "" if want is None else short(want),
            }
        )
    return table


def summary_markdown(rows, device_type: str, autocast_dtype: torch.dtype) -> str:
    """``summarise`` as a Markdown table, for ``IPython.display.Markdown``."""
    table = summarise(rows, device_type, autocast_dtype)
    if not table:
        return "(no ops traced)"
    columns = list(table[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += [
        "| " + " | ".join(f"`{row[c]}`" if c == "op" else str(row[c]) for c in columns) + " |"
        for row in table
    ]
    return "\n".join(lines)
