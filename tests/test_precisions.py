"""ac.precisions is the one table of precisions: every module that names, parses, enables or
gates a precision agrees with it, and its facts agree with torch itself."""

import dataclasses

import pytest
import torch

from amp_course import capstone, cli, cpu, device, emulation, gpus, inspector, precisions
from amp_course.bench import config
from amp_course.bench.variant import Variant, skip_reason
from amp_course.recipe import AmpRecipe


def test_the_table_holds_the_four_training_precisions():
    assert precisions.NAMES == ("fp32", "tf32", "fp16", "bf16")
    assert [p.name for p in precisions.BY_STORAGE.values()] == ["fp32", "fp16", "bf16"]
    # The first GPUs with tensor cores for each: ac.gpus's table.
    assert precisions.BF16.min_capability == gpus.tensor_cores_from("bf16") == (8, 0)
    assert precisions.TF32.min_capability == gpus.tensor_cores_from("tf32") == (8, 0)
    assert precisions.FP16.min_capability == gpus.tensor_cores_from("fp16") == (7, 0)


@pytest.mark.parametrize("precision", precisions.PRECISIONS.values(), ids=precisions.NAMES)
def test_the_table_parses_and_names_every_spelling(precision):
    for name in precision.names:
        assert precisions.get(name).dtype is precision.dtype
        assert precisions.get(name.upper()).dtype is precision.dtype
        assert precisions.get(f"torch.{name}") is precision
    # The short name of a dtype is its training precision's: float32 is "fp32", never "tf32".
    assert precisions.name_of(precision.dtype) == precisions.get(precision.dtype).name
    assert precisions.get(precision) is precision  # a row is read as itself


@pytest.mark.parametrize("precision", precisions.PRECISIONS.values(), ids=precisions.NAMES)
def test_amp_recipe_and_bench_configurations_follow_the_table(precision):
    recipe = Variant.matrix(precision.name).recipe("cpu")
    assert recipe == AmpRecipe("cpu", precision.name) == AmpRecipe("cpu", precision)
    assert recipe.precision is precision  # tf32 stays tf32: its dtype alone would read as fp32
    assert AmpRecipe("cpu", precision.dtype).precision is precisions.get(precision.dtype)
    assert recipe.autocast_dtype is precision.dtype
    assert recipe.enabled is precision.autocast
    assert recipe.needs_scaler is precision.grad_scaler
    assert recipe.scaler().is_enabled() is precision.grad_scaler
    assert recipe.name == precision.name


def test_bench_capstone_inspector_and_cli_list_the_tables_precisions():
    assert config.PRECISIONS == precisions.NAMES
    assert inspector.INSPECTED_FORMATS[:4] == precisions.NAMES
    assert capstone.MODES == {
        "fp32": precisions.FP32,
        "fp16 + GradScaler": precisions.FP16,
        "bf16": precisions.BF16,
    }
    # Each mode's recipe autocasts to its dtype, or not at all for fp32.
    recipes = {label: AmpRecipe("cpu", row) for label, row in capstone.MODES.items()}
    assert {label: r.autocast_dtype if r.enabled else None for label, r in recipes.items()} == {
        "fp32": None,
        "fp16 + GradScaler": torch.float16,
        "bf16": torch.bfloat16,
    }
    helps = cli.build_parser().format_help() + _subcommand_help("bench")
    assert "fp32/tf32/fp16/bf16" in helps and "fp32,tf32,fp16,bf16" in helps


def _subcommand_help(name):
    assert name == "bench"
    return cli.bench_parser().format_help()


@pytest.mark.parametrize(
    "capability, bf16, tf32",
    [((7, 0), False, False), ((7, 5), False, False), ((8, 0), True, True), ((9, 0), True, True)],
)
def test_one_capability_threshold_gates_bf16_and_tf32(monkeypatch, capability, bf16, tf32):
    expected = torch.bfloat16 if bf16 else torch.float16
    assert device.recommended_precision(capability).dtype is expected
    monkeypatch.setattr(emulation, "capability", lambda device: capability)
    reason = skip_reason(Variant.matrix("tf32"), torch.device("cuda"))
    assert (reason is None) is tf32
    gpu = dataclasses.replace(gpus.GPUS["T4"], capability=capability)
    profile = emulation.GpuProfile("x", gpu, 2**30)
    assert ("bf16 and fp16" in profile.describe()) is bf16
    assert profile.tf32 is tf32 and (f"TF32 {'allowed' if tf32 else 'off'}" in profile.describe())


def test_cpu_flags_come_from_the_table():
    bf16, fp16 = precisions.BF16.cpu_flags, precisions.FP16.cpu_flags
    for flag in bf16:
        assert cpu.has_native(torch.bfloat16, frozenset({flag}))
        assert not cpu.has_native(torch.float16, frozenset({flag}))
    for flag in fp16:
        assert cpu.has_native("fp16", frozenset({flag}))
        assert not cpu.has_native("bf16", frozenset({flag}))
    assert cpu.has_native(torch.float32, frozenset())  # fp32 needs no flag
    # AMX without its bf16 part, AVX512 without bf16 or fp16: no native path.
    assert not cpu.has_native("bf16", frozenset({"amx_tile", "amx_int8", "avx512f"}))


def test_fp16_and_bf16_need_their_table_facts_in_torch():
    # The scaler: fp16's range is too narrow for small gradients, bf16 keeps fp32's exponent.
    assert torch.finfo(torch.bfloat16).min == pytest.approx(torch.finfo(torch.float32).min, 1e-2)
    assert torch.finfo(torch.float16).tiny > 1e-5 > torch.finfo(torch.bfloat16).tiny
    assert [p.grad_scaler for p in precisions.PRECISIONS.values()] == [False, False, True, False]


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match="fp32, float32, float, tf32, fp16"):
        precisions.get("fp8")
    with pytest.raises(ValueError, match="Unknown precision 'torch.float64'. Valid choices: fp32"):
        precisions.get(torch.float64)
