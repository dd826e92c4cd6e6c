"""Reference solutions of lesson 11's exercises (hidden from the grading sandbox)."""

from __future__ import annotations

import math

import torch


def mx_roundtrip(x, exponent_bits, mantissa_bits, block_size):
    """Reference: the OCP MX round trip for elements with no inf or NaN codes, E8M0 scales."""
    bias = 2 ** (exponent_bits - 1) - 1
    largest = (2 - 2.0**-mantissa_bits) * 2.0 ** (2**exponent_bits - 1 - bias)
    emax = math.floor(math.log2(largest))
    blocks = x.float().reshape(*x.shape[:-1], x.shape[-1] // block_size, block_size)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    _, exponent = torch.frexp(amax)  # floor(log2(amax)) = exponent - 1, exactly
    shared = torch.where(amax > 0, exponent - 1 - emax, -127).clamp(min=-127)
    scale = torch.exp2(shared.float())
    v = (blocks / scale).clamp(-largest, largest)  # saturate normal numbers
    _, e = torch.frexp(v.abs())
    step = torch.exp2((e - 1).clamp(min=1 - bias).float() - mantissa_bits)
    elements = torch.round(v / step) * step  # ties to even
    return (elements * scale).reshape(x.shape)


def fp8_linear_times(m, k, n, bf16_tflops, fp8_tflops, bandwidth_tbs):
    """Reference: (bf16 GEMM, FP8 GEMM, amax-and-cast passes) in seconds, each at its floor."""
    flops, bandwidth = 2 * m * k * n, bandwidth_tbs * 1e12
    inputs, output = m * k + n * k, m * n
    bf16 = max(flops / (bf16_tflops * 1e12), 2 * (inputs + output) / bandwidth)
    fp8 = max(flops / (fp8_tflops * 1e12), (inputs + 2 * output) / bandwidth)
    cast = (2 + 2 + 1) * inputs / bandwidth  # amax read, cast read, fp8 write
    return bf16, fp8, cast


def moment_bytes(shape, state):
    """Reference: bytes of AdamW's two moments for one parameter (torchao's 8-bit rules)."""
    numel = math.prod(shape)
    if state == "bf16":
        return 2 * 2 * numel
    if state == "8bit" and numel >= 4096 and numel % 256 == 0:
        return 2 * (numel + 4 * numel // 256)  # a code per value, an fp32 absmax per block
    return 2 * 4 * numel


SOLUTIONS = {
    "11.mx_roundtrip": mx_roundtrip,
    "11.fp8_gain": fp8_linear_times,
    "11.moment_bytes": moment_bytes,
}
