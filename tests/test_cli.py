import shutil

from amp_course import cli, data


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
