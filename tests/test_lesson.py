import pytest
import torch

from amp_course import lesson


def test_smoke_resolution(monkeypatch):
    monkeypatch.delenv(lesson.SMOKE_ENV, raising=False)
    assert lesson.resolve_smoke(None, torch.device("cpu")) is True
    assert lesson.resolve_smoke(None, torch.device("cuda")) is False
    assert lesson.resolve_smoke(False, torch.device("cpu")) is False
    monkeypatch.setenv(lesson.SMOKE_ENV, "1")
    assert lesson.resolve_smoke(None, torch.device("cuda")) is True


@pytest.mark.parametrize(
    "text, smoke", [("false", False), ("False", False), ("0", False), ("yes", True)]
)
def test_smoke_given_as_text_means_what_it_says(text, smoke):
    """`papermill -p SMOKE false` hands the lesson the text 'false' (papermill turns only 'False'
    into a bool); it must not count as a true value and run in smoke mode."""
    assert lesson.resolve_smoke(text, torch.device("cuda")) is smoke


@pytest.mark.parametrize(
    "setting", [{"smoke": "maybe"}, {"seed": "x"}, {"seed": 1.5}, {"seed": None}]
)
def test_a_smoke_or_seed_that_means_nothing_is_named(setting):
    ((name, value),) = setting.items()
    with pytest.raises(ValueError, match=f"^{name.upper()}={value!r}: "):
        lesson.start(device="cpu", verbose=False, **setting)


@pytest.mark.parametrize("name", ["fp32", "float32", "tf32"])
def test_an_amp_dtype_without_autocast_is_refused_by_name(name):
    """Lesson 05 set to AMP_DTYPE='fp32' ran until its two recipes, both 'fp32', fell into one
    dict entry ('not enough values to unpack')."""
    with pytest.raises(
        ValueError, match=f"^AMP_DTYPE='{name}': 'auto', 'bf16' or 'fp16' \\(it turns autocast off"
    ):
        lesson.start(device="cpu", autocast_dtype=name, verbose=False)


def test_a_seed_given_as_text_seeds_as_its_number():
    assert lesson.start(device="cpu", seed="7", verbose=False).seed == 7


def test_start_seeds_and_reports(capsys):
    settings = lesson.start(smoke=True, device="cpu", seed=3, autocast_dtype="bf16")
    first = torch.rand(1)
    lesson.start(smoke=True, device="cpu", seed=3, autocast_dtype="bf16", verbose=False)
    assert torch.equal(first, torch.rand(1))
    assert settings.autocast_dtype is torch.bfloat16 and not settings.use_grad_scaler
    assert "smoke" in capsys.readouterr().out


def test_fp16_setting_turns_on_the_scaler():
    settings = lesson.start(smoke=True, device="cpu", autocast_dtype="fp16", verbose=False)
    assert settings.use_grad_scaler


def test_bad_dtype_name_is_explained():
    with pytest.raises(ValueError, match="Valid choices"):
        lesson.start(device="cpu", autocast_dtype="float8")


def test_a_cpu_lesson_on_a_machine_with_cuda_is_smoke_and_gets_the_subset(monkeypatch):
    # The lesson's device decides, not whether CUDA is present: DEVICE="cpu" on a GPU machine.
    from amp_course import data

    monkeypatch.delenv(lesson.SMOKE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    # cuDNN's first version check asks the GPUs this stand-in does not have (min() of none); a
    # test that asked earlier in the same process hid it. The lesson's header needs no cuDNN.
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: False)
    settings = lesson.start(device="cpu", verbose=False)
    assert settings.device.type == "cpu" and settings.smoke
    assert data.load_mnist(settings).source.startswith("shipped MNIST subset, smoke mode")


def test_the_smoke_variable_decides_for_lessons_data_and_the_benchmark(monkeypatch):
    from amp_course import data

    monkeypatch.setenv(lesson.SMOKE_ENV, "0")
    assert lesson.start(device="cpu", verbose=False).smoke is False
    assert data._default_smoke() is False  # load_mnist() outside a lesson asks the same rule
    monkeypatch.setenv(lesson.SMOKE_ENV, "1")
    assert data._default_smoke() is True
