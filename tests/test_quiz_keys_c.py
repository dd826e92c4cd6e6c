"""Keys of lessons 09-11's and the labs' quiz questions, checked against what they teach.

Each test asserts a question's marked choice(s) by exact text, then shows with the installed torch
(on the CPU, or fake CUDA tensors) or the course's own code (its GPU table, roofline, block
formats, FP8 and NVFP4 emulations) that the marked choice holds and, where cheap, that the others
do not. Questions only a real GPU, Lightning, Hugging Face or torchao could decide are left out.
"""

import contextlib
import io
import math
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import quiz_answers as marked
from conftest import quiz_key
from torch import nn
from torch.utils.checkpoint import checkpoint

from amp_course import block_formats as bf
from amp_course import gpus, nvfp4_training, roofline
from amp_course.autocast_trace import autocast_policy
from amp_course.fp8_recipes import DelayedScaling

L09, L10, L11 = "09_beyond_autocast", "10_where_time_goes", "11_below_bf16"
LAB_BEYOND, LAB_BUGS = "labs_beyond_autocast", "labs_bug_hunts"
H100 = gpus.GPUS["H100 SXM"]
BF16 = torch.bfloat16


def saved_tensors(fn):
    """The distinct tensors (by storage) autograd saves for backward while ``fn`` runs."""
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = t
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return list(seen.values())


def scaler_step(scaler, optimizer, loss):
    """One scaled step; True where the scaler skipped it (its scale backed off)."""
    optimizer.zero_grad()
    scale = scaler.get_scale()
    scaler.scale(loss()).backward()
    scaler.step(optimizer)
    scaler.update()
    return scaler.get_scale() < scale


# Lesson 09: beyond autocast


def test_a_checkpointed_block_keeps_its_input_and_recomputes_only_itself():
    assert marked(L09, "checkpoint-keeps") == [
        "Its input; everything else is recomputed in backward"
    ]
    stem, block = nn.Linear(8, 8), nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
    h = stem(torch.randn(4, 8))
    assert len(saved_tensors(lambda: block(h))) > 1  # without the checkpoint: much more
    runs, outs = [], []
    for module in (stem, block):
        module.register_forward_pre_hook(lambda m, args: runs.append((m, args[0].data_ptr())))
    kept = saved_tensors(lambda: outs.append(checkpoint(block, h, use_reentrant=False)))
    assert [t.data_ptr() for t in kept] == [h.data_ptr()]  # the block's input alone
    outs[0].sum().backward()
    assert runs == [(block, h.data_ptr())] * 2  # rerun: this block on its kept input, not the stem


def test_flash_and_cudnn_attention_refuse_fp32_on_a_cuda_gpu():
    assert marked(L09, "flash-fp32") == ["Flash attention (and cuDNN attention)"]
    for capability in [(8, 0), (9, 0), (12, 0)]:
        assert gpus.attention_kernels("fp32", capability) == ("efficient", "math")


def test_autocast_hands_sdpa_bf16_inputs_on_cuda():
    assert marked(L09, "sdpa-autocast") == [
        "SDPA is on autocast's lower-precision list, so q, k, v reach it in bf16"
    ]
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert autocast_policy("scaled_dot_product_attention", "cuda") == "lower"
    assert not gpus.attention_takes("flash", "fp32", (9, 0))
    before = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
    with FakeTensorMode(allow_non_fake_inputs=True):  # CUDA tensors without a GPU
        q = torch.ones(1, 2, 8, 16, device="cuda")
        torch.set_autocast_enabled("cuda", True)
        torch.set_autocast_dtype("cuda", BF16)
        try:
            out = F.scaled_dot_product_attention(q, q, q)
        finally:
            torch.set_autocast_enabled("cuda", before[0])
            torch.set_autocast_dtype("cuda", before[1])
    assert out.dtype == BF16 and q.dtype == torch.float32  # q itself stays fp32


def test_pure_bf16_keeps_no_fp32_activations_and_fewer_bytes():
    assert marked(L09, "pure-bf16-activations") == [
        "They shrink, since the tensors autocast kept in fp32 are now bf16 too"
    ]
    from torchvision.models.vision_transformer import EncoderBlock

    block, x = EncoderBlock(4, 64, 128, 0.0, 0.0), torch.randn(2, 17, 64, requires_grad=True)
    with torch.autocast("cpu", dtype=BF16):
        mixed = saved_tensors(lambda: block(x))
    pure = saved_tensors(lambda: block.to(BF16)(x.detach().to(BF16).requires_grad_()))

    def activation_bytes(saved, dtype=None):  # tensors of the batch's tokens, not weights
        acts = [t for t in saved if t.shape[0] in (2, 2 * 17)]
        return sum(t.nbytes for t in acts if dtype in (None, t.dtype))

    assert activation_bytes(mixed, torch.float32) > activation_bytes(pure, torch.float32)
    assert activation_bytes(pure) < activation_bytes(mixed)


def test_fusion_skips_the_rounding_between_pointwise_ops():
    assert marked(L09, "compile-emulate-casts") == [
        "It fused pointwise ops, keeping fp32 between them instead of rounding after each."
    ]
    import torch._inductor.config as inductor

    config = Path(inductor.__file__).read_text()
    assert "Inductor will elide the downcast-upcast pairs" in config
    assert inductor.emulate_precision_casts is False  # off by default: compile rounds less
    x = torch.randn(4096).to(BF16)
    eager = (x * 1.1).add(0.3)  # rounds to bf16 after each op
    fused = (x.float() * 1.1 + 0.3).to(BF16)  # rounds once
    assert 0 < (eager != fused).float().mean() < 1


def test_the_recompute_replays_the_forwards_autocast_dtype():
    assert marked(L09, "recompute-dtype") == [
        "bf16: the checkpoint restores the forward's autocast state"
    ]
    first, second, dtypes = nn.Linear(8, 8), nn.Linear(8, 8), []

    def block(x):
        hidden = first(x)
        dtypes.append(hidden.dtype)
        return second(hidden.relu()).float()  # fp32 out: the incoming gradient is fp32

    with torch.autocast("cpu", dtype=torch.float16):
        out = checkpoint(block, torch.randn(4, 8, requires_grad=True), use_reentrant=False)
    assert not torch.is_autocast_enabled("cpu")
    out.sum().backward()
    assert dtypes == [torch.float16, torch.float16]  # fp16 here: CPU's default is bf16


def test_checkpointing_every_block_adds_under_a_third_of_the_flops():
    assert marked(L09, "checkpoint-cost") == [
        "Fewer than a third more FLOPs; the time change must be measured per device"
    ]
    from torch.utils.flop_counter import FlopCounterMode

    from amp_course.checkpointing import checkpoint_blocks
    from amp_course.models import build_vit

    def step_flops(model):
        with FlopCounterMode(display=False) as counter:
            model(torch.randn(2, 1, 28, 28)).sum().backward()
        return counter.get_total_flops()

    model = build_vit("tiny")
    plain = step_flops(model)
    extra = step_flops(checkpoint_blocks(model)) / plain - 1
    assert 0.1 < extra < 1 / 3


def test_a_t4_has_the_memory_efficient_kernel_and_math_for_fp16():
    assert marked(L09, "sdpa-t4") == ["The memory-efficient kernel or the math backend"]
    assert gpus.GPUS["T4"].capability == (7, 5)
    assert gpus.attention_kernels("fp16", (7, 5)) == ("efficient", "math")


def test_fp8_tensor_cores_start_at_compute_capability_8_9():
    assert marked(L09, "fp8-hardware") == [
        "Compute capability 8.9 and above (Ada, Hopper, Blackwell)"
    ]
    assert gpus.tensor_cores_from("fp8") == (8, 9)
    assert not gpus.has_tensor_cores((8, 0), "fp8") and gpus.has_tensor_cores((8, 0), "bf16")
    assert all(gpus.has_tensor_cores(c, "fp8") for c in [(8, 9), (9, 0), (10, 0)])


def test_only_compensation_or_stochastic_rounding_keep_small_updates():
    assert marked(L09, "fix-lost-updates") == [
        "Kahan-compensated updates",
        "Stochastic rounding of the write-back",
    ]
    steps, update = 100, 1e-3  # an fp32 update, under half a bf16 step at 1.0
    plain = kahan = torch.ones(4096, dtype=BF16)
    compensation = torch.zeros_like(kahan)
    rounded, generator = torch.ones(4096), torch.Generator().manual_seed(0)
    for _ in range(steps):
        plain = (plain.float() + update).to(BF16)  # fp32 math, round-to-nearest write-back
        y = update - compensation.float()
        new = (kahan.float() + y).to(BF16)
        compensation, kahan = ((new.float() - kahan.float()) - y).to(BF16), new
        rounded = nvfp4_training.stochastic_round_to_grid(rounded + update, 8, 7, generator)
    assert plain.eq(1).all()  # every update lost
    assert kahan.float().mean() == pytest.approx(1.1, abs=0.01)
    assert rounded.mean() == pytest.approx(1.1, abs=0.01)
    # A GradScaler unscales before the step: a larger init_scale leaves the update as it was.
    grads = []
    for init_scale in (2.0**16, 2.0**24):
        p = nn.Parameter(torch.ones(1))
        scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
        optimizer = torch.optim.SGD([p], lr=1.0)
        scaler.scale(p.sum() * update).backward()
        scaler.unscale_(optimizer)
        grads.append(p.grad.item())
    assert grads[0] == grads[1] == pytest.approx(update)


# Lesson 10: where the time goes


def test_a_layer_norm_sits_far_below_both_ridges():
    assert marked(L10, "layernorm-regime") == [
        "Memory-bound: its bytes set its time, so fusion helps it and tensor cores do not."
    ]
    roof = roofline.published(H100.device_name, ("fp32", "bf16"))
    assert roof.ridge("fp32") == pytest.approx(20, abs=0.5)
    assert roof.ridge("bf16") == pytest.approx(295, abs=1)
    intensity = 10 / (4 + 4)  # ~10 FLOPs per element over an fp32 read and write
    assert roof.regime(intensity, "fp32") == roof.regime(intensity, "bf16") == "memory-bound"
    assert intensity < roof.ridge("fp32") / 10


def test_4095_has_4096s_tiles_but_unaligned_bf16_rows():
    assert marked(L10, "unaligned-4095") == [
        "Its bf16 rows are not 16-byte aligned, so cuBLAS falls back to slower kernels."
    ]
    assert math.ceil(4095 / 128) == 4096 // 128 == 32  # same tiles, same waves
    assert (4095 * 2) % 16 and not (4096 * 2) % 16  # bf16 rows: 8190 bytes against 8192
    with torch.autocast("cpu", dtype=BF16):  # autocast looks at the op, not its shape
        assert (torch.randn(15, 15) @ torch.randn(15, 15)).dtype == BF16
    assert autocast_policy("mm", "cuda") == "lower"


def test_only_compute_bound_work_gains_the_tensor_core_peak_ratio():
    assert marked(L10, "peak-ratio") == [
        "Only the matmuls gain the peak ratio; memory-bound kernels and launch gaps gain far less."
    ]
    roof = roofline.published(H100.device_name, ("fp32", "bf16"))
    assert H100.peak("bf16") / H100.peak("fp32") == pytest.approx(15, abs=0.5)
    fp32_s = 1 / roof.attainable(1.0, "fp32")  # a memory-bound op: 1 FLOP per fp32 byte
    bf16_s = 1 / roof.attainable(2.0, "bf16")  # the same op on bf16: half the bytes
    assert fp32_s / bf16_s == pytest.approx(2)
    assert autocast_policy("linear", "cuda") == "lower"  # Linear does run in bf16


def test_4104_needs_a_ninth_wave_on_a_quarter_of_the_sms():
    assert marked(L10, "wave-4104") == [
        "33 x 33 tiles take 9 waves, the last on a quarter of the SMs; 32 x 32 take 8."
    ]
    sms = H100.sms
    assert sms == 132
    tiles = {n: math.ceil(n / 128) ** 2 for n in (4096, 4104)}
    assert tiles == {4096: 1024, 4104: 1089}
    assert {n: math.ceil(t / sms) for n, t in tiles.items()} == {4096: 8, 4104: 9}
    assert tiles[4104] - 8 * sms == sms // 4
    assert 4104 % 8 == 0  # aligned: bf16 rows of 8208 bytes


def test_torchvisions_attention_adds_copies_not_other_kernels():
    assert marked(L10, "same-flops-more-bytes") == [
        "nn.MultiheadAttention is sequence first inside a batch-first model, "
        "so it copies q, k, v and their gradients."
    ]
    from amp_course.models import build_vit
    from amp_course.step_account import account_step, differences, kind_of

    def account(lean):
        build = lambda: build_vit("tiny", num_layers=1, lean=lean)  # noqa: E731
        return account_step(build, 2, channels=1, num_classes=10)

    torchvision, timm_like = account(False), account(True)
    extra = {d.name: d for d in differences(torchvision, timm_like)}
    assert extra["clone.default"].calls > 0 and torchvision.bytes > timm_like.bytes
    assert not [n for n in extra if kind_of(n) == "attention" or "layer_norm" in n]
    assert not [n for n in torchvision.by_name() if "dropout" in n or "bernoulli" in n]


def test_batch_size_and_the_16_bit_format_leave_the_launches_alike():
    assert marked(L10, "launch-bound-fixes") == [
        "A larger batch.",
        'CUDA graphs: torch.compile(mode="reduce-overhead").',
        "Fusion with torch.compile.",
    ]
    from amp_course.models import build_vit
    from amp_course.step_account import account_step

    def launches(batch, precision):
        build = lambda: build_vit("tiny", num_layers=1)  # noqa: E731
        return len(account_step(build, batch, precision=precision, channels=1, num_classes=10).ops)

    # A batch 8 times larger: the same launches, each with 8 times the work to hide them;
    # fp16 only adds its GradScaler's kernels.
    assert launches(8, "bf16") == launches(64, "bf16") < launches(8, "fp16")


# Lesson 11: below bf16


def test_delayed_scaling_saturates_a_jump_and_learns_it_next_step():
    assert marked(L11, "delayed-jump") == [
        "They saturate at the format's largest value; the next steps' scale includes this amax."
    ]
    recipe, x = DelayedScaling(bf.E4M3, history_len=16), torch.linspace(-1, 1, 65)
    for _ in range(16):
        recipe.roundtrip(x)
    y, saturated = recipe.roundtrip(3 * x)
    above = (3 * x).abs() > 1
    assert saturated == int(above.sum()) > 0
    assert y[above].abs().eq(1).all()  # at the history's amax: the format's largest value
    assert recipe.amax(x) == pytest.approx(3)


def test_rceil_scales_never_clamp_and_double_floors_where_they_differ():
    assert marked(L11, "rceil-vs-floor") == [
        "It never clamps; where the rules differ, its scale is twice floor's."
    ]
    element = bf.E2M1
    blocks = bf.split_blocks(
        torch.randn(256, 64, generator=torch.Generator().manual_seed(0)), 32, ""
    )
    amax = blocks.abs().amax(-1, keepdim=True)
    floor, rceil = (bf.mx_scale_exponents(amax, element, r) for r in ("floor", "rceil"))
    assert set((rceil - floor).unique().tolist()) == {0.0, 1.0}  # never equal everywhere
    assert (floor == floor.round()).all()  # powers of two, not E4M3 numbers
    assert (amax / torch.exp2(floor) > element.max).any()
    assert (amax / torch.exp2(rceil) <= element.max).all()
    same = (rceil == floor).reshape(256, 2).repeat_interleave(32, dim=1)
    x = blocks.flatten(1)
    assert bf.block_roundtrip(x, "mxfp4", scale_rounding="rceil")[same].equal(
        bf.block_roundtrip(x, "mxfp4")[same]  # same scale, same element rounding
    )


def test_nvfp4_weight_tiles_make_the_transpose_hold_the_same_numbers():
    assert marked(L11, "nvfp4-weight-tiles") == [
        "The forward GEMM's weight and the backward's transposed copy hold the same numbers."
    ]
    w = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    assert nvfp4_training.transpose_mismatch(w, (16, 16)) == 0
    assert nvfp4_training.transpose_mismatch(w, (1, 16)) > 0.1
    errors = [
        bf.relative_error(w, nvfp4_training.nvfp4_roundtrip(w, t)) for t in [(16, 16), (1, 16)]
    ]
    assert errors[0] > errors[1]  # tiles cost accuracy: it is not what they buy


def test_mfu_of_a_mixed_fp8_step_depends_on_the_peak():
    assert marked(L11, "mfu-under-fp8") == [
        "Little: it depends on which peak divides it, and no single peak fits a mixed step."
    ]
    peaks = {p: H100.peak(p) for p in ("bf16", "fp8")}
    achieved = 0.55 * peaks["bf16"]
    mixed = nvfp4_training.mixed_peak({"fp8": 0.8, "bf16": 0.2}, peaks)
    readings = [achieved / peaks["bf16"], achieved / peaks["fp8"], achieved / mixed]
    assert readings[1] == pytest.approx(0.275, abs=0.001)
    assert readings[0] > readings[2] > readings[1]  # three peaks, three MFUs


# Labs: beyond autocast


_PROBED = []  # the dtypes the custom op below received


@torch.library.custom_op("quiz_keys_c::probe", mutates_args=())
def _probe(x: torch.Tensor) -> torch.Tensor:
    _PROBED.append(x.dtype)
    return x.clone()


def test_autocast_leaves_a_custom_op_its_fp32_inputs():
    assert marked(LAB_BEYOND, "custom-op-fp32") == [
        "autocast casts only the ops on its lists, and a custom op is on none"
    ]
    _PROBED.clear()
    x = torch.randn(4, 4)
    with torch.autocast("cpu", dtype=BF16):
        _probe(x)
        _probe(x.to(BF16))  # nor does torch.library convert bf16 to fp32
        assert torch.is_autocast_enabled("cpu") and (x @ x).dtype == BF16  # still on after it
    assert _PROBED == [torch.float32, BF16]


def test_a_hand_written_recompute_outside_autocast_runs_in_fp32():
    assert marked(LAB_BEYOND, "handwritten-checkpoint") == [
        "The recompute runs in fp32: the gradients are an fp32 network's"
    ]
    from handwritten_checkpoint import recompute_in

    torch.manual_seed(0)
    block, x, dtypes = nn.Linear(8, 8), torch.randn(4, 8, requires_grad=True), []
    block.register_forward_hook(lambda _, __, out: dtypes.append(out.dtype))
    checkpointed = recompute_in(lambda *state: contextlib.nullcontext())
    with torch.autocast("cpu", dtype=BF16):
        out = checkpointed(block, x)
    out.float().sum().backward()  # no CheckpointError: nothing compares the dtypes
    assert dtypes == [BF16, torch.float32]
    grad, x.grad = x.grad, None
    block(x).sum().backward()
    assert torch.equal(grad, x.grad)  # exactly the fp32 network's gradient


def test_only_fp32_or_python_sums_average_bf16_losses():
    assert marked(LAB_BEYOND, "fix-sum") == [
        "total += loss.item() (a Python float)",
        "A float32 running sum: total += loss.float()",
    ]
    losses = (2.3 + 0.2 * torch.randn(4096, generator=torch.Generator().manual_seed(0))).to(BF16)
    true = losses.double().mean().item()
    totals = {"python": 0.0, "fp32": torch.tensor(0.0)}
    totals |= {
        "fp16": torch.tensor(0.0, dtype=torch.float16),
        "bf16": torch.tensor(0.0, dtype=BF16),
    }
    for loss in losses:
        totals["python"] += loss.item()
        totals["fp32"] += loss.float()
        totals["fp16"] += loss
        totals["bf16"] += loss
    means = {k: float(v) / len(losses) for k, v in totals.items()}
    assert means["python"] == pytest.approx(true, rel=1e-6)
    assert means["fp32"] == pytest.approx(true, rel=1e-5)
    assert abs(means["fp16"] / true - 1) > 0.05 and abs(means["bf16"] / true - 1) > 0.05


# Labs: bug hunts


def test_a_second_optimizer_step_applies_the_skipped_inf_gradient():
    assert marked(LAB_BUGS, "extra-step") == [
        "Each iteration steps twice, and a skipped step's inf/NaN gradients get applied."
    ]
    p = nn.Parameter(torch.ones(2))
    optimizer, scaler = torch.optim.SGD([p], lr=0.1), torch.amp.GradScaler("cpu")
    scaler.scale((p * math.inf).sum()).backward()
    scaler.step(optimizer)  # skipped: the gradient is inf
    assert p.eq(1).all()
    optimizer.step()  # no error, no check
    assert not p.isfinite().any()


def test_only_an_fp16_only_scaler_fits_every_loop():
    right = "torch.amp.GradScaler(device.type, enabled=(dtype == torch.float16))"
    assert marked(LAB_BUGS, "bf16-scaler-lab") == [right]
    assert torch.finfo(BF16).max > 1e38  # bf16 has fp32's range: nothing to scale
    device, fits = torch.device("cpu"), []
    for choice in quiz_key(LAB_BUGS, "bf16-scaler-lab"):
        ok = True
        for dtype in (torch.float32, torch.float16, BF16):
            scaler = eval(choice, {"torch": torch, "device": device, "dtype": dtype})
            loss = torch.tensor(2.0)
            usable = scaler is not None and scaler.scale(loss) is not None
            ok &= usable and scaler.is_enabled() == (dtype == torch.float16)
        if ok:
            fits.append(choice)
    assert fits == [right]


def test_unscaling_fails_on_fp16_parameters_not_on_fp16_losses():
    assert marked(LAB_BUGS, "unscale-fp16-grads") == [
        "model.half() made the parameters fp16, so their gradients are fp16."
    ]

    def unscale(model, autocast):
        optimizer, scaler = torch.optim.SGD(model.parameters()), torch.amp.GradScaler("cpu")
        x = torch.randn(2, 4, dtype=next(model.parameters()).dtype)
        with torch.autocast("cpu", dtype=torch.float16, enabled=autocast):
            loss = model(x).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        return loss.dtype, scaler, optimizer

    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        unscale(nn.Linear(4, 4).half(), False)
    loss_dtype, scaler, optimizer = unscale(nn.Linear(4, 4), True)  # an fp16 loss is fine
    assert loss_dtype == torch.float16
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(optimizer)  # twice: another error


def test_the_scheduler_warning_misses_skips_after_the_first_step():
    assert marked(LAB_BUGS, "scheduler-fix") == [
        "Decide whether the schedule counts optimizer updates or iterations, and step it to match."
    ]

    def warnings_per_step(skip):
        p = nn.Parameter(torch.ones(2))
        optimizer, scaler = torch.optim.SGD([p], lr=0.1), torch.amp.GradScaler("cpu")
        scheduler, counts = torch.optim.lr_scheduler.StepLR(optimizer, 1), []
        for step in range(5):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                factor = math.inf if step == skip else 1.0
                skipped = scaler_step(scaler, optimizer, lambda: (p * factor).sum())  # noqa: B023
                scheduler.step()
            counts.append(sum("lr_scheduler.step()" in str(w.message) for w in caught))
            assert skipped == (step == skip)
        return counts

    assert warnings_per_step(0) == [1, 0, 0, 0, 0]
    assert warnings_per_step(3) == [0, 0, 0, 0, 0]  # a skipped step, and no warning


def test_a_resume_without_the_scalers_state_backs_off_again():
    assert marked(LAB_BUGS, "resume-symptom") == [
        "The checkpoint lacked the scaler's state, so the scale restarted at init_scale."
    ]

    def skips(scaler, steps=10):  # a fresh parameter and optimizer: no momentum kept
        p = nn.Parameter(torch.ones(1))
        optimizer = torch.optim.SGD([p], lr=1e-40, momentum=0.9)
        return sum(scaler_step(scaler, optimizer, lambda: (p * 1e35).sum()) for _ in range(steps))

    first = torch.amp.GradScaler("cpu")  # 1e35 x scale overflows fp32 above a scale of ~3400
    assert skips(first) == 5 and first.get_scale() == 2048
    resumed = torch.amp.GradScaler("cpu")
    resumed.load_state_dict(first.state_dict())
    assert skips(resumed) == 0 and skips(torch.amp.GradScaler("cpu")) == 5
    buffer = io.BytesIO()
    torch.save(nn.Linear(2, 2).state_dict(), buffer)
    buffer.seek(0)
    assert all(t.dtype == torch.float32 for t in torch.load(buffer).values())  # dtypes kept
