"""The op lists autocast applies, as data, and which list an op is in.

``AUTOCAST_OPS`` holds what torch 2.14 registers in its dispatcher for CUDA and CPU autocast
(``aten/src/ATen/autocast_mode.h`` and ``autocast_mode.cpp``; ``_cudnn_rnn`` in
``aten/src/ATen/cudnn/AutocastRNN.cpp``). ``tests/test_autocast_lists.py`` derives both devices'
lists from the installed torch's dispatcher, calling every registered op under autocast (on fake
CUDA tensors for CUDA, so no GPU is needed), and fails on any difference. PyTorch's documentation
page lists fewer ops: ``docs_page`` holds its lists and what they leave out.
"""

from __future__ import annotations


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# "lower": autocast casts the inputs to the lower-precision dtype (fp16 or bf16);
# "float32": it runs the op in float32; "widest": it casts every input to the widest input type;
# "refused": autocast raises an error instead of running the op.
AUTOCAST_OPS = {
    "cuda": {
        "lower": _names(
            """
            conv1d conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d
            convolution _convolution cudnn_convolution cudnn_convolution_transpose prelu
            addmm addmv addr matmul einsum mm mv linalg_vecdot linear addbmm baddbmm bmm
            chain_matmul linalg_multi_dot
            lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell _thnn_fused_lstm_cell
            _thnn_fused_gru_cell _cudnn_rnn
            scaled_dot_product_attention _scaled_dot_product_flash_attention
            """
        ),
        "float32": _names(
            """
            acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow
            softplus layer_norm native_layer_norm rms_norm group_norm frobenius_norm nuclear_norm
            cosine_similarity poisson_nll_loss cosine_embedding_loss nll_loss nll_loss2d
            hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss mse_loss
            margin_ranking_loss multilabel_margin_loss soft_margin_loss triplet_margin_loss
            multi_margin_loss binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp
            upsample_nearest1d _upsample_nearest_exact1d upsample_nearest2d
            _upsample_nearest_exact2d upsample_nearest3d _upsample_nearest_exact3d
            upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa upsample_trilinear3d
            upsample_bicubic2d _upsample_bicubic2d_aa linalg_matrix_sqrth
            prod softmax log_softmax cumprod cumsum linalg_vector_norm linalg_matrix_norm sum norm
            """
        ),
        "widest": _names(
            "addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot "
            "scatter_add"
        ),
        "refused": _names("binary_cross_entropy"),
    },
    "cpu": {  # float16 shares the lists of bfloat16 on the CPU
        "lower": _names(
            """
            conv1d conv2d conv3d bmm mm linalg_vecdot baddbmm addmm _addmm_activation addbmm
            linear matmul _convolution conv_tbc mkldnn_rnn_layer conv_transpose1d
            conv_transpose2d conv_transpose3d prelu scaled_dot_product_attention
            _native_multi_head_attention
            """
        ),
        "float32": _names(
            """
            avg_pool3d binary_cross_entropy grid_sampler grid_sampler_2d
            _grid_sampler_2d_cpu_fallback grid_sampler_3d polar prod quantile nanquantile stft
            cdist trace view_as_complex cholesky_inverse cholesky_solve inverse lu_solve orgqr
            ormqr pinverse max_pool3d max_unpool2d max_unpool3d adaptive_avg_pool3d
            reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d
            replication_pad3d mse_loss cosine_embedding_loss nll_loss nll_loss2d
            hinge_embedding_loss poisson_nll_loss cross_entropy_loss l1_loss huber_loss
            smooth_l1_loss margin_ranking_loss soft_margin_loss triplet_margin_loss
            multi_margin_loss ctc_loss kl_div multilabel_margin_loss
            binary_cross_entropy_with_logits fft_fft fft_ifft fft_fft2 fft_ifft2 fft_fftn
            fft_ifftn fft_rfft fft_irfft fft_rfft2 fft_irfft2 fft_rfftn fft_irfftn fft_hfft
            fft_ihfft linalg_cond linalg_matrix_rank linalg_solve linalg_cholesky linalg_svdvals
            linalg_eigvals linalg_eigvalsh linalg_inv linalg_householder_product linalg_tensorinv
            linalg_tensorsolve fake_quantize_per_tensor_affine geqrf _lu_with_info svd
            triangular_solve fractional_max_pool2d fractional_max_pool3d adaptive_max_pool3d
            multilabel_margin_loss_forward linalg_qr linalg_cholesky_ex linalg_svd linalg_eig
            linalg_eigh linalg_lstsq linalg_inv_ex linalg_matrix_sqrth
            """
        ),
        "widest": _names("cat stack index_copy"),
    },
}
POLICIES = ("lower", "float32", "widest", "refused")

# A dispatch mode sees ops after autocast and after composite ops decompose, so it reports
# aten names (native_layer_norm, _softmax...); these are the listed names they implement.
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


def autocast_policy(op: str, device_type: str) -> str | None:
    """``"lower"``, ``"float32"``, ``"widest"`` or ``"refused"``: what autocast does to ``op``.

    None if ``op`` is on none of ``device_type``'s lists: it runs in the type its inputs define.
    """
    lists = AUTOCAST_OPS.get(device_type)
    if lists is None:
        raise ValueError(
            f"No autocast lists for {device_type!r}; known: {', '.join(AUTOCAST_OPS)}."
        )
    for policy, names in lists.items():
        if op in names:
            return policy
    return None
