"""Every course helper and every torch API that the prose names exists: a reader who types
``ac.gpus.lookup`` or ``torch.amp.GradScaler`` from a lesson, a quiz, the README, a guide or a
comment finds it (torch's names in the installed torch, the pinned one in CI).

Code cells are checked by running them; what they say in comments, and what markdown, quizzes,
guides and docstrings say, is checked here. A name is ``ac.`` or ``amp_course.`` followed by
dotted parts; each part is an attribute of the one before, or a submodule the package leaves to
an import by name (``ac.dist_train``, the torchrun script; ``amp_course.tooling``).
"""

import importlib
import re

import nbformat
import pytest
import torch
from conftest import NOTEBOOKS, ROOT

import amp_course as ac

NAME = re.compile(r"(?<![\w./])((?:ac|amp_course)(?:\.[A-Za-z_]\w*)+)")
TORCH_NAME = re.compile(r"(?<![\w./])(torch(?:\.[A-Za-z_]\w*)+)")


def resolves(name: str) -> bool:
    """Whether ``ac.x.y`` (or ``amp_course.x.y``) names something of the course, or
    ``torch.x.y`` something of torch: an attribute, or a submodule."""
    found, module = (torch, "torch") if name.startswith("torch.") else (ac, "amp_course")
    for part in name.split(".")[1:]:
        module += f".{part}"
        try:
            found = getattr(found, part)
        except AttributeError:
            try:
                found = importlib.import_module(module)
            except ImportError:
                return False
    return True


def comments(source: str) -> str:
    return "\n".join(line.split("#", 1)[1] for line in source.splitlines() if "#" in line)


def texts() -> dict[str, str]:
    """Where the prose stands -> the prose: lesson markdown and code comments, quiz sources, the
    README, the guides and the package's own docstrings and comments."""
    found = {}
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            prose = cell.source if cell.cell_type == "markdown" else comments(cell.source)
            found[f"{path.name}:{cell.get('id')}"] = prose
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "quizzes" / "source").glob("*.yaml"))
    files += sorted((ROOT / "amp_course").rglob("*.py"))
    for path in files:
        found[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return found


def unknown(prose: dict[str, str], pattern=NAME) -> list[tuple[str, str]]:
    return [
        (where, name)
        for where, text in prose.items()
        for name in dict.fromkeys(pattern.findall(text))
        if not resolves(name)
    ]


def test_every_helper_the_prose_names_exists():
    prose = texts()
    named = {name for text in prose.values() for name in NAME.findall(text)}
    assert len(named) > 100, sorted(named)  # the scan reads the course, not an empty folder
    missing = unknown(prose)
    assert not missing, "Names of the course that do not exist (renamed or moved?):\n" + "\n".join(
        f"  {where}: {name}" for where, name in missing
    )


def test_every_torch_api_the_prose_names_exists():
    prose = texts()
    assert sum(len(TORCH_NAME.findall(text)) for text in prose.values()) > 300
    missing = unknown(prose, TORCH_NAME)
    assert not missing, f"torch {torch.__version__} has no such name:\n" + "\n".join(
        f"  {where}: {name}" for where, name in missing
    )


@pytest.mark.parametrize(
    "name, exists",
    [
        ("ac.gpus.lookup", True),
        ("ac.dist_train", True),  # a submodule the package leaves to an import by name
        ("ac.cpu.flags", True),
        ("ac.device.cpu_flags", False),  # moved to ac.cpu
        ("ac.memory.fake_cuda.ATTENTION_KERNELS", False),
        ("ac.no_such_module", False),
        ("amp_course.tooling.nbval_grading", True),
        ("amp_course.tooling.nbval", False),
        ("torch.amp.GradScaler", True),
        ("torch.utils.flop_counter.FlopCounterMode", True),  # a submodule torch leaves unimported
        ("torch.cuda.amp.GradScalar", False),
    ],
)
def test_a_name_resolves_only_if_the_course_has_it(name, exists):
    assert resolves(name) is exists
    pattern = TORCH_NAME if name.startswith("torch.") else NAME
    assert unknown({"planted": f"see `{name}`, and (ac.gpus.GPUS, torch.float16)"}, pattern) == (
        [] if exists else [("planted", name)]
    )
