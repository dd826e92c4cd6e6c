"""Lesson 01's hardware line: what a GPU of each compute capability has tensor cores for, as the
course's table of GPUs (ac.gpus) says, run on a CPU with the CUDA stand-in."""

from types import SimpleNamespace

import pytest
import torch
from conftest import run_tagged
from cuda_double import FakeGpu

import amp_course as ac

LESSON = "01_number_formats"


@pytest.mark.parametrize(
    "model, capability, bf16, fp8",
    [
        ("T4", (7, 5), "no", "no"),
        ("A100 40GB", (8, 0), "yes", "no"),
        ("H100 SXM", (9, 0), "yes", "yes"),
    ],
)
def test_the_gpu_line_says_which_formats_have_tensor_cores(
    monkeypatch, capsys, model, capability, bf16, fp8
):
    FakeGpu(monkeypatch, model)
    settings = SimpleNamespace(on_gpu=True, capability=capability, hardware="a simulated GPU")
    ns = {"ac": ac, "torch": torch, "settings": settings, "device": torch.device("cuda")}
    run_tagged(LESSON, "tf32", namespace=ns)
    printed = capsys.readouterr().out
    line = f"compute capability {capability[0]}.{capability[1]}: bf16 tensor cores {bf16}, "
    assert line + f"fp8 tensor cores {fp8}" in printed
    # A T4's TF32 switches exist (torch's flags) but act on nothing: the line says so.
    assert ("this GPU has no TF32 tensor cores" in printed) == (model == "T4"), printed
