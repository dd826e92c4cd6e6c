"""A CUDA GPU's forward counted on any machine (amp_course.memory.fake_cuda): CUDA's autocast
without a GPU, SDPA sent to the kernel the GPU picks, and the bytes that makes a count keep."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from amp_course import memory, models, precisions
from amp_course.memory import fake_cuda
from amp_course.recipe import AmpRecipe

no_gpu_here = pytest.mark.skipif(torch.cuda.is_available(), reason="asks what torch does without")


def _walk(grad_fn):
    """The names of every autograd node behind ``grad_fn``."""
    names, stack, seen = [], [grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


@no_gpu_here
def test_torch_autocast_switches_itself_off_for_cuda_without_a_gpu():
    # Why fake_cuda.cuda_autocast exists: torch.autocast("cuda") does nothing here.
    with pytest.warns(UserWarning, match="Disabling autocast"):
        context = torch.autocast("cuda", dtype=torch.bfloat16)
    with context:
        assert not torch.is_autocast_enabled("cuda")


def test_cuda_autocast_casts_by_cudas_lists_without_a_gpu():
    with FakeTensorMode():
        x = torch.empty(4, 8, device="cuda")
        weight = torch.empty(16, 8, device="cuda")
        with fake_cuda.cuda_autocast(precisions.get("bf16")):
            y = F.linear(x, weight)  # CUDA's lower-precision list
            normed = F.layer_norm(y, (16,))  # CUDA's fp32 list (the CPU's lists leave it out)
            probs = torch.softmax(y, dim=-1)  # CUDA's fp32 list too
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cpu_normed = F.layer_norm(torch.empty(4, 16, dtype=torch.bfloat16), (16,))
    assert y.dtype == torch.bfloat16
    assert normed.dtype == probs.dtype == torch.float32
    assert cpu_normed.dtype == torch.bfloat16  # the CPU's rule differs: what the count must avoid
    assert not torch.is_autocast_enabled("cuda")  # switched off again on exit
    assert torch.get_autocast_dtype("cuda") == torch.float16  # torch's default, restored


def test_cuda_autocast_off_for_fp32():
    with fake_cuda.cuda_autocast(precisions.FP32), fake_cuda.cuda_autocast(precisions.TF32):
        assert not torch.is_autocast_enabled("cuda")


def _attention(dtype_context, batch=2):
    """A fake-CUDA multi-head self-attention forward with gradients, inside the H100's kernels:
    (output, the kernels that ran)."""
    with torch.device("meta"):
        mha = nn.MultiheadAttention(64, 4, batch_first=True)
    with FakeTensorMode(allow_non_fake_inputs=True):
        mha = mha.to_empty(device="cuda")
        x = torch.empty(batch, 10, 64, device="cuda", requires_grad=True)
        with fake_cuda.attention_kernels("H100 SXM") as ran, dtype_context:
            out, _ = mha(x, x, x, need_weights=False)
    return out, ran


def test_attention_runs_the_kernel_the_gpu_picks():
    out, ran = _attention(fake_cuda.cuda_autocast(precisions.FP32))
    assert ran == ["efficient"] and out.dtype == torch.float32
    assert "ScaledDotProductEfficientAttentionBackward0" in _walk(out.grad_fn)
    out, ran = _attention(fake_cuda.cuda_autocast(precisions.BF16))
    assert ran == ["cudnn"] and out.dtype == torch.bfloat16
    assert "ScaledDotProductCudnnAttentionBackward0" in _walk(out.grad_fn)
    # Outside the context SDPA is torch's own again, which on fake CUDA tensors takes math.
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention


def test_attention_inputs_are_cast_as_cuda_autocast_casts_sdpa():
    with FakeTensorMode():
        q = torch.empty(2, 4, 10, 16, device="cuda")
        with fake_cuda.cuda_autocast(precisions.FP16):
            by_torch = F.scaled_dot_product_attention(q, q, q)  # torch's autocast casts it
            with fake_cuda.attention_kernels("H100 SXM") as ran:
                redirected = F.scaled_dot_product_attention(q, q, q)
    assert ran == ["cudnn"]
    assert redirected.dtype == by_torch.dtype == torch.float16
    assert redirected.shape == by_torch.shape


def test_attention_with_a_mask_is_refused_and_sdpa_restored():
    with FakeTensorMode():
        q = torch.empty(2, 4, 10, 16, device="cuda")
        mask = torch.empty(10, 10, dtype=torch.bool, device="cuda")
        with pytest.raises(ValueError, match="without a mask"):
            with fake_cuda.attention_kernels("H100 SXM"):
                F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention


def test_unknown_gpu_is_refused():
    with pytest.raises(ValueError, match="H100"):
        with fake_cuda.attention_kernels("Z9000"):
            pass


def test_h100_count_adds_what_its_fp32_attention_kernel_keeps():
    """Counted for an H100, an fp32 ViT keeps what the CPU keeps plus what the memory-efficient
    kernel adds: per block, the copy of its batch-first output that nn.MultiheadAttention makes,
    a logsumexp padded to a multiple of 32 rows where the CPU's flash kernel keeps one per row,
    and the seed and offset of its random numbers (one int64 each)."""
    batch, layers, heads, width = 2, 2, 4, 64
    tokens = (28 // 7) ** 2 + 1

    def build():
        return models.build_vit("tiny", num_layers=layers)

    shape = (batch, 1, 28, 28)
    cpu = memory.count_saved_bytes(build, shape, recipe=AmpRecipe("cpu"))
    h100 = memory.count_saved_bytes(build, shape, recipe=AmpRecipe("cuda"), gpu="H100 SXM")
    padded = -(-tokens // 32) * 32
    per_block = batch * tokens * width * 4 + batch * heads * (padded - tokens) * 4 + 2 * 8
    assert h100.activations - cpu.activations == layers * per_block
    assert h100.weight_copies == cpu.weight_copies == 0


@no_gpu_here
def test_count_saved_bytes_on_cuda_without_a_gpu_counts_for_the_default_gpu():
    def build():
        return models.build_vit("tiny", num_layers=1)

    shape = (2, 1, 28, 28)
    for dtype in (None, torch.bfloat16):
        recipe = AmpRecipe("cuda", dtype)
        default = memory.count_saved_bytes(build, shape, recipe=recipe)
        named = memory.count_saved_bytes(build, shape, recipe=recipe, gpu=memory.DEFAULT_GPU)
        assert default == named and default.activations > 0


def test_a_gpu_to_count_for_needs_a_cuda_device():
    with pytest.raises(ValueError, match="pass a recipe on 'cuda'"):
        memory.count_saved_bytes(
            lambda: models.build_vit("tiny", num_layers=1),
            (2, 1, 28, 28),
            recipe=AmpRecipe("cpu"),
            gpu="H100",
        )
