"""The T4 rehearsal on a big GPU (``ac.emulation``) and the out-of-memory message, simulated on a
CPU: torch.cuda's queries are replaced by an H100's answers; the settings are torch's own flags."""

import warnings

import pytest
import torch
from cuda_double import FakeGpu

from amp_course import dist_train, emulation, lesson, memory, oom, recipe

GIB = 2**30
H100_BYTES = 80 * GIB


@pytest.fixture
def fake_h100(monkeypatch):
    """torch.cuda answering as one H100 would, refusing what torch refuses; the memory cap is
    recorded (``.fraction``), not set."""
    gpu = FakeGpu(
        monkeypatch, name="NVIDIA H100 80GB HBM3", total=H100_BYTES, free=H100_BYTES - GIB
    )
    saved = (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.cudnn_sdp_enabled())
    with recipe.tf32(False):  # puts back the TF32 settings the emulation changes
        yield gpu
    torch.backends.cuda.enable_flash_sdp(saved[0])
    torch.backends.cuda.enable_cudnn_sdp(saved[1])


def test_without_the_variable_nothing_is_emulated(monkeypatch, fake_h100, capsys):
    monkeypatch.delenv(emulation.ENV, raising=False)
    settings = lesson.start(smoke=False, device="cuda")
    assert settings.on_gpu and settings.emulated is None and settings.capability == (9, 0)
    assert settings.autocast_dtype is torch.bfloat16 and fake_h100.fraction == 1.0
    out = capsys.readouterr().out
    assert "bf16 and fp16" in out and "TF32 at start:" in out and "T4" not in out


def test_the_t4_rehearsal_caps_memory_and_switches_off_what_a_t4_lacks(
    monkeypatch, fake_h100, capsys
):
    monkeypatch.setenv(emulation.ENV, "t4")
    torch.backends.cuda.enable_flash_sdp(True)
    torch.backends.cuda.enable_cudnn_sdp(True)
    with recipe.tf32(True):  # TF32 on before the lesson starts, as code before it may leave it
        settings = lesson.start(smoke=False, device="cuda")
        assert recipe.tf32_enabled() == {"matmul": False, "conv": False}
        with recipe.tf32(True):  # asked for later, TF32 stays off: a T4 has none
            assert recipe.tf32_enabled() == {"matmul": False, "conv": False}
    assert fake_h100.fraction == pytest.approx(15 / 80)
    assert not torch.backends.cuda.flash_sdp_enabled()
    assert not torch.backends.cuda.cudnn_sdp_enabled()
    assert torch.backends.cuda.mem_efficient_sdp_enabled()  # a T4 runs this one
    # AUTO picks what a T4 gets: fp16 with a GradScaler, by compute capability 7.5.
    assert settings.capability == (7, 5) and settings.emulated is emulation.PROFILES["t4"]
    assert settings.autocast_dtype is torch.float16 and settings.use_grad_scaler
    header = capsys.readouterr().out
    assert "AMP dtype: fp16 (with GradScaler)" in header
    assert "TF32 at start: matmul off, cuDNN conv off" in header
    assert "emulating a Tesla T4 (sm_75)" in header and "15.0 GiB" in header
    # The T4's row of ac.gpus: no flash or cuDNN kernel, the memory-efficient one without bf16.
    assert "attention kernels: flash off, cuDNN off, efficient fp32 and fp16" in header
    assert "not a Tesla T4's" in header
    # The hardware line still names the real GPU and what it supports.
    assert "NVIDIA H100 80GB HBM3 (sm_90, 80 GiB, bf16 and fp16)" in header


def test_a_lesson_that_forces_bf16_in_the_rehearsal_is_told_what_a_t4_does(monkeypatch, fake_h100):
    monkeypatch.setenv(emulation.ENV, "t4")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said in the header, not as a warning on stderr
        settings = lesson.start(smoke=False, device="cuda", autocast_dtype="bf16", verbose=False)
    assert "Note: AMP dtype bf16 was asked for: a Tesla T4 has no bf16 tensor cores" in (
        settings.header()
    )
    assert settings.autocast_dtype is torch.bfloat16  # it still runs, as on a real T4


def test_a_real_t4_asked_for_bf16_is_told_so_in_the_header(monkeypatch):
    FakeGpu(monkeypatch, "T4")
    monkeypatch.delenv(emulation.ENV, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings = lesson.start(smoke=False, device="cuda", autocast_dtype="bf16", verbose=False)
    assert (
        "Note: AMP dtype bf16 was asked for: this GPU (sm_75) has no bf16 tensor cores (it runs "
        "bf16 emulated, and slowly); its AMP is fp16 with GradScaler."
    ) in settings.header()
    assert settings.autocast_dtype is torch.bfloat16
    # An A100 has them: no note.
    FakeGpu(monkeypatch, "A100 40GB")
    settings = lesson.start(smoke=False, device="cuda", autocast_dtype="bf16", verbose=False)
    assert "no bf16 tensor cores" not in settings.header()


def test_each_torchrun_rank_of_lesson_07_rehearses_the_t4_as_the_lesson_does(
    monkeypatch, fake_h100
):
    """Lesson 07's ranks inherit AMP_COURSE_EMULATE: each applies the T4's cap, kernels and TF32
    as the lesson's kernel does (they ran as the H100 they are)."""
    monkeypatch.setenv(emulation.ENV, "t4")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    for name, fake in {"init_process_group": None, "get_rank": 0, "get_world_size": 1}.items():
        monkeypatch.setattr(dist_train.dist, name, lambda *a, fake=fake, **k: fake)
    recipe.set_tf32(True)
    _, _, device = dist_train.setup()
    assert device.type == "cuda"
    assert memory.usable_cuda_bytes(device) == 15 * GIB
    assert recipe.tf32_enabled() == {"matmul": False, "conv": False}
    assert not torch.backends.cuda.flash_sdp_enabled()


def test_the_rehearsal_sizes_batches_to_the_cap(monkeypatch, fake_h100):
    # An H100 fits the ViT-L/16 batch of 32; the 15 GiB rehearsal makes fit_batch choose less.
    wanted, per_sample, fixed = 32, int(0.5 * GIB), 5 * GIB
    monkeypatch.delenv(emulation.ENV, raising=False)
    assert memory.usable_cuda_bytes("cuda") == H100_BYTES - GIB
    assert memory.fit_batch(wanted, per_sample, fixed, H100_BYTES - GIB).batch_size == wanted
    monkeypatch.setenv(emulation.ENV, "t4")
    lesson.start(smoke=False, device="cuda", verbose=False)
    usable = memory.usable_cuda_bytes("cuda")
    assert usable == 15 * GIB
    choice = memory.fit_batch(wanted, per_sample, fixed, usable)
    assert choice.batch_size == 8  # (15 * 0.85 - 5) GiB / 0.5 GiB = 15.5 samples: a multiple of 8
    assert "BATCH_SIZE=32" in choice.reason and "15.0 GiB" in choice.reason


def test_an_unknown_emulation_is_refused(monkeypatch):
    monkeypatch.setenv(emulation.ENV, "k80")
    with pytest.raises(ValueError, match="choose from t4"):
        emulation.active()


def test_the_out_of_memory_message_names_the_setting_and_the_cap():
    error = torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.19 "
        "GiB of which 60.00 GiB is free.\nOf the allocated memory ..."
    )
    lines = oom.message(error, ("BATCH_SIZE", "IMAGE_SIZE"), (15 * GIB, H100_BYTES), None)
    assert lines[0] == "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB."
    assert "may use 15.0 GiB of this GPU's 80.0 GiB" in lines[1]
    assert "Lower BATCH_SIZE or IMAGE_SIZE in the parameters cell" in lines[2]
    t4 = oom.message(error, (), (15 * GIB, H100_BYTES), emulation.PROFILES["t4"])
    assert "the Tesla T4 emulation's cap" in t4[1] and "batch size" in t4[2]


def test_an_out_of_memory_error_in_a_cell_shows_the_message_and_still_fails(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        assert oom.register(("BATCH_SIZE",), "cpu")
        result = shell.run_cell(
            "import torch\n"
            "raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 2.00 GiB. More.')"
        )
        shown = capsys.readouterr().out
        other = shell.run_cell("raise ValueError('not memory')")  # other errors: as before
        assert "Traceback" in capsys.readouterr().out
    finally:
        InteractiveShell.clear_instance()
    assert isinstance(result.error_in_exec, torch.OutOfMemoryError)  # the cell failed
    assert isinstance(other.error_in_exec, ValueError)
    assert "Tried to allocate 2.00 GiB." in shown and "Lower BATCH_SIZE" in shown
    assert "Traceback" not in shown and "More." not in shown


def test_the_out_of_memory_limits_read_the_cap_of_an_index_less_cuda_device(fake_h100):
    """The message's limits come from ``"cuda"`` as lessons name it (torch refuses that device in
    get_per_process_memory_fraction: the message crashed on a GPU)."""
    fake_h100.fraction = 15 / 80
    for device in ("cuda", torch.device("cuda"), torch.device("cuda", 0)):
        assert oom.memory_limits(device) == (15 * GIB, H100_BYTES)


def test_a_rehearsed_gpus_attention_kernels_hold_in_every_bench_step(monkeypatch):
    """Under a T4 rehearsal a bf16 step may use only the kernels a T4 runs bf16 in (math): the
    trainer asks ``ac.attention`` with the autocast dtype and restricts SDPA to its answer."""
    from amp_course import models, precisions
    from amp_course.bench import Variant, trainer

    asked, restricted = [], []
    monkeypatch.setattr(
        trainer, "emulated_kernels", lambda device, dtype: asked.append(dtype) or ["math"]
    )
    real_context = trainer.sdpa_context
    monkeypatch.setattr(
        trainer, "sdpa_context", lambda kernels: restricted.append(kernels) or real_context(kernels)
    )
    model = models.build_vit(
        "b16", image_size=32, patch_size=16, num_layers=1, num_heads=2, hidden_dim=32, mlp_dim=64
    )
    shared = trainer.Trainer(torch.device("cpu"), lambda kind: model)
    images, labels = torch.randn(2, 3, 32, 32), torch.randint(0, 1000, (2,))
    shared.step(Variant.matrix("bf16"), iter([(images, labels)]))()
    assert asked == [torch.bfloat16] and restricted == [["math"]]
    rung = Variant("+ flash", precisions.BF16, attention="flash", batch=2)
    shared.step(rung)()  # a rung's own kernel is kept
    assert restricted[-1] == "flash" and len(asked) == 1
