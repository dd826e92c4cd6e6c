"""Lessons 07 and 09 count the scenario's ViT-L/16 on a CPU as lesson 00 does: for the H100 of
``ac.memory.DEFAULT_GPU``, without data, at the batch their code names. The figures must be those
the course's committed H100 runs of the same cells printed from real tensors (at batch 1 the
count came out 298.0 MiB per image in fp32, against the H100's 316.5, and lesson 07 then counted
18 GPUs for the scenario where the H100 run counted 19)."""

import re

import nbformat
import pytest
import torch

import amp_course as ac
from amp_course.paths import NOTEBOOKS

CELLS = {  # lesson: (the counting cell's id, the fp32 line its H100 copy printed)
    "07_multi_gpu": ("5b3740cc", r"fp32: +([\d.]+) MiB activations per image"),
    "09_beyond_autocast": ("1cb18dba", r"fp32 +: +([\d.]+) MiB per image"),
}


@pytest.mark.parametrize("lesson", sorted(CELLS))
def test_the_cpu_counts_what_the_h100_run_measured(lesson):
    cell_id, figure = CELLS[lesson]
    source = "\n".join(
        c.source for c in nbformat.read(NOTEBOOKS / f"{lesson}.ipynb", as_version=4).cells
    )
    assert "gpu=" in source and "ac.memory.DEFAULT_GPU" in source, lesson
    batch = int(re.search(r"^measure_batch = (\d+)", source, re.M).group(1))
    runs = [
        run
        for run in ac.gpu_runs.committed_outputs(f"{lesson}.ipynb", cell_id, containing="MiB")
        if ac.gpus.lookup(run.where.split(",")[0]) is ac.gpus.GPUS[ac.memory.DEFAULT_GPU]
    ]
    assert runs, f"no committed H100 run of {lesson} printed its ViT-L/16 count"
    measured = float(re.search(figure, runs[0].text).group(1))
    counted = ac.memory.count_saved_bytes(
        lambda: ac.models.build_vit("l16"),
        (batch, 3, 224, 224),
        recipe=ac.recipe.AmpRecipe(torch.device("cuda"), "fp32"),
        gpu=ac.memory.DEFAULT_GPU,
    )
    assert round(counted.activations / batch / 2**20, 1) == round(measured, 1)
