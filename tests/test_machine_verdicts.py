"""Every sentence a lesson prints about the learner's machine follows what it measured there.

The cells tagged ``machine-verdict`` in lessons 02, 05 and 06 run here with the CPU's flags and the
timings faked both ways ($AMP_COURSE_FAKE_CPU_FLAGS, read by ``ac.device.cpu_flags``, and
$AMP_COURSE_FAKE_TIMES, read by ``ac.timing.measure``), and what they print must agree with the
fakes: a native-bf16 CPU that measured bf16 slower is told to train in fp32, an emulated one that
measured it faster in bf16, a difference inside the noise ranks nothing.
"""

import contextlib
import io

import conftest
import pytest
import torch
import torch.nn.functional as F

import amp_course as ac
from amp_course.timing import FAKE_TIMES_ENV

NATIVE, EMULATED = "avx2 avx512f avx512_bf16", "avx2 fma"
BF16_FASTER = "fp32=2e-3,bf16=1e-3,fp16=9e-3"
BF16_SLOWER = "fp32=1e-3,bf16=1.6e-3,fp16=9e-3"
BF16_SAME = "fp32=1e-3,bf16=1e-3,fp16=1e-3"


def run_tagged(lesson: str, namespace: dict) -> str:
    """Run the lesson's machine-verdict cells in order in ``namespace``; return what they print."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        conftest.run_tagged(lesson, "machine-verdict", namespace=namespace, one=False)
    return out.getvalue()


@pytest.fixture
def fake(monkeypatch, fake_cpu):
    def set_machine(flags: str, times: str):
        fake_cpu(flags)
        monkeypatch.setenv(FAKE_TIMES_ENV, times)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as lesson 05 does in smoke mode: tiny steps, a shared machine
    yield set_machine
    torch.set_num_threads(threads)


@pytest.mark.parametrize("flags, native", [(NATIVE, True), (EMULATED, False)])
def test_lesson_02_header_names_the_cpu_it_was_given(fake, flags, native):
    fake(flags, BF16_SAME)
    ns = {"ac": ac, "SMOKE": True, "DEVICE": "cpu", "SEED": 0, "AMP_DTYPE": "bf16"}
    ns["TRAIN_BATCHES"] = 200
    printed = run_tagged("02_autocast", ns)
    assert ("no native bf16" not in printed) == native
    assert ("native bf16 (AVX512-BF16/AMX)" in printed) == native
    assert "slow" not in printed  # nothing about speed that this lesson did not measure


def _report(times: str) -> dict:
    """A bench report of the MNIST CNN whose rows hold the faked timings."""
    rows = []
    for item in times.split(","):
        name, _ = item.split("=")
        measured = ac.timing.measure(lambda: None, description=name, repeats=5)
        rows.append({"label": name, **ac.timing.summarise(measured)})
    return {"results": {"mnist_cnn": rows, "vit_b16": []}}


CASES = [
    # (flags, timings, bf16 verdict, what the flags note says, dtype to train in)
    (NATIVE, BF16_SLOWER, "bf16 is slower than fp32", "did not make this step faster", "fp32"),
    (NATIVE, BF16_FASTER, "bf16 is faster than fp32", "paid off", "bf16"),
    (EMULATED, BF16_FASTER, "bf16 is faster than fp32", "emulated", "bf16"),
    (EMULATED, BF16_SLOWER, "bf16 is slower than fp32", "emulated", "fp32"),
    (NATIVE, BF16_SAME, "bf16 and fp32 are not distinguishable", "cannot tell bf16", "fp32"),
]


@pytest.mark.parametrize("flags, times, verdict, note, train_in", CASES)
def test_lesson_05_cpu_verdicts_follow_the_measurement(fake, flags, times, verdict, note, train_in):
    fake(flags, times)
    settings = ac.lesson.start(True, "cpu", 0, "bf16", verbose=False)
    ns = {"ac": ac, "torch": torch, "settings": settings, "report": _report(times)}
    printed = run_tagged("05_speed_memory", ns)
    assert printed.count(verdict) == 3, printed  # the bench's CNN twice, section 7 once
    assert "bf16: this CPU" in printed and note in printed
    assert not (times == BF16_SAME and "did not make" in printed), printed  # no unmeasured cause
    assert f"train in: {train_in} " in printed
    assert ("avx512_bf16    yes" in printed) == (flags == NATIVE)
    fp16 = "fp16 and fp32 are not distinguishable" if times == BF16_SAME else "fp16 is slower"
    assert fp16 in printed and "slower fallback code" in printed


def test_lesson_05_names_fp16_kernels_where_the_cpu_has_them(fake):
    fake("avx2 avx512f avx512_fp16", BF16_SLOWER)
    settings = ac.lesson.start(True, "cpu", 0, "bf16", verbose=False)
    ns = {"ac": ac, "torch": torch, "settings": settings, "report": _report(BF16_SLOWER)}
    printed = run_tagged("05_speed_memory", ns)
    assert "torch has oneDNN fp16 kernels for this CPU" in printed
    assert "this CPU gives torch no AVX512-BF16 or AMX to use" in printed


def test_lesson_05_says_emulated_where_onednn_is_capped_below_the_cpus_bf16(fake, monkeypatch):
    fake(NATIVE, BF16_SLOWER)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # as the AVX2 rehearsal sets it
    settings = ac.lesson.start(True, "cpu", 0, "bf16", verbose=False)
    ns = {"ac": ac, "torch": torch, "settings": settings, "report": _report(BF16_SLOWER)}
    printed = run_tagged("05_speed_memory", ns)
    assert "avx512_bf16    yes, unused by torch" in printed
    assert "so its bf16 is emulated" in printed and "native bf16 (AVX512" not in printed


def reference_rule(capability, cpu):  # what the exercise asks for: ac.device's rule
    return ac.device.recommended_precision(capability, cpu_bf16=cpu.bf16 if cpu else None).dtype


@pytest.mark.parametrize(
    "flags, times, verdict, picked",
    [
        (NATIVE, BF16_SLOWER, "slower", torch.float32),
        (EMULATED, BF16_FASTER, "faster", torch.bfloat16),
    ],
)
def test_lesson_06_applies_the_learners_rule_to_this_machines_measurement(
    fake, flags, times, verdict, picked
):
    fake(flags, times)
    settings = ac.lesson.start(True, "cpu", 0, verbose=False)
    ns = {"ac": ac, "torch": torch, "F": F, "settings": settings, "device": settings.device}
    ns["choose"] = reference_rule
    printed = run_tagged("06_debugging_nan", ns)
    assert f"bf16 is {verdict} than fp32" in printed
    assert f"your choose() picks {picked} for this cpu" in printed


def test_lesson_06_shows_no_answer_before_the_exercise_is_done(fake):
    fake(NATIVE, BF16_FASTER)
    settings = ac.lesson.start(True, "cpu", 0, verbose=False)

    def blank(capability, cpu):
        raise NotImplementedError

    ns = {"ac": ac, "torch": torch, "F": F, "settings": settings, "device": settings.device}
    printed = run_tagged("06_debugging_nan", {**ns, "choose": blank})
    assert "Finish the exercise above" in printed and "picks torch." not in printed
