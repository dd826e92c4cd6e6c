"""References for lesson 02's dtype predictions (tests check them against torch itself)."""

from __future__ import annotations

import torch

PREDICTIONS = {
    "a @ b": torch.bfloat16,  # matmul: on the CPU lower-precision list
    "F.linear(a, b)": torch.bfloat16,  # linear: on the list
    "a + b": torch.float32,  # unlisted: runs in its inputs' dtype
    "(a @ b) + a": torch.float32,  # unlisted add promotes bf16 + fp32 to fp32
    "torch.softmax(a @ b, dim=-1)": torch.bfloat16,  # unlisted on CPU (fp32-listed on CUDA)
    "F.mse_loss(a @ b, b)": torch.float32,  # mse_loss: on the CPU fp32 list
    "torch.cat([a @ b, a])": torch.float32,  # cat: promotes to the widest input
    "(a @ b).float()": torch.float32,  # an explicit cast wins
}

CUDA_PREDICTIONS = {
    "a @ b": torch.float16,  # matmul: on CUDA's lower-precision list
    "torch.softmax(a @ b, dim=-1)": torch.float32,  # on CUDA's float32 list
    "F.layer_norm(a @ b, (4,))": torch.float32,  # on CUDA's float32 list
    "F.scaled_dot_product_attention(q, k, v)": torch.float16,  # registered lower; not on the page
    "torch.einsum('ij,jk->ik', a, b)": torch.float16,  # registered lower; not on the page
    "(a @ b).sum()": torch.float32,  # on CUDA's float32 list
    "F.gelu(a @ b)": torch.float16,  # unlisted: follows its fp16 input
    "torch.cat([a @ b, a])": torch.float32,  # unlisted on CUDA, but cat promotes by itself
}


SOLUTIONS = {"02.predict_dtypes": PREDICTIONS, "02.predict_cuda_dtypes": CUDA_PREDICTIONS}
