"""Lessons 07 and 09 count the scenario's ViT-L/16 on a CPU as lesson 00 does: for the H100 of
``ac.memory.DEFAULT_GPU``, without data. Their own counting cells, run here on the CPU, must give
the figures the course's committed H100 runs of the same cells printed from real tensors (lesson
07 once counted at batch 1 with the CPU's rules: 298.0 MiB per image in fp32 against the H100's
316.5, and 18 GPUs for the scenario where the H100 run counted 19)."""

import re

import pytest
from conftest import run_tagged

import amp_course as ac

LESSONS = {  # lesson: (its counting cell's id, the fp32 figure its H100 copy printed, ours)
    "07_multi_gpu": (
        "5b3740cc",
        r"fp32: +([\d.]+) MiB activations per image",
        lambda ns: ns["saved"]["fp32"].activations,
    ),
    "09_beyond_autocast": (
        "1cb18dba",
        r"fp32 +: +([\d.]+) MiB per image",
        lambda ns: ns["stacks"]["fp32"].kept(False),
    ),
}


@pytest.mark.parametrize("lesson", sorted(LESSONS))
def test_the_cpu_counts_what_the_h100_run_measured(lesson):
    cell_id, figure, counted = LESSONS[lesson]
    runs = [
        run
        for run in ac.gpu_runs.committed_outputs(f"{lesson}.ipynb", cell_id, containing="MiB")
        if ac.gpus.lookup(run.where.split(",")[0]) is ac.gpus.GPUS[ac.memory.DEFAULT_GPU]
    ]
    assert runs, f"no committed H100 run of {lesson} printed its ViT-L/16 count"
    measured = float(re.search(figure, runs[0].text).group(1))
    ns = run_tagged(lesson, "parameters", namespace={"ac": ac})
    ns.update(SMOKE=True, DEVICE="cpu")
    run_tagged(lesson, "settings", "scenario-count", namespace=ns)
    assert round(counted(ns) / 2**20, 1) == round(measured, 1)
