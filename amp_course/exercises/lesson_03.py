"""Lesson 03 exercises: the dynamic loss-scale update rule, checked against a real GradScaler."""

from __future__ import annotations

import torch

from . import ExerciseFailed, call_answer, fail_on_error, register

CASES = [  # (scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval, what)
    (65536.0, 0, False, 2.0, 0.5, 2000, "a clean step"),
    (65536.0, 5, True, 2.0, 0.5, 2000, "an overflow"),
    (1024.0, 1999, False, 2.0, 0.5, 2000, "the clean step that completes growth_interval"),
    (1024.0, 1998, False, 2.0, 0.5, 2000, "one clean step short of growth_interval"),
    (8.0, 3, False, 4.0, 0.25, 4, "growth with growth_factor=4"),
    (8.0, 3, True, 4.0, 0.25, 4, "an overflow with backoff_factor=0.25"),
    (2.0**20, 0, False, 2.0, 0.5, 1, "growth_interval=1 (grow after every clean step)"),
]


def cases(seed: int) -> list[tuple]:
    """Seed 0: CASES. Other seeds: twelve random states, half of them at the growth boundary."""
    if seed == 0:
        return list(CASES)
    generator = torch.Generator().manual_seed(seed)

    def pick(n):
        return int(torch.randint(0, n, (1,), generator=generator))

    drawn = []
    for index in range(12):
        interval = [1, 2, 3, 7, 50, 2000][pick(6)]
        good = max(0, interval - 1 - (pick(2) if index % 2 else pick(interval)))
        found = pick(3) == 0
        growth, backoff = [(2.0, 0.5), (4.0, 0.25), (2.0, 0.25)][pick(3)]
        scale = 2.0 ** (pick(30) - 4)
        drawn.append((scale, good, found, growth, backoff, interval, "a random state"))
    return drawn


def observe(update_scale, seed: int) -> list[dict]:
    """``update_scale`` on every case: the pair it returns, or what went wrong."""
    results = []
    for scale, good, found, growth, backoff, interval, what in cases(seed):
        got, error = call_answer(
            update_scale,
            scale,
            good,
            found,
            growth_factor=growth,
            backoff_factor=backoff,
            growth_interval=interval,
        )
        record = {"case": [scale, good, found, interval], "what": what, "error": error}
        if error is None:
            try:
                if not isinstance(got, tuple) or len(got) != 2:
                    raise TypeError
                record["result"] = [float(got[0]), int(got[1])]
            except (TypeError, ValueError):
                record["result"], record["returned"] = None, repr(got)[:80]
        results.append(record)
    return results


def compare(mine, reference, seed: int) -> None:
    for index, want in enumerate(reference):
        got = mine[index]
        scale, good, found, interval = want["case"]
        fail_on_error(got["error"], f"update_scale({scale:g}, {good}, {found}, ...)")
        if got.get("result") is None:
            raise ExerciseFailed(
                f"update_scale should return a pair (scale, good_steps); got {got.get('returned')}."
            )
        if got["result"] != want["result"]:
            raise ExerciseFailed(
                f"For {want['what']} (scale={scale:g}, good_steps={good}, found_inf={found}, "
                f"growth_interval={interval}) GradScaler gives scale={want['result'][0]:g}, "
                f"good_steps={want['result'][1]}; yours gives scale={got['result'][0]:g}, "
                f"good_steps={got['result'][1]}."
            )


register("03.update_scale", observe, compare)
