"""The GPU machine's offline bootstrap: the wheels it lacks, fetched here, checked to form a closed
set, and the line that installs them there.

The GPU machine has Python 3.12 with torch 2.11, torchvision, timm, transformers, lightning and
what they bring, but no package index, no Jupyter stack and no torchao: ``gpu_machine_packages.txt``
beside this module records its packages (with the versions read there), ``ON_MACHINE`` holds them.
The GPU run needs papermill, nbval and a kernel (ipykernel, ipywidgets), lesson 09's FP8 training
torchao. ``fetch`` downloads them and everything they require that the machine lacks, as CPython
3.12 manylinux x86_64 wheels, one version each: the version this environment runs the tests with
where it has the package, else the pin in ``PINS``. ``check`` reads every wheel's requirements and
refuses the set unless each one is met by a wheel of the set or by a package on the machine (at
its recorded version, where one was recorded).

    amp-course gpu --fetch-wheels .whl   # download, check, print the install line
    amp-course gpu --check-wheels .whl   # check only (no network)
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from ...env_vars import OFFLINE
from ...paths import ROOT

# What the GPU run and the lessons import on the machine that it does not have. Not timm: the
# machine has timm 1.0.29 (with its Hub client), which lesson 10 and the bench use as it is.
NEEDED = ("papermill", "nbval", "nbclient", "nbformat", "ipykernel", "ipywidgets", "torchao")
# Versions for packages this environment does not have (it has the Jupyter stack).
# torchao 0.18.0 is the newest release, and it loads its compiled kernels from torch 2.11 on
# (torchao/__init__.py: min_torch_version 2.11.0; since 0.17.0 torchao is built against torch's
# stable ABI instead of one exact torch version, pytorch/ao#2919).
PINS = {"torchao": "0.18.0"}
MACHINE_FILE = "gpu_machine_packages.txt"  # beside this module: the machine's packages
PYTHON = "3.12"
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
# What the machine's interpreter looks like to a requirement's environment marker.
MARKER_ENV = {
    "python_version": PYTHON,
    "python_full_version": f"{PYTHON}.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}
BUDGET_BYTES = 64 * 2**20  # what travels to the machine: the working tree and the wheels


def normalize(name: str) -> str:
    """A distribution name as an index compares it: ``PyYAML``, ``pyyaml`` -> ``pyyaml``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_type():
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip vendors it
        from pip._vendor.packaging.requirements import Requirement
    return Requirement


def read_machine_packages(text: str) -> dict[str, str | None]:
    """The packages a list like ``gpu_machine_packages.txt`` names: normalized name -> the
    recorded version, or None where none was recorded. Comments start with ``#``."""
    packages: dict[str, str | None] = {}
    for line in text.splitlines():
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        req = _requirement_type()(entry)
        pins = list(req.specifier)
        ops = [pin.operator for pin in pins]
        if req.extras or req.marker or req.url or ops not in ([], ["=="]) or "*" in entry:
            raise ValueError(f"{MACHINE_FILE}: not a name or name==version: {line!r}")
        packages[normalize(req.name)] = pins[0].version if pins else None
    return packages


# On the GPU machine already; never carried (a second copy on PYTHONPATH would shadow the
# machine's own). Read from the package, so that a wheel install of the course has it too.
ON_MACHINE = read_machine_packages(
    importlib.resources.files(__package__).joinpath(MACHINE_FILE).read_text(encoding="utf-8")
)


@dataclass(frozen=True)
class Wheel:
    """One wheel file: its distribution, version and the requirements that apply on the machine."""

    path: Path
    name: str
    version: str
    requires: tuple  # packaging Requirements

    @classmethod
    def read(cls, path: Path) -> Wheel:
        requirement = _requirement_type()
        with zipfile.ZipFile(path) as archive:
            meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            # The headers only: the description after them may hold lines like "Version: 2".
            fields = HeaderParser().parsestr(archive.read(meta).decode("utf-8"))
        requires = []
        for line in fields.get_all("Requires-Dist") or []:
            req = requirement(line)
            if req.marker is None or req.marker.evaluate(MARKER_ENV):
                requires.append(req)
        return cls(path, normalize(fields["Name"]), fields["Version"].strip(), tuple(requires))


def _machine(on_machine: Mapping[str, str | None] | Iterable[str]) -> dict[str, str | None]:
    """The machine's packages by normalized name: from a mapping to versions, or bare names."""
    if isinstance(on_machine, Mapping):
        return {normalize(name): version for name, version in on_machine.items()}
    return dict.fromkeys(map(normalize, on_machine))


def check(folder: Path, on_machine=ON_MACHINE) -> list[str]:
    """What is wrong with the wheels in ``folder`` (nothing: an empty list): a package twice, one
    that the machine has, a requirement neither the set nor the machine meets, or one that the
    set's version, or the machine's recorded version, does not satisfy (``on_machine``: as
    ``ON_MACHINE``, or bare names)."""
    wheels = _wheels(folder)
    problems, have = [], {}
    machine = _machine(on_machine)
    for wheel in wheels:
        if wheel.name in have:
            problems.append(f"two wheels of {wheel.name}: {have[wheel.name]} and {wheel.version}")
        if wheel.name in machine:
            problems.append(f"{wheel.path.name}: the machine has {wheel.name}; do not shadow it")
        have[wheel.name] = wheel.version
    for wheel in wheels:
        for req in wheel.requires:
            name = normalize(req.name)
            if name in have:
                if not req.specifier.contains(have[name], prereleases=True):
                    problems.append(f"{wheel.path.name} needs {req}; the set has {have[name]}")
            elif name not in machine:
                problems.append(
                    f"{wheel.path.name} needs {req}: neither in the set nor on the machine"
                )
            elif machine[name] and not req.specifier.contains(machine[name], prereleases=True):
                # A machine package is never carried: a wheel it is too old (or new) for is refused.
                problems.append(f"{wheel.path.name} needs {req}; the machine has {machine[name]}")
    return problems


def pinned_version(name: str) -> str | None:
    """The version to carry: this environment's, else the pin; None when neither names one."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return PINS.get(normalize(name))


def _download(specs: list[str], folder: Path) -> None:
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", PYTHON, "--implementation", "cp", "-d", str(folder)]
    command += [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    result = subprocess.run([*command, *specs], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"pip download failed:\n{result.stderr[-3000:]}")


def _wheels(folder: Path) -> list[Wheel]:
    return [Wheel.read(path) for path in sorted(Path(folder).glob("*.whl"))]


def fetch(folder: Path, needed=NEEDED, on_machine=ON_MACHINE) -> list[str]:
    """Download ``needed`` and what they require that the machine lacks into ``folder``, until the
    set is closed; returns the problems that remain (``check``'s, and requirements without a
    version to carry). Wheels of other versions, or of packages no longer needed, are removed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    machine = set(_machine(on_machine))
    wanted: dict[str, str] = {}
    unpinned: set[str] = set()
    todo = {normalize(name) for name in needed}
    while todo:
        for name in todo:
            version = pinned_version(name)
            if version is None:
                unpinned.add(name)
            else:
                wanted[name] = version
        present = {(wheel.name, wheel.version) for wheel in _wheels(folder)}
        missing = [f"{n}=={v}" for n, v in sorted(wanted.items()) if (n, v) not in present]
        if missing:
            _download(missing, folder)
        required = {
            normalize(req.name)
            for wheel in _wheels(folder)
            if wanted.get(wheel.name) == wheel.version
            for req in wheel.requires
        }
        todo = required - set(wanted) - machine - unpinned
    for wheel in _wheels(folder):
        if wanted.get(wheel.name) != wheel.version:
            wheel.path.unlink()
    lacking = [f"{name} is required but has no version to carry: pin it" for name in unpinned]
    return sorted(lacking) + check(folder, on_machine)


def install_line(folder: Path) -> str:
    """The shell line that starts every GPU command: install the set beside the machine's own
    packages and point Python at it (and at the checkout, for nbval's kernels)."""
    return (
        "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "
        f"--target /tmp/site {folder.as_posix()}/*.whl && export PYTHONPATH=/tmp/site:$PWD "
        f"{OFFLINE}=1 PYTHONUNBUFFERED=1 || exit;"
    )


def report(folder: Path, problems: list[str], tree_bytes: int = 0) -> int:
    """Print the problems, or the set's size and its install line; the exit status."""
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    wheels = sorted(Path(folder).glob("*.whl"))
    size = sum(path.stat().st_size for path in wheels)
    print(
        f"{len(wheels)} wheels in {folder}/, {size / 2**20:.1f} MiB; with the working tree "
        f"({tree_bytes / 2**20:.1f} MiB) {(size + tree_bytes) / 2**20:.1f} of the "
        f"{BUDGET_BYTES / 2**20:.0f} MiB that travel"
    )
    if size + tree_bytes > BUDGET_BYTES:
        problems = [*problems, "over the budget"]
        print("problem: the wheels and the working tree exceed what travels", file=sys.stderr)
    if problems:
        return 1
    print("Every requirement is met by the set or by the GPU machine's own packages.")
    print(f"Start each GPU command with (carry {folder}):")
    print(install_line(folder))
    return 0


def tree_bytes(root: Path) -> int:
    """Bytes of the files git tracks or would add in the checkout at ``root`` (what travels)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:
        return 0
    files = (root / name for name in listed.stdout.split("\0") if name)
    return sum(path.stat().st_size for path in files if path.is_file())


def bootstrap(folder: Path, download: bool, root: Path = ROOT) -> int:
    """Fetch (or only check) the set in ``folder`` for the checkout at ``root``, print what
    ``report`` prints; the exit status (``amp-course gpu --fetch-wheels`` / ``--check-wheels``)."""
    if not download and not Path(folder).is_dir():  # not "0 wheels": a mistyped path
        print(f"error: {folder} is not a folder of wheels (--check-wheels)", file=sys.stderr)
        return 2
    try:
        problems = fetch(folder) if download else check(folder)
    except (OSError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return report(folder, problems, tree_bytes(root))
