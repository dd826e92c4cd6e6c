"""The package's import graph, read from its sources (no module is imported): no cycle among
``amp_course`` modules, imports made inside functions included, and the layer that runs and
reports the course (``amp_course.tooling.runs``) imported only from above it."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import amp_course

PACKAGE = Path(amp_course.__file__).resolve().parent
# What may import amp_course.tooling.runs: the website (it renders the runs' reports) and the
# command line (whose table names the runs' commands, imported when one runs).
RUNS = "amp_course.tooling.runs"
ABOVE_RUNS = ("amp_course.tooling.website", "amp_course.cli")


def modules(package: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """{dotted name: (source file, whether it is a package's __init__)}."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")[: len(module.split(".")) - node.level + is_package]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(found: dict[str, tuple[Path, bool]]) -> dict[str, set[str]]:
    """Which package modules each module imports, anywhere in its source (``from x import y``:
    the module ``x.y`` if there is one, else ``x``). Importing ``a.b.c`` runs ``a.b``'s __init__
    first: an edge to it too, unless the importer sits inside ``a.b``."""
    graph = {name: set() for name in found}
    for name, (path, is_package) in found.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = _target(name, is_package, node)
                for alias in node.names:
                    targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in found else base)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        for target in targets & set(found):
            parts = target.split(".")
            for depth in range(1, len(parts) + 1):  # the packages above it, then the module
                ancestor = ".".join(parts[:depth])
                if depth == len(parts) or not name.startswith(ancestor + "."):
                    graph[name].add(ancestor)
        graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), set()

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.add(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph(modules())) == set(), "import cycles among amp_course modules"


def test_the_package_layers_have_no_cycle():
    """Seen as its top-level parts (a subpackage counted whole), the package is layered: no part
    imports one that imports it back, so each sits above everything it uses (the lab kit, for one,
    below the exercise checks that use it)."""
    parts = {}
    for name, targets in import_graph(modules()).items():
        part = ".".join(name.split(".")[:2])
        parts.setdefault(part, set()).update(
            ".".join(t.split(".")[:2]) for t in targets if t != "amp_course"
        )
    for part, targets in parts.items():
        targets.discard(part)
    assert cycles(parts) == set(), "parts of amp_course that import each other"


def test_only_the_website_and_command_lines_import_the_runs():
    graph = import_graph(modules())
    importers = {
        name
        for name, targets in graph.items()
        if not name.startswith(RUNS) and any(t == RUNS or t.startswith(RUNS + ".") for t in targets)
    }
    below = {name for name in importers if not name.startswith(ABOVE_RUNS)}
    assert below == set(), f"modules below {RUNS} import it: {sorted(below)}"
    assert "amp_course.tooling.website.gpu_page" in importers


@pytest.mark.parametrize(
    "sources, expected",
    [
        # a lazy import inside a function closes a cycle too
        ({"a": "from . import b", "b": "def f():\n    from .a import x"}, {("p.a", "p.b")}),
        # a subpackage's module importing its sibling does not cycle through the __init__
        ({"s/__init__": "from .m import x", "s/m": "from .n import y", "s/n": ""}, set()),
        # but one outside it that the __init__ imports does
        (
            {"s/__init__": "from ..c import x", "s/m": "", "c": "from .s.m import y"},
            {("p.c", "p.s")},
        ),
        (
            {"a": "import p.b", "b": "from .c import z", "c": "from . import a"},
            {("p.a", "p.b", "p.c")},
        ),
    ],
)
def test_the_cycle_finder_on_planted_packages(tmp_path, sources, expected):
    for name, text in {"__init__": "", **sources}.items():
        path = tmp_path / "p" / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert cycles(import_graph(modules(tmp_path / "p"))) == expected


# The command line: a thin shell over the library and the tooling alike.
COMMAND_LINES = ("amp_course.cli",)


# The library's one door into the tooling: what a committed GPU run printed, for lesson 09, read by
# the tooling's reader of the runs and of the copies' stamps, and nothing else of it.
TOOLING_DOOR = {
    "amp_course.gpu_runs": {"amp_course.tooling.gpu_copies", "amp_course.tooling.executed"}
}


def test_no_lesson_or_library_module_imports_the_tooling():
    """What lessons call is apart from the tooling (grading, GPU runs, the website, wheels, the
    smoke benchmark): no module of the library imports ``amp_course.tooling`` but its one door,
    ``amp_course.gpu_runs``, and that only the committed runs' reader; no lesson names it."""
    graph = import_graph(modules())
    library = {
        name: {t for t in targets if t.startswith("amp_course.tooling")}
        for name, targets in graph.items()
        if not name.startswith("amp_course.tooling")
        and name not in COMMAND_LINES
        and any(t.startswith("amp_course.tooling") for t in targets)
    }
    doors = {name: reached - {"amp_course.tooling"} for name, reached in library.items()}
    assert doors == TOOLING_DOOR, f"library modules that import the tooling: {doors}"
    for notebook in sorted((PACKAGE.parent / "notebooks").glob("*.ipynb")):
        assert "tooling" not in notebook.read_text(encoding="utf-8"), notebook.name


def test_the_gpu_command_starts_on_a_machine_without_the_jupyter_stack():
    """The GPU machine has no Jupyter stack until a command installs the carried wheels, and
    `python -m amp_course gpu --check-wheels` runs before that: the GPU run's modules import
    jupyter_client, nbformat, papermill and nbval only where they execute a notebook."""
    blocked = ("jupyter_client", "nbformat", "nbclient", "papermill", "nbval", "ipykernel", "zmq")
    script = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {blocked!r}:\n"
        "            raise ImportError('not on the GPU machine: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import amp_course.tooling.runs.gpu_cli, amp_course.tooling.runs.gpu_smoke\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=PACKAGE.parent, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
