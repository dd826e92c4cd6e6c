"""The GPU machine's offline bootstrap: the closure check, on wheels made here (no download)."""

import importlib.metadata
import importlib.resources
import zipfile

import pytest

from amp_course import cli
from amp_course.tooling.runs import wheels


def _wheel(folder, name, version, *requires):
    """A wheel holding only its METADATA, as pip download leaves it (the check reads no more)."""
    folder.mkdir(exist_ok=True)
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {req}" for req in requires]
    # A description that quotes metadata: after the headers, so never read as them.
    lines += ["", "Install it beside:", "Requires-Dist: not-a-requirement", "Version: 0"]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join(lines) + "\n")
    return path


def test_a_closed_set_passes_and_markers_are_read_for_the_machine(tmp_path):
    _wheel(tmp_path, "nbval", "0.11.0", "pytest>=7", "ipykernel", 'coverage; extra == "cov"')
    _wheel(tmp_path, "ipykernel", "7.4.0", "traitlets>=5.4", 'appnope; sys_platform == "darwin"')
    _wheel(tmp_path, "traitlets", "5.16.1", 'typing-extensions; python_version < "3.11"')
    assert wheels.check(tmp_path) == []


def test_every_way_a_set_can_fail_to_close_is_named(tmp_path):
    _wheel(tmp_path, "papermill", "2.7.0", "torch", "tenacity>=5.2", "nbformat")
    _wheel(tmp_path, "nbformat", "5.10.4")
    _wheel(tmp_path, "ipykernel", "7.4.0", "traitlets>=5.4")
    _wheel(tmp_path, "traitlets", "5.3.0")
    _wheel(tmp_path, "Tqdm", "4.67.1")  # the machine has tqdm: a second copy would shadow it
    problems = wheels.check(tmp_path)
    assert any("tenacity>=5.2: neither in the set nor on the machine" in p for p in problems)
    assert any("needs traitlets>=5.4; the set has 5.3.0" in p for p in problems)
    assert any("the machine has tqdm" in p for p in problems)
    assert len(problems) == 3  # torch is on the machine; nbformat is in the set
    _wheel(tmp_path / "two", "traitlets", "5.3.0")
    (tmp_path / "two" / "traitlets-5.16.1-py3-none-any.whl").write_bytes(
        _wheel(tmp_path / "other", "traitlets", "5.16.1").read_bytes()
    )
    assert wheels.check(tmp_path / "two") == ["two wheels of traitlets: 5.16.1 and 5.3.0"]


def test_the_command_checks_offline_and_prints_the_install_line(tmp_path, capsys):
    folder = tmp_path / ".whl"
    _wheel(folder, "papermill", "2.7.0", "nbclient>=0.2.0")
    assert cli.main(["gpu", "--check-wheels", str(folder)]) == 1  # nbclient missing
    assert "papermill-2.7.0-py3-none-any.whl needs nbclient>=0.2.0" in capsys.readouterr().err
    _wheel(folder, "nbclient", "0.11.0")
    assert cli.main(["gpu", "--check-wheels", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "2 wheels in" in out and f"--target /tmp/site {folder.as_posix()}/*.whl" in out
    assert "export PYTHONPATH=/tmp/site:$PWD AMP_COURSE_OFFLINE=1" in out
    # A mistyped folder is said as such, not counted as "0 wheels" too large to travel.
    assert cli.main(["gpu", "--check-wheels", str(tmp_path / "absent")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {tmp_path / 'absent'} is not a folder of wheels (--check-wheels)"
    )


def test_what_the_bootstrap_carries_has_a_version_and_is_not_on_the_machine():
    for name in wheels.NEEDED:
        assert wheels.pinned_version(name), name
        assert wheels.normalize(name) not in wheels.ON_MACHINE, name


def test_the_machine_list_says_where_it_was_read_and_has_timm_and_its_hub_client():
    text = (importlib.resources.files("amp_course.tooling.runs") / wheels.MACHINE_FILE).read_text()
    assert "2026-11-27" in text and "torch 2.11.0+cu130" in text
    assert wheels.ON_MACHINE["timm"] == "1.0.29" and wheels.ON_MACHINE["torch"] == "2.11.0"
    assert {"huggingface-hub", "hf-xet", "safetensors", "transformers", "lightning"} <= set(
        wheels.ON_MACHINE
    )


def test_a_recorded_machine_version_refuses_a_wheel_it_does_not_satisfy(tmp_path):
    machine = wheels.read_machine_packages("# read there\ntimm==1.0.29  # a comment\nPyYAML\n")
    assert machine == {"timm": "1.0.29", "pyyaml": None}
    _wheel(tmp_path, "lesson-extra", "1.0", "timm>=1.1", "pyyaml>=99")  # no version: assumed
    assert wheels.check(tmp_path, machine) == [
        "lesson_extra-1.0-py3-none-any.whl needs timm>=1.1; the machine has 1.0.29"
    ]
    _wheel(tmp_path / "ok", "lesson-extra", "1.0", "timm<2,>=1.0")
    assert wheels.check(tmp_path / "ok", machine) == []
    for line in ("timm>=1.0", "timm==1.0.*", "timm[hub]==1.0.29", 'timm; os_name == "posix"'):
        with pytest.raises(ValueError):
            wheels.read_machine_packages(line)


@pytest.mark.parametrize("root", wheels.NEEDED)
def test_what_is_carried_closes_over_the_machine_list_offline(root):
    """``root`` and what it requires, at the versions carried (this environment's), walked through
    their installed metadata: each requirement is met by the carried set or the machine's list."""
    requirement, machine = wheels._requirement_type(), wheels.ON_MACHINE
    carried, requires, todo = {}, [], [root]
    while todo:
        name = wheels.normalize(todo.pop())
        if name in carried or name in machine:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            if name != root:
                pytest.fail(f"{name} is carried but not installed here, so has no version")
            pytest.skip(f"{root} {wheels.PINS[root]} is not installed here: fetch reads its wheel")
        carried[name] = wheels.pinned_version(name)
        assert carried[name] == dist.version  # the version carried is this environment's
        for line in dist.requires or []:
            req = requirement(line)
            if req.marker is None or req.marker.evaluate(wheels.MARKER_ENV):
                requires.append((name, req))
                todo.append(req.name)
    for owner, req in requires:
        name = wheels.normalize(req.name)
        version = carried[name] if name in carried else machine[name]
        assert version is None or req.specifier.contains(version, prereleases=True), (
            f"{owner} needs {req}; {version} is carried or on the machine"
        )


# The Requires-Dist of the releases the bootstrap carried before the machine's list had timm and
# its Hub client, read from their wheels on 2026-11-27 (huggingface-hub 2.4.0's hf-xet marker cut
# to the machine's platform).
PUBLISHED = {
    "timm": ("1.0.31", ["torch", "torchvision", "pyyaml", "huggingface_hub", "safetensors"]),
    "huggingface-hub": (
        "2.4.0",
        [
            "click<9.0.0,>=8.4.2",
            "filelock>=3.10.0",
            "fsspec>=2023.5.0",
            'hf-xet<2.0.0,>=1.6.0; platform_machine == "x86_64"',
            "httpx2<3,>=2.0.0",
            "packaging>=20.9",
            "pyyaml>=5.1",
            "tqdm>=4.42.1",
            "typing-extensions>=4.1.0",
        ],
    ),
    "safetensors": ("0.8.0", []),
    "torchao": ("0.18.0", ['pytest==9.0.3; extra == "dev"']),
}


def test_fetch_closes_the_set_without_carrying_what_the_machine_has(tmp_path, monkeypatch):
    def download(specs, folder):
        """pip download, offline: this environment's own METADATA, else PUBLISHED's."""
        for spec in specs:
            name, version = spec.split("==")
            if name in PUBLISHED:
                assert PUBLISHED[name][0] == version
                _wheel(folder, name, version, *PUBLISHED[name][1])
                continue
            dist = importlib.metadata.distribution(name)
            assert dist.version == version
            with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as archive:
                archive.writestr(f"{name}-{version}.dist-info/METADATA", dist.read_text("METADATA"))

    monkeypatch.setattr(wheels, "_download", download)
    assert wheels.fetch(tmp_path) == []  # before: "hf-xet is required but has no version to carry"
    carried = {wheel.name for wheel in wheels._wheels(tmp_path)}
    assert {"papermill", "nbval", "ipykernel", "ipywidgets", "torchao"} <= carried
    assert not carried & set(wheels.ON_MACHINE)  # timm and its Hub client are the machine's
