from amp_course import cli


def test_inspect_prints_every_format(capsys):
    assert cli.main(["inspect", "1"]) == 0
    out = capsys.readouterr().out
    assert "0 01111 0000000000" in out and "fp8 e5m2" in out and len(out.splitlines()) == 6


def test_inspect_one_format_overflow(capsys):
    assert cli.main(["inspect", "65520", "--format", "fp16"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("fp16") and " inf " in out and len(out.splitlines()) == 1


def test_inspect_unknown_format_is_explained(capsys):
    assert cli.main(["inspect", "1", "--format", "fp12"]) == 2
    assert "unknown format fp12" in capsys.readouterr().err
