"""The CUDA stand-in is as strict as torch.cuda, and the course names devices as torch accepts:
the crashes an H200 found on 2026-11-27 (an index-less ``torch.device("cuda")`` given to the
per-process memory fraction) reproduced on a CPU."""

import pytest
import torch
from cuda_double import GIB, FakeGpu

from amp_course import emulation, memory
from amp_course.device_index import cuda_index

INDEX_LESS = ("cuda", torch.device("cuda"))


@pytest.mark.parametrize("device", INDEX_LESS)
def test_the_stand_in_refuses_what_torch_refuses(monkeypatch, device):
    FakeGpu(monkeypatch)
    for refused in (
        lambda: torch.cuda.set_per_process_memory_fraction(0.5, device),
        lambda: torch.cuda.get_per_process_memory_fraction(device),
        lambda: torch.cuda.set_device(device),
    ):
        with pytest.raises(ValueError, match="Expected a torch.device with a specified index"):
            refused()
    # What torch accepts without an index, it accepts here.
    assert torch.cuda.mem_get_info(device) == (80 * GIB, 80 * GIB)
    assert torch.cuda.get_device_capability(device) == (9, 0)
    assert torch.cuda.memory_allocated(device) == 0
    with pytest.raises(ValueError, match="Expected a cuda device"):
        torch.cuda.memory_allocated("cpu")
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.cuda.get_device_properties(1)  # one GPU: cuda:0 only
    with pytest.raises(TypeError, match="must be `float`"):
        torch.cuda.set_per_process_memory_fraction(1, 0)


@pytest.mark.parametrize("device", [*INDEX_LESS, torch.device("cuda", 1), 1])
def test_cuda_index_is_one_every_query_accepts(monkeypatch, device):
    gpu = FakeGpu(monkeypatch, count=2)
    gpu.current = 1
    assert cuda_index(device) == 1
    torch.cuda.set_per_process_memory_fraction(0.25, cuda_index(device))
    assert torch.cuda.get_per_process_memory_fraction(cuda_index(device)) == 0.25
    with pytest.raises(ValueError, match="cpu is not a CUDA device"):
        cuda_index("cpu")


@pytest.mark.parametrize("device", INDEX_LESS)
def test_the_memory_queries_take_the_device_as_lessons_name_it(monkeypatch, device):
    """Lessons 08 and 10 stopped here on an H200 (ValueError in the fraction query)."""
    gpu = FakeGpu(monkeypatch, total=80 * GIB, free=70 * GIB, reserved=2 * GIB, allocated=GIB)
    gpu.fraction = 0.5
    assert memory.process_memory_fraction(device) == 0.5
    assert memory.usable_cuda_bytes(device) == 40 * GIB - 2 * GIB + GIB


@pytest.mark.parametrize("device", INDEX_LESS)
def test_the_t4_rehearsal_caps_the_memory_of_an_index_less_device(monkeypatch, device):
    """Every lesson stopped here under AMP_COURSE_EMULATE=t4 on an H200."""
    gpu = FakeGpu(monkeypatch, name="NVIDIA H200", total=140 * GIB)
    flash, cudnn = torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.cudnn_sdp_enabled()
    try:
        fraction = emulation.apply(emulation.PROFILES["t4"], device)
    finally:
        torch.backends.cuda.enable_flash_sdp(flash)
        torch.backends.cuda.enable_cudnn_sdp(cudnn)
    assert fraction == gpu.fraction == pytest.approx(15 / 140)
    assert ("set_per_process_memory_fraction", 0) in gpu.calls
