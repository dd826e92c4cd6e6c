"""The keys of quiz questions in lessons 00-03 checked against the installed torch: each test
asserts the marked choice(s) by exact text, then shows with torch that the marked choice holds and
the others, where a computation can tell, do not. CUDA autocast runs on fake CUDA tensors (shapes
and dtypes, no data), with CUDA's own autocast kernels from torch's dispatcher, so no GPU is needed.
"""

import contextlib

import pytest
import torch
import torch.nn.functional as F
from conftest import quiz_answers as right
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from amp_course import memory, models, precisions
from amp_course.memory.fake_cuda import cuda_autocast
from amp_course.recipe import AmpRecipe


def cast(value, dtype):
    return torch.tensor(value, dtype=torch.float64).to(dtype).item()


@contextlib.contextmanager
def fake_cuda(dtype=torch.float16):
    """Fake CUDA tensors under CUDA's autocast in ``dtype``."""
    with FakeTensorMode(allow_non_fake_inputs=True), cuda_autocast(precisions.get(dtype)):
        yield


def saved_dtypes(model, x, dtype=torch.bfloat16):
    """Dtypes of the tensors a CPU-autocast forward keeps for backward, and its output."""
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        with torch.autocast("cpu", dtype=dtype):
            out = model(x.requires_grad_())
    return saved, out


# 00_scenario


def test_only_fp16_gradients_underflow_and_autocast_does_not_scale_them():
    assert right("00_scenario", "when-gradscaler") == ["Only with float16, not bfloat16"]
    assert cast(1e-8, torch.float16) == 0 and cast(1e-8, torch.bfloat16) != 0
    assert torch.finfo(torch.bfloat16).tiny == torch.finfo(torch.float32).tiny  # same exponent
    w = torch.ones(3, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (w * 2.0).sum().backward()
    assert torch.equal(w.grad, torch.full((3,), 2.0))  # autocast left the gradient unscaled


def test_amp_activations_shrink_by_less_than_half_and_weight_copies_are_added():
    assert right("00_scenario", "halve-gpus") == [
        "Some activations stay fp32, weight copies are added, and the fp32 state does not shrink."
    ]
    build, shape = lambda: models.build_vit("tiny"), (2, 1, 28, 28)  # counted on a fake H100
    fp32 = memory.count_saved_bytes(build, shape, recipe=AmpRecipe("cuda"))
    fp16 = memory.count_saved_bytes(build, shape, recipe=AmpRecipe("cuda", "fp16"))
    assert fp16.activations > fp32.activations / 2 and fp16.weight_copies > 0
    assert fp32.weight_copies == 0
    # Per parameter the fp32 state is 4 + 4 + 8 bytes whatever the autocast dtype.
    assert memory.training_memory(1, 0, "adamw").total == 16
    # GradScaler keeps a scale and counters, no copy of the gradients.
    state = torch.amp.GradScaler("cpu").state_dict()
    assert not any(isinstance(v, torch.Tensor) for v in state.values())


def test_lesson_00_counts_saved_bytes_on_fake_tensors():
    assert right("00_scenario", "count-without-data") == [
        "It runs the forward on fake tensors: real shapes and dtypes, no data."
    ]
    seen = []

    class Probe(torch.nn.Linear):
        def forward(self, x):
            seen.append((type(x), x.shape))
            return super().forward(x)

    recipe = AmpRecipe("cpu", "bf16")
    counted = memory.count_saved_bytes(lambda: Probe(8, 8), (4, 8), recipe=recipe)
    assert seen == [(FakeTensor, torch.Size([4, 8]))]
    real = memory.saved_tensor_bytes(Probe(8, 8), torch.randn(4, 8), recipe=recipe)
    assert counted == real and counted.activations != 2 * (8 * 8 + 8)  # not params x 2 bytes


def test_amp_shrinks_activations_and_adds_weight_copies_but_not_grads_or_adam_state():
    assert right("00_scenario", "what-shrinks") == [
        "Activations saved for the backward pass",
        "Low-precision weight copies",
    ]
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    saved, out = saved_dtypes(model, torch.randn(4, 8))
    assert any(t.dtype == torch.bfloat16 and t.shape == (4, 8) for t in saved)  # activations
    assert any(t.dtype == torch.bfloat16 and t.shape == (8, 8) for t in saved)  # weight copy
    out.float().sum().backward()
    optimizer = torch.optim.AdamW(model.parameters())
    optimizer.step()
    assert {p.grad.dtype for p in model.parameters()} == {torch.float32}
    moments = [s[k] for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq")]
    assert {m.dtype for m in moments} == {torch.float32}


# 01_number_formats


def test_bf16_trades_mantissa_bits_for_fp32_range_in_the_same_two_bytes():
    assert right("01_number_formats", "bf16-vs-fp16") == [
        "It gives up precision for float32's range."
    ]
    bf16, fp16, fp32 = (torch.finfo(d) for d in (torch.bfloat16, torch.float16, torch.float32))
    assert bf16.bits == fp16.bits == 16  # no more memory
    assert bf16.eps == 2**-7 > fp16.eps == 2**-10  # less precision
    assert bf16.max > 3.3e38 and bf16.max / fp32.max > 0.99 > fp16.max / fp32.max  # more range


def test_small_updates_round_away_in_16_bit_weights_but_not_in_fp32():
    assert right("01_number_formats", "master-weights") == [
        "Small updates would round away in 16-bit weights."
    ]
    for dtype in (torch.float16, torch.bfloat16):
        w = torch.ones((), dtype=dtype)
        assert w + torch.tensor(1e-4, dtype=dtype) == 1
    assert torch.ones(()) + 1e-4 != 1
    # autocast still makes a 16-bit copy of an fp32 weight: the fp32 copy is extra memory.
    saved, _ = saved_dtypes(torch.nn.Linear(8, 8), torch.randn(4, 8))
    assert any(t.dtype == torch.bfloat16 and t.shape == (8, 8) for t in saved)


def test_a_small_addend_is_swamped_in_fp16():
    assert right("01_number_formats", "swamping") == ["Exactly 1"]
    one = torch.ones((), dtype=torch.float16)
    total = (one + torch.tensor(1e-4, dtype=torch.float16)).item()
    assert total == 1.0 and total != 1 + 2**-10 and total != 1.0001


def test_e4m3fn_saturates_inf_to_448():
    assert right("01_number_formats", "e4m3-inf") == [
        "You get 448: the format has no inf, so the cast saturates."
    ]
    values = torch.tensor([float("inf"), float("-inf"), 1000.0])
    assert torch.equal(values.to(torch.float8_e4m3fn).float(), torch.tensor([448.0, -448, 448]))
    # The all-ones exponent with a zero mantissa is the normal number 256, not inf.
    assert torch.tensor([0b0_1111_000], dtype=torch.uint8).view(torch.float8_e4m3fn).item() == 256


def test_1e_8_underflows_in_fp16_survives_in_bf16_and_when_scaled():
    assert right("01_number_formats", "underflow-1e-8") == [
        "In fp16 it becomes 0.",
        "In bf16 it survives (coarsely rounded).",
        "Scaling the loss by 2^16 before backward keeps it non-zero in fp16.",
    ]
    assert cast(1e-8, torch.float16) == 0  # 0, not inf
    assert cast(1e-8, torch.bfloat16) == pytest.approx(1e-8, rel=2**-8)
    assert cast(1e-8 * 2**16, torch.float16) != 0


# 02_autocast


def test_linear_under_cuda_autocast_returns_fp16_with_fp32_weights():
    assert right("02_autocast", "linear-dtype-cuda") == ["torch.float16"]
    with fake_cuda():
        layer = torch.nn.Linear(4, 3, device="cuda")
        out = layer(torch.ones(2, 4, device="cuda"))
    assert out.dtype == torch.float16 and layer.weight.dtype == torch.float32


def test_sdpa_is_on_cuda_autocasts_lower_precision_list():
    assert right("02_autocast", "sdpa-cuda") == [
        "float16: CUDA autocast registers it, as the CPU's does"
    ]
    for key in ("AutocastCUDA", "AutocastCPU"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(
            "aten::scaled_dot_product_attention", key
        )
    with fake_cuda():
        q = torch.ones(1, 2, 4, 8, device="cuda")
        assert F.scaled_dot_product_attention(q, q, q).dtype == torch.float16  # runs, no raise


def test_bf16_softmax_stays_bf16_under_cpu_autocast_but_is_fp32_on_cuda():
    assert right("02_autocast", "softmax-cpu-vs-cuda") == ["bfloat16, the dtype of its input."]
    x = torch.ones(2, 3, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert F.softmax(x, -1).dtype == torch.bfloat16
    with fake_cuda(torch.bfloat16):
        assert F.softmax(x.to("cuda"), -1).dtype == torch.float32


def test_a_16_bit_sigmoid_saturates_and_bce_loses_the_gradient():
    assert right("02_autocast", "bce") == [
        "A 16-bit sigmoid rounds large logits to 1, so BCELoss takes log(0)."
    ]
    logit = torch.tensor([20.0], dtype=torch.bfloat16, requires_grad=True)
    target = torch.zeros(1, dtype=torch.bfloat16)
    p = torch.sigmoid(logit)
    assert p.item() == 1.0
    loss = F.binary_cross_entropy(p, target)
    loss.backward()
    assert loss.item() == 100 and logit.grad.item() == 0  # clamped log(0), no gradient
    fused = F.binary_cross_entropy_with_logits(logit.detach().float(), target.float())
    assert fused.item() == pytest.approx(20.0)  # not the same loss
    with torch.autocast("cpu", dtype=torch.bfloat16):  # BCELoss itself runs in fp32 on the CPU
        assert F.binary_cross_entropy(p.detach(), target).dtype == torch.float32
    with fake_cuda(), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(torch.ones(1, device="cuda") / 2, torch.ones(1, device="cuda"))


def unscale(param_dtype, init_scale=2.0**16):
    """Runs a GradScaler step on parameters of ``param_dtype`` with an fp32 loss."""
    w = torch.nn.Parameter(torch.ones(2, dtype=param_dtype))
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    scaler.scale(w.float().sum()).backward()
    scaler.step(torch.optim.SGD([w], lr=0.1))


def test_gradscaler_refuses_fp16_gradients_of_fp16_parameters():
    assert right("02_autocast", "half-model") == [
        "The model's parameters are fp16, e.g. after model.half()."
    ]
    for init_scale in (1.0, 2.0**16):
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
            unscale(torch.float16, init_scale)
    unscale(torch.float32, 2.0**24)  # fp32 loss, large scale: no error


def test_custom_fwd_casts_inputs_to_fp32_and_runs_forward_without_autocast():
    assert right("02_autocast", "custom-fwd") == [
        "Casts its floating-point CUDA inputs to fp32 (float64 ones stay), runs forward with "
        "autocast off."
    ]
    seen = []

    class Double(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
        def forward(ctx, x, y, z=None):
            seen.append((x.dtype, y.dtype, z, torch.is_autocast_enabled("cuda")))
            return x * 2, y * 2

    with fake_cuda():
        x = torch.ones(2, dtype=torch.float16, device="cuda")
        out, _ = Double.apply(x, torch.ones(2, dtype=torch.float64, device="cuda"))
        # A CPU tensor is not the decorator's device's: it stays as it came.
        Double.apply(x, torch.ones(2, dtype=torch.float16), None)
    assert seen[0] == (torch.float32, torch.float64, None, False) and out.dtype == torch.float32
    assert seen[1][:2] == (torch.float32, torch.float16)
    Double.apply(torch.ones(2, dtype=torch.float16), torch.ones(2))  # outside autocast: no cast
    assert seen[2][0] == torch.float16


def test_a_float32_region_needs_autocast_off_and_float_inputs():
    assert right("02_autocast", "disable-region") == [
        "Nest torch.autocast(device_type, enabled=False).",
        "Cast the region's inputs to float32 with .float().",
    ]
    layer = torch.nn.Linear(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = layer(torch.randn(2, 4))
        assert layer.weight.dtype == torch.float32  # model.float() would change nothing
        with torch.autocast("cpu", enabled=False):
            assert (h @ h.t()).dtype == torch.bfloat16  # autocast off alone: still 16 bits
            with pytest.raises(RuntimeError):
                layer(h)  # bf16 activations against fp32 weights
            assert layer(h.float()).dtype == torch.float32


# 03_grad_scaler


def test_loss_scaling_rescues_small_gradients_without_changing_the_update():
    assert right("03_grad_scaler", "why-scale") == [
        "So that small gradients do not round to 0 in fp16."
    ]
    assert cast(1e-8, torch.float16) == 0 and cast(1e-8 * 2**16, torch.float16) != 0
    updates = []
    for enabled in (False, True):
        w = torch.nn.Parameter(torch.ones(2))
        scaler = torch.amp.GradScaler("cpu", enabled=enabled)
        scaler.scale((w * 3.0).sum()).backward()
        scaler.step(torch.optim.SGD([w], lr=0.1))
        updates.append(w.detach().clone())
    assert torch.equal(*updates)  # gradients unscaled first: no larger learning rate


def steps(bad, growth_interval=2000):
    """Two SGD optimizers sharing a GradScaler; ``bad`` names those whose grads hold inf.
    Returns (optimizers whose step ran, scale before, scale after)."""
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval)
    weights = {name: torch.nn.Parameter(torch.ones(1)) for name in "AB"}
    ran, before = [], scaler.get_scale()
    loss = sum(w.sum() * (float("inf") if n in bad else 1.0) for n, w in weights.items())
    scaler.scale(loss).backward()
    for name, w in weights.items():
        optimizer = torch.optim.SGD([w], lr=0.1)
        optimizer.register_step_post_hook(lambda *_, name=name: ran.append(name))
        scaler.step(optimizer)
    scaler.update()
    return ran, before, scaler.get_scale()


def test_a_lower_scale_means_some_optimizer_skipped_and_hooks_tell_which():
    assert right("03_grad_scaler", "detect-skip") == [
        "At least one of A and B skipped; a step post-hook on each tells which."
    ]
    ran, before, after = steps(bad="A")
    assert after < before and ran == ["B"]  # one skipped, not both
    ran, before, after = steps(bad="", growth_interval=1)
    assert after > before and ran == ["A", "B"]  # growth_interval raises the scale
    assert not hasattr(torch.amp.GradScaler("cpu"), "skipped")


def test_a_disabled_scaler_is_a_pass_through_and_bf16_needs_no_scaling():
    assert right("03_grad_scaler", "bf16-scaler") == [
        "Create it with enabled=False, or leave it out."
    ]
    # bf16 underflows where fp32 does; a power-of-two scale adds no mantissa bits.
    assert torch.finfo(torch.bfloat16).smallest_normal == torch.finfo(torch.float32).smallest_normal
    x = torch.tensor(1.2345e-3).bfloat16()
    assert torch.equal((x.float() * 2**10).bfloat16(), x * 2**10)
    w = torch.nn.Parameter(torch.ones(2))
    scaler, loss = torch.amp.GradScaler("cpu", enabled=False), w.sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.step(torch.optim.SGD([w], lr=0.5))
    assert torch.equal(w.detach(), torch.full((2,), 0.5))


def test_gradscaler_backs_off_by_half_and_resets_the_growth_count():
    assert right("03_grad_scaler", "backoff-rule") == [
        "Halves the scale and resets the count of clean steps."
    ]
    w = torch.nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([w], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", growth_interval=2)
    for factor, scale in ((1.0, 2.0**16), (float("inf"), 2.0**15), (1.0, 2.0**15)):
        optimizer.zero_grad()
        scaler.scale(w.sum() * factor).backward()
        scaler.step(optimizer)
        scaler.update()  # no raise
        assert scaler.get_scale() == scale  # the clean step after the inf does not grow it
    assert scaler.state_dict()["_growth_tracker"] == 1
