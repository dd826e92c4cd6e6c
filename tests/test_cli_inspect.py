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
    assert "unknown format 'fp12'; choose from fp32" in capsys.readouterr().err
    assert cli.main(["inspect", "1", "--format", ""]) == 2
    assert "unknown format ''" in capsys.readouterr().err


def test_inspect_takes_fp8_for_both_and_a_name_in_any_case_or_with_an_underscore(capsys):
    """The command's summary names fp8; "fp8 e4m3" typed unquoted needs another spelling."""
    assert cli.main(["inspect", "1", "--format", "fp8"]) == 0
    assert [line.split()[:2] for line in capsys.readouterr().out.splitlines()] == [
        ["fp8", "e4m3"],
        ["fp8", "e5m2"],
    ]
    assert cli.main(["inspect", "1", "--format", "FP8_E5M2", "--format", "BF16"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in shown] == ["fp8", "bf16"], shown


def test_inspect_notes_a_value_beyond_float64(capsys):
    assert cli.main(["inspect", "1e400", "--format", "fp16"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("note: 1e400 is beyond float64's range") and " inf " in out
    assert cli.main(["inspect", "inf", "--format", "fp16"]) == 0
    assert "note" not in capsys.readouterr().out
