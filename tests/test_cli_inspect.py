from amp_course import cli
from amp_course.inspector import INSPECTED_FORMATS


def test_inspect_prints_every_format(capsys):
    assert cli.main(["inspect", "1"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert [line.split("  ")[0] for line in lines] == list(
        INSPECTED_FORMATS
    )  # each, once, in order
    assert "0 01111 0000000000" in lines[INSPECTED_FORMATS.index("fp16")]  # fp16's bits for 1


def test_inspect_one_format_overflow(capsys):
    assert cli.main(["inspect", "65520", "--format", "fp16"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("fp16") and " inf " in out and len(out.splitlines()) == 1


def test_inspect_unknown_format_is_explained(capsys):
    assert cli.main(["inspect", "1", "--format", "fp12"]) == 2
    assert "unknown format fp12" in capsys.readouterr().err
