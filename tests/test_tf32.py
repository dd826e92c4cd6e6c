"""TF32 is read and switched with one torch API; lesson 01 and the benchmark run after the other."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import ROOT, tagged

from amp_course import recipe

# Code a learner (or a library) may have run before the course's code, with each torch API.
EARLIER_CODE = {
    "legacy flags": "torch.backends.cuda.matmul.allow_tf32 = True\n"
    "torch.backends.cudnn.allow_tf32 = False",
    "new settings": "torch.backends.cuda.matmul.fp32_precision = 'tf32'\n"
    "torch.backends.cudnn.conv.fp32_precision = 'ieee'",
    "matmul precision": "torch.set_float32_matmul_precision('high')",
}
EXPECTED_AFTER = {  # what each earlier snippet leaves switched on (matmul, conv)
    "legacy flags": {"matmul": True, "conv": False},
    "new settings": {"matmul": True, "conv": False},
    "matmul precision": {"matmul": True, "conv": True},
}


def test_tf32_switches_both_backends_and_restores_them_even_on_error():
    before = recipe.tf32_enabled()
    assert before == {"matmul": False, "conv": True}  # PyTorch's defaults in a fresh process
    with pytest.raises(RuntimeError, match="boom"), recipe.tf32(True):
        assert recipe.tf32_enabled() == {"matmul": True, "conv": True}
        raise RuntimeError("boom")
    assert recipe.tf32_enabled() == before
    with recipe.tf32(False):
        assert recipe.tf32_enabled() == {"matmul": False, "conv": False}  # strict conv too
    assert recipe.tf32_enabled() == before


def test_this_torch_is_switched_with_the_new_api():
    # torch 2.14 has the per-backend settings; the legacy flags are only for torch before 2.9.
    assert recipe.NEW_API and recipe.api_name() == "fp32_precision"


@pytest.mark.parametrize("enabled", [True, False])
def test_switching_keeps_the_legacy_matmul_getters_readable(enabled):
    # torch's compiler reads the legacy matmul getters (pytorch/pytorch#166387): switching
    # through ac.recipe must not leave them raising "mix of the legacy and new APIs".
    with recipe.tf32(enabled):
        assert torch.get_float32_matmul_precision() == ("high" if enabled else "highest")
        assert torch.backends.cuda.matmul.allow_tf32 is enabled
    assert torch.get_float32_matmul_precision() == "highest"


def _lesson_01_tf32_cells() -> str:
    """The source of lesson 01's cell that reads and switches TF32 in the learner's kernel (section
    5), to run outside the notebook. (The cell after it shows the two APIs mixed in fresh child
    processes, which code run earlier in the kernel cannot reach.)"""
    cells = [cell.source for cell in tagged("01_number_formats", "tf32")]
    assert any("ac.recipe.tf32(" in c for c in cells)
    return "\n\n".join(cells)


@pytest.mark.parametrize("earlier", list(EARLIER_CODE))
def test_lesson_01_and_the_benchmark_run_after_code_that_used_either_api(earlier, tmp_path):
    script = f"""
import json, torch
{EARLIER_CODE[earlier]}
import amp_course as ac
from amp_course import cli
before = ac.recipe.tf32_enabled()
settings = ac.lesson.start(True, "cpu", 0, verbose=False)
device = settings.device
exec(compile({_lesson_01_tf32_cells()!r}, "lesson 01, section 5", "exec"))
code = cli.main(["bench", "--device", "cpu", "--smoke", "--workloads", "matmul",
                 "--precisions", "fp32,tf32", "--out", {str(tmp_path)!r}])
print(json.dumps({{"code": code, "before": before, "after": ac.recipe.tf32_enabled()}}))
"""
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    result = json.loads(child.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    assert result["before"] == result["after"] == EXPECTED_AFTER[earlier]
