"""ac.gpus, the one table of the GPUs the course knows: its rows agree with each other and with
torch, its rules answer by compute capability, and no other module or lesson spells a capability."""

import json
import re
from pathlib import Path

import pytest
import torch

from amp_course import gpus, roofline

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ("fp32", "tf32", "fp16", "bf16")


@pytest.mark.parametrize("gpu", gpus.GPUS.values(), ids=list(gpus.GPUS))
def test_each_row_is_found_by_the_name_torch_gives_it_and_is_consistent(gpu):
    assert gpus.lookup(gpu.device_name) is gpu
    assert gpus.peak_tflops(gpu.device_name, "fp32") == gpu.peak("fp32")
    assert gpus.peak_bandwidth_tbs(gpu.device_name) == gpu.bandwidth_tbs
    assert gpus.datasheet_note(gpu.device_name) is None
    # A peak for a format only where the GPU has tensor cores for it.
    for fmt in ("tf32", "fp16", "bf16", "fp8"):
        if gpu.peak(fmt) is not None:
            assert gpu.has_tensor_cores(fmt), (gpu.model, fmt)
    peaks = [gpu.peak(p) for p in ("fp32", "tf32", "fp16", "fp8") if gpu.peak(p)]
    assert peaks == sorted(peaks)  # each narrower format is faster
    assert gpu.peak("fp16") == gpu.peak("bf16") or gpu.peak("bf16") is None
    assert set(gpu.peak_tflops) <= set(gpus.PEAK_NAMES)


@pytest.mark.parametrize("name", ["bfloat16", "bf17", "FP16", "e4m3"])
@pytest.mark.parametrize("device", ["NVIDIA H100 80GB HBM3", "CPU x86"])
def test_a_peak_name_the_table_does_not_use_is_refused_not_unknown(name, device):
    """A typo or another spelling gave None, which reads as "this card has no such peak"."""
    with pytest.raises(ValueError, match=f"no peak named '{name}'. Valid choices: fp32, tf32"):
        gpus.peak_tflops(device, name)
    assert gpus.GPUS["A100 SXM4 80GB"].peak("fp8") is None  # a name of the table this card lacks


@pytest.mark.parametrize(
    "name", ["NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GH200 480GB", "NVIDIA H800", "CPU x86"]
)
def test_variants_without_figures_of_their_own_get_none(name):
    assert gpus.lookup(name) is None and gpus.peak_tflops(name, "bf16") is None
    assert name in gpus.datasheet_note(name)


@pytest.mark.parametrize(
    "capability, formats",
    [
        ((7, 0), {"fp16"}),  # V100
        ((7, 5), {"fp16"}),  # T4
        ((8, 0), {"fp16", "tf32", "bf16"}),  # A100
        ((8, 6), {"fp16", "tf32", "bf16"}),
        ((8, 9), {"fp16", "tf32", "bf16", "fp8"}),  # L4, Ada
        ((9, 0), {"fp16", "tf32", "bf16", "fp8"}),  # H100
        ((10, 0), {"fp16", "tf32", "bf16", "fp8", "mx", "nvfp4"}),  # B200
        ((11, 0), {"fp16", "tf32", "bf16", "fp8", "mx", "nvfp4"}),  # Jetson Thor (CUDA 13's name)
        ((12, 0), {"fp16", "tf32", "bf16", "fp8", "mx", "nvfp4"}),
    ],
)
def test_tensor_cores_by_compute_capability(capability, formats):
    assert {f for f in gpus.TENSOR_CORES if gpus.has_tensor_cores(capability, f)} == formats


def test_the_known_cards_features():
    t4, a100, h100 = gpus.GPUS["T4"], gpus.GPUS["A100 40GB"], gpus.GPUS["H100 SXM"]
    assert t4.has_tensor_cores("fp16") and not t4.has_tensor_cores("bf16")
    assert not t4.has_tensor_cores("tf32") and t4.peak("bf16") is None
    assert a100.has_tensor_cores("bf16") and not a100.has_tensor_cores("fp8")
    assert h100.has_tensor_cores("fp8")
    assert h100.peak("fp8") == pytest.approx(2 * h100.peak("bf16"), rel=1e-3)
    assert not any(g.has_tensor_cores("nvfp4") for g in gpus.GPUS.values())  # no Blackwell row
    assert (t4.sms, a100.sms, h100.sms, gpus.GPUS["H100 PCIe"].sms) == (40, 108, 132, 114)


@pytest.mark.parametrize(
    "capability, dtype, kernels",
    [
        ((7, 5), "fp32", ("efficient", "math")),
        ((7, 5), "fp16", ("efficient", "math")),
        ((7, 5), "bf16", ("math",)),  # less_than_sm80_mem_efficient_dtypes: fp32 and fp16
        ((9, 0), "fp32", ("efficient", "math")),  # flash and cuDNN take no fp32
        ((9, 0), "bf16", ("flash", "efficient", "cudnn", "math")),
        # Past sdp_utils.cpp's check_sm_version<..., sm121>: the fused kernels refuse it.
        ((12, 1), "fp16", ("flash", "efficient", "cudnn", "math")),
        ((13, 0), "fp16", ("math",)),
    ],
)
def test_attention_kernels_by_dtype_and_compute_capability(capability, dtype, kernels):
    assert gpus.attention_kernels(dtype, capability) == kernels


def test_the_memory_efficient_rule_matches_the_kernels_torch_ships():
    """torch's memory-efficient attention kernels (the headers installed with it) exist in bf16
    only for Sm80, in fp16 and fp32 from Sm50: the table's rule for that kernel."""
    headers = (
        Path(torch.__file__).parent / "include/ATen/native/transformers/cuda/mem_eff_attention"
    )
    forward = headers / "kernels/cutlassF.h"
    if not forward.is_file():
        pytest.skip("this torch installs no attention kernel headers")
    built = re.findall(r"AttentionKernel<([\w:]+), cutlass::arch::Sm(\d+)", forward.read_text())
    dtypes = {"float": "fp32", "cutlass::half_t": "fp16", "cutlass::bfloat16_t": "bf16"}
    first = {}
    for dtype, sm in built:
        name = dtypes[dtype]
        first[name] = min(first.get(name, 99), int(sm))
    rules = gpus.ATTENTION["efficient"]
    assert {d: divmod(sm, 10) for d, sm in first.items()} == {d: r.first for d, r in rules.items()}


def test_the_h100s_default_kernels_are_what_its_committed_run_measured():
    """The picks on the H100's row: what lesson 09's committed H100 run printed for "default"."""
    path = ROOT / "reports/gpu/nvidia-h100-80gb-hbm3/notebooks/09_beyond_autocast.ipynb"
    text = "".join(
        "".join(output.get("text", ""))
        for cell in json.loads(path.read_text())["cells"]
        for output in cell.get("outputs", [])
    )
    for dtype, kernel in gpus.GPUS["H100 SXM"].attention_picks.items():
        assert re.search(rf"^{dtype} +default +{kernel} ", text, re.MULTILINE), dtype


def test_the_published_roofline_has_the_training_precisions_and_fp8_only_when_asked():
    """Lesson 10 draws every roof of a roofline: the FP8 peak must not add one unasked."""
    h100 = roofline.published("NVIDIA H100 80GB HBM3")
    assert set(h100.peak_flops) == set(TRAINING)
    fp8 = roofline.published("NVIDIA H100 80GB HBM3", ("bf16", "fp8"))
    assert fp8.peak_flops["fp8"] == 1978.9e12


# A capability spelled outside the table: a tuple compared or named as one, a major compared.
CAPABILITY_LITERAL = re.compile(
    r"[<>]=?\s*\(\s*\d+\s*,\s*\d+\s*\)"  # capability >= (8, 9)
    r"|\bmajor\s*(?:[<>]=?|==)\s*\d"  # major >= 8
    r"|capability\)?\[0\]\s*(?:[<>]=?|==)\s*\d"  # capability[0] >= 8
    r"|MIN_CAPABILITY"
)


def _notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _course_sources(exercises: bool = True) -> dict[Path, str]:
    """Every module but the table itself (the exercise checks too, if ``exercises``), and every
    lesson's code."""
    package = ROOT / "amp_course"
    sources = {
        path: path.read_text()
        for path in package.rglob("*.py")
        if path.name != "gpus.py"
        and (exercises or "exercises" not in path.relative_to(package).parts)
    }
    return sources | {path: _notebook_code(path) for path in (ROOT / "notebooks").glob("*.ipynb")}


def test_no_module_or_lesson_spells_a_capability_rule_of_its_own():
    """Every capability question reads ac.gpus. The exercises are left out: their graders ask
    about made-up GPUs, and a reference solution is the rule a learner writes by hand."""
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path, text in _course_sources(exercises=False).items()
        for match in CAPABILITY_LITERAL.finditer(text)
    ]
    assert not found


# A GPU's memory written as a number where a lesson or module names it: GPU_MEMORY_GIB = 80,
# GPU_SIZES_GIB = (40, 48, 80), memory_gb=16; not a unit (GIB = 2**30).
MEMORY_LITERAL = re.compile(r"\b\w*(?:GIB|GB|gib|gb)\w*\s*=\s*[(\[]?\s*\d+\b(?!\s*\*\*)")


def test_no_module_exercise_or_lesson_types_a_figure_of_the_gpu_table():
    """Peaks, bandwidths and memory sizes are read from ac.gpus, exercises included. 2.0 (the H100
    PCIe's TB/s) is left out of the search: it is every other constant's value too."""
    figures = {
        str(value)
        for gpu in gpus.GPUS.values()
        for value in (*gpu.peak_tflops.values(), gpu.bandwidth_tbs)
    } - {"2.0"}
    typed = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, figures)) + r")(?![\w.])")
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path, text in _course_sources().items()
        for pattern in (typed, MEMORY_LITERAL)
        for match in pattern.finditer(text)
    ]
    assert not found


def test_the_patterns_find_what_a_lesson_would_type():
    """The search above is not vacuous: the forms the course used to type are found."""
    assert MEMORY_LITERAL.search("GPU_SIZES_GIB = (40, 48, 80)")
    assert MEMORY_LITERAL.search("GPU_MEMORY_GIB = 80")
    assert not MEMORY_LITERAL.search("GPU_MEMORY_GIB = ac.gpus.SCENARIO.memory_gb")
    assert not MEMORY_LITERAL.search("GIB = 2**30")
