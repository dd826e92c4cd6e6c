"""The MFU ladder: which rungs run where and what each one changes, a real CPU run through
``amp-course bench --workloads ladder`` and its JSON, and timm beside the course's ViT."""

import dataclasses
import importlib.util
import json
from types import SimpleNamespace

import matplotlib
import pytest
import torch
from cuda_double import FakeGpu

from amp_course import bench, cli, emulation, flops, models, precisions
from amp_course.bench import ladder, ladder_report, timm_vit, trainer, variant
from amp_course.bench.ladder import LadderConfig
from amp_course.bench.rows import Row, load
from amp_course.bench.variant import Variant

matplotlib.use("Agg")
HAS_TIMM = importlib.util.find_spec("timm") is not None


def _by_name(pairs):
    return {rung.label: (rung, reason) for rung, reason in pairs}


def _rung(name, model="course", **values):
    """A bf16 ladder row of a rung at batch 64."""
    return Row("ladder", Variant(name, precisions.BF16, model=model, batch=64), **values)


def test_on_a_cpu_in_smoke_mode_each_rung_builds_on_the_last_that_runs():
    rungs = _by_name(LadderConfig.smoke_config(timm=False).rungs_for(torch.device("cpu")))
    assert list(rungs)[:2] == ["eager", "+ fused AdamW"]
    assert "minutes" in rungs["+ torch.compile"][1]
    assert rungs["+ CUDA graphs"][1] == "CUDA graphs need a CUDA GPU"
    big, reason = rungs["+ batch 32"]
    assert reason is None and (big.batch, big.fused, big.compile) == (32, True, None)
    flash, reason = rungs["+ flash attention"]
    assert reason is None and (flash.batch, flash.attention) == (32, "flash")


def test_on_a_gpu_every_rung_adds_to_the_one_before(monkeypatch):
    FakeGpu(monkeypatch)  # an H100: every attention kernel takes bf16
    monkeypatch.setattr(variant, "fused_adamw_unavailable", lambda device: None)
    monkeypatch.setattr(timm_vit, "unavailable", lambda: None)  # as if timm were installed
    pairs = LadderConfig().rungs_for(torch.device("cuda"))
    rungs = _by_name(pairs)
    assert all(reason is None for _, reason in pairs)
    last, _ = rungs["+ flash attention"]
    assert (last.batch, last.fused, last.compile, last.attention) == (
        256,
        True,
        "max-autotune",
        "flash",
    )
    assert rungs["+ CUDA graphs"][0].compile == "reduce-overhead"
    twin, _ = rungs["timm: + torch.compile"]
    assert (twin.model, twin.compile, twin.fused, twin.batch) == ("timm", "default", True, 64)
    chosen = LadderConfig(rungs=("eager", "timm: eager")).rungs_for(torch.device("cuda"))
    assert [r.label for r, _ in chosen] == ["eager", "timm: eager"]
    # A rung left out adds nothing: here the larger batch builds on CUDA graphs, not max-autotune.
    lighter = [n for n, _ in LadderConfig().changes() if n != "+ max-autotune"]
    rungs = _by_name(LadderConfig(rungs=tuple(lighter)).rungs_for(torch.device("cuda")))
    assert "+ max-autotune" not in rungs and rungs["+ batch 256"][0].compile == "reduce-overhead"
    with pytest.raises(ValueError, match="Unknown rung"):
        LadderConfig(rungs=("warp speed",)).rungs_for(torch.device("cuda"))


def test_the_t4_rehearsal_leaves_the_flash_rung_out(monkeypatch):
    monkeypatch.setattr(variant, "fused_adamw_unavailable", lambda device: None)
    monkeypatch.setattr(timm_vit, "unavailable", lambda: None)
    monkeypatch.setenv(emulation.ENV, "t4")  # flash attention needs compute capability 8.0
    rungs = _by_name(LadderConfig().rungs_for(torch.device("cuda")))
    assert rungs["+ flash attention"][1] == "the emulated Tesla T4 has no flash attention kernel"
    assert [name for name, (_, why) in rungs.items() if why] == ["+ flash attention"]


def test_a_real_t4_leaves_the_flash_rung_out_as_its_rehearsal_does(monkeypatch):
    """Not only a rehearsed T4: on a real one the flash rung would compile, then find no kernel."""
    FakeGpu(monkeypatch, "T4")
    monkeypatch.setattr(variant, "fused_adamw_unavailable", lambda device: None)
    monkeypatch.setattr(timm_vit, "unavailable", lambda: None)
    rungs = _by_name(LadderConfig().rungs_for(torch.device("cuda")))
    assert rungs["+ flash attention"][1] == "this Tesla T4 (sm_75) has no flash attention kernel"
    assert [name for name, (_, why) in rungs.items() if why] == ["+ flash attention"]
    # An A100 takes flash attention in bf16 and fp16, not in fp32.
    FakeGpu(monkeypatch, "A100 40GB")
    fp16 = Variant("x", precisions.FP16, attention="flash")
    assert variant.skip_reason(fp16, torch.device("cuda")) is None
    fp32 = Variant("x", precisions.FP32, attention="flash")
    reason = variant.skip_reason(fp32, torch.device("cuda"))
    assert reason.endswith("(sm_80) has no flash attention kernel for torch.float32"), reason


def test_a_rung_that_runs_out_of_memory_names_its_batch_and_the_ladder_goes_on(monkeypatch):
    """Simulated on a CPU: the larger batch runs out of memory in its warm-up, the attention rung
    at that batch while it is timed; the eager rung is measured all the same."""
    warm = ladder._warm

    def out_of_memory(*args):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 ...")

    def warm_or_run_out(trainer, rung):
        if rung.batch == 8:
            return warm(trainer, rung)
        if rung.attention is None:
            out_of_memory()
        return out_of_memory

    monkeypatch.setattr(ladder, "_warm", warm_or_run_out)
    names = ("eager", "+ batch 32", "+ flash attention")
    config = LadderConfig.smoke_config(timm=False, rungs=names, rounds=1, matmul_peak_tflops=1.0)
    rows = {row.label: row for row in ladder.run(config, torch.device("cpu"), progress=None)}
    assert rows["+ batch 32"].skipped == "out of memory at batch 32"
    assert rows["+ flash attention"].skipped == "out of memory at batch 32"
    assert rows["eager"].skipped is None and rows["eager"].median_s > 0


def test_a_smoke_rung_runs_its_warm_step_one_untimed_call_and_its_timed_runs(monkeypatch):
    """Where bf16 is emulated a smoke rung's step costs many fp32 steps: the smoke ladder takes
    one untimed call after the rung's warm step, not three, and times its runs; the full ladder
    keeps three (a compiled step settles over a few)."""
    warm, calls = ladder._warm, []

    def counted(trainer, rung):
        step = warm(trainer, rung)
        calls.append("warm")

        def step_counted():
            calls.append("step")
            return step()

        return step_counted

    monkeypatch.setattr(ladder, "_warm", counted)
    # min_run_time 0: every timed run is one call, however fast this machine steps.
    config = LadderConfig.smoke_config(
        timm=False, rungs=("eager",), rounds=1, min_run_time=0.0, matmul_peak_tflops=1.0
    )
    rows = ladder.run(config, torch.device("cpu"), progress=None)
    assert rows[0].median_s > 0 and rows[0].runs == 3
    after_warm = len(calls) - 1  # round_robin's 3 runs of one call each, and the untimed ones
    assert calls[0] == "warm" and after_warm == 1 + 3, f"{after_warm - 3} untimed calls, not 1"
    assert LadderConfig().warmup == 3


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ladder")
    rungs = "eager,timm: eager"
    code = cli.main(
        ["bench", "--device", "cpu", "--smoke", "--workloads", "ladder", "--rungs", rungs]
        + ["--rounds", "1", "--out", str(out)]
    )
    return code, out


def test_the_bench_writes_the_ladder_as_typed_rows(cli_run):
    code, out = cli_run
    assert code == 0
    report = json.loads((out / "bench.json").read_text())
    rows = load(out / "bench.json", "ladder")
    assert [r.label for r in rows] == ["eager", "timm: eager"]
    assert all(isinstance(r, Row) and r.workload == "ladder" for r in rows)
    assert report["results"]["ladder"][0]["label"] == "eager"
    eager = rows[0]
    assert eager.variant.precision is precisions.BF16
    assert eager.mfu is None  # no published peak for a CPU
    assert eager.median_s > 0 and eager.images_per_s == pytest.approx(8 / eager.median_s)
    assert eager.achieved_tflops == pytest.approx(eager.flops_per_step / eager.median_s / 1e12)
    assert eager.mfu_of_matmul == pytest.approx(eager.achieved_tflops / eager.matmul_peak_tflops)
    assert "== ladder (bf16) ==" in (out / "bench.txt").read_text()
    assert (out / "ladder.png").read_bytes()[:4] == b"\x89PNG"
    if HAS_TIMM:
        assert rows[1].median_s > 0 and rows[1].flops_per_step == eager.flops_per_step
        assert [name for name, _ in ladder_report.timm_ratios(rows)] == ["eager"]
    else:
        assert "not installed" in rows[1].skipped


def test_the_readme_renders_a_committed_ladder_from_its_json(cli_run):
    _, out = cli_run
    lines = ladder_report.readme_lines(out / "bench.json")
    assert lines[0].startswith("**MFU ladder of a bf16 ViT-B/16 training step**")
    assert lines[2] == "| rung | batch | step | images/s | MFU | of matmul | peak memory |"
    assert lines[4].startswith("| eager | 8 | ") and lines[4].endswith("| - | - |"[-3:])


def test_the_lean_vit_is_timed_beside_the_course_at_the_eager_and_compiled_rungs():
    smoke = LadderConfig.smoke_config()
    rungs = _by_name(smoke.rungs_for(torch.device("cpu")))
    eager, reason = rungs["lean: eager"]
    assert reason is None and (eager.model, eager.batch, eager.fused) == ("lean", 8, False)
    assert "minutes" in rungs["lean: + torch.compile"][1]  # as the course's compiled rung
    built = ladder.build(smoke)("lean")
    assert any(isinstance(m, models.PackedSelfAttention) for m in built.modules())
    assert not any(
        isinstance(m, models.PackedSelfAttention) for m in ladder.build(smoke)("course").modules()
    )
    assert "lean: eager" not in _by_name(
        LadderConfig.smoke_config(lean=False).rungs_for(torch.device("cpu"))
    )


def test_without_timm_its_rungs_say_how_to_install_it(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "timm", None)  # import timm now fails
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert timm_vit.unavailable() == 'timm is not installed (pip install -e ".[bench]")'
    rungs = _by_name(LadderConfig.smoke_config().rungs_for(torch.device("cpu")))
    assert rungs["timm: eager"][1] == timm_vit.unavailable()


@pytest.mark.skipif(not HAS_TIMM, reason="timm is optional")
def test_timms_vit_has_the_course_vits_parameters_and_flops():
    shape = dict(num_layers=2, image_size=64)  # ViT-B/16's blocks; fewer of them, fewer tokens
    with torch.device("meta"):
        course = models.build_vit("b16", **shape)
        theirs = timm_vit.build_timm_vit("b16", **shape)
    assert models.count_parameters(course) == models.count_parameters(theirs)
    inputs = (1, 3, 64, 64)
    assert flops.count_step_flops(
        lambda: timm_vit.build_timm_vit("b16", **shape), inputs, 1000
    ) == flops.count_step_flops(lambda: models.build_vit("b16", **shape), inputs, 1000)


def test_table_chart_and_ratios_from_rows():
    # 0.8 TFLOP a step in 0.04 s: 20 TFLOP/s, 20% of a 100 TFLOP/s peak; 64 images: 1600/s.
    eager = _rung("eager", median_s=0.04, flops_per_step=8e11, dense_peak_tflops=100.0)
    rows = [
        eager,
        _rung("+ torch.compile", skipped="no compiler here"),
        _rung("timm: eager", model="timm", median_s=0.05),
    ]
    assert (eager.images_per_s, eager.achieved_tflops) == pytest.approx((1600, 20))
    assert ladder_report.timm_ratios(rows) == [("eager", pytest.approx(1.25))]
    table = ladder_report.format_table(rows)
    assert "20.0%" in table and "skipped: no compiler here" in table
    fig = ladder_report.plot(rows)
    assert len(fig.axes) == 2
    assert Row.from_dict(json.loads(json.dumps(rows[0].to_dict()))) == rows[0]


def test_cuda_graph_rungs_get_a_note_instead_of_the_allocators_peak(monkeypatch):
    """A replayed CUDA graph allocates from the graphs' private pool, which the allocator's peak
    does not see: every rung run from CUDA graphs, inherited ones included, gets the note and no
    figure; the others are measured (here with a stand-in for the CUDA measurement)."""
    monkeypatch.setattr(variant, "fused_adamw_unavailable", lambda device: None)
    monkeypatch.setattr(timm_vit, "unavailable", lambda: None)
    rungs = _by_name(LadderConfig().rungs_for(torch.device("cuda")))
    graphs = ["+ CUDA graphs", "+ max-autotune", "+ batch 256", "+ flash attention"]
    measured = ["eager", "+ fused AdamW", "+ torch.compile", "timm: eager", "timm: + torch.compile"]
    measured += ["lean: eager", "lean: + torch.compile"]
    assert sorted(graphs + measured) == sorted(rungs)
    lighter = LadderConfig(rungs=("eager", "+ CUDA graphs", "+ batch 256")).rungs_for("cuda")
    inherited = _by_name(lighter)["+ batch 256"][0]  # builds on reduce-overhead, not max-autotune

    monkeypatch.setattr(trainer, "step_peak_memory", lambda make_step, device, warmup=1: 1000)
    model = torch.nn.Linear(4, 4)  # 20 fp32 parameters: 80 bytes
    cuda = type("Device", (), {"type": "cuda"})()
    shared = trainer.Trainer(cuda, lambda kind: model)
    shared.models = {
        "course": model,
        "lean": model,
        "timm": model,
    }  # built: the stand-in has no .to
    shared.clear_state = lambda: None
    for rung in [rungs[name][0] for name in graphs] + [inherited]:
        assert shared.peak_memory(rung, lambda: None) is None, rung.label
        assert rung.memory_note == ladder.GRAPH_MEMORY_NOTE, rung.label
    for name in measured:
        assert shared.peak_memory(rungs[name][0], lambda: None) == 1080, name
        assert rungs[name][0].memory_note is None, name


def test_the_table_and_readme_say_not_measured_for_graph_rungs_even_from_an_old_report(tmp_path):
    common = dict(model="course", fused=True, attention=None, precision="bf16", mfu_of_matmul=0.3)
    timed = dict(median_s=0.04, images_per_s=1600, **common)
    # Written before rows had a memory_note, by the old LadderRow (its rung under "rung" and
    # "mode"): the allocator's peak for the graph rung.
    dicts = [
        {
            "workload": "ladder",
            "mode": "eager",
            "rung": "eager",
            "batch": 64,
            "compile": None,
            "peak_memory_bytes": 5 * 2**30,
            **timed,
        },
        {
            "workload": "ladder",
            "mode": "+ CUDA graphs",
            "rung": "+ CUDA graphs",
            "batch": 64,
            "compile": "reduce-overhead",
            "peak_memory_bytes": int(0.97 * 2**30),
            **timed,
        },
    ]
    report = {"config": {"rounds": 3}, "results": {"ladder": dicts}}
    (tmp_path / "bench.json").write_text(json.dumps(report))
    rows = load(json.loads(json.dumps(report)), "ladder")
    assert rows[1].peak_memory_bytes is None
    assert rows[1].memory_note == ladder.GRAPH_MEMORY_NOTE
    assert rows[0].peak_memory_bytes == 5 * 2**30 and rows[0].memory_note is None
    again = load(
        {"results": {"ladder": json.loads(json.dumps([r.to_dict() for r in rows]))}}, "ladder"
    )
    assert again == rows  # the note survives the JSON round trip

    table = ladder_report.format_table(rows).splitlines()
    assert table[1].rstrip().endswith("5.00") and table[2].rstrip().endswith("not measured")
    assert len(table[2]) == len(table[1]) == len(table[0])  # the columns stay aligned
    assert "0.97" not in "\n".join(table)
    assert table[3] == f"peak memory {ladder.GRAPH_MEMORY_NOTE} (+ CUDA graphs)"
    readme = ladder_report.readme_lines(tmp_path / "bench.json")
    assert readme[5].startswith("| + CUDA graphs | 64 |") and readme[5].endswith("| not measured |")
    assert readme[4].endswith("| 5.00 GiB |") and "0.97" not in "\n".join(readme)
    assert readme[7] == "Peak memory not measured: CUDA graphs run from a private memory pool " + (
        "that the allocator's peak does not see (+ CUDA graphs)."
    )


def test_timm_against_the_course_is_judged_by_the_one_verdict_rule():
    """Lesson 10's timm verdict comes from ``ac.timing.compare`` (the runs' quartiles), not from
    the ratio alone: a 1.25x ratio inside the spread ranks nothing."""

    def rows(timm_quartiles):
        low, median, high = timm_quartiles
        return [
            _rung("eager", median_s=0.04, p25_s=0.039, p75_s=0.041),
            _rung("timm: eager", model="timm", median_s=median, p25_s=low, p75_s=high),
        ]

    ((rung, apart),) = ladder_report.timm_comparisons(rows((0.049, 0.05, 0.051)))
    assert rung == "eager" and apart.verdict == "slower" and apart.ratio == pytest.approx(1.25)
    assert "timm is slower than course here: timm takes 1.25x the course time" in apart.sentence()
    ((_, overlap),) = ladder_report.timm_comparisons(rows((0.03, 0.05, 0.07)))
    assert overlap.verdict == "indistinguishable" and "not distinguishable" in overlap.sentence()
    old = [dataclasses.replace(r, p25_s=None, p75_s=None) for r in rows((0.049, 0.05, 0.051))]
    assert ladder_report.timm_comparisons(old) == []  # no quartiles: no verdict, only the ratio


class _SmallGpu(FakeGpu):
    """A GPU with a T4's 40 SMs."""

    def _properties(self, index, *args, **kwargs):
        return SimpleNamespace(**{**vars(super()._properties(index)), "multi_processor_count": 40})


@pytest.mark.parametrize("gpu, noted", [(FakeGpu, False), (_SmallGpu, True)])
def test_max_autotune_rungs_say_when_the_gpu_is_too_small_to_autotune_matmuls(
    monkeypatch, gpu, noted
):
    """torch._inductor.utils.is_big_gpu: no GEMM autotuning below 68 SMs (a T4 has 40)."""
    gpu(monkeypatch)
    monkeypatch.setattr(variant, "fused_adamw_unavailable", lambda device: None)
    rungs = _by_name(LadderConfig(timm=False).rungs_for(torch.device("cuda")))
    cuda = torch.device("cuda", 0)
    for name in ("+ max-autotune", "+ batch 256", "+ flash attention"):  # the last two inherit it
        note = ladder.autotune_note(rungs[name][0], cuda)
        assert (note is not None) == noted, name
        assert not noted or ("40" in note and "68" in note)
    for name in ("eager", "+ torch.compile", "+ CUDA graphs"):
        assert ladder.autotune_note(rungs[name][0], cuda) is None


def test_the_table_and_readme_show_a_rungs_note(tmp_path):
    note = "matmuls not autotuned: inductor autotunes GEMM kernels only on GPUs with ..."
    rung = Variant("+ max-autotune", precisions.BF16, compile="max-autotune", batch=8)
    measured = dict(median_s=0.1, flops_per_step=8e12, matmul_peak_tflops=800.0)
    row = Row("ladder", rung, **measured, note=note)
    assert f"+ max-autotune: {note}" in ladder_report.format_table([row])
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"config": {"rounds": 1}, "results": {"ladder": [row.to_dict()]}}))
    assert f"+ max-autotune: {note}." in ladder_report.readme_lines(path)


def test_a_compiled_rung_past_the_recompile_limit_says_it_was_not_timed(monkeypatch):
    """Past torch._dynamo's recompile limit a compiled model runs eager without a word: the rung
    must not be timed as compiled. Simulated on a CPU with dynamo's eager backend and a limit
    the rung's compile exceeds."""
    import torch._dynamo

    compile_ = torch.compile

    def eager_backend(model, mode=None, dynamic=None):  # no inductor: only dynamo's guards
        return compile_(model, backend="eager", dynamic=dynamic)

    monkeypatch.setattr(torch, "compile", eager_backend)
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1)
    names = ("eager", "+ torch.compile")
    settings = dict(timm=False, rungs=names, rounds=1, matmul_peak_tflops=1.0)
    configured = LadderConfig.smoke_config(**settings, smoke=False)
    build = ladder.build(configured)
    # The ladder's model, compiled first outside autocast, fills the limit.
    model = build("course")
    eager_backend(model, dynamic=False)(torch.randn(2, 3, 32, 32))
    given = iter([model])
    monkeypatch.setattr(
        ladder, "build", lambda config: lambda kind: next(given, None) or build(kind)
    )
    rows = {row.label: row for row in ladder.run(configured, torch.device("cpu"), progress=None)}
    skipped = rows["+ torch.compile"].skipped or ""
    assert skipped.startswith("not timed: torch.compile passed torch._dynamo's recompile limit (1)")
    assert rows["+ torch.compile"].median_s is None
    assert rows["eager"].median_s > 0


def test_the_recompile_limit_stays_silent_outside_a_compiled_configuration():
    import torch._dynamo

    eager = ladder.LadderConfig.smoke_config().rungs_for("cpu")[0][0]
    with trainer.flags(eager):
        assert not torch._dynamo.config.fail_on_recompile_limit_hit
    assert trainer.recompile_limit_line("RuntimeError: boom") is None
    assert trainer.recompile_limit_line("FailOnRecompileLimitHit: Hard failure").startswith(
        "not timed"
    )


def test_the_lean_vit_against_the_course_is_judged_by_the_same_rule():
    rows = [
        _rung("eager", median_s=0.04, p25_s=0.039, p75_s=0.041),
        _rung("lean: eager", model="lean", median_s=0.03, p25_s=0.029, p75_s=0.031),
        _rung("timm: eager", model="timm", median_s=0.05, p25_s=0.049, p75_s=0.051),
    ]
    ((rung, lean),) = ladder_report.timm_comparisons(rows, model="lean")
    assert rung == "eager" and lean.verdict == "faster" and lean.ratio == pytest.approx(0.75)
    assert "lean is faster than course here: lean takes 0.75x the course time" in lean.sentence()
    ((_, timm),) = ladder_report.timm_comparisons(rows)
    assert timm.verdict == "slower"


def test_in_a_bench_run_the_ladder_is_held_against_the_matrixs_matmul_peak():
    """One matmul peak: a bench run that timed the square matmuls hands their best to the ladder
    (in the device's AMP precision); without them the ladder times its own."""
    smoke = bench.BenchConfig.smoke_config(workloads=("matmul", "ladder"))
    peaks = {"fp32": 1.5, "bf16": 2.5}
    config = LadderConfig.from_bench(smoke, torch.device("cpu"), peaks)
    assert config.precision is precisions.BF16 and config.matmul_peak_tflops == 2.5
    assert config.smoke and config.rounds == smoke.rounds
    assert LadderConfig.from_bench(smoke, "cpu", {}).matmul_peak_tflops is None
