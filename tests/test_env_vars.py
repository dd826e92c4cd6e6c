"""Every environment variable the course reads is named once, in ``ac.env_vars``, and documented."""

import ast
import re

from conftest import ROOT

from amp_course import env_vars

SPELLED = re.compile(r"AMP_COURSE_[A-Z0-9_]+")


def spelled_in_code(source: str) -> list[str]:
    """The ``AMP_COURSE_*`` names a module's code spells in a string (docstrings are prose)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
        for name in SPELLED.findall(node.value)
    ]


def test_the_scan_finds_a_spelled_name_and_skips_prose():
    assert spelled_in_code('os.environ.get("AMP_COURSE_SMOKE")\n') == ["AMP_COURSE_SMOKE"]
    assert spelled_in_code('x = f"AMP_COURSE_OFFLINE={1}"\n') == ["AMP_COURSE_OFFLINE"]
    assert spelled_in_code('"""Set $AMP_COURSE_SMOKE."""\n# AMP_COURSE_DATA\n') == []


def test_no_module_but_env_vars_spells_a_variable():
    found = {
        str(path.relative_to(ROOT)): names
        for path in sorted((ROOT / "amp_course").rglob("*.py"))
        if path.name != "env_vars.py"
        if (names := spelled_in_code(path.read_text(encoding="utf-8")))
    }
    assert found == {}, f"read these through ac.env_vars instead: {found}"


def test_every_name_is_documented_in_one_line():
    names = {v for k, v in vars(env_vars).items() if k.isupper() and isinstance(v, str)}
    assert names == set(env_vars.MEANINGS)
    for name, meaning in env_vars.MEANINGS.items():
        assert name.startswith("AMP_COURSE_") and meaning.strip() and "\n" not in meaning, name


def test_every_variable_mentioned_anywhere_is_one_the_course_names():
    files = [*(ROOT / "amp_course").rglob("*.py"), *(ROOT / "tests").glob("*.py")]
    files += [ROOT / "Makefile", ROOT / "README.md", *(ROOT / "notebooks").glob("*.ipynb")]
    files += [*(ROOT / "docs").glob("*.md")]  # the guides the README links
    mentioned = {
        (name, str(path.relative_to(ROOT)))
        for path in files
        for name in SPELLED.findall(path.read_text(encoding="utf-8"))
    }
    unknown = sorted(pair for pair in mentioned if pair[0] not in env_vars.MEANINGS)
    assert unknown == []


def test_flag_reads_yes_no_and_unset(monkeypatch):
    for value, expected in (("1", True), ("TRUE", True), ("0", False), ("no", False), ("", None)):
        monkeypatch.setenv(env_vars.SMOKE, value)
        assert env_vars.flag(env_vars.SMOKE) is expected
    monkeypatch.delenv(env_vars.SMOKE)
    assert env_vars.flag(env_vars.SMOKE) is None
