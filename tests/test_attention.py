"""Which scaled_dot_product_attention kernel runs, by dtype and allowed backend, on this device."""

import pytest
import torch

from amp_course import attention
from amp_course.recipe import AmpRecipe


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
    run = attention.run_attention(*qkv, "default", recipe=AmpRecipe("cpu", torch.bfloat16))
    assert run.compute_dtype == torch.bfloat16


@pytest.mark.gpu
def test_flash_refuses_fp32_on_cuda():
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("PyTorch's flash kernel needs compute capability >= 8.0")
    q, k, v = attention.attention_inputs(1, 2, 64, 64, device="cuda")
    assert attention.run_attention(q, k, v, "flash").error is not None
    run = attention.run_attention(q.half(), k.half(), v.half(), "flash")
    assert run.kernel == "flash" and run.compute_dtype == torch.float16


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only behaviour")
def test_a_refusal_keeps_the_whole_message(qkv):
    run = attention.run_attention(*qkv, "efficient")
    assert run.error.startswith("No viable backend") and run.error.endswith("fused kernels.")


def test_cuda_refusal_reasons_are_those_of_the_allowed_backend(qkv, monkeypatch):
    # What sdp_utils.cpp does on a GPU when no allowed kernel can run, simulated on the CPU:
    # a heading per fused kernel, its reasons, then the error.
    import warnings

    def refuse(*args, **kwargs):
        for message in [
            "Memory efficient kernel not used because: (Triggered internally at sdp_utils.cpp:9.)",
            "Memory Efficient attention has been runtime disabled.",
            "Flash attention kernel not used because: (Triggered internally at sdp_utils.cpp:988.)",
            "Expected query, key and value to all be of dtype: {Half, BFloat16}. Got Query dtype:"
            " float (Triggered internally at sdp_utils_cpp.h:91.)",
            "cuDNN attention kernel not used because:",
            "cuDNN attention has been runtime disabled.",
        ]:
            warnings.warn(message, UserWarning, stacklevel=2)
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", refuse)
    run = attention.run_attention(*qkv, "flash")
    assert run.error == "No available kernel. Aborting execution."
    assert run.reasons == [
        "Expected query, key and value to all be of dtype: {Half, BFloat16}. Got Query dtype: float"
    ]


@pytest.mark.gpu
def test_refusal_says_why_and_peaks_count_the_step_only():
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("PyTorch's flash kernel needs compute capability >= 8.0")
    q, k, v = attention.attention_inputs(4, 16, 1024, 64, device="cuda")
    refused = attention.run_attention(q, k, v, "flash")
    assert any("Half, BFloat16" in reason for reason in refused.reasons)
    held = torch.empty(2**30, dtype=torch.uint8, device="cuda")  # an earlier cell's tensor
    q, k, v = (t.half() for t in (q, k, v))
    _, peak = attention.cost(q, k, v, "flash", repeats=2)
    one = q.numel() * q.element_size()
    assert 7 * one <= peak < 20 * one  # copies of q, k, v, the output and three gradients
    del held


def test_a_t4_rehearsal_refuses_the_kernels_a_t4_lacks(monkeypatch):
    # Restricting SDPA to flash would switch flash on again on the H100 that rehearses a T4.
    from amp_course import emulation

    monkeypatch.setenv(emulation.ENV, "t4")
    cuda = torch.device("cuda")
    for backend in ("flash", "cudnn"):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            reason = attention.emulated_refusal(backend, cuda, dtype)
            assert "compute capability 8.0" in reason and "Tesla T4" in reason
    assert attention.emulated_refusal("efficient", cuda, torch.float16) is None
    assert attention.emulated_refusal("efficient", cuda, torch.float32) is None
    assert attention.emulated_refusal("flash", torch.device("cpu"), torch.float16) is None
    monkeypatch.delenv(emulation.ENV)
    assert attention.emulated_refusal("flash", cuda, torch.float16) is None


def test_a_t4_rehearsal_refuses_bf16_memory_efficient_attention_as_a_t4_does(monkeypatch):
    """torch takes bf16 in the memory-efficient kernel from compute capability 8.0 only; an H100
    rehearsing a T4 keeps that kernel on for fp32 and fp16, so bf16 must be refused by dtype."""
    from amp_course import emulation

    monkeypatch.setenv(emulation.ENV, "t4")
    cuda = torch.device("cuda")
    reason = attention.emulated_refusal("efficient", cuda, torch.bfloat16)
    assert "takes bf16 from compute capability 8.0" in reason and "fp32 and fp16" in reason
    # The default backend may choose only what a T4 would run: the math kernel for bf16.
    assert attention.emulated_kernels(cuda, torch.bfloat16) == ["math"]
    assert attention.emulated_kernels(cuda, torch.float16) == ["efficient", "math"]
    assert "T4" in emulation.active().describe() and "efficient fp32 and fp16" in (
        emulation.active().describe()
    )
    monkeypatch.delenv(emulation.ENV)
    assert attention.emulated_refusal("efficient", cuda, torch.bfloat16) is None
    assert attention.emulated_kernels(cuda, torch.bfloat16) is None


def test_the_rehearsal_is_asked_with_the_dtype_that_reaches_sdpa(monkeypatch, qkv):
    """Under bf16 autocast, fp32 inputs reach the kernel in bf16: that is the dtype the rehearsed
    T4 must refuse. (On a CPU the rehearsal asks nothing: it rehearses a GPU.)"""
    from amp_course import emulation

    monkeypatch.setenv(emulation.ENV, "t4")
    asked = []

    def record(backend, device, dtype):
        asked.append((backend, dtype))
        return "refused"

    monkeypatch.setattr(attention, "emulated_refusal", record)
    run = attention.run_attention(*qkv, "efficient", recipe=AmpRecipe("cpu", torch.bfloat16))
    assert asked == [("efficient", torch.bfloat16)] and run.error == "refused"


def test_the_default_backend_chooses_only_among_the_rehearsed_gpus_kernels(monkeypatch, qkv):
    """Under a rehearsal "default" is restricted to what the rehearsed GPU runs for the dtype
    (for bf16 on a T4: math), not to whatever the bigger GPU's global flags allow."""
    asked = []

    def math_only(device, dtype):
        asked.append(dtype)
        return ["math"]

    monkeypatch.setattr(attention, "emulated_kernels", math_only)
    run = attention.run_attention(*(t.bfloat16() for t in qkv), "default")
    assert asked == [torch.bfloat16] and run.kernel == "math"
    monkeypatch.undo()
    assert attention.run_attention(*(t.bfloat16() for t in qkv)).kernel == "flash (CPU kernel)"
