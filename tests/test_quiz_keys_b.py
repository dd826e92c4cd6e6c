"""The keys of lessons 04-08's choice questions about facts, checked on this CPU.

Each test asserts a question's marked choice(s) by exact text, then shows with the installed
torch (GradScaler on CPU, anomaly mode, FSDP2 on a fake process group, the backends' flags) or
the course's own helpers (ac.stats, ac.debug, ac.device, ac.memory) that the marked choice holds
and, where cheap, that the others do not. Questions only a GPU's timings decide (launch-bound
steps, tensor-core shapes, unsynchronised timers, warm-up) and design advice (one scaler per DDP
process, DDP's identical replicas) are left out.
"""

import copy
import dataclasses
import subprocess
import sys
import warnings

import pytest
import torch
import torch.distributed as dist
from conftest import quiz_answers as marked
from torch.amp import GradScaler
from torch.nn.utils import clip_grad_norm_

from amp_course import cpu, precisions, stats
from amp_course.debug import ActivationWatch, Fp32Region
from amp_course.device import recommended_precision
from amp_course.memory.account import saved_tensor_bytes, training_memory
from amp_course.paths import ROOT
from amp_course.recipe import AmpRecipe
from amp_course.timing import Comparison

L04, L05, L06, L07, L08 = (
    "04_training_loops",
    "05_speed_memory",
    "06_debugging_nan",
    "07_multi_gpu",
    "08_capstone",
)
INF = float("inf")


# --- lesson 04 and the capstone's recap: the GradScaler's calls -------------------------------


def test_accumulation_unscales_once_after_the_last_micro_batch():
    assert marked(L04, "accumulation-calls") == [
        "Once each per optimizer step, after the 4th backward."
    ]
    w = torch.nn.Parameter(torch.ones(2))
    opt, scaler = torch.optim.SGD([w], lr=0.1), GradScaler("cpu")
    for _ in range(4):
        scaler.scale(w.sum()).backward()
    scaler.unscale_(opt)
    assert torch.equal(w.grad, torch.full((2,), 4.0))  # the 4 micro-batches' gradients, summed
    with pytest.raises(RuntimeError, match=r"unscale_\(\) has already been called"):
        scaler.unscale_(opt)  # a second unscale_ before update() is refused
    scaler.step(opt)
    scaler.update()
    assert torch.allclose(w.detach(), torch.full((2,), 0.6))


def test_autograd_grad_of_a_scaled_loss_must_be_divided_by_the_scale():
    assert marked(L04, "penalty-unscale") == ["Divide it by scaler.get_scale() before the penalty."]
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    opt, scaler = torch.optim.SGD([w], lr=0.1), GradScaler("cpu", init_scale=1024.0)
    (grad,) = torch.autograd.grad(scaler.scale((w**2).sum() / 2), [w], create_graph=True)
    assert grad.norm().item() == 1024 * 5  # the norm carries the scale: not invariant
    scaler.unscale_(opt)  # acts on w.grad (None here), never on autograd.grad's result
    assert torch.equal(grad.detach(), 1024 * w.detach())
    assert torch.equal(grad.detach() / scaler.get_scale(), w.detach())  # the true gradient


def sgd_step(*calls: str) -> torch.Tensor:
    """Weights after one fp16-style step of 0.5|w|^2 from w = (3, 4), lr 1, clipping to norm 1,
    with the scaler's calls in ``calls``' order. Clipped right, the step is w - (0.6, 0.8)."""
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    opt, scaler = torch.optim.SGD([w], lr=1.0), GradScaler("cpu", init_scale=1024.0)
    scaler.scale((w**2).sum() / 2).backward()
    actions = {
        "unscale_": lambda: scaler.unscale_(opt),
        "clip": lambda: clip_grad_norm_([w], 1.0),
        "step": lambda: scaler.step(opt),
        "update": scaler.update,
    }
    for call in calls:
        actions[call]()
    return w.detach()


CLIPPED = torch.tensor([2.4, 3.2])


def test_clipping_works_only_between_unscale_and_step():
    assert marked(L04, "clip-order") == ["After scaler.unscale_(optimizer), before scaler.step()."]
    assert torch.allclose(sgd_step("unscale_", "clip", "step", "update"), CLIPPED)
    assert not torch.allclose(sgd_step("step", "clip", "update"), CLIPPED)  # clipped too late
    assert not torch.allclose(sgd_step("clip", "unscale_", "step", "update"), CLIPPED)


def test_capstone_clip_order_is_backward_unscale_clip_step_update():
    assert marked(L08, "clip-order") == [
        "scale(loss).backward(), unscale_(opt), clip, step(opt), update()"
    ]
    assert torch.allclose(sgd_step("unscale_", "clip", "step", "update"), CLIPPED)
    assert not torch.allclose(sgd_step("clip", "step", "update"), CLIPPED)
    assert not torch.allclose(sgd_step("clip", "unscale_", "step", "update"), CLIPPED)


def test_one_scaler_skips_only_the_optimizer_with_the_inf_and_backs_off_once():
    assert marked(L04, "multi-optimizer") == ["A steps, B skips, and the scale is reduced once."]
    a, b = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    opt_a, opt_b = torch.optim.SGD([a], lr=0.5), torch.optim.SGD([b], lr=0.5)
    scaler = GradScaler("cpu", init_scale=8.0)
    scaler.scale(a.sum() + b.sum() * INF).backward()
    scaler.step(opt_a)
    scaler.step(opt_b)
    scaler.update()
    assert (a.item(), b.item(), scaler.get_scale()) == (0.5, 1.0, 4.0)


def fp16_run(steps: int = 6, resume_at: int | None = None, restore=("model", "optim", "scaler")):
    """Weights and scale after an Adam run whose backward passes fp16 (scaled gradients above 64
    overflow; the scale grows every 2 clean steps), interrupted and resumed at ``resume_at`` from
    a checkpoint of ``restore``: what is not restored starts afresh (the scaler from get_scale)."""

    def fresh(scale=64.0):
        w = torch.nn.Parameter(torch.randn(4))
        return w, torch.optim.Adam([w], lr=0.1), GradScaler("cpu", scale, growth_interval=2)

    torch.manual_seed(0)
    w, opt, scaler = fresh()
    for step in range(steps):
        if step == resume_at:
            saved = copy.deepcopy((w.detach(), opt.state_dict(), scaler.state_dict()))
            new_w, new_opt, new_scaler = fresh(scaler.get_scale())
            if "model" in restore:
                new_w.data.copy_(saved[0])
            if "optim" in restore:
                new_opt.load_state_dict(saved[1])
            if "scaler" in restore:
                new_scaler.load_state_dict(saved[2])
            w, opt, scaler = new_w, new_opt, new_scaler
        opt.zero_grad()
        scaler.scale((w.half() * 1000).float().sum() + (w**2).sum()).backward()
        scaler.step(opt)
        scaler.update()
    return w.detach(), scaler.get_scale()


def same_run(a, b) -> bool:
    return torch.equal(a[0], b[0]) and a[1] == b[1]


def test_an_exact_resume_needs_the_model_optimizer_and_scaler_state_dicts():
    assert marked(L04, "resume-state") == [
        "model.state_dict()",
        "optimizer.state_dict()",
        "scaler.state_dict()",
    ]
    whole = fp16_run()
    assert same_run(fp16_run(resume_at=1), whole)
    for missing in ("model", "optim", "scaler"):  # scaler: only get_scale() kept
        kept = {"model", "optim", "scaler"} - {missing}
        assert not same_run(fp16_run(resume_at=1, restore=kept), whole), missing


def test_a_resume_without_the_scaler_state_dict_differs_while_fp16_reproduces():
    assert marked(L08, "resume-scaler") == ["scaler.state_dict()"]
    assert same_run(fp16_run(), fp16_run())  # fp16 reruns are bit-identical here
    assert not same_run(fp16_run(resume_at=1, restore=("model", "optim")), fp16_run())


# --- lesson 05 and the capstone: CPU bf16 and TF32 ------------------------------------------


def bf16_linear_is_fp32_arithmetic_on_bf16_values() -> torch.Tensor:
    """CPU bf16 autocast runs the Linear in bf16, and its result is fp32 arithmetic on the
    bf16-rounded operands rounded back; the course knows no native bf16 on an AVX2 CPU."""
    torch.manual_seed(0)
    lin, x = torch.nn.Linear(64, 64), torch.randn(8, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = lin(x)
    as_fp32 = torch.nn.functional.linear(*(t.bfloat16().float() for t in (x, lin.weight, lin.bias)))
    assert torch.allclose(y.float(), as_fp32, rtol=2**-7, atol=1e-3)
    assert not cpu.has_native(precisions.BF16, frozenset({"avx", "avx2", "fma"}))
    assert cpu.has_native(precisions.BF16, frozenset({"avx2", "avx512_bf16"}))
    return y


def test_cpu_bf16_without_native_instructions_is_emulated():
    assert marked(L05, "cpu-bf16-slow") == [
        "Without native bf16 instructions, every op converts to fp32 and back: bf16 is emulated."
    ]
    assert bf16_linear_is_fp32_arithmetic_on_bf16_values().dtype == torch.bfloat16  # not ignored


def test_capstone_cpu_bf16_is_emulated_not_wider_nor_fp16():
    assert marked(L08, "cpu-bf16-slow") == [
        "bf16 is emulated: converted to fp32 and back around the arithmetic"
    ]
    assert bf16_linear_is_fp32_arithmetic_on_bf16_values().dtype == torch.bfloat16  # no fp16
    assert torch.bfloat16.itemsize < torch.float32.itemsize  # half the bytes to move


def test_a_fresh_torch_uses_tf32_for_cudnn_convolutions_only():
    assert marked(L05, "tf32-default") == [
        "cuDNN convolutions; matmuls stay strict fp32 until you switch TF32 on."
    ]
    fresh = subprocess.run(
        [sys.executable, "-c", "from amp_course import recipe; print(recipe.tf32_enabled())"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert fresh.stdout.strip() == "{'matmul': False, 'conv': True}"


# --- lesson 06: NaN hunting -------------------------------------------------------------------


def test_bf16_activations_above_65504_overflow_fp16():
    assert marked(L06, "bf16-model-fp16") == [
        "Its activations can exceed fp16's largest value, 65504"
    ]
    assert torch.finfo(torch.float16).max == 65504
    big = torch.tensor(1e5)
    assert big.bfloat16().isfinite() and big.half().isinf()
    assert torch.finfo(torch.float16).eps < torch.finfo(torch.bfloat16).eps  # fp16: more mantissa
    fp16_model = torch.nn.Linear(2, 2).half()
    fp16_model.load_state_dict(torch.nn.Linear(2, 2).bfloat16().state_dict())  # loads fine
    assert fp16_model.weight.dtype == torch.float16


def zero_row_penalty() -> tuple[torch.Tensor, torch.nn.Parameter]:
    """features.pow(2).sum(dim=1).sqrt().mean() in fp32, one sample's features all zero."""
    w = torch.nn.Parameter(torch.ones(3, 4))
    features = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]) @ w
    return features.pow(2).sum(dim=1).sqrt().mean(), w


def test_detect_anomaly_names_the_backward_op_that_made_the_nan():
    assert marked(L06, "anomaly") == ["torch.autograd.detect_anomaly()"]
    model = torch.nn.Sequential(torch.nn.Linear(3, 4))
    with ActivationWatch(model) as watch:
        model(torch.zeros(2, 3))
    loss, w = zero_row_penalty()
    assert loss.isfinite() and watch.first_nonfinite is None  # forward hooks see nothing wrong
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anomaly mode warns that it is on, and where it stopped
        with (
            torch.autograd.detect_anomaly(),
            pytest.raises(RuntimeError, match="Function 'PowBackward0' returned nan"),
        ):
            loss.backward()


def test_sqrt_backward_at_zero_is_inf_and_pow_backward_turns_it_into_nan():
    assert marked(L06, "sqrt-backward") == [
        "sqrt's backward at 0 is inf, and pow(2)'s backward multiplies it by 0: inf times 0 is NaN"
    ]
    zero = torch.zeros((), requires_grad=True)
    zero.sqrt().backward()
    assert torch.sqrt(torch.tensor(0.0)) == 0 and zero.grad == INF  # forward fine, backward inf
    assert (INF * torch.tensor(0.0)).isnan()
    loss, w = zero_row_penalty()
    assert loss.isfinite() and loss.item() < 1e3  # mean over 2 rows, no overflow anywhere
    loss.backward()
    assert w.grad.isnan().any()


def test_the_course_trains_in_fp32_where_bf16_measured_slower():
    assert marked(L06, "cpu-measured") == ["fp32: bf16 measured slower there"]
    slower = Comparison("fp32", "bf16", ratio=1.4, distinguishable=True)
    faster = Comparison("fp32", "bf16", ratio=0.7, distinguishable=True)
    assert recommended_precision(None, cpu_bf16=slower) is precisions.FP32
    assert recommended_precision(None, cpu_bf16=faster) is precisions.BF16


class OneInf(torch.nn.Module):
    """Overflows one value of its input: the culprit."""

    def forward(self, x):
        return x.index_fill(1, torch.tensor([0]), INF)


def culprit_model() -> torch.nn.Sequential:
    torch.manual_seed(0)
    lin = torch.nn.Linear
    return torch.nn.Sequential(
        torch.nn.Sequential(lin(4, 4), OneInf()), lin(4, 4), lin(4, 4), lin(4, 4)
    )


def nonfinite_reports() -> list:
    model = culprit_model()
    with ActivationWatch(model) as watch:
        model(torch.randn(2, 4))
    return watch.nonfinite


def test_the_first_nonfinite_report_is_the_one_to_fix():
    assert marked(L06, "first-not-last") == [
        "The first one reported (a forward hook fires when its module finishes)"
    ]
    reports = nonfinite_reports()
    worst = max(reports, key=lambda r: r.num_inf + r.num_nan)
    assert reports[0].name == "0.1" and reports[-1].name == "" and worst.name != "0.1"


def test_the_first_report_is_the_innermost_culprit():
    assert marked(L08, "first-nan-module") == [
        "The innermost module that produced the first non-finite output"
    ]
    reports = nonfinite_reports()
    assert [r.name for r in reports[:2]] == ["0.1", "0"]  # inner OneInf before its parent
    assert reports[0].num_inf + reports[0].num_nan < max(r.num_inf + r.num_nan for r in reports)


def fp16_skips(init_scale: float, steps: int = 12) -> tuple[int, float]:
    """Skipped steps and final scale when scaled gradients above 64 x 1000 overflow fp16."""
    w = torch.nn.Parameter(torch.zeros(1))
    opt, scaler = torch.optim.SGD([w], lr=0.1), GradScaler("cpu", init_scale=init_scale)
    skipped = 0
    for _ in range(steps):
        opt.zero_grad()
        before = scaler.get_scale()
        scaler.scale((w.half() * 1000).float().sum()).backward()
        scaler.step(opt)
        scaler.update()
        skipped += scaler.get_scale() < before
    return skipped, scaler.get_scale()


def test_a_lower_init_scale_skips_fewer_first_steps_and_from_64_none():
    assert marked(L06, "init-scale") == [
        "Fewer of the first steps overflow and are skipped; from 64 or below, none"
    ]
    assert fp16_skips(2.0**16) == (10, 64.0)  # the question's 10 skipped, halving steps
    assert fp16_skips(2.0**10) == (4, 64.0)  # fewer, and the same scale afterwards
    assert fp16_skips(64.0) == (0, 64.0) and fp16_skips(32.0) == (0, 32.0)


def test_bf16_or_an_fp32_span_fix_an_fp16_forward_overflow_a_scaler_or_half_do_not():
    assert marked(L06, "fixes") == [
        "Autocast to bf16 instead of fp16",
        "Run the span from where values pass 65504 until they are back in range "
        "(e.g. the whole MLP) in fp32, autocast off",
    ]
    lin, x = torch.nn.Linear(1, 1), torch.tensor([[100.0]])
    with torch.no_grad():
        lin.weight.fill_(1000.0), lin.bias.zero_()  # an output of 1e5
    outputs = {}
    for name, dtype, module in [("fp16", torch.float16, lin), ("bf16", torch.bfloat16, lin)]:
        with torch.autocast("cpu", dtype=dtype):
            outputs[name] = module(x)
    with torch.autocast("cpu", dtype=torch.float16):
        outputs["fp32 span"] = Fp32Region(lin)(x)
    outputs["half"] = copy.deepcopy(lin).half()(x.half())
    finite = {name: bool(y.isfinite().all()) for name, y in outputs.items()}
    assert finite == {"fp16": False, "bf16": True, "fp32 span": True, "half": False}
    # The scaler multiplies the loss after the forward: the overflow is already there.
    assert GradScaler("cpu", init_scale=1.0).scale(outputs["fp16"].float().sum()).isinf()


# --- lesson 07: FSDP2 on a fake 4-rank process group ------------------------------------------

WORLD = 4


@pytest.fixture(scope="module")
def mesh():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=WORLD, store=FakeStore())
    yield init_device_mesh("cpu", (WORLD,))
    dist.destroy_process_group()


def sharded_step(mesh, monkeypatch, **policy):
    """fully_shard a 2-layer MLP under MixedPrecisionPolicy(**policy), run a forward, backward and
    Adam step; return the model, the output, the optimizer and the collectives' input dtypes."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    calls = []
    for name in ("all_gather_single", "reduce_scatter_single"):
        original = getattr(dist, name)

        def record(*args, _name=name, _original=original, **kwargs):
            tensor = kwargs.get("input", args[1] if len(args) > 1 else None)
            calls.append((_name, tensor.dtype))
            return _original(*args, **kwargs)

        monkeypatch.setattr(dist, name, record)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4))
    fully_shard(model, mesh=mesh, mp_policy=MixedPrecisionPolicy(**policy))
    out = model(torch.randn(3, 8))
    out.float().sum().backward()
    opt = torch.optim.Adam(model.parameters())
    opt.step()
    return model, out, opt, dict(calls)


def test_fsdp2_param_dtype_leaves_the_sharded_parameters_fp32(mesh, monkeypatch):
    assert marked(L07, "optimizer-dtype") == [
        "float32: the sharded parameters keep their original dtype"
    ]
    model, out, _, _ = sharded_step(mesh, monkeypatch, param_dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16  # computed in param_dtype ...
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # ... updated in fp32


def test_fsdp2_reduce_dtype_sets_the_gradient_reduce_scatter_only(mesh, monkeypatch):
    assert marked(L07, "reduce-dtype") == ["The dtype of the gradient reduce-scatter across ranks"]
    for reduce_dtype in (torch.float32, torch.float16):
        _, _, opt, calls = sharded_step(
            mesh, monkeypatch, param_dtype=torch.bfloat16, reduce_dtype=reduce_dtype
        )
        assert calls == {"all_gather_single": torch.bfloat16, "reduce_scatter_single": reduce_dtype}
        assert {s["exp_avg"].dtype for s in opt.state.values()} == {torch.float32}


def test_fsdp2_shards_weights_gradients_and_adam_moments_not_activations(mesh, monkeypatch):
    assert marked(L07, "what-fsdp-shards") == ["fp32 weights", "Gradients", "Adam's moments"]
    model, out, opt, _ = sharded_step(mesh, monkeypatch)
    weight = model[0].weight  # 16 x 8, split by rows over 4 ranks
    assert weight.to_local().shape == weight.grad.to_local().shape == (16 // WORLD, 8)
    assert opt.state[weight]["exp_avg_sq"].to_local().shape == (16 // WORLD, 8)
    assert type(out) is torch.Tensor and out.shape == (3, 4)  # the whole local batch's output


def test_fsdp2_works_with_torch_amp_gradscaler_which_reduces_found_inf(mesh, monkeypatch):
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from torch.distributed.tensor import DTensor

    assert marked(L07, "fsdp-scaler") == ["torch.amp.GradScaler, one per process"]
    # DTensor gradients route the scaler's inf check through a handler that max-reduces found_inf
    # over the mesh, so every rank sees the same verdict.
    unscale = torch.ops.aten._amp_foreach_non_finite_check_and_unscale_.default
    assert DTensor._op_dispatcher._custom_op_handlers[unscale].__name__ == (
        "found_inf_reduce_handler"
    )
    model, _, opt, _ = sharded_step(mesh, monkeypatch)
    before = [p.to_local().clone() for p in model.parameters()]
    scaler = GradScaler("cpu")
    opt.zero_grad()
    scaler.scale(model(torch.randn(3, 8)).sum()).backward()
    model[0].weight.grad.to_local()[0, 0] = INF
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**15  # skipped and backed off
    assert all(
        torch.equal(b, p.to_local()) for b, p in zip(before, model.parameters(), strict=True)
    )
    names = {f.name for f in dataclasses.fields(MixedPrecisionPolicy)}
    assert names == {"param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs"}


# --- the capstone: memory, dtypes, statistics ----------------------------------------------


def test_only_the_activations_grow_with_the_batch():
    assert marked(L08, "memory-grows-with-batch") == ["The activations saved for the backward pass"]
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    recipe = AmpRecipe("cpu", "bf16")
    small, large = (saved_tensor_bytes(model, torch.randn(b, 32), recipe=recipe) for b in (5, 40))
    assert large.activations > small.activations and large.weight_copies == small.weight_copies
    params = sum(p.numel() for p in model.parameters())
    a, b = (
        training_memory(params, s.activations, "adamw", s.weight_copies) for s in (small, large)
    )
    assert (a.parameters, a.gradients, a.optimizer_state) == (
        b.parameters,
        b.gradients,
        b.optimizer_state,
    )


def test_autocast_keeps_fp32_master_weights_and_half_loses_small_updates():
    assert marked(L08, "autocast-half") == [
        "The master weights must stay fp32; autocast makes 16-bit copies per op"
    ]
    lin = torch.nn.Linear(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = lin(torch.randn(2, 4))
    assert lin.weight.dtype == torch.float32 and out.dtype == torch.bfloat16
    assert copy.deepcopy(lin).half().weight.dtype == torch.float16  # .half() does not keep fp32
    one = torch.tensor(1.0)
    assert one.half() + 1e-4 == 1 and one + 1e-4 != 1  # an fp16 master weight drops the update


def test_bf16_has_fp32s_range_so_gradients_do_not_underflow():
    assert marked(L08, "scaler-bf16") == [
        "No: bf16 has fp32's range, so gradients do not underflow"
    ]
    bf16, fp32 = torch.finfo(torch.bfloat16), torch.finfo(torch.float32)
    assert bf16.smallest_normal == fp32.smallest_normal and bf16.max / fp32.max > 0.99
    tiny = torch.tensor(1e-30)
    assert tiny.half() == 0  # fp16 underflows ...
    assert abs(tiny.bfloat16().item() / 1e-30 - 1) < 2**-8  # ... bf16 keeps it to its precision


def test_two_seeds_t_interval_half_width_is_about_0_064():
    assert marked(L08, "ci-two-seeds") == ["About 0.064"]
    mean, half = stats.t_interval([0.97, 0.98])
    assert half == pytest.approx(0.064, abs=5e-4)
    assert half == pytest.approx(12.706 * 0.01 / 2, rel=1e-3)  # t(0.975, 1) x s / sqrt(2)


def test_pairing_cancels_the_seed_effect():
    assert marked(L08, "paired-seeds") == [
        "What a seed does to both runs cancels in their difference"
    ]
    seed_effect = [0.02, -0.03, 0.01, 0.04]  # moves both modes' accuracy alike
    fp32 = [0.97 + e for e in seed_effect]
    bf16 = [0.968 + e + n for e, n in zip(seed_effect, [0.001, -0.001, 0.0, 0.0005], strict=True)]
    paired = stats.paired_difference(fp32, bf16)
    assert paired.half_width < stats.two_sample_half_width(fp32, bf16) / 10
    shifted = stats.paired_difference(fp32, [v + 100 for v in bf16])  # large differences
    assert shifted.half_width == pytest.approx(paired.half_width)  # same width: size is not it
    assert stats.t_interval([0.97, 0.98])  # t intervals need 2 values, not 30


def test_an_interval_reaching_past_the_margin_settles_nothing():
    assert marked(L08, "includes-zero") == [
        "Nothing settled: a difference beyond the margin is not ruled out"
    ]
    interval = stats.PairedDifference((), mean=-0.25, half_width=0.65, confidence=0.95)
    assert (interval.low, interval.high) == pytest.approx((-0.9, 0.4))
    assert not interval.within(0.5)  # not "within the margin"
    assert interval.includes_zero  # nor "less accurate": 0 is inside


def test_fp8_range_cannot_hold_activations_and_gradients_at_one_scale():
    assert marked(L08, "fp8-scale") == [
        "FP8's few exponent bits cannot hold activations, weights and gradients at one scale"
    ]
    e4m3 = torch.float8_e4m3fn
    assert torch.finfo(e4m3).max == 448 and torch.finfo(e4m3).smallest_normal == 2.0**-6

    def kept(value: float, scale: float) -> bool:  # within e4m3's half-ulp of 2^-4 after a trip
        back = (torch.tensor(value * scale).to(e4m3).float() / scale).item()
        return abs(back - value) <= value / 16

    activation, gradient = 100.0, 1e-6
    assert not any(kept(activation, 2.0**k) and kept(gradient, 2.0**k) for k in range(-20, 40))
    assert kept(activation, 1.0) and kept(gradient, 2.0**20)  # each at its own scale fits
