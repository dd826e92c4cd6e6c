"""The step account of lesson 10: one training step's operators by phase and kind, recorded on
tensors without data as on real ones, and the lean ViT's account against torchvision's and
timm's."""

import pytest
import torch

from amp_course import models, step_account
from amp_course.bench import timm_vit

SMALL = dict(image_size=32, num_layers=1, num_heads=2, hidden_dim=32, mlp_dim=64)


def _vit(lean=False, **shape):
    return lambda: models.build_vit("b16", lean=lean, **{**SMALL, **shape})


@pytest.mark.parametrize("lean", [False, True])
def test_an_account_without_data_records_what_a_real_step_runs(lean):
    torch.manual_seed(0)
    real = step_account.account_step(_vit(lean), 2, without_data=False)
    fake = step_account.account_step(_vit(lean), 2, without_data=True)
    for phase in step_account.PHASES:
        assert [op.name for op in fake.phases[phase]] == [op.name for op in real.phases[phase]]
        assert [op.bytes for op in fake.phases[phase]] == [op.bytes for op in real.phases[phase]]
    assert fake.views == real.views


def test_phases_and_kinds_add_up_to_the_step():
    account = step_account.account_step(_vit(), 1)
    assert all(account.phases[phase] for phase in step_account.PHASES)
    kinds = account.by_kind()
    assert sum(row["calls"] for row in kinds.values()) == len(account.ops)
    assert sum(row["bytes"] for row in kinds.values()) == account.bytes
    # The optimizer's phase is AdamW's update: no matmul, no cast, no copy.
    assert set(account.by_kind(("optimizer",))) == {"element-wise"}
    assert {"matmul", "attention", "layer norm", "cast"} <= set(account.by_kind(("forward",)))


def test_kinds_of_operators():
    assert step_account.kind_of("mm.default") == "matmul"
    assert step_account.kind_of("_scaled_dot_product_flash_attention_for_cpu.default") == (
        "attention"
    )
    assert step_account.kind_of("select_backward.default") == "copy"
    assert step_account.kind_of("native_layer_norm_backward") == "layer norm"
    assert step_account.kind_of("lerp_.Scalar") == "element-wise"


def test_differences_name_what_one_step_runs_beyond_the_other():
    course = step_account.account_step(_vit(), 1, label="course")
    lean = step_account.account_step(_vit(lean=True), 1, label="lean")
    found = {d.name: d for d in step_account.differences(course, lean)}
    # torchvision's MultiheadAttention: q, k and v split by select (zero-filled in backward),
    # copies to and from the sequence-first layout, the in-projection's bias added apart.
    assert found["select_backward.default"].calls == 3
    assert found["clone.default"].calls > 0 and found["clone.default"].bytes > 0
    assert found["add.Tensor"].calls > 0
    assert found["stack.default"].calls == -1  # the lean backward joins q, k, v with one stack
    assert sum(d.calls for d in found.values()) == len(course.ops) - len(lean.ops)
    assert sum(d.bytes for d in found.values()) == course.bytes - lean.bytes
    assert step_account.differences(lean, lean) == []


@pytest.fixture(scope="module")
def b16():
    """One ViT-B/16 training step at batch 2 of each model (timm's where installed), accounted
    without data: about a second each."""
    builders = {
        "course": lambda: models.build_vit("b16"),
        "lean": lambda: models.build_vit("b16", lean=True),
    }
    if timm_vit.unavailable() is None:
        builders["timm"] = lambda: timm_vit.build_timm_vit("b16")
    return {
        name: step_account.account_step(build, 2, label=name, image_size=224)
        for name, build in builders.items()
    }


def test_the_lean_vit_b16_step_runs_fewer_operators_and_bytes_than_torchvisions(b16):
    course, lean = b16["course"], b16["lean"]
    assert len(lean.ops) < len(course.ops) and lean.bytes < course.bytes
    assert lean.by_kind()["copy"]["bytes"] < course.by_kind()["copy"]["bytes"]
    # The same matmuls, attention, layer norms, casts and optimizer: only the layout work differs.
    for kind in ("matmul", "attention", "layer norm", "cast", "activation"):
        assert lean.by_kind()[kind]["calls"] == course.by_kind()[kind]["calls"]
    assert len(lean.phases["optimizer"]) == len(course.phases["optimizer"])


def test_the_quizs_facts_attention_layer_norms_and_dropout_cost_the_same_in_every_step(b16):
    """Lesson 10's quiz (same-flops-more-bytes): every model's step runs the same attention and
    layer-norm operators with the same bytes, and no dropout operator (the rate is 0)."""
    course = b16["course"].by_kind()
    for account in b16.values():
        kinds = account.by_kind()
        assert "dropout" not in kinds
        for kind in ("attention", "layer norm"):
            assert kinds[kind] == course[kind], (account.label, kind)


@pytest.mark.skipif(timm_vit.unavailable() is not None, reason="timm is not installed")
def test_the_lean_vit_b16_step_is_at_most_timms_in_operators_and_bytes(b16):
    lean, timm = b16["lean"], b16["timm"]
    assert len(lean.ops) <= len(timm.ops)
    assert lean.bytes <= timm.bytes
    for phase in step_account.PHASES:
        assert len(lean.phases[phase]) <= len(timm.phases[phase])
