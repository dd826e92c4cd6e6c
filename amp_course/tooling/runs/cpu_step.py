"""What a kind of CPU does to bf16 autocast, in one number the smoke benchmark records beside the
lessons' times: lesson 00's MNIST CNN at smoke sizes (1/8 width, a batch of 128), one AdamW
training step in fp32 and in bf16 autocast, timed in alternation (``ac.timing.round_robin``).

It runs in a fresh interpreter (``python -m amp_course.tooling.runs.cpu_step``) with the
environment the lessons get, since torch reads its dispatch caps (``ac.cpu``) when it starts,
and prints one JSON line. The suite benchmark records it too: its fp32 time tells a slower
machine, or a slower day of the same one, from a slower suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

BATCH = 128
WIDTH_DIVISOR = 8


def measure() -> dict:
    """The step's median in fp32 and in bf16 autocast here, their ratio and what says native."""
    import torch
    import torch.nn.functional as F

    from ... import cpu, models, timing
    from ...recipe import AmpRecipe

    torch.manual_seed(0)
    images, labels = torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))

    def step_of(precision: str):
        model = models.MnistCNN(width_divisor=WIDTH_DIVISOR)
        optimizer = torch.optim.AdamW(model.parameters())
        recipe = AmpRecipe("cpu", precision)

        def step():
            with recipe.autocast():
                loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return step

    steps = {name: step_of(name) for name in ("fp32", "bf16")}
    measured, failed = timing.round_robin(
        steps, device="cpu", rounds=3, min_run_time=0.05, warmup=1, repeats=1
    )
    if failed:
        raise RuntimeError(f"the timed step failed: {failed}")
    fp32, bf16 = measured["fp32"].median, measured["bf16"].median
    return {
        "step": f"lesson 00's MNIST CNN at 1/{WIDTH_DIVISOR} width, batch {BATCH}, AdamW",
        "fp32_s": fp32,
        "bf16_s": bf16,
        "bf16_over_fp32": round(bf16 / fp32, 2),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "native_bf16": cpu.has_native(torch.bfloat16),
    }


def sentence(step: dict) -> str:
    """The measured step in words: its sizes, both medians, their ratio, native or emulated."""
    native = "native" if step["native_bf16"] else "emulated"
    return (
        f"{step['step']}, timed in alternation: fp32 {step['fp32_s'] * 1e3:.0f} ms, bf16 "
        f"autocast {step['bf16_s'] * 1e3:.0f} ms, {step['bf16_over_fp32']:.2f}x (bf16 {native}; "
        f"torch's CPU capability {step['cpu_capability']})."
    )


def measure_in_child(env: dict[str, str] | None = None) -> dict:
    """``measure`` in a fresh interpreter with this environment plus ``env``."""
    from ...paths import ROOT

    environment = {**os.environ, **(env or {})}
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), environment.get("PYTHONPATH")])
    )
    done = subprocess.run(
        [sys.executable, "-m", __name__],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the CPU step did not run: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(measure()))
