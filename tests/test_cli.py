import shutil
import warnings

from amp_course import cli, data, device


def test_check_data_ok(capsys):
    assert cli.main(["check-data"]) == 0
    assert "SHA-256 verified" in capsys.readouterr().out


def test_check_data_refuses_damaged_file(tmp_path, capsys):
    bad = tmp_path / data.SUBSET_FILE
    shutil.copy(data.data_dir() / data.SUBSET_FILE, bad)
    bad.write_bytes(bad.read_bytes()[:-10])
    assert cli.main(["check-data", str(bad)]) == 1
    assert "Refusing to use" in capsys.readouterr().err


def test_info(capsys):
    assert cli.main(["info", "--device", "cpu"]) == 0
    assert "autocast dtype" in capsys.readouterr().out


def test_info_prints_the_cpu_note_as_one_plain_line(fake_cpu, capsys):
    fake_cpu("avx2 fma")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning escaping the command fails the test
        assert cli.main(["info", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "no AVX512-BF16 or AMX that torch may use" in notes[0]
    assert "Warning" not in captured.out + captured.err and ".py:" not in captured.err


def test_info_without_a_gpu_notes_the_fallback(monkeypatch, fake_cpu, capsys):
    fake_cpu("avx2 avx512_bf16")
    monkeypatch.setattr(device.torch.cuda, "is_available", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cli.main(["info", "--device", "cuda"]) == 0
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and notes[0].startswith("note: DEVICE='cuda' was requested")
    assert "autocast dtype for this device: bf16" in out


def test_the_tooling_runs_as_amp_course_subcommands(capsys):
    """`amp-course --help` lists the tooling's commands; each takes its own arguments."""
    import pytest

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    listed = capsys.readouterr().out
    assert all(name in listed for name in ("gpu", "gpu-results", "smoke-bench", "website"))
    with pytest.raises(SystemExit) as status:
        cli.main(["smoke-bench", "--help"])
    assert status.value.code == 0 and "usage: amp-course smoke-bench" in capsys.readouterr().out
    assert cli.main(["gpu-results", "no-such-run"]) == 2
    assert "cannot read the GPU run in no-such-run" in capsys.readouterr().err
