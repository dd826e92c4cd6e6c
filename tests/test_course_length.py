"""The README says what a learner will spend: the course's length from the lessons' own time
estimates, its core path, and each CPU kind's smoke-mode times from the committed reports. Each
figure it quotes is the one computed here."""

import json
import re

import nbformat
from conftest import NOTEBOOKS, ROOT

from amp_course.paths import SMOKE_REPORTS

README = (ROOT / "README.md").read_text(encoding="utf-8")
# The section's words, lines joined (a figure may wrap).
SECTION = " ".join(README.split("## How long it takes\n", 1)[1].split("\n## ", 1)[0].split())
CORE = ("00_scenario", "01_number_formats", "02_autocast", "03_grad_scaler", "04_training_loops")
CORE += ("labs_bug_hunts",)
SPEED = ("05_speed_memory", "06_debugging_nan", "10_where_time_goes")


def minutes(path) -> int:
    """The lesson's own estimate: "**Time:** about N minutes" under its title."""
    opening = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells[:3])
    found = re.search(r"\*\*Time:\*\* about (\d+) minutes", opening)
    assert found, f"{path.name} states no time"
    return int(found.group(1))


def test_every_lesson_states_its_time_and_the_readme_adds_them_up():
    spent = {p.stem: minutes(p) for p in NOTEBOOKS}
    total, core = sum(spent.values()), sum(spent[name] for name in CORE)
    speed = sum(spent[name] for name in SPEED)
    assert f"about {total / 60:.1f} hours ({total} minutes)" in SECTION
    assert f"about {core / 60:.1f} hours ({core} minutes)" in SECTION
    assert f"{speed} minutes), and scale and" in SECTION
    beyond = total - core - speed
    assert f", {beyond} minutes)." in SECTION
    # The paths the README names hold these lessons: every lesson on one of them, once.
    listed = {
        "core": _path_lessons(r"the core, about [\d.]+ hours \(\d+ minutes\): (.*?)\. Then"),
        "speed": _path_lessons(r"speed and debugging \((.*?), \d+ minutes\)"),
        "beyond": _path_lessons(r"scale and beyond \((.*?), \d+ minutes\)"),
    }
    beyond_names = [p.stem for p in NOTEBOOKS if p.stem not in CORE + SPEED]
    assert listed == {"core": sorted(CORE), "speed": sorted(SPEED), "beyond": sorted(beyond_names)}


def _path_lessons(pattern: str) -> list[str]:
    """The lessons one of the README's paths names: "05" for 05_speed_memory, `labs_x` by name."""
    found = re.search(pattern, SECTION)
    assert found, f"the README's section names no path matching {pattern!r}"
    by_number = {p.stem[:2]: p.stem for p in NOTEBOOKS if p.stem[:2].isdigit()}
    named = re.findall(r"\b(\d\d)\b|`(\w+)`", found.group(1))
    return sorted(by_number[number] if number else name for number, name in named)


def _report(kind: str) -> dict:
    """The committed smoke report of a CPU with native bf16 ("native"), of one rehearsing a CPU
    without it ("rehearsed"), or of a real CPU without it ("emulated"): one of each is committed,
    the newest, so the README cannot quote a report that another of its kind replaced."""
    found = {}
    for path in sorted((ROOT / SMOKE_REPORTS).glob("*.json")):
        bench = json.loads(path.read_text())
        rehearsed, native = bool(bench.get("rehearsal")), bench["cpu_step"]["native_bf16"]
        if kind == ("rehearsed" if rehearsed else "native" if native else "emulated"):
            found[path.name] = bench
    assert len(found) == 1, f"{len(found)} committed {kind} smoke reports: {sorted(found)}"
    return next(iter(found.values()))


def test_the_readme_quotes_each_cpu_kinds_times_from_the_committed_reports():
    native, rehearsed, emulated_cpu = _report("native"), _report("rehearsed"), _report("emulated")
    text = SECTION
    assert len(NOTEBOOKS) == 16 and "all 16 lessons ran in" in text
    assert (
        f"{native['total_s']:.0f} s on a CPU with native bf16 (slowest lesson "
        f"{native['slowest_s']:.1f} s) and in {rehearsed['total_s']:.0f} s rehearsing a CPU "
        f"without it (slowest {rehearsed['slowest_s']:.1f} s)"
    ) in text
    assert native["cpu_step"]["native_bf16"] and not rehearsed["cpu_step"]["native_bf16"]
    emulated, native_ratio = (b["cpu_step"]["bf16_over_fp32"] for b in (rehearsed, native))
    assert f"took {emulated:.0f}x its fp32 time (against {native_ratio:.1f}x" in text
    # A real CPU without native bf16: its times, how much slower it is than the rehearsing CPU,
    # and every lesson that missed the 30 s target there, named.
    slower = emulated_cpu["cpu_step"]["fp32_s"] / rehearsed["cpu_step"]["fp32_s"]
    over = [n["notebook"].removesuffix(".ipynb") for n in emulated_cpu["notebooks"] if not n["met"]]
    assert (
        f"On a real 2-core CPU without native bf16 ({emulated_cpu['device']}, {slower:.1f}x slower "
        f"per fp32 step than the rehearsing one) they ran in {emulated_cpu['total_s']:.0f} s, "
        f"slowest {emulated_cpu['slowest_s']:.1f} s"
    ) in text
    assert ("every lesson's median within 30 s" in text) == (not over), over
    ratio = emulated_cpu["cpu_step"]["bf16_over_fp32"]
    assert f"the bf16 step took {ratio:.0f}x its fp32 step there" in text
    missed = ", ".join(over[:-1]) + f" and {over[-1]}" if len(over) > 1 else "".join(over)
    assert (f"{missed} took over 30 s there" in text) == bool(over), over
