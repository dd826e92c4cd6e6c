"""PyTorch's documentation page of autocast's op lists, and the ops it leaves out.

The page (DOCS_URL; ``docs/source/amp.md`` in pytorch/pytorch) names Python-level ops
(``__matmul__``, ``LSTMCell``, ``softmin``); autocast registers aten ops (``matmul``, ``lstm_cell``,
``softmax``). ``docs_page_gaps`` maps one onto the other and returns what torch registers but the
page does not name: where the page lags the torch the course runs.
"""

from __future__ import annotations

from .op_lists import AUTOCAST_OPS, _names

DOCS_URL = "https://docs.pytorch.org/docs/stable/amp.html#autocast-op-reference"

# Registered CPU ops the page leaves out, and a name it lists that torch 2.14 does not register.
CPU_PAGE_OMITS = {
    "lower": {"_addmm_activation"},
    "float32": {"linalg_matrix_sqrth", "smooth_l1_loss"},
}
CPU_PAGE_ADDS = {"float32": {"qr"}}

# The page's lists as it prints them (CUDA "float16" and CPU "bfloat16" lists are "lower").
DOCS_PAGE_OPS = {
    "cuda": {
        "lower": _names(
            "__matmul__ addbmm addmm addmv addr baddbmm bmm multi_dot conv1d conv2d conv3d "
            "conv_transpose1d conv_transpose2d conv_transpose3d GRUCell linear LSTMCell matmul "
            "mm mv prelu RNNCell"
        ),
        "float32": _names(
            """
            __pow__ __rdiv__ __rpow__ __rtruediv__ acos asin binary_cross_entropy_with_logits
            cosh cosine_embedding_loss cdist cosine_similarity cross_entropy cumprod cumsum dist
            erfinv exp expm1 group_norm hinge_embedding_loss kl_div l1_loss layer_norm log
            log_softmax log10 log1p log2 margin_ranking_loss mse_loss multilabel_margin_loss
            multi_margin_loss nll_loss norm normalize pdist poisson_nll_loss pow prod reciprocal
            rsqrt sinh smooth_l1_loss soft_margin_loss softmax softmin softplus sum renorm tan
            triplet_margin_loss
            """
        ),
        "widest": _names(
            "addcdiv addcmul atan2 bilinear cross dot grid_sample index_put scatter_add tensordot"
        ),
        # "binary_cross_entropy and BCELoss raise an error in autocast-enabled regions"
        "refused": _names("binary_cross_entropy"),
    },
    # The CPU page lists torch's CPU registrations (op_lists.AUTOCAST_OPS) but for these:
    "cpu": {
        policy: (names - CPU_PAGE_OMITS.get(policy, set())) | CPU_PAGE_ADDS.get(policy, set())
        for policy, names in AUTOCAST_OPS["cpu"].items()
    },
}

# The aten ops each Python-level name on the page stands for (names not here are aten names).
PAGE_NAME_TO_ATEN = {
    "__matmul__": {"matmul"},
    "multi_dot": {"linalg_multi_dot"},
    "GRUCell": {"gru_cell", "_thnn_fused_gru_cell"},
    "LSTMCell": {"lstm_cell", "_thnn_fused_lstm_cell"},
    "RNNCell": {"rnn_tanh_cell", "rnn_relu_cell"},
    "__pow__": {"pow"},
    "__rpow__": {"pow"},
    "__rdiv__": {"reciprocal"},  # torch.Tensor.__rdiv__ is self.reciprocal() * other
    "__rtruediv__": {"reciprocal"},
    "softmin": {"softmax"},
    "normalize": {"norm", "linalg_vector_norm"},
    "norm": {"norm", "frobenius_norm", "nuclear_norm", "linalg_vector_norm", "linalg_matrix_norm"},
    "layer_norm": {"layer_norm", "native_layer_norm"},
    "grid_sample": {"grid_sampler"},
    "conv1d": {"conv1d", "convolution", "_convolution", "cudnn_convolution"},
    "conv2d": {"conv2d", "convolution", "_convolution", "cudnn_convolution"},
    "conv3d": {"conv3d", "convolution", "_convolution", "cudnn_convolution"},
    "conv_transpose2d": {"conv_transpose2d", "cudnn_convolution_transpose"},
    "cross_entropy": {"log_softmax", "nll_loss"},  # what F.cross_entropy decomposes into
}


def docs_page_gaps(device_type: str) -> dict[str, list[str]]:
    """For each list, the aten ops torch registers for ``device_type`` that the page does not name.

    An op counts as named when the page names it or a Python-level op it implements
    (``PAGE_NAME_TO_ATEN``: ``cudnn_convolution`` is named by ``conv2d``).
    """
    gaps = {}
    for policy, registered in AUTOCAST_OPS[device_type].items():
        on_page = DOCS_PAGE_OPS[device_type].get(policy, frozenset())
        named = set().union(*(PAGE_NAME_TO_ATEN.get(name, {name}) for name in on_page))
        missing = sorted(registered - named)
        if missing:
            gaps[policy] = missing
    return gaps


def docs_page_stale(device_type: str) -> dict[str, list[str]]:
    """For each list, the names on the page that torch no longer registers for ``device_type``."""
    stale = {}
    for policy, on_page in DOCS_PAGE_OPS[device_type].items():
        registered = AUTOCAST_OPS[device_type].get(policy, frozenset())
        gone = sorted(n for n in on_page if not PAGE_NAME_TO_ATEN.get(n, {n}) & registered)
        if gone:
            stale[policy] = gone
    return stale
