"""Reference solutions of lesson 10's exercises (hidden from the grading sandbox)."""

from __future__ import annotations

import math


def matmul_intensity(batch, m, k, n, dtype):
    """FLOPs per byte of ``batch`` products (m x k) @ (k x n) in the dtype named ``dtype``
    ("fp32", "fp16", "bf16"): every input read once, every output written once."""
    itemsize = {"fp32": 4, "fp16": 2, "bf16": 2}[dtype]
    flops = 2 * batch * m * k * n
    return flops / (itemsize * batch * (m * k + k * n + m * n))


def wave_efficiency(batch, m, n, tile_m, tile_n, sms):
    """The share of launched tile work that is useful when ``batch`` outputs of m x n share the
    GPU's waves: partial tiles and the last wave's idle SMs are the waste."""
    tiles = batch * math.ceil(m / tile_m) * math.ceil(n / tile_n)
    waves = math.ceil(tiles / sms)
    return batch * m * n / (waves * sms * tile_m * tile_n)


def conv_intensity(batch, c_in, c_out, size, kernel, itemsize):
    """FLOPs per byte of a stride-1 convolution that keeps the image size (padding kernel // 2)."""
    flops = 2 * batch * c_out * size * size * c_in * kernel * kernel
    elements = batch * c_in * size * size + c_out * c_in * kernel * kernel + batch * c_out * size**2
    return flops / (itemsize * elements)


SOLUTIONS = {
    "10.matmul_intensity": matmul_intensity,
    "10.wave_efficiency": wave_efficiency,
    "10.conv_intensity": conv_intensity,
}
