"""DDP and FSDP2 under torchrun on CPU (two gloo processes): every rank ends with equal weights,
and the same weights as one process trained on the ranks' batches concatenated."""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT

from amp_course import dist_train

# A guard against a hung rendezvous, not a speed target (the launch takes about 15 s here).
LAUNCH_TIMEOUT_S = 240
SCRIPT = ROOT / "tests" / "fixtures" / "distributed" / "several_runs.py"
TRAIN = ["--steps", "3", "--batch-size", "16"]
# fp32 and SGD: the step is proportional to the averaged gradient (``reference_state``).
SGD = ["--dtype", "fp32", "--optimizer", "sgd", "--lr", "0.1", *TRAIN]
CASES = {
    "ddp-fp16": ["--strategy", "ddp", "--dtype", "fp16", *TRAIN],
    "fsdp-bf16": ["--strategy", "fsdp", "--dtype", "bf16", *TRAIN],
    "ddp-sgd": ["--strategy", "ddp", *SGD],
    "fsdp-sgd": ["--strategy", "fsdp", *SGD],
    "fsdp2-one-rank-inf": "fsdp2_one_rank_inf",
}


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """One torchrun with two gloo ranks running every case in turn (``several_runs.py``); the
    folder holding each case's reports."""
    out = tmp_path_factory.mktemp("distributed")
    cases = out / "cases.json"
    cases.write_text(json.dumps(CASES))
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "AMP_COURSE_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    command += ["--log_dir", str(out / "logs")]  # not a torchelastic_* folder left in /tmp
    result = subprocess.run(
        [*command, str(SCRIPT), str(out), str(cases)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


def reports(launched, case):
    return [json.loads((launched / case / f"rank{r}.json").read_text()) for r in range(2)]


def initial_sums():
    torch.manual_seed(0)
    model = dist_train.build_vit("tiny")
    return {name: float(p.detach().double().sum()) for name, p in model.named_parameters()}


@pytest.mark.parametrize("case", ["ddp-fp16", "fsdp-bf16"])
def test_ranks_end_with_identical_parameters(launched, case):
    ranks = reports(launched, case)
    first, second = ranks
    assert {r["rank"] for r in ranks} == {0, 1}
    assert first["backend"] == "gloo" and first["world_size"] == 2
    assert first["strategy"] == case.split("-")[0] and first["dtype"] == case.split("-")[1]
    assert first["checksum"] == second["checksum"]
    assert first["param_sums"] == second["param_sums"]
    if first["strategy"] == "fsdp":  # gathered, one model on both; each rank holds its own part
        assert first["local_checksum"] != second["local_checksum"]
    else:  # every DDP rank holds the whole model
        assert first["local_checksum"] == second["local_checksum"] == first["checksum"]
    # Each rank saw its own shard of the data, so their losses differ ...
    assert first["losses"] != second["losses"]
    assert all(loss == loss and loss < 10 for r in ranks for loss in r["losses"])
    # ... and the weights did move away from the common starting point.
    start = initial_sums()
    assert set(start) == set(first["param_sums"])
    assert any(abs(first["param_sums"][n] - start[n]) > 1e-6 for n in start)
    if first["dtype"] == "fp16":
        assert first["scale"] is not None and first["scale"] == second["scale"]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_ranks_match_one_process_on_the_concatenated_batch(launched, strategy):
    """The ranks' checksums agree even if the reduction is wrong (FSDP gathers one answer for
    all ranks), so compare with one process trained on both ranks' batches at once. fp32 and SGD:
    the step is proportional to the averaged gradient, so a sum (twice the step) or a missing
    reduction fails, while reduction order changes the result only by rounding."""
    args = CASES[f"{strategy}-sgd"]
    distributed = torch.load(launched / f"{strategy}-sgd" / "params.pt")
    reference = dist_train.reference_state(dist_train.parse_args(args), world_size=2)
    torch.manual_seed(0)
    start = {name: p.detach() for name, p in dist_train.build_vit("tiny").named_parameters()}
    assert set(distributed) == set(reference) == set(start)
    moved = torch.cat([(reference[n] - start[n]).flatten() for n in start])
    error = torch.cat([(distributed[n] - reference[n]).flatten() for n in start])
    # Stated tolerance: the distributed update equals the reference update to 1e-3 of its size;
    # summed instead of averaged gradients would be off by about 100% of it.
    assert moved.norm() > 1e-3
    assert error.norm() <= 1e-3 * moved.norm(), (error.norm(), moved.norm())


def test_fsdp2_fp16_ranks_skip_together_when_one_shard_overflows(launched):
    """Lesson 07: with FSDP2 a plain GradScaler all-reduces found_inf over the DTensor shards."""
    for report in reports(launched, "fsdp2-one-rank-inf"):
        assert report["scaler"] == "GradScaler" and report["grad_type"] == "DTensor"
        clean, overflow = report["clean"], report["inf_on_rank0"]
        assert clean["moved"] and clean["scale_after"] == clean["scale_before"]
        # Rank 1's own shard was finite: it skips only because the flag was all-reduced.
        assert not overflow["moved"]
        assert overflow["scale_after"] == overflow["scale_before"] / 2


def test_make_scaler_refuses_an_unknown_strategy():
    with pytest.raises(ValueError, match="ddp, fsdp"):
        dist_train.make_scaler("fsdp1", dist_train.AmpRecipe("cpu", torch.float16))


def test_running_without_torchrun_is_explained(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        dist_train.setup()


def test_bad_arguments_are_refused():
    with pytest.raises(SystemExit):
        dist_train.parse_args(["--steps", "0"])
    with pytest.raises(ValueError):
        dist_train.parse_args(["--dtype", "fp12"])


def test_more_steps_than_a_ranks_batches_are_refused_before_the_model_is_built(monkeypatch):
    """It said only StopIteration, after building the model and joining DDP; the refusal comes
    first, so no process group is needed to see it (wrapping the model would need one)."""
    monkeypatch.setattr(dist_train, "wrap_model", lambda *a: pytest.fail("the model was built"))
    digits = len(dist_train.load_mnist().train)
    per_rank = digits // 2 // 32  # two ranks, 32 digits a batch, the last short batch dropped
    args = dist_train.parse_args(["--steps", str(per_rank + 1)])
    with pytest.raises(ValueError, match=rf"^{per_rank + 1} steps need .* holds {per_rank}: "):
        dist_train.run(args, 0, 2, torch.device("cpu"))
