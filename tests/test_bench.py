import dataclasses
import json
import time

import pytest
import torch

from amp_course import bench, cli, flops, gpus, models, precisions, recipe


def test_vit_b16_training_step_flops_match_the_analytic_count():
    forward, step = flops.count_step_flops(lambda: models.build_vit("b16"), (1, 3, 224, 224), 1000)
    # 6·N·T + 12·L·d·T² with N = 86.6 M, T = 197: about 106.6 GFLOP per image per step.
    assert step == pytest.approx(106.6e9, rel=0.02)
    assert step / forward == pytest.approx(3.0, abs=0.05)  # backward costs about twice forward


def test_mfu_arithmetic():
    # 64 ViT-B/16 images in 0.1 s on an H100 in bf16: 68.2 TFLOP/s of 989.4.
    assert flops.mfu(106.6e9 * 64, 0.1, 989.4) == pytest.approx(0.06895, rel=1e-3)
    assert flops.mfu(1e12, 1.0, 1.0) == 1.0
    with pytest.raises(ValueError, match="positive"):
        flops.mfu(1e12, 0.0, 989.4)


@pytest.mark.parametrize(
    "name, precision, peak",
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4),
        ("NVIDIA H100 80GB HBM3", "fp32", 66.9),
        ("NVIDIA H100 PCIe", "fp16", 756.0),
        ("NVIDIA A100-SXM4-80GB", "tf32", 156.0),
        ("Tesla T4", "fp16", 65.0),
        ("Tesla T4", "bf16", None),
        ("CPU x86_64 (AVX2)", "fp32", None),
    ],
)
def test_peak_table_is_keyed_by_gpu_name(name, precision, peak):
    assert gpus.peak_tflops(name, precision) == peak


def _flags():
    state = recipe.tf32_enabled()  # read with the API the run switches with: never raises
    return state["matmul"], state["conv"]


def test_compile_and_fused_together_add_the_combined_recipe():
    names = [c.label for c in bench.BenchConfig.full(compile=True, fused=True).variants()]
    assert len(names) == 16 and {"bf16", "bf16+compile", "bf16+fused"} <= set(names)
    assert "bf16+compile+fused" in names and "fp32+compile+fused" in names
    assert not any(
        "+compile+fused" in n
        for n in (c.label for c in bench.BenchConfig.full(compile=True).variants())
    )


def test_unavailable_modes_are_skipped_with_a_reason_on_cpu():
    cpu = torch.device("cpu")
    assert "CUDA" in bench.skip_reason(bench.Variant.matrix("tf32"), cpu)
    assert bench.skip_reason(bench.Variant.matrix("bf16"), cpu) is None


def test_a_mode_that_fails_is_reported_as_skipped_and_the_others_run(monkeypatch):
    real_mm = torch.mm

    def mm(a, b):  # as if this build had no bf16 matmul kernel
        if a.dtype == torch.bfloat16:
            raise RuntimeError("\"addmm\" not implemented for 'BFloat16'")
        return real_mm(a, b)

    monkeypatch.setattr(torch, "mm", mm)
    config = bench.BenchConfig.smoke_config(
        precisions=("fp32", "bf16"), workloads=("matmul",), matmul_sizes=(32,), min_run_time=0.005
    )
    report = bench.run(config, "cpu", progress=None)
    rows = {r["label"]: r for r in report["results"]["matmul"]}
    assert rows["fp32"]["achieved_tflops"] > 0 and "skipped" not in rows["fp32"]
    assert rows["bf16"]["skipped"].startswith('RuntimeError: "addmm" not implemented')
    assert "achieved_tflops" not in rows["bf16"]
    assert "bf16             skipped: RuntimeError" in bench.format_report(report)


def test_bad_names_get_clear_errors(capsys):
    with pytest.raises(ValueError, match="Unknown precision 'fp8'.*fp32, .*tf32, .*bf16"):
        bench.BenchConfig.smoke_config(precisions=("fp8",))
    assert cli.main(["bench", "--device", "cpu", "--workloads", "resnet"]) == 2
    assert "Unknown workload 'resnet'" in capsys.readouterr().err
    assert cli.main(["bench", "--device", "cpu", "--precisions", "fp8"]) == 2
    assert "Unknown precision 'fp8'" in capsys.readouterr().err


def test_the_bench_reads_every_spelling_the_table_does_once():
    """Rows end to end: names a learner types ("bfloat16", "BF16") become the table's rows when
    the config is made, and the report keeps their short names."""
    config = bench.BenchConfig.smoke_config(precisions=("float32", "BFloat16", precisions.FP16))
    assert config.precisions == (precisions.FP32, precisions.BF16, precisions.FP16)
    assert [c.precision for c in config.variants()] == list(config.precisions)
    assert config.to_dict()["precisions"] == ["fp32", "bf16", "fp16"]
    ladder = bench.ladder.LadderConfig.smoke_config(precision="bfloat16")
    assert ladder.precision is precisions.BF16


def test_a_bench_run_reads_each_typed_name_once(monkeypatch):
    """The matrix and the ladder carry rows: a run reads each name a user typed once (when its
    config is made), and nothing under it turns a row back into a name to read again."""
    read = []

    def get(name, real=precisions.get):
        if not isinstance(name, precisions.Precision):
            read.append(name)
        return real(name)

    monkeypatch.setattr(precisions, "get", get)
    config = bench.BenchConfig.smoke_config(
        precisions=("float32", "BFloat16"),
        workloads=("matmul", "ladder"),
        matmul_sizes=(32,),
        min_run_time=0.005,
    )
    report = bench.run(config, "cpu", progress=None)
    assert read == ["float32", "BFloat16"]
    assert {r["label"] for r in report["results"]["matmul"]} == {"fp32", "bf16"}
    assert report["results"]["ladder"]


def reference_work_seconds() -> float:
    """Seconds that 200 single-threaded steps of a small MLP take on this machine right now.

    A time budget is a ratio to this: a slow or busy machine slows both alike, so the ratio
    fails only when the measured code itself gets slower.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        x, y = torch.randn(64, 256, generator=generator), torch.randint(0, 10, (64,))
        model = torch.nn.Sequential(
            torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
        )
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        start = time.perf_counter()
        for _ in range(200):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        return time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    # Non-default flags, to see that the run puts them back.
    flags = (True, False)
    before = _flags()
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
    threads = torch.get_num_threads()
    reference = reference_work_seconds()
    start = time.perf_counter()
    try:
        code = cli.main(["bench", "--device", "cpu", "--smoke", "--out", str(out)])
        after = _flags()
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
    seconds = time.perf_counter() - start
    reference = (reference + reference_work_seconds()) / 2  # the load before and after
    return dict(
        code=code,
        out=out,
        flags=flags,
        after=after,
        threads=threads,
        seconds=seconds,
        reference=reference,
    )


def test_smoke_bench_writes_json_table_and_plot(smoke_run):
    assert smoke_run["code"] == 0
    report = json.loads((smoke_run["out"] / "bench.json").read_text())
    for key in ("device", "versions", "date", "smoke", "config", "variants", "results"):
        assert key in report
    assert report["smoke"] and report["versions"]["torch"] == torch.__version__
    assert set(report["results"]) == set(bench.WORKLOADS)
    results = report["results"]
    # Every runnable mode produced numbers; on a CPU only TF32 and the GPU-only search are skipped.
    for workload in ("matmul", "mnist_cnn", "vit_b16", "vit_l16"):
        done = {r["label"] for r in results[workload] if "skipped" not in r}
        assert done == {"fp32", "fp16", "bf16"}, (workload, results[workload])
    assert all("skipped" in r for r in results["max_batch"])
    vit = next(r for r in bench.rows.load(report, "vit_b16") if r.label == "fp32")
    assert vit.median_s > 0 and vit.images_per_s == pytest.approx(vit.batch / vit.median_s)
    assert vit.flops_per_step > 0 and vit.mfu is None  # no published peak for a CPU
    assert vit.p25_s <= vit.median_s <= vit.p75_s and vit.runs >= 1
    assert vit.variant == dataclasses.replace(bench.Variant.matrix("fp32"), batch=2)
    assert vit.peak_memory_bytes is None  # a CPU
    table = (smoke_run["out"] / "bench.txt").read_text()
    assert "== vit_b16 ==" in table and "tf32             skipped" in table
    assert (smoke_run["out"] / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_smoke_bench_restores_flags_and_threads(smoke_run):
    assert smoke_run["after"] == smoke_run["flags"]
    assert torch.get_num_threads() == smoke_run["threads"]


def test_smoke_bench_is_quick(smoke_run):
    # 25-35x the reference work on 2 shared cores (11-14 s): a margin of about 2x.
    ratio = smoke_run["seconds"] / smoke_run["reference"]
    assert ratio < 70, (
        f"the smoke bench took {smoke_run['seconds']:.1f} s, {ratio:.0f}x the reference"
    )


@pytest.mark.gpu
def test_gpu_bench_measures_memory_mfu_and_largest_batch():
    config = bench.BenchConfig.full(
        precisions=("fp32", "tf32", "bf16"),
        workloads=("matmul", "vit_b16", "max_batch"),
        matmul_sizes=(1024, 2048),
        vit_batch_size={"b16": 8, "l16": 4},
        rounds=2,
        min_run_time=0.2,
        max_batch_limit=4096,
    )
    report = bench.run(config, "cuda", progress=None)
    rows = {r.label: r for r in bench.rows.load(report, "vit_b16")}
    for mode in ("fp32", "bf16"):
        assert rows[mode].peak_memory_bytes > 0
        if rows[mode].dense_peak_tflops:
            assert 0 < rows[mode].mfu < 1
    # bf16 saves activations: its step peaks below fp32's.
    assert rows["bf16"].peak_memory_bytes < rows["fp32"].peak_memory_bytes
    batches = {r.label: r.max_batch for r in bench.rows.load(report, "max_batch")}
    # The limit is far above what fits, so the two searches end at real out-of-memory errors:
    # bf16 halves the activations, so strictly more images fit than in fp32.
    assert 8 <= batches["fp32"] < config.max_batch_limit
    assert batches["bf16"] > batches["fp32"]


def test_profile_modes_and_kernel_families():
    from amp_course.bench import profile

    cell = bench.Variant.parse("bf16+compile+fused")
    assert cell == bench.Variant.matrix(precisions.BF16, compile=True, fused=True)
    assert (cell.label, cell.precision, cell.compile, cell.fused) == (
        "bf16+compile+fused",
        precisions.BF16,
        "default",
        True,
    )
    with pytest.raises(ValueError, match="Unknown variant 'bf16\\+foo'"):
        bench.Variant.parse("bf16+foo")
    assert profile.kernel_family("nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN") == "matmul"
    assert profile.kernel_family("cudnn_generated_fort_native_sdpa_sm90_flash_bprop") == (
        "attention"
    )
    assert profile.kernel_family("triton_poi_fused_gelu_view_12") == "other"


def test_profile_on_a_cpu_times_the_step_and_reports_no_kernels():
    from amp_course.bench import profile

    result = profile.profile_step(
        bench.Variant.parse("fp32"), "cpu", preset="tiny", batch=2, steps=2, warmup=1
    )
    assert result["step_s"] > 0 and result["kernel_s"] is None
    assert result["label"] == "fp32" and "mode" not in result
    assert "no device kernels" in profile.format_profile(result)
    # On a CPU the split is of the ATen operators' own time, and the rest of the profiled step.
    parts = profile.split(result)
    assert parts["matmul"] > 0 and parts["attention"] > 0 and parts["outside operators"] >= 0
    assert sum(parts.values()) == pytest.approx(result["profiled_step_s"])
    assert profile.cpu_op_family("aten::convolution_backward") == "matmul"


def test_profile_split_of_a_gpu_result_adds_up_to_the_step():
    """The split of a GPU profile (the committed H100 run's): kernel families and idle time."""
    from conftest import ROOT

    from amp_course.bench import profile

    path = ROOT / "reports" / "gpu" / "nvidia-h100-80gb-hbm3" / "profile-vit_b16" / "profile.json"
    stored = json.loads(path.read_text())
    # Written when a variant's label was its "mode": load reads it as the label.
    assert [r["mode"] for r in stored] == [r["label"] for r in profile.load(path)]
    assert all("label" not in r for r in stored)
    for result in profile.load(path):
        parts = profile.split(result)
        assert set(parts) == {"matmul", "attention", "other", "GPU idle"}
        assert sum(parts.values()) == pytest.approx(max(result["step_s"], result["kernel_s"]))


def test_one_peak_memory_definition_counts_the_model_and_one_clean_step(monkeypatch):
    """The matrix and the ladder share ``trainer.peak_memory``: parameters plus one step's
    peak from a clean state, whatever the process held before; None off CUDA and under CUDA
    graphs."""
    from amp_course.bench import Variant, trainer

    cleared = []
    monkeypatch.setattr(trainer, "step_peak_memory", lambda make_step, device, warmup=1: 1000)
    model = torch.nn.Linear(4, 4)  # 20 fp32 parameters: 80 bytes
    cuda = type("Device", (), {"type": "cuda"})()
    clear = lambda: cleared.append(True)  # noqa: E731
    eager, compiled = Variant.matrix("bf16"), Variant.matrix("bf16", compile=True)
    assert trainer.peak_memory(clear, model, lambda: None, cuda, eager) == 1080 and cleared
    assert trainer.peak_memory(clear, model, lambda: None, cuda, compiled) == 1080
    for graphs in bench.variant.CUDA_GRAPH_MODES:
        rung = dataclasses.replace(eager, compile=graphs)
        assert trainer.peak_memory(clear, model, lambda: None, cuda, rung) is None
    assert trainer.peak_memory(clear, model, lambda: None, torch.device("cpu"), eager) is None


def test_a_matrix_cell_and_a_ladder_rung_are_variants_of_one_trainer():
    """A matrix cell is a variant without options; one trainer steps both kinds, sharing
    the model and one AdamW per fused flag, and each gives the one Row type."""
    from amp_course.bench import Variant, trainer

    matrix = Variant.matrix("bf16", compile=True, fused=True)
    assert (matrix.label, matrix.precision, matrix.compile, matrix.fused, matrix.batch) == (
        "bf16+compile+fused",
        precisions.BF16,
        "default",
        True,
        None,
    )
    assert Variant.matrix("fp32").compile is None and Variant.matrix("fp32").plain
    assert matrix.recipe("cpu").precision is precisions.BF16
    model = models.build_vit(
        "b16", image_size=32, patch_size=16, num_layers=1, num_heads=2, hidden_dim=32, mlp_dim=64
    )
    shared = trainer.Trainer(torch.device("cpu"), lambda kind: model)
    images, labels = torch.randn(2, 3, 32, 32), torch.randint(0, 1000, (2,))
    shared.step(Variant.matrix("fp32"), iter([(images, labels)]))()
    rung = Variant("+ batch 4", precisions.BF16, fused=True, attention="math", batch=4)
    shared.step(rung)()  # its own synthetic batch of 4, under the math SDPA kernel
    assert list(shared.models) == ["course"] and set(shared.optimizers) == {
        ("course", False),
        ("course", True),
    }
    assert all(o.state for o in shared.optimizers.values())  # each stepped once
    shared.clear_state()
    assert all(p.grad is None for p in model.parameters())
    assert not any(o.state for o in shared.optimizers.values())


def test_tf32_is_the_tables_flag_in_the_bench(monkeypatch):
    """The trainer's flags, the matmul peak and the skip rule read ``tf32_matmuls`` of the
    precision's row, not its name: a row with the flag under another name is TF32 too."""
    from amp_course.bench import Variant, trainer

    renamed = dataclasses.replace(precisions.TF32, name="tf32-renamed")
    cell = Variant("x", renamed)
    assert "CUDA tensor-core" in bench.skip_reason(cell, torch.device("cpu"))
    with recipe.tf32(False), trainer.flags(cell):
        assert recipe.tf32_enabled()["matmul"] is recipe.tf32_allowed()
    with recipe.tf32(True), trainer.flags(Variant.matrix("fp32")):
        assert not recipe.tf32_enabled()["matmul"]  # fp32 is strict IEEE in the bench


def test_one_skip_reason_for_matrix_cells_and_rungs():
    """The matrix's rules (TF32 off CUDA) and the ladder's (CUDA graphs, compiling in a CPU smoke
    run, CUDA-only attention kernels) are one function's, of the one configuration type."""
    from amp_course.bench import Variant

    cpu, bf16 = torch.device("cpu"), precisions.BF16
    assert "CUDA tensor-core" in bench.skip_reason(Variant.matrix("tf32"), cpu)
    compiled = Variant.matrix("bf16", compile=True)
    assert "minutes" in bench.skip_reason(compiled, cpu, smoke=True)
    assert bench.skip_reason(compiled, cpu) is None  # the matrix compiles when asked
    graphs = Variant("+ CUDA graphs", bf16, compile="reduce-overhead")
    assert bench.skip_reason(graphs, cpu) == "CUDA graphs need a CUDA GPU"
    efficient = Variant("x", bf16, attention="efficient")
    assert bench.skip_reason(efficient, cpu) == "the efficient attention kernel is CUDA only"
    tf32_rung = Variant("x", precisions.TF32, attention="flash", batch=8)
    assert "CUDA tensor-core" in bench.skip_reason(tf32_rung, cpu)


def test_rows_round_trip_and_old_rows_load_under_their_new_names():
    """bench.json holds ``Row.to_dict``; the committed H100 run's rows (written by the old matrix,
    with its own names) load as the same Row type, and the figures derived from what they
    measured are the ones the old writer stored."""
    from conftest import ROOT

    from amp_course.bench import Variant

    cell = Variant.matrix("bf16", compile=True, fused=True)
    timed = bench.Row(
        "vit_b16",
        dataclasses.replace(cell, batch=64),
        median_s=0.02,
        flops_per_step=6e12,
        dense_peak_tflops=989.4,
    )
    stored = json.loads(json.dumps(timed.to_dict()))
    assert bench.Row.from_dict(stored) == timed
    assert stored["label"] == "bf16+compile+fused" and stored["precision"] == "bf16"
    assert stored["mfu"] == timed.mfu == pytest.approx(6e12 / 0.02 / 989.4e12)
    assert "skipped" not in stored  # absent, not None
    path = ROOT / "reports/gpu/nvidia-h100-80gb-hbm3/bench-vit_b16/bench.json"
    old = json.loads(path.read_text())["results"]["vit_b16"]
    rows = {r.label: r for r in bench.rows.load(path, "vit_b16")}
    fp32, best = old[0], rows["bf16+compile+fused"]
    assert rows["fp32"].batch == fp32["batch_size"] == 64
    assert rows["fp32"].dense_peak_tflops == fp32["peak_tflops"] == 66.9
    assert rows["fp32"].peak_memory_bytes == fp32["peak_memory_bytes"]
    c = best.variant
    assert (c.compile, c.fused, c.precision) == ("default", True, precisions.BF16)
    for stored in old:
        row = rows[stored["mode"]]
        for key in ("images_per_s", "achieved_tflops", "mfu"):
            assert getattr(row, key) == pytest.approx(stored[key], rel=1e-12), key
    matmul = bench.Row.from_dict(
        {
            "mode": "fp16",
            "workload": "matmul",
            "precision": "fp16",
            "size": 4096,
            "median_s": 2 * 4096**3 / 600e12,
            "tflops": 600.0,
            "peak_tflops": 1000.0,
            "fraction_of_peak": 0.6,
        }
    )
    assert (matmul.achieved_tflops, matmul.mfu) == (pytest.approx(600.0), pytest.approx(0.6))
    # An old ladder row stored rates and shares only: what they came from is filled in.
    rung = {"workload": "ladder", "rung": "eager", "precision": "bf16", "batch_size": 64}
    old_rung = bench.Row.from_dict(
        {**rung, "median_s": 0.04, "tflops": 20.0, "fraction_of_peak": 0.2}
        | {"fraction_of_ceiling": 0.5}
    )
    assert (old_rung.label, old_rung.batch, old_rung.images_per_s) == ("eager", 64, 1600)
    shown = (old_rung.achieved_tflops, old_rung.mfu, old_rung.mfu_of_matmul)
    assert shown == pytest.approx((20.0, 0.2, 0.5))


def test_the_matmul_peak_is_the_best_square_matmul_of_each_precision():
    from amp_course.bench import Variant

    def matmul(name, size, seconds):
        cell = Variant.matrix(name)
        return bench.Row("matmul", cell, size, median_s=seconds, flops_per_step=2 * size**3)

    rows = [matmul("bf16", 1024, 1e-4), matmul("bf16", 4096, 1e-3), matmul("fp32", 1024, 1e-3)]
    rows.append(bench.Row("matmul", Variant.matrix("fp16"), 1024, skipped="no kernel"))
    assert bench.rows.matmul_peaks(rows) == {
        "bf16": pytest.approx(2 * 4096**3 / 1e-3 / 1e12),
        "fp32": pytest.approx(2 * 1024**3 / 1e-3 / 1e12),
    }


@pytest.mark.parametrize(
    "name", ["NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GH200 480GB", "NVIDIA H800"]
)
def test_variants_without_datasheet_figures_get_none_rather_than_another_cards(name):
    # "H100" and "H200" are substrings of these names, but the cards' clocks and memory differ
    # from the SXM cards' and the course has no checked figures for them: none, not the SXM's.
    assert gpus.peak_tflops(name, "bf16") is None and gpus.peak_bandwidth_tbs(name) is None
    assert name in gpus.datasheet_note(name)


def test_sxm_figures_are_the_hopper_whitepapers():
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        peaks = {p: gpus.peak_tflops(name, p) for p in ("fp32", "tf32", "bf16")}
        assert peaks == {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4}
        assert gpus.datasheet_note(name) is None
    assert gpus.peak_bandwidth_tbs("NVIDIA H200") == 4.8
    assert gpus.peak_bandwidth_tbs("NVIDIA A100 80GB PCIe") == 1.935
    assert "CPU" in gpus.datasheet_note("CPU x86_64 (AVX2)")


def test_a_row_keeps_its_measurement_and_derives_its_figures():
    """Rows keep every timed run (as a Measurement does) and derive the median, quartiles, IQR
    and run count from them, as the Measurement itself computes them; a row written before rows
    kept their runs loads with the figures it stored."""
    from torch.utils import benchmark as tbench

    from amp_course import timing
    from amp_course.bench.rows import Row, timing_fields

    times = [0.012, 0.010, 0.011, 0.016, 0.010, 0.013, 0.011]
    spec = tbench.TaskSpec(stmt="step", setup="pass")
    measured = tbench.Measurement(number_per_run=1, raw_times=times, task_spec=spec)
    cell = bench.Variant.matrix("bf16")
    row = Row("vit_b16", cell, **timing_fields(timing.summarise(measured)))
    assert row.times_s == tuple(times) and row.runs == len(times)
    assert row.median_s == measured.median and row.iqr_s == pytest.approx(measured.iqr, abs=1e-15)
    saved = json.loads(json.dumps(row.to_dict()))
    assert saved["times_s"] == times and Row.from_dict(saved) == row
    older = {k: v for k, v in saved.items() if k != "times_s"} | {"median_s": 0.5, "runs": 3}
    old_row = Row.from_dict(older)
    assert old_row.times_s is None and (old_row.median_s, old_row.runs) == (0.5, 3)


def test_the_figure_names_each_panel_and_shows_each_timed_bars_spread(smoke_run):
    """Each panel its own title (the MNIST one the epoch it extrapolates to), whiskers over the
    middle half of the runs on the timed bars, and labelled values on a matmul axis that spans
    less than a decade."""
    import matplotlib.pyplot as plt

    report = json.loads((smoke_run["out"] / "bench.json").read_text())
    figure = bench.plot_report(report)
    panels = {ax.get_title(): ax for ax in figure.axes if ax.axison}
    steps = next(r for r in bench.rows.load(report, "mnist_cnn") if r.timed).steps_per_epoch
    assert set(panels) == {
        "matmul throughput",
        f"MNIST CNN: an epoch ({steps} steps) at the timed step",
        "ViT training step",
    }
    for title in ("ViT training step", f"MNIST CNN: an epoch ({steps} steps) at the timed step"):
        bars = len(panels[title].patches)  # every timed row of a smoke run has its quartiles
        whiskers = sum(len(c.get_segments()) for c in panels[title].collections)
        assert bars >= 3 and whiskers == bars, title
    figure.canvas.draw()
    ticks = panels["matmul throughput"].get_yticklabels()
    low, high = panels["matmul throughput"].get_ylim()
    shown = [t for t in ticks if t.get_text() and low <= t.get_position()[1] <= high]
    assert len(shown) >= 2, [t.get_text() for t in ticks]
    plt.close(figure)
