import pytest
import torch
from cuda_double import FakeGpu

import amp_course as ac
from amp_course import device, exercises
from amp_course.exercises import ExerciseFailed, lesson_06

NAME = "06.choose_dtype"


@pytest.mark.parametrize("capability", [(6, 0), (7, 0), (7, 5), (8, 0), (8, 9), (9, 0), (10, 0)])
def test_solution_agrees_with_pick_autocast_dtype(monkeypatch, capability):
    """The exercise's answer is the one the course's own device rule gives for that GPU."""
    FakeGpu(monkeypatch, capability=capability)
    assert exercises.solution(NAME)(capability, None) == device.pick_autocast_dtype("cuda")


# What the lesson says each device should train in.
EXPECTED = {
    "V100": torch.float16,
    "T4": torch.float16,
    "A100": torch.bfloat16,
    "H100": torch.bfloat16,
    "RTX 3090": torch.bfloat16,
    "a Sapphire Rapids CPU (AMX)": torch.bfloat16,  # measured faster
    "an AMD Zen 4 CPU (AVX512-BF16)": torch.float32,  # native bf16, measured slower
    "an AVX2 CPU": torch.float32,
    "another AMX CPU": torch.float32,  # 0.96x, within the noise
}


@pytest.mark.parametrize("seed", [0, 12345, 987654321])
def test_every_case_follows_the_rule_of_ac_device(seed):
    """One rule: the reference's answers are what ac.device.recommended_dtype says."""
    reference = exercises.solution(NAME)
    for name, capability, cpu, _ in lesson_06.devices(seed):
        rule = device.recommended_dtype(capability, cpu_bf16=cpu.bf16 if cpu else None)
        assert reference(capability, cpu) == rule, name
        if name in EXPECTED:
            assert rule == EXPECTED[name], name


def test_other_seeds_hold_cpus_both_ways():
    cases = lesson_06.devices(12345) + lesson_06.devices(987654321)
    verdicts = {cpu.bf16.verdict for _, _, cpu, _ in cases if cpu}
    assert verdicts == {"faster", "slower", "indistinguishable"}


def by_flags(cc, cpu):  # the old rule: native bf16 flags mean bf16
    if cc is None:
        return torch.bfloat16 if {"avx512_bf16", "amx_bf16"} & cpu.flags else torch.float32
    return torch.bfloat16 if cc >= (8, 0) else torch.float16


def amx_tile_means_bf16(cc, cpu):
    if cc is None:
        return torch.bfloat16 if "amx_tile" in cpu.flags else torch.float32
    return torch.bfloat16 if cc >= (8, 0) else torch.float16


def ratio_below_one(cc, cpu):  # ignores the spread
    if cc is None:
        return torch.bfloat16 if cpu.bf16.ratio < 1 else torch.float32
    return torch.bfloat16 if cc >= (8, 0) else torch.float16


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda cc, cpu: torch.bfloat16, "T4|V100"),  # bf16 everywhere
        (lambda cc, cpu: torch.float16, "A100"),  # fp16 everywhere
        (lambda cc, cpu: torch.float16 if cc is None or cc < (8, 0) else torch.bfloat16, "CPU"),
        (lambda cc, cpu: torch.bfloat16 if cc is None or cc >= (7, 5) else torch.float16, "T4"),
        (by_flags, r"Zen 4.*flags say native bf16 \(avx512_bf16\).*1\.61x.*slower"),
        (amx_tile_means_bf16, "Zen 4|another AMX"),
        (ratio_below_one, r"another AMX CPU.*0\.96x.*not distinguishable"),
        (lambda cc, cpu: "bf16", "torch dtype"),
    ],
)
def test_wrong_answers_fail(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(NAME, wrong)


# ---- An overflow elsewhere ---------------------------------------------------------------------
FIX = "06.fix_overflow"


def _first(model, images):
    return ac.debug.find_first_nonfinite(model, images, device="cpu", autocast_dtype=torch.float16)


def wrap_culprit_only(model, images):  # the lesson's own move, without widening
    name = _first(model, images).name
    model.set_submodule(name, ac.debug.Fp32Region(model.get_submodule(name)))
    return model


def wrap_everything(model, images):
    return ac.debug.Fp32Region(model)


def to_bf16(model, images):
    return model.to(torch.bfloat16)


def test_the_plants_overflow_only_in_fp16():
    model, images = lesson_06.planted_vit("attention", 1, 0)
    culprit = _first(model, images)
    assert culprit.name == "encoder.layers.encoder_layer_1.self_attention"  # not in the lesson
    for dtype in (None, torch.bfloat16):
        found = ac.debug.find_first_nonfinite(model, images, device="cpu", autocast_dtype=dtype)
        assert found is None


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda model, images: model, "still overflows at .*self_attention: that is the module"),
        (wrap_culprit_only, r"still overflows at .*mlp\.3: the region ends too early"),
        (wrap_everything, "also runs .* in float32"),
        (to_bf16, "changed the parameters' dtype"),
        (lambda model, images: None, "return the model"),
    ],
)
def test_fix_overflow_mistakes_are_diagnosed(wrong, message):
    with pytest.raises(ExerciseFailed, match=message):
        exercises.check(FIX, wrong)
