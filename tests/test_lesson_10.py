"""Lesson 10, section 7 (cells executed from the notebook): the accounts of the course's, the
lean and timm's ViT steps side by side, what each difference costs, and the three steps' timing;
with timm and without it (an optional extra: the lesson then says what the comparison adds)."""

import types
from pathlib import Path

import pytest
import torch
from conftest import run_tagged

import amp_course as ac
from amp_course import precisions
from amp_course.bench.rows import Row
from amp_course.bench.variant import Variant

LESSON = "10_where_time_goes"
SHAPE = dict(image_size=32, num_layers=1, num_heads=2, hidden_dim=32, mlp_dim=64)
NO_TIMM = 'timm is not installed (pip install -e ".[bench]")'


def _section(**values) -> dict:
    """What the lesson's earlier cells leave for section 7, at a small size on the CPU."""
    return {
        "ac": ac,
        "torch": torch,
        "settings": types.SimpleNamespace(smoke=True, on_gpu=False),
        "vit_shape": SHAPE,
        "batch": 2,
        "BATCH": 64,
        "vit_name": "shrunk ViT-B/16",
        "where": "a test CPU",
        "roof": types.SimpleNamespace(bandwidth=20e9),
        "h100": ac.roofline.published("NVIDIA H100 80GB HBM3"),
        "per_op": 5e-6,
        "bench_file": Path("no such run") / "bench.json",
        **values,
    }


def test_without_timm_the_lesson_accounts_the_course_and_lean_steps_and_says_what_timm_adds(
    monkeypatch, capsys
):
    monkeypatch.setattr(ac.bench.timm_vit, "unavailable", lambda: NO_TIMM)
    section = run_tagged(LESSON, "step-accounts", "account-differences", namespace=_section())
    assert list(section["accounts"]) == ["course", "lean"]
    printed = capsys.readouterr().out
    assert f"timm's account is left out ({NO_TIMM})" in printed
    assert "the course step beyond lean's" in printed
    assert "the course step beyond timm's" not in printed and "the lean step" not in printed
    assert "select_backward.default" in printed  # torchvision's split of q, k and v
    assert "memory-bound, at 3,350 GB/s (an H100 SXM's datasheet)" in printed


@pytest.mark.skipif(ac.bench.timm_vit.unavailable() is not None, reason="timm is optional")
def test_with_timm_the_lesson_names_what_the_course_step_runs_beyond_timms(capsys):
    section = run_tagged(LESSON, "step-accounts", "account-differences", namespace=_section())
    assert list(section["accounts"]) == ["course", "lean", "timm"]
    printed = capsys.readouterr().out
    assert "the course step beyond timm's" in printed and "the lean step beyond timm's" in printed
    assert "left out" not in printed


def _row(mode, model, median_s=None, skipped=None):
    quartiles = dict(p25_s=median_s * 0.99, p75_s=median_s * 1.01) if median_s else {}
    rung = Variant(mode, precisions.BF16, model=model, batch=2)
    return Row("ladder", rung, median_s=median_s, skipped=skipped, **quartiles)


def _three_timings(monkeypatch, capsys, smoke: bool) -> str:
    monkeypatch.setattr(ac.bench.timm_vit, "unavailable", lambda: NO_TIMM)
    rows = [
        _row("eager", "course", 0.04),
        _row("lean: eager", "lean", 0.03),
        _row("timm: eager", "timm", skipped=NO_TIMM),
    ]
    section = run_tagged(LESSON, "step-accounts", namespace=_section(rows=rows))
    capsys.readouterr()
    section["settings"] = types.SimpleNamespace(smoke=smoke, on_gpu=False)
    run_tagged(LESSON, "three-timings", namespace=section)
    return capsys.readouterr().out


def test_the_three_timings_are_labelled_a_cpu_measurement_and_judged_by_the_rule(
    monkeypatch, capsys
):
    printed = _three_timings(monkeypatch, capsys, smoke=False)
    assert "on a test CPU (a CPU measurement, not a GPU's)" in printed
    assert "lean at 'eager': lean is faster than course here" in printed
    assert f"No timm comparison ran here ({NO_TIMM})" in printed
    assert "the lean eager step is faster than the course's" in printed


def test_smoke_modes_one_round_gives_a_ratio_and_no_verdict(monkeypatch, capsys):
    """One round's quartiles are one burst's: on a loaded machine they parted by 1.44x between
    steps that five rounds found indistinguishable, and the lesson printed a verdict."""
    printed = _three_timings(monkeypatch, capsys, smoke=True)
    assert "lean at 'eager': lean takes 0.75x the course time in one round: no verdict" in printed
    assert "faster than" not in printed and "slower than" not in printed
    assert "the clock here: one round in smoke mode (the method, not a verdict)" in printed
