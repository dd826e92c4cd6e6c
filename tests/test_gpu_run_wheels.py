"""The GPU machine's offline bootstrap: the closure check, on wheels made here (no download)."""

import zipfile

import pytest

from amp_course import gpu_run
from amp_course.runs import wheels


def _wheel(folder, name, version, *requires):
    """A wheel holding only its METADATA, as pip download leaves it (the check reads no more)."""
    folder.mkdir(exist_ok=True)
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {req}" for req in requires]
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join(lines) + "\n")
    return path


def test_a_closed_set_passes_and_markers_are_read_for_the_machine(tmp_path):
    _wheel(tmp_path, "nbval", "0.11.0", "pytest>=7", "ipykernel", 'coverage; extra == "cov"')
    _wheel(tmp_path, "ipykernel", "7.4.0", "traitlets>=5.4", 'appnope; sys_platform == "darwin"')
    _wheel(tmp_path, "traitlets", "5.16.1", 'typing-extensions; python_version < "3.11"')
    assert wheels.check(tmp_path) == []


def test_every_way_a_set_can_fail_to_close_is_named(tmp_path):
    _wheel(tmp_path, "timm", "1.0.31", "torch", "huggingface_hub", "safetensors")
    _wheel(tmp_path, "safetensors", "0.8.0")
    _wheel(tmp_path, "ipykernel", "7.4.0", "traitlets>=5.4")
    _wheel(tmp_path, "traitlets", "5.3.0")
    _wheel(tmp_path, "Tqdm", "4.67.1")  # the machine has tqdm: a second copy would shadow it
    problems = wheels.check(tmp_path)
    assert any("huggingface_hub: neither in the set nor on the machine" in p for p in problems)
    assert any("needs traitlets>=5.4; the set has 5.3.0" in p for p in problems)
    assert any("the machine has tqdm" in p for p in problems)
    assert len(problems) == 3  # torch is on the machine; safetensors is in the set
    _wheel(tmp_path / "two", "traitlets", "5.3.0")
    (tmp_path / "two" / "traitlets-5.16.1-py3-none-any.whl").write_bytes(
        _wheel(tmp_path / "other", "traitlets", "5.16.1").read_bytes()
    )
    assert wheels.check(tmp_path / "two") == ["two wheels of traitlets: 5.16.1 and 5.3.0"]


def test_the_command_checks_offline_and_prints_the_install_line(tmp_path, capsys):
    folder = tmp_path / ".whl"
    _wheel(folder, "papermill", "2.7.0", "nbclient>=0.2.0")
    assert gpu_run.main(["--check-wheels", str(folder)]) == 1  # nbclient missing
    assert "papermill-2.7.0-py3-none-any.whl needs nbclient>=0.2.0" in capsys.readouterr().err
    _wheel(folder, "nbclient", "0.11.0")
    assert gpu_run.main(["--check-wheels", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "2 wheels in" in out and f"--target /tmp/site {folder.as_posix()}/*.whl" in out
    assert "export PYTHONPATH=/tmp/site:$PWD AMP_COURSE_OFFLINE=1" in out


@pytest.mark.parametrize("name", ["torchao", "timm", "huggingface-hub", "safetensors"])
def test_what_this_environment_lacks_has_a_pin(name):
    assert wheels.pinned_version(name)
