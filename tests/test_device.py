import warnings

import pytest
import torch
from cuda_double import FakeGpu

from amp_course import device as dev
from amp_course import precisions, timing


def test_cpu_is_cpu():
    assert dev.pick_device("cpu") == torch.device("cpu")


def test_unknown_device_lists_valid_choices():
    with pytest.raises(ValueError, match="auto, cpu, cuda"):
        dev.pick_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the no-GPU fallback")
def test_cuda_without_gpu_warns_and_names_fallback():
    with pytest.warns(dev.DeviceFallbackWarning, match="no CUDA GPU.*Falling back to DEVICE='cpu'"):
        assert dev.pick_device("cuda") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the no-GPU fallback")
def test_numbered_cuda_without_gpu_falls_back_to_cpu():
    with pytest.warns(dev.DeviceFallbackWarning, match="DEVICE='cuda:1'.*no CUDA GPU"):
        assert dev.pick_device("cuda:1") == torch.device("cpu")


def test_numbered_cuda_picks_that_gpu(monkeypatch):
    FakeGpu(monkeypatch, count=2)
    assert dev.pick_device("cuda:1") == torch.device("cuda", 1)
    assert dev.pick_device(" CUDA:0 ") == torch.device("cuda", 0)
    assert dev.pick_device("cuda") == torch.device("cuda")
    with pytest.raises(ValueError, match="has 2 CUDA GPU.*cuda:0 to cuda:1"):
        dev.pick_device("cuda:2")


@pytest.mark.parametrize("name", ["cuda:", "cuda:x", "cuda:-1", "cuda:1.5"])
def test_malformed_cuda_number_lists_valid_choices(name):
    with pytest.raises(ValueError, match="Valid choices: auto, cpu, cuda or cuda:N"):
        dev.pick_device(name)


@pytest.mark.parametrize(
    "name,dtype",
    [
        ("bf16", torch.bfloat16),
        ("float16", torch.float16),
        ("FP32", torch.float32),
        ("torch.bfloat16", torch.bfloat16),
        (torch.float16, torch.float16),
    ],
)
def test_the_table_parses_every_spelling(name, dtype):
    assert precisions.get(name).dtype is dtype


def test_unknown_dtype_lists_valid_ones():
    with pytest.raises(ValueError) as info:
        precisions.get("fp12")
    message = str(info.value)
    assert "fp12" in message
    for valid in ("fp32", "fp16", "bf16", "bfloat16"):
        assert valid in message


def test_unsupported_dtype_object_is_refused():
    with pytest.raises(ValueError, match="Valid choices"):
        precisions.get(torch.int8)


@pytest.mark.parametrize(
    "capability,expected",
    [
        ((7, 5), torch.float16),  # T4
        ((7, 0), torch.float16),  # V100
        ((8, 0), torch.bfloat16),  # A100
        ((9, 0), torch.bfloat16),
    ],
)  # H100
def test_cuda_dtype_follows_compute_capability(monkeypatch, capability, expected):
    # A T4 reports is_bf16_supported() == True (emulation); the choice must ignore that.
    FakeGpu(monkeypatch, capability=capability)  # is_bf16_supported() answers True
    assert dev.pick_precision(torch.device("cuda")).dtype is expected


def test_cpu_dtype_is_bf16_and_warns_without_native_support(fake_cpu):
    fake_cpu("avx2 fma")
    with pytest.warns(dev.DeviceFallbackWarning, match="emulated.*no AVX512-BF16 or AMX"):
        assert dev.pick_precision("cpu").dtype is torch.bfloat16
    assert "no native bf16" in dev.describe_hardware("cpu")
    fake_cpu("avx2 avx512_bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dev.pick_precision("cpu").dtype is torch.bfloat16


def _measured(ratio, apart):
    return timing.Comparison("fp32", "bf16", ratio, apart)


@pytest.mark.parametrize(
    "capability, cpu_bf16, expected",
    [
        ((7, 5), None, torch.float16),
        ((8, 0), None, torch.bfloat16),
        ((6, 0), None, torch.float16),
        (None, None, torch.float32),  # not measured: fp32, whatever the flags
        (None, _measured(0.5, True), torch.bfloat16),  # measured faster
        (None, _measured(1.6, True), torch.float32),  # measured slower (a native-bf16 CPU)
        (None, _measured(0.95, False), torch.float32),  # within the noise
    ],
)
def test_recommended_precision_is_one_rule_by_hardware_and_measurement(
    capability, cpu_bf16, expected
):
    assert dev.recommended_precision(capability, cpu_bf16=cpu_bf16).dtype is expected


def test_recommended_precision_takes_no_flags_on_a_cpu():
    with pytest.raises(TypeError):
        dev.recommended_precision(None, frozenset({"amx_bf16"}))  # flags alone never decide


def test_describe_hardware_is_one_line_with_versions():
    line = dev.describe_hardware("cpu")
    assert "\n" not in line
    assert torch.__version__ in line
    assert "CPU" in line


@pytest.mark.parametrize(
    ("cores", "threads", "says"),
    [
        (1, 1, "1 core (1 torch thread)"),
        (2, 1, "2 cores (1 torch thread)"),
        (16, 8, "16 cores (8 torch threads)"),
    ],
)
def test_describe_hardware_counts_in_good_grammar(monkeypatch, cores, threads, says):
    monkeypatch.setattr(dev.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(dev.torch, "get_num_threads", lambda: threads)
    assert f", {says}, " in dev.describe_hardware("cpu")


def test_device_slug():
    assert dev.device_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert dev.device_slug("Tesla T4") == "tesla-t4"
    assert dev.device_slug("CPU x86_64 (AVX2)") == "cpu-x86-64-avx2"


def test_machine_record_of_a_cpu():
    record = dev.machine_record("cpu")
    assert record["device"] == dev.device_name("cpu") and record["device"].startswith("CPU ")
    assert record["device_type"] == "cpu" and record["capability"] is None
    assert record["versions"]["torch"] == torch.__version__ and record["date"]
