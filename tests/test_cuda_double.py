"""The CUDA stand-in is as strict as torch.cuda, and the course names devices as torch accepts:
the crashes an H200 found on 2026-11-27 (an index-less ``torch.device("cuda")`` given to the
per-process memory fraction) reproduced on a CPU."""

import pytest
import torch
from cuda_double import GIB, FakeGpu

from amp_course import emulation, gpus, memory, timing
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


@pytest.mark.parametrize("model", ["T4", "A100 40GB", "H100 SXM", "H100 PCIe"])
def test_each_card_is_its_row_of_the_gpu_table(monkeypatch, model):
    row = gpus.GPUS[model]
    FakeGpu(monkeypatch, model)
    properties = torch.cuda.get_device_properties(0)
    assert torch.cuda.get_device_name(0) == row.device_name
    assert torch.cuda.get_device_capability(0) == row.capability
    assert properties.multi_processor_count == row.sms
    assert properties.total_memory == row.memory_gb * GIB
    assert gpus.lookup(torch.cuda.get_device_name(0)) is row


def test_allocated_and_peak_memory_move_with_allocations_and_reset_when_asked(monkeypatch):
    gpu = FakeGpu(monkeypatch)
    weights = gpu.allocate(3 * GIB)
    activations = gpu.allocate(2 * GIB)
    assert torch.cuda.memory_allocated() == torch.cuda.max_memory_allocated() == 5 * GIB
    gpu.release(activations)
    assert torch.cuda.memory_allocated() == 3 * GIB and torch.cuda.max_memory_allocated() == 5 * GIB
    assert torch.cuda.memory_reserved() == 5 * GIB  # freed blocks stay cached
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == 3 * GIB  # the peak restarts from what is held
    assert torch.cuda.max_memory_reserved() == 5 * GIB
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == 3 * GIB
    assert torch.cuda.mem_get_info() == (77 * GIB, 80 * GIB)
    gpu.release(weights)
    assert torch.cuda.memory_allocated() == 0 and ("reset_peak_memory_stats", 0) in gpu.calls


def test_memory_stats_has_torchs_key_names(monkeypatch):
    gpu = FakeGpu(monkeypatch)
    gpu.allocate(GIB)
    gpu.allocate(1000)  # under 1 MB: the small pool
    stats = torch.cuda.memory_stats()
    for key in (
        "allocated_bytes.all.current",
        "allocated_bytes.all.peak",
        "allocated_bytes.large_pool.freed",
        "reserved_bytes.all.current",
        "active_bytes.small_pool.allocated",
        "allocation.all.current",
        "segment.all.peak",
        "num_alloc_retries",
        "num_ooms",
    ):
        assert key in stats, key
    assert stats["allocated_bytes.small_pool.current"] == 1000
    assert stats["allocation.all.current"] == 2
    # torch's own summary reads every core statistic by its name: it renders from the stand-in.
    summary = torch.cuda.memory_summary()
    assert "Allocated memory" in summary and "1024 MiB" in summary


def test_an_allocation_past_the_cap_retries_after_freeing_the_cache_then_runs_out(monkeypatch):
    gpu = FakeGpu(monkeypatch, total=16 * GIB, fraction=0.5)  # 8 GiB for this process
    gpu.release(gpu.allocate(6 * GIB))  # cached: 6 GiB reserved, none allocated
    gpu.allocate(7 * GIB)  # fits only once the cache is given back
    stats = torch.cuda.memory_stats()
    assert stats["num_alloc_retries"] == 1 and stats["num_ooms"] == 0
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate 2.00 GiB"):
        gpu.allocate(2 * GIB)
    assert torch.cuda.memory_stats()["num_ooms"] == 1
    assert torch.cuda.memory_allocated() == 7 * GIB  # the failed allocation holds nothing


def test_synchronize_records_each_call_with_its_device(monkeypatch):
    gpu = FakeGpu(monkeypatch, count=2)
    torch.cuda.synchronize()
    torch.cuda.synchronize("cuda:1")
    timing.synchronize(torch.device("cuda", 1))
    assert [call for call in gpu.calls if call[0] == "synchronize"] == [
        ("synchronize", 0),
        ("synchronize", 1),
        ("synchronize", 1),
    ]


@pytest.mark.parametrize("model, native", [("T4", False), ("A100 40GB", True), ("H100 SXM", True)])
def test_bf16_support_is_answered_as_torch_answers_for_the_capability(monkeypatch, model, native):
    FakeGpu(monkeypatch, model)
    assert torch.cuda.is_bf16_supported(including_emulation=False) is native
    assert torch.cuda.is_bf16_supported() is True  # emulated where not native, as on a T4
    assert torch.cuda.is_tf32_supported() is native


def test_indices_past_the_last_gpu_are_refused_as_torch_refuses(monkeypatch):
    FakeGpu(monkeypatch, count=2)
    assert torch.cuda.get_device_name(1) == gpus.GPUS["H100 SXM"].device_name
    for index in (2, -1, torch.device("cuda", 2)):
        with pytest.raises(AssertionError, match="Invalid device id"):
            torch.cuda.get_device_properties(index)
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.cuda.memory_stats(2)
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.cuda.synchronize(2)
