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
