import shutil
import warnings

import pytest

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


def test_check_data_takes_a_folder_and_knows_a_renamed_file_by_its_content(tmp_path, capsys):
    """The argument may be a folder holding both files (as the default, data/, is), and a copy
    under another name is checked as whichever file it holds; a file that is neither says so (it
    was called a damaged subset, to be restored with `git checkout -- data/README.md`)."""
    assert cli.main(["check-data", str(data.data_dir())]) == 0
    assert capsys.readouterr().out.count("SHA-256 verified") == 2
    renamed = tmp_path / "mnist full copy.tar.xz"
    shutil.copy(data.data_dir() / data.FULL_FILE, renamed)
    assert cli.main(["check-data", str(renamed)]) == 0
    assert f"ok: full MNIST archive, SHA-256 verified ({renamed})" in capsys.readouterr().out
    other = tmp_path / "README.md"
    other.write_text("notes")
    assert cli.main(["check-data", str(other)]) == 1
    err = capsys.readouterr().err
    assert f"{other} is neither of the course's MNIST files" in err and "git" not in err


def test_check_data_says_when_it_checks_another_folder_than_amp_course_data(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("AMP_COURSE_DATA", str(tmp_path))  # holds no MNIST file
    assert cli.main(["check-data"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"note: $AMP_COURSE_DATA ({tmp_path}) holds no {data.SUBSET_FILE};")


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


@pytest.mark.parametrize(
    "argv, says",
    [
        (["info", "--device", "gpu"], "--device: Unknown device 'gpu'"),
        (["bench", "--device", "mps"], "--device: Unknown device 'mps'"),
        (["bench", "--workloads", "ladder", "--rungs", "bogus"], "Unknown rung(s) ['bogus']"),
        (["bench", "--workloads", "matmul", "--out", "{file}"], "is a file; it names the folder"),
        (["bench", "--workloads", "matmul", "--rungs", "eager"], "add --workloads ladder"),
    ],
    ids=["info-device", "bench-device", "bench-rung", "bench-out-a-file", "rungs-without-ladder"],
)
def test_a_mistyped_device_rung_or_output_is_one_line_before_anything_runs(
    tmp_path, monkeypatch, capsys, argv, says
):
    """A device name the course does not know ended in a traceback; an unknown ladder rung was
    found only once the run had begun, and an --out naming a file once every workload had run
    (its results lost): each is now one line and exit status 2, before any workload runs."""
    from amp_course import bench

    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("a workload ran"))
    (tmp_path / "results.txt").write_text("kept")
    argv = [a.format(file=tmp_path / "results.txt") for a in argv]
    try:
        code = cli.main(argv)
    except SystemExit as stopped:  # argparse's usage error
        code = stopped.code
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err
    assert (tmp_path / "results.txt").read_text() == "kept"


def test_bench_notes_a_missing_gpu_as_a_plain_line(monkeypatch, capsys):
    from amp_course import bench

    monkeypatch.setattr(device.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("a workload ran"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning escaping the command fails the test
        with pytest.raises(pytest.fail.Exception):
            cli.main(["bench", "--device", "cuda", "--workloads", "matmul"])
    out = capsys.readouterr().out
    assert out.startswith("note: DEVICE='cuda' was requested but no CUDA GPU is visible")


def test_bench_times_a_precision_named_twice_once(monkeypatch):
    from amp_course import bench

    seen = {}

    def run(config, device):
        seen["labels"] = [cell.label for cell in config.variants()]
        raise SystemExit(0)

    monkeypatch.setattr(bench, "run", run)
    try:
        cli.main(["bench", "--workloads", "matmul", "--precisions", "fp16,fp32,fp16"])
    except SystemExit:
        pass
    assert seen["labels"] == ["fp16", "fp32"]
