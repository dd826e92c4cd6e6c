"""ac.op_costs (FLOPs and bytes per operator) against FlopCounterMode and hand counts, and
ac.roofline's arithmetic, published figures, measurements and picture."""

import matplotlib
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from amp_course import models, op_costs, roofline
from amp_course.op_costs import OpCost

matplotlib.use("Agg")


def _tiny_vit_step():
    torch.manual_seed(0)
    model = models.build_vit("tiny")
    optimizer = torch.optim.AdamW(model.parameters())
    images, labels = torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,))

    def step():
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # the optimizer's state exists, as in every later step
    return step


def test_recorded_flops_agree_with_flop_counter_mode_on_a_training_step():
    step = _tiny_vit_step()
    ops = op_costs.record_ops(step)
    with FlopCounterMode(display=False) as counter:
        step()
    # FlopCounterMode has no formula for the CPU's fused attention kernels; everything else
    # must agree exactly.
    counted = sum(op.flops for op in ops if op.family != "attention")
    assert counted == counter.get_total_flops() > 0
    names = {op.name for op in ops}
    assert {"mm.default", "addmm.default", "native_layer_norm.default"} <= names
    assert "lerp_.Scalar" in names, "AdamW's updates count (on a CPU: one loop over tensors)"
    assert not any(name in {"view.default", "t.default", "transpose.int"} for name in names)


def test_cpu_attention_is_counted_with_torchs_sdpa_formula():
    b, h, s, d = 2, 3, 16, 8
    q, k, v = (torch.randn(b, h, s, d, requires_grad=True) for _ in range(3))

    def attention():
        F.scaled_dot_product_attention(q, k, v).sum().backward()

    ops = [op for op in op_costs.record_ops(attention) if op.family == "attention"]
    assert len(ops) == 2  # the fused forward kernel and its backward
    forward, backward = ops
    assert forward.flops == 4 * b * h * s * s * d  # Q K^T and P V: 2 matmuls of 2bhs^2d
    # The backward recomputes Q K^T, then forms dV, dP, dQ and dK: 5 matmuls.
    assert backward.flops == 10 * b * h * s * s * d


def test_bytes_of_a_matmul_an_in_place_add_and_a_copy():
    a, b = torch.randn(32, 16), torch.randn(16, 8)
    (mm,) = op_costs.record_ops(lambda: torch.mm(a, b))
    assert (mm.flops, mm.bytes_read, mm.bytes_written) == (
        2 * 32 * 16 * 8,
        (512 + 128) * 4,
        256 * 4,
    )
    assert mm.dtype == "fp32" and mm.intensity == pytest.approx(mm.flops / mm.bytes)
    x, y = torch.randn(100), torch.randn(100, dtype=torch.bfloat16)
    (add,) = op_costs.record_ops(lambda: x.add_(y))
    assert (add.bytes_read, add.bytes_written, add.flops) == (400 + 200, 400, 0)
    (copy,) = op_costs.record_ops(lambda: x.copy_(y))
    assert (copy.bytes_read, copy.bytes_written) == (200, 400)  # copy_ never reads its target
    assert op_costs.record_ops(lambda: x.view(10, 10).t()) == []  # views move no data


def test_summarise_groups_by_operator():
    ops = [OpCost("mm.default", 10, 4, 4, "bf16", 1), OpCost("mm.default", 30, 8, 8, "bf16", 2)]
    ops.append(OpCost("add.Tensor", 0, 100, 50, "fp32", 10))
    table = op_costs.summarise(ops)
    assert table[0] == {"name": "add.Tensor", "calls": 1, "flops": 0, "bytes": 150}
    assert table[1] == {"name": "mm.default", "calls": 2, "flops": 40, "bytes": 24}


@pytest.fixture
def toy():
    # 100 FLOP/s in bf16, 10 in fp32, 2 bytes/s: ridges at 50 and 5 FLOP per byte.
    return roofline.Roofline("toy", {"bf16": 100.0, "fp32": 10.0}, 2.0, "measured")


def test_ridge_attainable_and_regime(toy):
    assert toy.ridge("bf16") == 50 and toy.ridge("fp32") == 5
    assert toy.attainable(10, "bf16") == 20 and toy.attainable(1000, "bf16") == 100
    assert toy.regime(10, "bf16") == "memory-bound" and toy.regime(10, "fp32") == "compute-bound"


def test_floors_charge_each_operator_its_slower_roof(toy):
    matmul = OpCost("mm.default", 1000, 4, 4, "bf16", 1)  # 10 s of arithmetic, 4 s of memory
    norm = OpCost("native_layer_norm.default", 0, 6, 6, "fp32", 3)  # 6 s of memory
    assert toy.op_seconds(matmul) == (10.0, 4.0)
    assert toy.floors([matmul, norm]) == {"compute-bound": 10.0, "memory-bound": 6.0}
    with pytest.raises(KeyError, match="No fp16 peak"):
        toy.op_seconds(OpCost("mm.default", 1, 1, 1, "fp16", 1))


def test_published_rooflines_come_from_the_bench_tables():
    h100 = roofline.published("NVIDIA H100 80GB HBM3")
    assert h100.peak_flops["bf16"] == pytest.approx(989.4e12)
    assert h100.bandwidth == pytest.approx(3.35e12) and h100.source == "published"
    assert h100.ridge("bf16") == pytest.approx(295.3, rel=1e-3)
    assert roofline.published("NVIDIA A100-SXM4-80GB").bandwidth == pytest.approx(2.039e12)
    assert roofline.published("NVIDIA A100-PCIE-40GB").bandwidth == pytest.approx(1.555e12)
    assert "bf16" not in roofline.published("Tesla T4").peak_flops
    assert roofline.published("CPU AMD EPYC (AVX512)") is None


def test_measure_on_a_cpu_gives_a_finite_roofline():
    measured = roofline.measure(
        "cpu", ("fp32",), matmul_size=64, copy_bytes=2**20, min_run_time=0.01
    )
    assert measured.source == "measured" and measured.device.startswith("CPU")
    assert 1e6 < measured.peak_flops["fp32"] < 1e14 and 1e6 < measured.bandwidth < 1e13


def test_the_picture_places_every_data_moving_operator(toy):
    ops = [
        OpCost("mm.default", 1000, 4, 4, "bf16", 1),
        OpCost("_scaled_dot_product_flash_attention.default", 400, 8, 4, "bf16", 4),
        OpCost("gelu.default", 0, 8, 8, "fp32", 4),
    ]
    ax = roofline.plot(toy, ops)
    placed = sum(len(c.get_offsets()) for c in ax.collections)
    assert placed == 3
    assert "toy" in ax.get_title()
    # As the lesson says: counted operators filled, the others hollow (their faces clear, not the
    # black that matplotlib paints a "none" face given in a list beside alpha=).
    faces = {c.get_label().split()[0]: c.get_facecolors() for c in ax.collections}
    assert faces["matmul"][0][3] > 0 and faces["attention"][0][3] > 0
    assert faces["other"][0][3] == 0
    legend = {t.get_text().split()[0]: h for t, h in zip(*_legend(ax), strict=True)}
    assert legend["other"].get_facecolors()[0][3] == 0


def _legend(ax):
    legend = ax.get_legend()
    return legend.get_texts(), legend.legend_handles


def test_each_dtype_has_its_own_ridge_and_unknown_variants_have_no_roofline():
    # Quiz 10's layer norm is judged against fp32's ridge, about 20 FLOP per byte on an H100
    # SXM, not bf16's, about 295.
    h100 = roofline.published("NVIDIA H100 80GB HBM3")
    assert h100.ridge("fp32") == pytest.approx(19.97, rel=1e-3)
    assert h100.ridge("bf16") == pytest.approx(295.3, rel=1e-3)
    assert h100.regime(1.0, "fp32") == "memory-bound" and h100.regime(25, "fp32") == "compute-bound"
    assert roofline.published("NVIDIA H100 NVL") is None
    assert roofline.published("NVIDIA GH200 480GB") is None


def test_the_matmul_roof_is_the_best_of_a_steps_layouts(monkeypatch):
    """A roof is a ceiling: where a CPU emulates bf16, a @ b ran at a sixth of a Linear's x @ W.T,
    so the measured peak takes the best of the layouts a training step's matmuls use."""
    from amp_course import flops, timing

    a, b = torch.randn(3, 3), torch.randn(3, 3)
    layouts = {name: mm(a, b) for name, mm in flops.LAYOUTS.items()}
    assert torch.equal(layouts["a @ b"], a @ b) and torch.equal(layouts["a @ b.T"], a @ b.T)
    assert torch.equal(layouts["a.T @ b"], a.T @ b)
    medians = iter([3e-3, 1e-3, 2e-3])  # the second layout is the fastest

    def measure(fn, **_):
        fn()
        return type("Timed", (), {"median": next(medians)})()

    monkeypatch.setattr(timing, "measure", measure)
    assert flops.measure_matmul_flops("cpu", "fp32", 64) == 2 * 64**3 / 1e-3
