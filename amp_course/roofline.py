"""The roofline of a device: its peak FLOP/s per dtype and its memory bandwidth, measured (a large
matmul, a large copy) or published, and where an operator of a given arithmetic intensity sits.

An operator that does F FLOPs and moves B bytes needs at least ``F / peak`` seconds of arithmetic
and ``B / bandwidth`` seconds of memory traffic; whichever is larger is its *floor* and names its
regime: compute-bound above the ridge point (``peak / bandwidth`` FLOP per byte), memory-bound
below. What a step takes beyond the sum of its operators' floors is not all overhead: it holds
the time no kernel runs (launches, Python, waits for the host) and the time kernels run below both
roofs (small, unaligned or badly tiled work); a profiler's kernel times tell the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import gpus, precisions, timing
from .device import device_name
from .flops import measure_matmul_flops
from .op_costs import OpCost

REGIMES = ("compute-bound", "memory-bound")


@dataclass(frozen=True)
class Roofline:
    """Peak FLOP/s per dtype name (``"fp32"``, ``"bf16"``...) and bandwidth in bytes/s."""

    device: str
    peak_flops: dict[str, float]
    bandwidth: float
    source: str  # "measured" or "published"

    def ridge(self, dtype: str) -> float:
        """The intensity (FLOP/byte) above which ``dtype`` work is compute-bound."""
        return self.peak_flops[dtype] / self.bandwidth

    def attainable(self, intensity: float, dtype: str) -> float:
        """The most FLOP/s an operator of this intensity can reach: min(peak, bandwidth x I)."""
        return min(self.peak_flops[dtype], self.bandwidth * intensity)

    def regime(self, intensity: float, dtype: str) -> str:
        return REGIMES[0] if intensity >= self.ridge(dtype) else REGIMES[1]

    def op_seconds(self, op: OpCost) -> tuple[float, float]:
        """(arithmetic seconds, memory seconds) of one operator at this device's roofs."""
        compute = op.flops / self._peak(op.dtype) if op.flops else 0.0
        return compute, op.bytes / self.bandwidth

    def floors(self, ops: list[OpCost]) -> dict[str, float]:
        """Seconds the operators need at least, summed by the regime each one sits in."""
        totals = dict.fromkeys(REGIMES, 0.0)
        for op in ops:
            compute, memory = self.op_seconds(op)
            totals[REGIMES[0] if compute >= memory else REGIMES[1]] += max(compute, memory)
        return totals

    def _peak(self, dtype: str) -> float:
        if dtype not in self.peak_flops:
            raise KeyError(
                f"No {dtype} peak on this roofline (it has {', '.join(self.peak_flops)}): "
                f"measure one with ac.roofline.measure(..., dtypes=[..., {dtype!r}])."
            )
        return self.peak_flops[dtype]


def measure_copy_bandwidth(
    device, nbytes: int, *, min_run_time: float = 0.2, repeats: int = 5
) -> float:
    """Bytes/s of copying ``nbytes`` from one tensor to another (counted: read plus write)."""
    source = torch.ones(nbytes // 4, device=device)
    target = torch.empty_like(source)
    seconds = timing.measure(
        lambda: target.copy_(source), device=device, min_run_time=min_run_time, repeats=repeats
    ).median
    return 2 * source.numel() * 4 / seconds


def measure(
    device,
    dtypes=("fp32", "bf16"),
    *,
    matmul_size: int,
    copy_bytes: int,
    min_run_time: float = 0.2,
) -> Roofline:
    """This device's roofline: a large matmul per dtype, a large copy for the bandwidth."""
    peaks = {
        d: measure_matmul_flops(device, d, matmul_size, min_run_time=min_run_time) for d in dtypes
    }
    bandwidth = measure_copy_bandwidth(device, copy_bytes, min_run_time=min_run_time)
    return Roofline(device_name(device), peaks, bandwidth, "measured")


def published(name: str, dtypes: tuple[str, ...] = precisions.NAMES) -> Roofline | None:
    """The datasheet roofline of the GPU called ``name`` (``ac.gpus``); None when the course has
    no figures for it. It has a roof for each of ``dtypes`` the GPU has a peak for: the training
    precisions by default, so an FP8 roof is drawn only where asked for (``ac.fp8_recipes``)."""
    gpu = gpus.lookup(name)
    if gpu is None:
        return None
    peaks = {d: gpu.peak(d) * 1e12 for d in dtypes if gpu.peak(d)}
    return Roofline(name, peaks, gpu.bandwidth_tbs * 1e12, "published")


FAMILY_COLOURS = {"matmul": "tab:blue", "attention": "tab:purple", "other": "tab:orange"}


def plot(roofline: Roofline, ops: list[OpCost], ax=None, title: str | None = None):
    """The roofs of every dtype, and each operator on its dtype's roof at its intensity.

    Marker area grows with the operator's floor time. Operators with no counted FLOPs (casts,
    layer norms, element-wise work, the optimizer) are drawn hollow at one FLOP per element
    written: an assumption that puts them on the picture, far left of any ridge.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import to_rgba

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.2))
    lowest = min([0.05] + [op.elements_written / op.bytes for op in ops if op.bytes])
    x = np.logspace(np.log10(lowest) - 0.3, 4, 200)
    styles = ["-", "--", ":", "-."]
    for index, (dtype, peak) in enumerate(
        sorted(roofline.peak_flops.items(), key=lambda kv: kv[1])
    ):
        ridge = roofline.ridge(dtype)
        ax.plot(
            x,
            np.minimum(peak, roofline.bandwidth * x),
            color="0.35",
            ls=styles[index % len(styles)],
            lw=1.2,
            label=f"{dtype} roof (ridge {ridge:.3g} FLOP/B)",
        )
    moving = [op for op in ops if op.bytes]
    floors = {id(op): max(roofline.op_seconds(op)) for op in moving}
    largest = max(floors.values(), default=1.0) or 1.0
    top = max(roofline.peak_flops.values())
    for family, colour in FAMILY_COLOURS.items():
        chosen = [op for op in moving if op.family == family]
        if not chosen:
            continue
        xs, ys = [], []
        for op in chosen:
            if op.flops:
                xs.append(op.intensity)
                ys.append(roofline.attainable(op.intensity, op.dtype))
            else:  # below every ridge: on the bandwidth roof
                xs.append(op.elements_written / op.bytes)
                ys.append(min(top, roofline.bandwidth * xs[-1]))
        ax.scatter(
            xs,
            ys,
            s=[8 + 200 * floors[id(op)] / largest for op in chosen],
            # Colours with their alpha, not alpha=: with alpha= matplotlib paints a "none" face
            # black wherever the faces are given as a list.
            facecolors=[to_rgba(colour, 0.6 if op.flops else 0.0) for op in chosen],
            edgecolors=to_rgba(colour, 0.8),
            label=f"{family} ({len(chosen)} ops)",
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="arithmetic intensity (FLOP per byte moved)",
        ylabel="attainable FLOP/s",
        title=title or f"{roofline.device} ({roofline.source} roofline)",
    )
    ax.legend(fontsize=7, loc="lower right")
    return ax
