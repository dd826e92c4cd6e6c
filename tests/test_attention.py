"""Which scaled_dot_product_attention kernel runs, by dtype and allowed backend, on this device."""

import pytest
import torch

from amp_course import attention


@pytest.fixture(scope="module")
def qkv():
    return attention.attention_inputs(1, 2, 16, 8, device="cpu")


def test_kernel_names_are_aten_sdpa_ops():
    from amp_course.autocast_trace import ATEN_TO_DOCUMENTED

    assert set(attention.KERNEL_NAMES) <= set(ATEN_TO_DOCUMENTED)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cpu_flash_kernel_takes_every_float_dtype(qkv, dtype):
    run = attention.run_attention(*(t.to(dtype) for t in qkv), "flash")
    assert run.error is None and run.kernel == "flash (CPU kernel)" and run.compute_dtype == dtype


def test_math_backend_computes_bf16_in_fp32_on_cpu(qkv):
    run = attention.run_attention(*(t.bfloat16() for t in qkv), "math")
    assert run.kernel == "math" and run.compute_dtype == torch.float32


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only behaviour")
def test_gpu_only_backends_are_refused_on_cpu(qkv):
    for backend in ("efficient", "cudnn"):
        run = attention.run_attention(*qkv, backend)
        assert run.kernel is None and "No viable backend" in run.error


def test_autocast_feeds_sdpa_in_the_autocast_dtype(qkv):
    run = attention.run_attention(*qkv, "default", autocast_dtype=torch.bfloat16)
    assert run.compute_dtype == torch.bfloat16


@pytest.mark.gpu
def test_flash_refuses_fp32_on_cuda():
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("PyTorch's flash kernel needs compute capability >= 8.0")
    q, k, v = attention.attention_inputs(1, 2, 64, 64, device="cuda")
    assert attention.run_attention(q, k, v, "flash").error is not None
    run = attention.run_attention(q.half(), k.half(), v.half(), "flash")
    assert run.kernel == "flash" and run.compute_dtype == torch.float16
