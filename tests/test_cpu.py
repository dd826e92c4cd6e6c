"""What the course says of this CPU: its flags, which of them torch may use under oneDNN's cap,
and the rehearsal of a CPU without native bf16 (``ac.cpu``), checked against torch itself in a
fresh process, where the caps take effect."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from amp_course import cli, cpu, device, precisions
from amp_course.paths import ROOT


def test_flags_decide_when_given():
    assert cpu.has_native("bf16", frozenset({"avx2", "avx512_bf16"}))
    assert cpu.has_native("bf16", frozenset({"amx_bf16"}))
    assert not cpu.has_native("bf16", frozenset({"avx2", "avx512f"}))
    assert not cpu.has_native("bf16", frozenset({"amx_tile", "amx_int8"}))  # AMX without bf16
    assert cpu.has_native("fp16", frozenset({"avx512_fp16"}))
    assert not cpu.has_native("fp16", frozenset({"avx512_bf16", "amx_bf16"}))


def test_fake_flags_replace_this_cpus(fake_cpu):
    fake_cpu("avx2,avx512_bf16 fma")
    assert cpu.flags() == {"avx2", "avx512_bf16", "fma"} and cpu.has_native(torch.bfloat16)
    fake_cpu("avx2")
    assert not cpu.has_native(torch.bfloat16)


@pytest.mark.parametrize(
    ("cap", "bf16", "fp16"),
    [
        ("AVX2", False, False),
        ("avx512_core_vnni", False, False),  # oneDNN reads the name in any case
        ("AVX2_VNNI_2", False, True),  # the AVX2 line's AVX-NE-CONVERT
        ("AVX512_CORE_BF16", True, False),
        ("AVX10_1_512", True, True),
        ("AVX512_CORE_AMX", True, True),
        ("ALL", True, True),  # no cap
    ],
)
def test_a_onednn_cap_turns_off_the_native_paths_above_it(fake_cpu, monkeypatch, cap, bf16, fp16):
    fake_cpu("avx2 avx512f avx512_bf16 avx512_fp16 avx_ne_convert amx_bf16")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert cpu.has_native("bf16") is bf16 and cpu.has_native("fp16") is fp16
    # A hypothetical CPU's flags, given, are not this machine's: the cap does not apply.
    assert cpu.has_native("bf16", frozenset({"avx512_bf16"}))


def test_avx512f_is_unused_where_aten_dispatches_at_avx2(fake_cpu, monkeypatch):
    """Lesson 05 prints which vector units torch uses: under ATEN_CPU_CAPABILITY=avx2 (a
    rehearsal, read when torch starts) the AVX-512 units are there but unused."""
    fake_cpu("avx2 avx512f")
    cases = (  # ATen's capability, oneDNN's cap, what torch may use
        ("AVX512", "AVX2", {"avx2", "avx512f"}),
        ("AVX2", None, {"avx2", "avx512f"}),  # oneDNN alone still runs AVX-512 kernels
        ("AVX2", "AVX2", {"avx2"}),
    )
    for capability, cap, usable in cases:
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda c=capability: c)
        if cap is None:
            for name in cpu.ONEDNN_CAP_VARIABLES:
                monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
        assert cpu.usable_flags() == usable, (capability, cap)


def test_the_older_name_of_the_cap_counts_too(fake_cpu, monkeypatch):
    fake_cpu("avx2 avx512_bf16")
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX2")
    assert cpu.onednn_cap() == "AVX2" and not cpu.has_native("bf16")
    assert "no native bf16 (oneDNN capped at AVX2)" in cpu.describe()


def test_every_capped_flag_is_a_native_flag_of_the_table():
    native = frozenset().union(*(p.cpu_flags for p in precisions.PRECISIONS.values()))
    assert frozenset().union(*cpu.ONEDNN_CAPS.values()) == native


def test_an_unknown_rehearsal_names_the_valid_ones():
    with pytest.raises(ValueError, match="Unknown CPU rehearsal 'avx'. Valid choices: avx2"):
        cpu.rehearsal_environment("avx")
    assert cpu.rehearsal_environment(None) == {}  # no rehearsal: this machine as it is


PROBE = """
import json, os, torch
import amp_course as ac
rehearsal = ac.cpu.active_rehearsal()
settings = ac.lesson.start(smoke=True, device="cpu", verbose=False)
print(json.dumps({
    "aten": torch.backends.cpu.get_cpu_capability(),
    "torch_bf16": torch.ops.mkldnn._is_mkldnn_bf16_supported(),
    "course_bf16": ac.cpu.has_native(torch.bfloat16),
    "rehearsal": rehearsal and rehearsal.key,
    "header": settings.header(),
    "inductor_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
}))
"""


def _probe(env: dict) -> dict:
    """What a fresh Python with ``env`` (and no cap or fake flags of this one's) says."""
    drop = {
        *cpu.ONEDNN_CAP_VARIABLES,
        cpu.ATEN_CAP_VARIABLE,
        cpu.INDUCTOR_CACHE_VARIABLE,
        "AMP_COURSE_FAKE_CPU_FLAGS",
    }
    environment = {k: v for k, v in os.environ.items() if k not in drop}
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PROBE],
        env={**environment, **env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_the_avx2_rehearsal_dispatches_as_an_avx2_cpu_and_the_course_says_emulated():
    rehearsed = _probe(cpu.rehearsal_environment("avx2"))
    assert rehearsed["aten"] == "AVX2" and rehearsed["rehearsal"] == "avx2"
    # torch's own answer (oneDNN has no bf16 path under the cap) and the course's agree.
    assert rehearsed["torch_bf16"] is False and rehearsed["course_bf16"] is False
    assert "no native bf16" in rehearsed["header"]
    assert "Rehearsal: rehearsing a CPU without native bf16" in rehearsed["header"]
    plain = _probe({})
    assert plain["rehearsal"] is None and "Rehearsal" not in plain["header"]
    assert plain["inductor_cache"] is None  # uncapped: torch's own cache, left to torch
    # Without the caps the course says native exactly where the CPU has the flags.
    assert plain["course_bf16"] is bool(precisions.BF16.cpu_flags & cpu.flags())


def test_a_cap_set_by_hand_compiles_into_the_rehearsals_cache(tmp_path):
    """ATEN_CPU_CAPABILITY=avx2 set by hand, not by ``amp-course rehearse-cpu``: the lesson's
    kernel compiles into the AVX2 rehearsal's cache too. Into the plain one, its kernels aborted
    the next uncapped run of labs_modern_stack ("free(): invalid pointer", seen here)."""
    by_hand = _probe({cpu.ATEN_CAP_VARIABLE: "avx2", "TMPDIR": str(tmp_path)})
    rehearsals = Path(cpu.rehearsal_environment("avx2")[cpu.INDUCTOR_CACHE_VARIABLE]).name
    assert by_hand["inductor_cache"] == str(tmp_path / rehearsals)
    assert by_hand["aten"] == "AVX2" and by_hand["rehearsal"] is None  # oneDNN's cap not set


def test_a_cache_chosen_by_the_user_is_kept_and_every_entry_point_separates(monkeypatch):
    chosen = {cpu.ATEN_CAP_VARIABLE: "avx2", cpu.INDUCTOR_CACHE_VARIABLE: "/their/cache"}
    assert cpu.separate_inductor_cache(chosen) is None
    assert chosen[cpu.INDUCTOR_CACHE_VARIABLE] == "/their/cache"
    assert cpu.separate_inductor_cache({"OTHER": "1"}) is None
    # A hostile cap names no folder outside the temporary one.
    assert Path(cpu.inductor_cache("../../x")).parent == Path(tempfile.gettempdir())
    monkeypatch.setenv(cpu.ATEN_CAP_VARIABLE, "avx2")
    monkeypatch.delenv(cpu.INDUCTOR_CACHE_VARIABLE, raising=False)
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert os.environ.get(cpu.INDUCTOR_CACHE_VARIABLE) == cpu.inductor_cache("avx2")


def test_a_rehearsal_compiles_into_a_cache_of_its_own(monkeypatch):
    """inductor's cache does not key kernels by ATEN_CPU_CAPABILITY: labs_modern_stack's kernel,
    compiled under the AVX2 caps and reused by an uncapped run, corrupted the heap and the kernel
    died. A rehearsal's compiles never reach the cache that plain runs use."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    env = cpu.rehearsal_environment("avx2")
    assert env["TORCHINDUCTOR_CACHE_DIR"] != cache_dir()
    assert env["TORCHINDUCTOR_CACHE_DIR"].endswith("_rehearsing_avx2")


def test_on_a_mac_the_header_says_what_runs_where(monkeypatch):
    """Apple silicon: the CPU build, bf16 counted as emulated (measured in lesson 05, not assumed
    native), and the GPU lessons' CUDA GPUs are not this Mac's; nothing claimed about MPS."""
    monkeypatch.delenv("AMP_COURSE_FAKE_CPU_FLAGS", raising=False)
    monkeypatch.setattr(cpu.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(cpu.platform, "machine", lambda: "arm64")
    monkeypatch.setattr(cpu, "flags", lambda: frozenset())  # macOS has no /proc/cpuinfo
    assert cpu.apple_silicon() and not cpu.has_native("bf16")
    line = device.describe_hardware("cpu")
    assert "Apple silicon with PyTorch's CPU build" in line and "counted as emulated" in line
    assert "NVIDIA CUDA GPUs" in line and "(MPS)" in line
    assert "native bf16 (AVX512" not in line
