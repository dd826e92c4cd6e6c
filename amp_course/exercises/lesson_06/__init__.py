"""Lesson 06 exercises: choosing what to train in for a device (the rule of ac.device)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...display import shown
from ...precisions import BF16
from ...timing import Comparison
from .. import ExerciseFailed, call_answer, fail_on_error, register
from .overflow import observe_overflow


@dataclass(frozen=True)
class CpuTiming:
    """What ``choose`` learns about a CPU: its flags, and bf16 autocast timed against fp32 there.

    ``bf16`` is ``ac.timing.compare(fp32, bf16)`` of a training step on that CPU: ``bf16.ratio``
    (bf16's time over fp32's), ``bf16.distinguishable`` and ``bf16.verdict``.
    """

    flags: frozenset[str]
    bf16: Comparison


def _cpu(flags: str, ratio: float, distinguishable: bool) -> CpuTiming:
    return CpuTiming(frozenset(flags.split()), Comparison("fp32", "bf16", ratio, distinguishable))


AMX = "avx2 avx512f avx512bw avx512_bf16 amx_tile amx_bf16"
BF16_CORES = "has bf16 tensor cores."
NO_TENSOR_CORES = "has no tensor cores and no bf16 hardware; fp16 still halves its activations."
# (device, compute capability or None for a CPU, the CPU's timing, a fact about the GPU).
# None of these GPUs is one the lesson names: the check asks for its rule, not for its examples.
DEVICES = [
    ("GTX 1080", (6, 1), None, "Pascal " + NO_TENSOR_CORES),
    ("L4", (8, 9), None, "Ada " + BF16_CORES),
    ("Tesla M40", (5, 2), None, "Maxwell " + NO_TENSOR_CORES),
    # Kepler: fp16 too, by the same rule (fp32 for it passed 112 grader seeds of 200, seed 0's
    # check among them, while only drawn GPUs were below 5.2).
    ("Tesla K40", (3, 5), None, "Kepler " + NO_TENSOR_CORES),
    (
        "RTX 2080 Ti",
        (7, 5),
        None,
        "Turing's tensor cores do fp16 only; torch.cuda.is_bf16_supported() says True there, "
        "counting emulation.",
    ),
    ("B200", (10, 0), None, "Blackwell " + BF16_CORES),
    ("Jetson AGX Orin", (8, 7), None, "Ampere " + BF16_CORES),
    ("A30", (8, 0), None, "Ampere " + BF16_CORES),  # on the line: 8.0 is the first with bf16
    ("RTX 5090", (12, 0), None, "Blackwell " + BF16_CORES),
    # Volta beside Turing: a rule that gives bf16 to 7.0-7.4 passed the notebook's check.
    ("Jetson AGX Xavier", (7, 2), None, "Volta's tensor cores do fp16 only."),
    ("a Sapphire Rapids CPU (AMX)", None, _cpu(AMX, 0.45, True), ""),
    ("an AMD Zen 4 CPU (AVX512-BF16)", None, _cpu("avx2 avx512f avx512_bf16", 1.61, True), ""),
    ("an AVX2 CPU", None, _cpu("avx avx2 fma", 3.5, True), ""),
    ("another AMX CPU", None, _cpu(AMX, 0.96, False), ""),
    # The verdict, not a threshold on the ratio: bf16 measured well ahead on a machine so busy
    # that the runs' spreads overlap, and a little ahead with the spreads apart.
    ("an AMX CPU on a busy machine", None, _cpu(AMX, 0.62, False), ""),
    ("a Zen 4 CPU, bf16 a little ahead", None, _cpu("avx2 avx512f avx512_bf16", 0.97, True), ""),
    # No bf16 flags, yet bf16 measured faster (a step bound by memory: bf16 moves half the bytes).
    (
        "an AVX-512 CPU without bf16 instructions",
        None,
        _cpu("avx2 avx512f avx512bw", 0.8, True),
        "",
    ),
]
CPU_FLAGS = ["avx", "avx2", "avx512f", "avx512bw", "avx512_bf16", "amx_tile", "amx_bf16"]


# The drawn GPUs' majors, one range per side of each line a wrong rule draws: below Volta, Volta
# and Turing (7.x: fp16 only), 8.0 and up; then three more from anywhere.
GPU_MAJORS = ((3, 7), (7, 8), (8, 13), (3, 13), (3, 13), (3, 13))
# The drawn CPUs' cases, each one a wrong rule gets wrong: (bf16 measured below fp32's time, the
# runs' spreads apart, the CPU's flags include bf16). A table of the check cell's devices with a
# rule for the rest passed up to 223 grader seeds of 300 while the CPUs were drawn at random.
CPU_CASES = (
    (True, True, False),  # bf16 ahead, apart, no bf16 flags: bf16 (not "bf16 where flagged")
    (True, False, True),  # ahead but within the spread: fp32 (not "bf16 where ratio < 1")
    (False, True, True),  # slower, bf16 flags: fp32 (not "bf16 where flagged")
    (False, False, False),
)
BF16_FLAGS = {"avx512_bf16", "amx_bf16"}


def devices(seed: int) -> list[tuple]:
    """Seed 0: DEVICES. Other seeds: those, six more GPUs and four more CPUs drawn on each side
    of the rule's lines (GPU_MAJORS, CPU_CASES), shuffled."""
    if seed == 0:
        return list(DEVICES)
    generator = torch.Generator().manual_seed(seed)
    # Never one of the check cell's devices again: a table of those would answer it.
    known = {capability for _, capability, _, _ in DEVICES if capability}
    known |= {(c.bf16.ratio, c.bf16.distinguishable) for _, _, c, _ in DEVICES if c}
    extra = []
    for low, high in GPU_MAJORS:
        capability = None
        while capability is None or capability in known:
            major = int(torch.randint(low, high, (), generator=generator))
            capability = (major, int(torch.randint(0, 10, (), generator=generator)))
        extra.append((f"a GPU of capability {capability[0]}.{capability[1]}", capability, None, ""))
    for number, (ahead, apart, flagged) in enumerate(CPU_CASES):
        picked = torch.rand(len(CPU_FLAGS), generator=generator) < 0.5
        flags = {f for f, keep in zip(CPU_FLAGS, picked.tolist(), strict=True) if keep}
        flags = flags | {"avx512_bf16"} if flagged else flags - BF16_FLAGS
        ratio = None
        while ratio is None or (ratio, apart) in known:
            draw = torch.rand(1, generator=generator).item()
            ratio = round(0.3 + 0.69 * draw, 2) if ahead else round(1.0 + 2.0 * draw, 2)
        extra.append((f"CPU {number + 1}", None, _cpu(" ".join(sorted(flags)), ratio, apart), ""))
    every = DEVICES + extra
    order = torch.randperm(len(every), generator=generator).tolist()
    return [every[i] for i in order]


def observe(choose, seed: int) -> list[dict]:
    results = []
    for name, capability, cpu, why in devices(seed):
        got, error = call_answer(choose, capability, cpu)
        results.append(
            {
                "device": name,
                "capability": list(capability) if capability else None,
                "flags": sorted(cpu.flags) if cpu else None,
                "ratio": cpu.bf16.ratio if cpu else None,
                "distinguishable": cpu.bf16.distinguishable if cpu else None,
                "why": why,
                "error": error,
                "dtype": str(got) if isinstance(got, torch.dtype) else None,
                "returned": None if isinstance(got, torch.dtype) else shown(got),
            }
        )
    return results


def _cpu_facts(want: dict) -> str:
    """What was measured on a CPU, and its flags, in words."""
    apart = "outside" if want["distinguishable"] else "within"
    native = sorted(BF16.cpu_flags & set(want["flags"]))
    flags = f"bf16 flags: {', '.join(native)}" if native else "no bf16 flags"
    return (
        f"bf16 autocast measured {want['ratio']:.2f}x the fp32 time there, {apart} the spread of "
        f"the runs; {flags}."
    )


def compare(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        name, capability = want["device"], want["capability"]
        where = f"compute capability {tuple(capability)}" if capability else "a CPU"
        fail_on_error(got["error"], f"choose(...) for {name} ({where})")
        if got["dtype"] is None:
            raise ExerciseFailed(
                f"For {name} you returned {got['returned']}; the reference returns a torch dtype."
            )
        if got["dtype"] != want["dtype"]:
            facts = want["why"] if capability else _cpu_facts(want)
            raise ExerciseFailed(
                f"{name} ({where}): you chose {got['dtype']}, the reference {want['dtype']}. "
                f"{facts}".rstrip()
            )


register("06.choose_dtype", observe, compare)


# ---- An overflow elsewhere: fix it with the smallest fp32 region ---------------------------------
def compare_overflow(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        where = f"the model with an overflow planted in {want['layer']}'s {want['plant']}"
        fail_on_error(got["error"], f"fix_overflow({where}, images)")
        if got["returned"] is not None:
            raise ExerciseFailed(
                f"For {where} you returned {got['returned']}; the reference returns the model."
            )
        if got.get("forward_error"):
            raise ExerciseFailed(
                f"For {where} the model you returned raised {got['forward_error']} in its forward "
                "pass under fp16 autocast; the reference's runs."
            )
        if got["param_dtypes"] != ["float32"]:
            raise ExerciseFailed(
                f"For {where} the parameters of the model you returned are "
                f"{' and '.join(got['param_dtypes'])}; the reference's are float32."
            )
        if not got["finite"]:
            ran = ", ".join(got["fp32_modules"]) or "none"
            raise ExerciseFailed(
                f"For {where} the forward pass under fp16 autocast still gives inf or NaN, first "
                f"in the output of {got['first_nonfinite']}, which is {got['first_dtype']}; the "
                f"reference's is finite. Linear, convolution and attention modules of yours that "
                f"ran in float32: {ran}."
            )
        if got["changed_weights"]:
            raise ExerciseFailed(
                f"For {where} the weights of {', '.join(got['changed_weights'])} in the model you "
                "returned differ from the model's you were given; the reference's are the same."
            )
        other = {n: d for n, d in got["other_dtypes"].items() if n in want["fp32_modules"]}
        other |= {
            n: "float16"
            for n in want["fp32_modules"]
            if n not in got["fp32_modules"] and n not in got["other_dtypes"]
        }
        if other:
            raise ExerciseFailed(
                f"For {where}: "
                + ", ".join(f"{name} ran in {dtype}" for name, dtype in other.items())
                + "; in the reference's region each runs in float32."
            )
        extra = sorted(set(got["fp32_modules"]) - set(want["fp32_modules"]))
        if extra:
            named = ", ".join(extra[:MAX_NAMED])
            if len(extra) > MAX_NAMED:
                named = f"{len(extra)} more modules, among them {named}"
            raise ExerciseFailed(
                f"For {where} your fix also runs {named} in float32, which the smallest region "
                "that keeps the forward pass finite does not."
            )
        if got["max_diff"] > 0.05:
            raise ExerciseFailed(
                f"For {where} the fixed model's logits differ from the fp32 ones by up to "
                f"{got['max_diff']:.3g}; the check allows 0.05."
            )


MAX_NAMED = 4  # the modules a message names; a region around the whole model has a dozen more


register("06.fix_overflow", observe_overflow, compare_overflow)
