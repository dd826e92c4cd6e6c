"""Lesson 06 exercises: choosing the AMP dtype for a device."""

from __future__ import annotations

import torch

from . import ExerciseFailed, call_answer, fail_on_error, register

# (device, compute capability or None for a CPU, why its dtype is the better choice)
DEVICES = [
    ("V100", (7, 0), "Volta's tensor cores do fp16 only; bf16 would be emulated."),
    (
        "T4",
        (7, 5),
        "Turing's tensor cores do fp16 only; torch.cuda.is_bf16_supported() says True on a T4 "
        "because it counts emulation, so decide by compute capability.",
    ),
    ("A100", (8, 0), "Ampere has bf16 tensor cores: fp32's range, no GradScaler."),
    ("H100", (9, 0), "Hopper has bf16 tensor cores: fp32's range, no GradScaler."),
    ("RTX 3090", (8, 6), "Every Ampere-or-later part (>= 8.0) has bf16 tensor cores."),
    (
        "CPU",
        None,
        "CPU autocast is built around bf16 (fast with AVX512-BF16 or AMX, slow but correct "
        "without).",
    ),
]
RULE = "bf16 tensor cores came with compute capability 8.0 (Ampere); below it, fp16."


def devices(seed: int) -> list[tuple[str, tuple[int, int] | None, str]]:
    """Seed 0: DEVICES. Other seeds: those and six more capabilities, in a shuffled order."""
    if seed == 0:
        return list(DEVICES)
    generator = torch.Generator().manual_seed(seed)
    majors = torch.randint(5, 13, (6,), generator=generator).tolist()
    minors = torch.randint(0, 10, (6,), generator=generator).tolist()
    pairs = zip(majors, minors, strict=True)
    extra = [(f"a GPU of capability {m}.{n}", (m, n), RULE) for m, n in pairs]
    every = DEVICES + extra
    order = torch.randperm(len(every), generator=generator).tolist()
    return [every[i] for i in order]


def observe(choose, seed: int) -> list[dict]:
    results = []
    for name, capability, why in devices(seed):
        got, error = call_answer(choose, capability)
        results.append(
            {
                "device": name,
                "capability": list(capability) if capability else None,
                "why": why,
                "error": error,
                "dtype": str(got) if isinstance(got, torch.dtype) else None,
                "returned": None if isinstance(got, torch.dtype) else repr(got)[:80],
            }
        )
    return results


def compare(mine, reference, seed: int) -> None:
    for got, want in zip(mine, reference, strict=True):
        name, capability = want["device"], want["capability"]
        fail_on_error(got["error"], f"choose({tuple(capability) if capability else None})")
        if got["dtype"] is None:
            raise ExerciseFailed(
                f"For {name} you returned {got['returned']}; return a torch dtype such as "
                "torch.float16 or torch.bfloat16."
            )
        if got["dtype"] != want["dtype"]:
            where = (
                "a CPU (None)" if capability is None else f"compute capability {tuple(capability)}"
            )
            raise ExerciseFailed(
                f"{name} ({where}): you chose {got['dtype']}, the better choice is "
                f"{want['dtype']}. {want['why']}"
            )


register("06.choose_dtype", observe, compare)
