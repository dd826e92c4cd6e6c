"""ac.torchao_support: where torchao's compiled optimizer steps may run, and its import's warnings
explained (torchao itself is optional; a stand-in package plays it here)."""

import logging

import fake_torchao
import pytest
import torch

import amp_course as ac
from amp_course import torchao_support


@pytest.mark.parametrize("capability", [(7, 5), (7, 0)])
def test_bf16_stochastic_rounding_is_not_compiled_below_ampere(capability):
    problem = torchao_support.compiled_step_problem("cuda", capability, bf16=True)
    assert problem is not None
    assert f"{capability[0]}.{capability[1]}" in problem and "8.0" in problem


@pytest.mark.parametrize("capability", [(8, 0), (8, 9), (9, 0), (10, 0)])
def test_bf16_stochastic_rounding_runs_from_ampere_on(capability):
    assert torchao_support.compiled_step_problem("cuda", capability, bf16=True) is None


def test_fp32_parameters_step_on_any_gpu():
    """AdamW8bit's fp32 step has no bf16 code: a T4 runs it."""
    assert torchao_support.compiled_step_problem(torch.device("cuda", 0), (7, 5)) is None


@pytest.mark.parametrize("bf16", [False, True])
def test_a_cpu_never_waits_on_torchaos_cpp_compile(bf16):
    problem = torchao_support.compiled_step_problem("cpu", None, bf16=bf16)
    assert problem is not None and "C++" in problem


def test_an_emulated_t4_skips_the_bf16_run(monkeypatch):
    """Lesson 09 passes settings.capability: a rehearsed T4's on a bigger GPU."""
    monkeypatch.setenv(ac.emulation.ENV, "t4")
    capability = ac.emulation.capability("cuda")
    assert torchao_support.compiled_step_problem("cuda", capability, bf16=True) is not None


def test_the_import_warning_is_explained_not_printed(tmp_path, monkeypatch, capsys):
    fake_torchao.install(
        tmp_path,
        monkeypatch,
        "import logging\n__version__ = '0.18.0'\n"
        "logging.getLogger(__name__).warning('Failed to load /x/_C_mxfp8.so: undefined symbol')\n",
    )
    # A handler on the root logger, as logging.basicConfig() leaves one, sees none of them.
    heard = []
    root = logging.getLogger()
    handler = logging.Handler()
    handler.emit = lambda record: heard.append(record.getMessage())
    root.addHandler(handler)
    try:
        module, line = torchao_support.load()
    finally:
        root.removeHandler(handler)
    assert heard == []
    assert module is not None and module.__version__ == "0.18.0"
    assert "Failed to load /x/_C_mxfp8.so" in line
    assert torchao_support.KERNEL_LIBRARIES_NOTE in line
    assert "Failed to load" not in capsys.readouterr().err  # not printed raw beside the line
    assert logging.getLogger("torchao").propagate and not logging.getLogger("torchao").handlers


def test_a_quiet_import_says_only_the_version(tmp_path, monkeypatch):
    fake_torchao.install(tmp_path, monkeypatch, "__version__ = '0.18.0'\n")
    module, line = torchao_support.load()
    assert module is not None and line == "torchao 0.18.0 installed"


def test_an_import_that_fails_says_why(tmp_path, monkeypatch):
    fake_torchao.install(tmp_path, monkeypatch, "raise ImportError('built for torch 2.9')\n")
    module, line = torchao_support.load()
    assert module is None and "ImportError: built for torch 2.9" in line


def test_not_installed_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(torchao_support.importlib.util, "find_spec", lambda name: None)
    module, line = torchao_support.load()
    assert module is None and "not installed" in line and "amp-course[fp8]" in line
