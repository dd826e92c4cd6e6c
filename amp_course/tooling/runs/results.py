"""The GPU results, rendered from a committed GPU run's files (``runs.files``), never typed in:
the GPU-run guide's section (docs/gpu-run.md) and the body of the website's GPU page.

    amp-course gpu-results reports/gpu/<device>            # print the section
    amp-course gpu-results reports/gpu/<device> --write    # replace it in docs/gpu-run.md

The tests regenerate the section from the files and compare it with the guide's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ... import precisions
from ...bench import ladder_report
from ...bench.tables import matmul_rates_table, vit_speedup_table
from ...paths import GPU_GUIDE, ROOT, lesson_notebooks
from ...timing import format_time
from ..gpu_copies import full_copies, gpu_reports
from .files import EAGER_WORKLOADS, checked_output_cells, collect

BEGIN = "<!-- gpu-results: begin (amp-course gpu-results writes this section) -->"
END = "<!-- gpu-results: end -->"
# The targets for ViT-B/16 at batch 64 on an H100: (what, measured key, bound, at most?).
TARGETS = [
    ("bf16 step time / fp32-strict eager", "bf16_time", 0.20, True),
    ("bf16 + compile + fused AdamW step time / fp32-strict eager", "best_time", 0.15, True),
    ("bf16 MFU, eager", "bf16_mfu", 0.35, False),
    ("bf16 MFU, compile + fused AdamW", "best_mfu", 0.45, False),
    ("bf16 peak memory / fp32", "bf16_memory", 0.65, True),
    ("largest batch, bf16 / fp32", "max_batch", 1.6, False),
]
SHOWN_MODES = precisions.NAMES + tuple(f"{p}+compile+fused" for p in precisions.NAMES)
# What the results say of an eager workload no bench.json of the run holds.
NOT_MEASURED = "not in this run's bench.json: the next GPU run's bench-eager part measures them"


def judged(measured: dict) -> list[tuple]:
    """Each target with its measured value and whether it is met: (key, what, value, bound,
    at_most, met); value and met are None for a target the run did not measure."""
    rows = []
    for what, key, bound, at_most in TARGETS:
        value = measured[key]
        met = None if value is None else value <= bound if at_most else value >= bound
        rows.append((key, what, value, bound, at_most, met))
    return rows


def _vit_table(data: dict) -> list[str]:
    """The ViT-B/16 matrix's rows, each mode's speed-up and memory against fp32's (and TF32's)."""
    fp32, tf32 = data["vit"]["fp32"], data["vit"]["tf32"]
    table = vit_speedup_table(fp32, tf32)
    return table.markdown([data["vit"][mode] for mode in SHOWN_MODES if mode in data["vit"]])


def _eager_heading(data: dict) -> str:
    """The heading of the eager workloads: the bench.json files they come from, if any."""
    sources = sorted({data["bench"]["sources"][w] for w in data["rows"]})
    return "**Eager modes" + (f", from {', '.join(f'`{s}`' for s in sources)}" if sources else "")


def _other_lines(data: dict) -> list[str]:
    """The eager workloads' lines, each from its rows, or saying the run did not measure it."""
    rows, batches = data["rows"], data["batches"]
    lines = []
    if batches:
        fits = data["measured"]["max_batch"]
        lines.append(
            "- **Largest ViT-B/16 training batch** (a search up to out-of-memory): "
            + ", ".join(f"{mode} {n}" for mode, n in batches.items())
            + ("" if fits is None else f"; bf16 fits {fits:.2f}x fp32's")
            + "."
        )
    mnist = {row.label: row for row in rows.get("mnist_cnn", []) if row.timed}
    if "fp32" in mnist:
        base = mnist["fp32"].median_s
        lines.append(
            f"- **MNIST CNN**, the scenario's CNN at batch {mnist['fp32'].batch}: fp32 step "
            f"{format_time(base)}, "
            + ", ".join(
                f"{mode} {format_time(mnist[mode].median_s)} "
                f"({mnist[mode].speedup_over(mnist['fp32']):.2f}x)"
                for mode in precisions.NAMES[1:]
                if mode in mnist
            )
            + ". World4AI's tutorial, where the CNN comes from, reports 1.7x with fp16 AMP "
            "(22.1 s against 13.0 s an epoch, on a GPU it does not name)."
        )
    matmul = [row for row in rows.get("matmul", []) if row.achieved_tflops is not None]
    if matmul:
        by_size: dict[int, dict] = {}
        for row in matmul:
            by_size.setdefault(row.size, {})[row.label] = row

        table = matmul_rates_table(by_size, precisions.NAMES)
        lines += [
            "- **Square matmuls**, TFLOP/s and share of the published dense peak:",
            "",
            *table.markdown([next(iter(at.values())) for at in by_size.values()]),
        ]
    titles = {
        "max_batch": "largest ViT-B/16 training batch",
        "mnist_cnn": "MNIST CNN",
        "matmul": "square matmuls",
    }
    missing = ", ".join(titles[w] for w in EAGER_WORKLOADS if w not in rows)
    if missing:
        lines.append(f"- **{missing[0].upper()}{missing[1:]}**: {NOT_MEASURED}.")
    return lines


def _profile_lines(data: dict) -> list[str]:
    lines = []
    for label, result in data["profile"].items():
        families, step = result["families_s"], data["vit"][label].median_s
        kernels = ", ".join(
            f"{name} {families.get(name, 0.0) * 1e3:.1f} ms"
            for name in ("matmul", "attention", "other")
        )
        lines.append(
            f"- {label}: {kernels} of kernels per step ({result['kernel_launches_per_step']:.0f} "
            f"launches), against the bench's {step * 1e3:.3g} ms step"
        )
    return lines


def _why_mfu(data: dict) -> str:
    """Why the MFU stays low, in figures from the profile (kernel time per step, in ms)."""
    ms = {
        label: {k: v * 1e3 for k, v in result["families_s"].items()}
        for label, result in data["profile"].items()
    }
    fp32, bf16, best = ms["fp32"], ms["bf16"], ms["bf16+compile+fused"]
    batch = data["vit"]["bf16"].batch
    missed = any(met is False for key, *_, met in judged(data["measured"]) if "mfu" in key)
    return (
        ("Where the MFU targets are missed" if missed else "Where the step's time goes")
        + ", `torch.profiler` (`profile-vit_b16/`) shows why. In "
        f"bf16 the matmul kernels take {fp32['matmul'] / bf16['matmul']:.0f}x less time than in "
        f"fp32 ({fp32['matmul']:.1f} -> {bf16['matmul']:.1f} ms a step), while the other "
        "kernels (autocast's casts, layer norms, GELU, the optimizer: memory-bound work that "
        f"tensor cores do not speed up) go only from {fp32['other']:.1f} to {bf16['other']:.1f} "
        f"ms: at batch {batch} they take {'more' if bf16['other'] > bf16['matmul'] else 'less'} "
        "GPU time than the matmuls. `torch.compile` with fused AdamW takes them to "
        f"{best['other']:.1f} ms:"
    )


def notebooks_sentence(folder: Path, lessons: list[Path] | None = None) -> str:
    """What the run's papermill and nbval results say, exactly, and which of ``lessons`` (the
    course's by default) it lacks."""
    folder = Path(folder)
    report = json.loads((folder / "report.json").read_text())
    runs = report["notebooks"]
    passed = [r for r in runs if r["status"] == "passed"]
    text = (
        f"{len(passed)} of {len(runs)} notebooks ran in full mode under papermill without an "
        "error (exercise blanks holding the course's reference solutions). "
    )
    if report["nbval"] == "passed":
        checked = sum(checked_output_cells(folder / "notebooks" / r["notebook"]) for r in runs)
        text += (
            "nbval: each of these executed copies ran again, cell by cell, under `pytest "
            "--nbval-lax` without an error; `--nbval-lax` compares the output only of cells "
            f"marked for it, and {checked} cell(s) are marked, so "
            + ("no output was compared." if checked == 0 else "only theirs were compared.")
        )
    else:
        text += f"nbval (`pytest --nbval-lax`, errors only): {report['nbval']}."
    lessons = lesson_notebooks() if lessons is None else lessons
    missing = sorted({p.name for p in lessons} - {r["notebook"] for r in runs})
    if missing:
        text += f" Not in this run (newer than it): {', '.join(missing)}."
    return text


def copies_lines(reports: Path, lessons: list[Path] | None = None) -> list[str]:
    """Where each of ``lessons`` (the course's by default) has its newest passing full-mode copy
    among the GPU runs in ``reports``: the device, torch, date and mode of the copy's stamp, and its
    run's folder. A run is made of parts from sessions on different days and devices."""
    folders = gpu_reports(reports=reports)
    lines = [
        "**Where each lesson's copy comes from:** the newest passing full-mode copy of each "
        "lesson among the GPU runs in `reports/gpu/`, as its stamp names it (a run is made in "
        "parts, on different days and devices). A lesson's page shows that copy while the lesson "
        "is unchanged since it ran; `amp-course gpu --plan` lists what a run of the "
        "current notebooks still lacks.",
        "",
        "| lesson | device | torch | date | mode | run |",
        "|---|---|---|---|---|---|",
    ]
    for path in lesson_notebooks() if lessons is None else lessons:
        copy = next(full_copies(path.stem, folders), None)
        if copy is None:
            lines.append(f"| {path.stem} | no GPU run yet | | | | |")
            continue
        stamp = copy.stamp
        lines.append(
            f"| {path.stem} | {stamp['device']} | {stamp['torch']} | {stamp['date'][:10]} "
            f"| {stamp['mode']} | `{copy.folder.name}/` |"
        )
    return lines


def timing_sentence(rows: list, config: dict) -> str:
    """What the step times of a bench workload's ``rows`` (``bench.rows.Row``) are the median of
    (``config``: the bench report's that ran it)."""
    runs = sorted({row.runs for row in rows if row.runs is not None})
    shown = "/".join(str(n) for n in runs)
    return (
        f"each step time is the median over {shown} timed blocks of steps per mode, taken in "
        f"{config['rounds']} rounds that interleave the modes; a block's time is its "
        "mean step time"
    )


def results_markdown(folder: Path) -> str:
    """The run's results as Markdown (a ``###`` heading, then text and tables): the GPU-run
    guide's section and the website's GPU page show it."""
    data = collect(folder)
    report, bench, measured = data["report"], data["bench"], data["measured"]
    versions = report["versions"]
    try:
        rel = Path(data["folder"]).resolve().relative_to(ROOT)
    except ValueError:  # a run outside the checkout
        rel = Path(data["folder"])
    vit_rows = list(data["vit"].values())
    lines = [
        f"### Results on an {report['device']}",
        "",
        f"Measured on one {report['device']} (driver {report['driver']}, torch "
        f"{versions['torch']}, CUDA {versions['cuda']}) on {report['date'][:10]}; every figure "
        f"below comes from the files in `{rel.as_posix()}/`. {notebooks_sentence(data['folder'])}",
        "",
        *copies_lines(Path(data["folder"]).parent),
        "",
        f"**ViT-B/16 training step, batch {data['vit']['fp32'].batch}** "
        f"(`{bench['sources']['vit_b16']}`: {timing_sentence(vit_rows, data['vit_config'])}; MFU "
        "against the published dense peak of the mode's precision, in TFLOP/s):",
        "",
        *_vit_table(data),
        "",
        f"{_eager_heading(data)}:**",
        "",
        *_other_lines(data),
        f'- The MNIST digits of this run: "{data["mnist_source"]}", as lesson 00 printed.',
        "",
        "**Against the course's targets** (ViT-B/16, batch 64):",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for key, what, value, bound, at_most, met in judged(measured):
        shown = f"{value:.1%}" if "mfu" in key else f"{value:.3f}x" if value is not None else "-"
        limit = f"{bound:.0%}" if "mfu" in key else f"{bound:.2f}x"
        verdict = {True: "yes", False: "no", None: "not in this run's bench.json"}[met]
        lines.append(f"| {what} {'<=' if at_most else '>='} {limit} | {shown} | {verdict} |")
    lines += ["", _why_mfu(data), "", *_profile_lines(data)]
    ladder = Path(data["folder"]) / "bench-ladder" / "bench.json"
    if ladder.exists():  # lesson 10's ladder: amp-course bench --workloads ladder
        lines += ["", *ladder_report.readme_lines(ladder)]
    return "\n".join(lines) + "\n"


def section(folder: Path) -> str:
    """The GPU-run guide's section for the run in ``folder``: ``results_markdown`` between
    markers."""
    return f"{BEGIN}\n{results_markdown(folder)}{END}\n"


def replace_section(page: str, text: str) -> str:
    """``page`` with its generated section replaced by ``text`` (ValueError without markers)."""
    if BEGIN not in page or END not in page:
        raise ValueError(f"{GPU_GUIDE.as_posix()} has no gpu-results markers to replace between")
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + text.rstrip("\n") + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="amp-course gpu-results", description=__doc__)
    parser.add_argument("folder", type=Path, help="a GPU run's folder, reports/gpu/<device>")
    parser.add_argument(
        "--write", action="store_true", help=f"replace the section in {GPU_GUIDE.as_posix()}"
    )
    args = parser.parse_args(argv)
    try:
        text = section(args.folder)
    except (OSError, KeyError, ValueError) as error:  # FileNotFoundError is an OSError
        # A KeyError names only the field: say where it was looked for.
        why = f"its report or bench.json lacks {error}" if isinstance(error, KeyError) else error
        print(f"error: cannot read the GPU run in {args.folder}: {why}", file=sys.stderr)
        return 2
    if args.write:
        guide = ROOT / GPU_GUIDE
        guide.write_text(replace_section(guide.read_text(encoding="utf-8"), text), encoding="utf-8")
    else:
        print(text)
    return 0
