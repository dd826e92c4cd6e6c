"""The README's GPU results, computed from a committed GPU run's files, never typed in.

    python -m amp_course.gpu_results reports/gpu/<device>            # print the section
    python -m amp_course.gpu_results reports/gpu/<device> --write    # replace it in README.md

Sources, all under the run's folder: ``bench-vit_b16/bench.json`` (the ViT-B/16 matrix with
torch.compile and fused AdamW), the benchmark table that lesson 05's executed copy printed
(matmul sweep, MNIST CNN, largest batch), ``profile-vit_b16/profile.json`` (where the step's time
goes) and ``report.json`` (the machine, each notebook's papermill and nbval result). The tests
regenerate the section from the files and compare it with the README.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

from .bench import ladder_report
from .bench.config import PRECISIONS
from .timing import format_time

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- gpu-results: begin (python -m amp_course.gpu_results writes this section) -->"
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
SHOWN_MODES = ("fp32", "tf32", "fp16", "bf16") + tuple(
    f"{p}+compile+fused" for p in ("fp32", "tf32", "fp16", "bf16")
)


def printed_text(notebook: Path) -> str:
    """Everything an executed notebook's code cells printed (their stream outputs), in order."""
    nb = nbformat.read(notebook, as_version=4)
    return "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )


def printed_bench_tables(notebook: Path) -> dict[str, list[dict]]:
    """The tables ``amp-course bench`` printed in an executed notebook, by workload: one dict per
    row, keyed by the header's column names (the report format of ``ac.bench.format_report``)."""
    text = printed_text(notebook)
    start = text.find("amp-course bench on ")
    if start < 0:
        raise ValueError(f"{notebook} printed no benchmark table")
    tables: dict[str, list[dict]] = {}
    parts = re.split(r"^== (\w+) ==\n", text[start:], flags=re.M)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [line for line in body.splitlines() if line.strip()]
        header = re.split(r"\s{2,}", lines[0].strip())
        rows = []
        for line in lines[1:]:
            cells = re.split(r"\s{2,}", line.strip())
            if len(cells) != len(header):
                break  # the table ended (the cell printed something else after it)
            rows.append(dict(zip(header, cells, strict=True)))
        tables[name] = rows
    return tables


def printed_mnist_source(notebook: Path) -> str:
    """The "MNIST source: ..." line a lesson printed (the shipped subset when offline)."""
    found = re.search(r"MNIST source: (.+)", printed_text(notebook))
    if found is None:
        raise ValueError(f"{notebook} printed no MNIST source")
    return found.group(1).strip()


def _number(text: str) -> float:
    return float(text.split()[0].rstrip("%x"))


def collect(folder: Path) -> dict:
    """Every figure the section quotes, from the run's files."""
    folder = Path(folder)
    report = json.loads((folder / "report.json").read_text())
    bench = json.loads((folder / "bench-vit_b16" / "bench.json").read_text())
    vit = {row["mode"]: row for row in bench["results"]["vit_b16"] if "median_s" in row}
    printed = printed_bench_tables(folder / "notebooks" / "05_speed_memory.ipynb")
    profile = {
        r["mode"]: r for r in json.loads((folder / "profile-vit_b16/profile.json").read_text())
    }
    batches = {row["mode"]: int(row["max batch"]) for row in printed["max_batch"]}
    fp32, best = vit["fp32"], vit["bf16+compile+fused"]
    measured = {
        "bf16_time": vit["bf16"]["median_s"] / fp32["median_s"],
        "best_time": best["median_s"] / fp32["median_s"],
        "bf16_mfu": vit["bf16"]["mfu"],
        "best_mfu": best["mfu"],
        "bf16_memory": vit["bf16"]["peak_memory_bytes"] / fp32["peak_memory_bytes"],
        "max_batch": batches["bf16"] / batches["fp32"],
    }
    return {
        "folder": folder,
        "report": report,
        "bench": bench,
        "vit": vit,
        "printed": printed,
        "profile": profile,
        "batches": batches,
        "measured": measured,
        "mnist_source": printed_mnist_source(folder / "notebooks" / "00_scenario.ipynb"),
    }


def _vit_table(data: dict) -> list[str]:
    vit = data["vit"]
    fp32, tf32 = vit["fp32"], vit["tf32"]
    lines = [
        "| mode | step | speed-up vs fp32 | vs TF32 | peak memory | / fp32 | TFLOP/s "
        "| MFU (peak) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode in SHOWN_MODES:
        row = vit.get(mode)
        if row is None:
            continue
        lines.append(
            f"| {mode} | {format_time(row['median_s'])} "
            f"| {fp32['median_s'] / row['median_s']:.2f}x "
            f"| {tf32['median_s'] / row['median_s']:.2f}x "
            f"| {row['peak_memory_bytes'] / 2**30:.2f} GiB "
            f"| {row['peak_memory_bytes'] / fp32['peak_memory_bytes']:.2f}x "
            f"| {row['achieved_tflops']:.0f} | {row['mfu']:.1%} ({row['peak_tflops']:g}) |"
        )
    return lines


def _lesson05_lines(data: dict) -> list[str]:
    printed, batches = data["printed"], data["batches"]
    mnist = {row["mode"]: row for row in printed["mnist_cnn"]}
    base = _number(mnist["fp32"]["step"])
    lines = [
        "- **Largest ViT-B/16 training batch** (a search up to out-of-memory): "
        + ", ".join(f"{mode} {n}" for mode, n in batches.items())
        + f"; bf16 fits {data['measured']['max_batch']:.2f}x fp32's.",
        f"- **MNIST CNN**, the scenario's CNN at batch {mnist['fp32']['batch']}: fp32 step "
        f"{mnist['fp32']['step']}, "
        + ", ".join(
            f"{mode} {mnist[mode]['step']} ({base / _number(mnist[mode]['step']):.2f}x)"
            for mode in ("tf32", "fp16", "bf16")
        )
        + ". World4AI's tutorial, where the CNN comes from, reports 1.7x with fp16 AMP "
        "(22.1 s against 13.0 s an epoch, on a GPU it does not name). The digits in this run: "
        f'"{data["mnist_source"]}", as lesson 00 printed.',
        "- **Square matmuls**, TFLOP/s and share of the published dense peak:",
        "",
        "| n | " + " | ".join(PRECISIONS) + " |",
        "|---|" + "---|" * len(PRECISIONS),
    ]
    by_size: dict[str, dict] = {}
    for row in printed["matmul"]:
        by_size.setdefault(row["size"], {})[row["mode"]] = row
    for size, rows in by_size.items():
        cells = [f"{rows[p]['TFLOP/s']} ({rows[p]['of peak']})" for p in PRECISIONS if p in rows]
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    return lines


def _profile_lines(data: dict) -> list[str]:
    lines = []
    for mode, result in data["profile"].items():
        families, step = result["families_s"], data["vit"][mode]["median_s"]
        kernels = ", ".join(
            f"{name} {families.get(name, 0.0) * 1e3:.1f} ms"
            for name in ("matmul", "attention", "other")
        )
        lines.append(
            f"- {mode}: {kernels} of kernels per step ({result['kernel_launches_per_step']:.0f} "
            f"launches), against the bench's {step * 1e3:.3g} ms step"
        )
    return lines


def _why_mfu(data: dict) -> str:
    """Why the MFU stays low, in figures from the profile (kernel time per step, in ms)."""
    ms = {
        mode: {k: v * 1e3 for k, v in result["families_s"].items()}
        for mode, result in data["profile"].items()
    }
    fp32, bf16, best = ms["fp32"], ms["bf16"], ms["bf16+compile+fused"]
    return (
        "Where the MFU targets are missed, `torch.profiler` (`profile-vit_b16/`) shows why. In "
        f"bf16 the matmul kernels take {fp32['matmul'] / bf16['matmul']:.0f}x less time than in "
        f"fp32 ({fp32['matmul']:.1f} -> {bf16['matmul']:.1f} ms a step), while the other "
        "kernels (autocast's casts, layer norms, GELU, the optimizer: memory-bound work that "
        f"tensor cores do not speed up) go only from {fp32['other']:.1f} to {bf16['other']:.1f} "
        "ms: at batch 64 they take more GPU time than the matmuls. `torch.compile` with fused "
        f"AdamW cuts them to {best['other']:.1f} ms:"
    )


def section(folder: Path) -> str:
    """The README section for the GPU run in ``folder``."""
    data = collect(folder)
    report, bench, measured = data["report"], data["bench"], data["measured"]
    versions = report["versions"]
    try:
        rel = Path(data["folder"]).resolve().relative_to(ROOT)
    except ValueError:  # a run outside the checkout
        rel = Path(data["folder"])
    passed = [r for r in report["notebooks"] if r["status"] == "passed"]
    lines = [
        BEGIN,
        f"### Results on an {report['device']}",
        "",
        f"Measured on one {report['device']} (driver {report['driver']}, torch "
        f"{versions['torch']}, CUDA {versions['cuda']}) on {report['date'][:10]}; every figure "
        f"below comes from the files in `{rel.as_posix()}/`. {len(passed)} of "
        f"{len(report['notebooks'])} notebooks ran in full mode under papermill without an "
        f"error; nbval: {report['nbval']}.",
        "",
        f"**ViT-B/16 training step, batch {data['vit']['fp32']['batch_size']}** "
        "(`bench-vit_b16/bench.json`: median of "
        f"{bench['config']['rounds']} interleaved rounds; MFU against the published dense peak "
        "of the mode's precision, in TFLOP/s):",
        "",
        *_vit_table(data),
        "",
        "**From lesson 05's executed copy** (`notebooks/05_speed_memory.ipynb`, eager modes):",
        "",
        *_lesson05_lines(data),
        "",
        "**Against the course's targets** (ViT-B/16, batch 64):",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for what, key, bound, at_most in TARGETS:
        value = measured[key]
        met = value <= bound if at_most else value >= bound
        shown = f"{value:.1%}" if "mfu" in key else f"{value:.3f}x"
        limit = f"{bound:.0%}" if "mfu" in key else f"{bound:.2f}x"
        lines.append(
            f"| {what} {'<=' if at_most else '>='} {limit} | {shown} | {'yes' if met else 'no'} |"
        )
    lines += [
        "",
        _why_mfu(data),
        "",
        *_profile_lines(data),
    ]
    ladder = Path(data["folder"]) / "bench-ladder" / "bench.json"
    if ladder.exists():  # lesson 10's ladder: amp-course bench --workloads ladder
        lines += ["", *ladder_report.readme_lines(ladder)]
    lines.append(END)
    return "\n".join(lines) + "\n"


def replace_section(readme: str, text: str) -> str:
    """``readme`` with its generated section replaced by ``text`` (ValueError without markers)."""
    if BEGIN not in readme or END not in readme:
        raise ValueError("README.md has no gpu-results markers to replace between")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + text.rstrip("\n") + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m amp_course.gpu_results", description=__doc__)
    parser.add_argument("folder", type=Path, help="a GPU run's folder, reports/gpu/<device>")
    parser.add_argument("--write", action="store_true", help="replace the section in README.md")
    args = parser.parse_args(argv)
    try:
        text = section(args.folder)
    except (OSError, KeyError, ValueError) as error:
        print(f"error: cannot read the GPU run in {args.folder}: {error}", file=sys.stderr)
        return 2
    if args.write:
        readme = ROOT / "README.md"
        readme.write_text(replace_section(readme.read_text(), text))
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
