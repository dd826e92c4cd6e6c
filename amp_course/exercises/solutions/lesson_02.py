"""References for lesson 02's dtype predictions (tests check them against torch itself)."""

from __future__ import annotations

import torch

PREDICTIONS = {
    "torch.bmm(a[None], b[None])": torch.bfloat16,  # bmm: on the CPU lower-precision list
    "F.conv1d(a[None], b[:, :, None])": torch.bfloat16,  # conv1d: on the list
    "torch.cumsum(a @ b, dim=0)": torch.bfloat16,  # unlisted on CPU (fp32-listed on CUDA)
    "torch.prod(a @ b)": torch.float32,  # prod: on the CPU fp32 list
    "F.l1_loss(a @ b, b)": torch.float32,  # l1_loss: on the CPU fp32 list
    "torch.stack([a @ b, a])": torch.float32,  # stack: promotes to the widest input
    "F.linear(a.double(), b.double())": torch.float64,  # autocast never casts float64 inputs
    "a @ b.half()": torch.bfloat16,  # a listed op casts every other floating input, fp16 too
}

CUDA_PREDICTIONS = {
    "a @ b": torch.float16,  # matmul: on CUDA's lower-precision list
    "torch.logsumexp(a @ b, dim=0)": torch.float32,  # CUDA's float32 list (unlisted on the CPU)
    "F.group_norm(a @ b, 2)": torch.float32,  # on CUDA's float32 list
    "torch.baddbmm(a[None], q[0], k[0].transpose(1, 2))": torch.float16,  # lower-precision
    "torch.einsum('ij,jk->ik', a, b)": torch.float16,  # registered lower; not on the page
    "torch.exp(a @ b)": torch.float32,  # on CUDA's float32 list (unlisted on the CPU)
    "F.gelu(a @ b)": torch.float16,  # unlisted: follows its fp16 input
    "torch.cat([a @ b, a])": torch.float32,  # unlisted on CUDA, but cat promotes by itself
}


SOLUTIONS = {"02.predict_dtypes": PREDICTIONS, "02.predict_cuda_dtypes": CUDA_PREDICTIONS}
