"""Optimizer-state precision: AdamW with its two moments stored in fp32, bf16 or 8 bits, and the
bytes an optimizer's state actually holds.

The 8-bit states follow Dettmers et al., "8-bit Optimizers via Block-wise Quantization" (arXiv
2110.02861), as torchao.optim.AdamW8bit applies them: each block of 256 values keeps an fp32
absmax, and each value an 8-bit code into a "dynamic" map (a decimal exponent and a linear
fraction: fine steps near zero, where Adam's second moments live), signed for the first moment and
unsigned for the second. Like bitsandbytes and torchao, tensors under 4096 values (or not a
multiple of the block) keep fp32 states. The arithmetic of every variant is fp32; only storage
differs. With ``state="fp32"`` the update is torch.optim.AdamW's (the tests check it).
"""

from __future__ import annotations

import functools

import torch

STATES = ("fp32", "bf16", "8bit")


@functools.lru_cache(maxsize=2)
def dynamic_map(signed: bool) -> torch.Tensor:
    """The 256 values an 8-bit code stands for: 0, 1, and per decade 10^-6 ... 10^0 the midpoints
    of an even split of [0.1, 1] (twice as many per decade when unsigned: no sign bit)."""
    values = [0.0, 1.0]
    for decade in range(7):
        count = 2**decade if signed else 2 ** (decade + 1)
        edges = torch.linspace(0.1, 1.0, count + 1, dtype=torch.float64)
        middles = ((edges[:-1] + edges[1:]) / 2 * 10.0 ** (decade - 6)).tolist()
        values += middles + ([-v for v in middles] if signed else [])
    return torch.tensor(sorted(values), dtype=torch.float32)


def quantize_blockwise(x: torch.Tensor, signed: bool, block_size: int):
    """(uint8 codes shaped like ``x``, fp32 absmax per block): each value's nearest code."""
    blocks = x.float().reshape(-1, block_size)
    absmax = blocks.abs().amax(dim=1).clamp(min=1e-12)
    table = dynamic_map(signed)
    midpoints = (table[1:] + table[:-1]) / 2
    codes = torch.bucketize(blocks / absmax[:, None], midpoints)
    return codes.to(torch.uint8).reshape(x.shape), absmax


def dequantize_blockwise(codes: torch.Tensor, absmax: torch.Tensor, signed: bool) -> torch.Tensor:
    """fp32 values back from codes and block absmax."""
    values = dynamic_map(signed)[codes.long()].reshape(absmax.shape[0], -1)
    return (values * absmax[:, None]).reshape(codes.shape)


class AdamW(torch.optim.Optimizer):
    """AdamW whose moments are stored in fp32, bf16 or 8-bit blocks (``state``)."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        *,
        state: str = "fp32",
        block_size: int = 256,
        min_quantized_size: int = 4096,
    ):
        if state not in STATES:
            raise ValueError(f"Unknown state precision {state!r}. Valid: {', '.join(STATES)}.")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.state_precision, self.block_size = state, block_size
        self.min_quantized_size = min_quantized_size

    def _storage(self, p: torch.Tensor) -> str:
        quantizable = p.numel() >= self.min_quantized_size and p.numel() % self.block_size == 0
        return (
            "fp32" if self.state_precision == "8bit" and not quantizable else self.state_precision
        )

    def _read(self, state: dict, name: str, signed: bool) -> torch.Tensor:
        if name in state:
            return state[name].float()
        return dequantize_blockwise(state[f"{name}_codes"], state[f"{name}_absmax"], signed)

    def _write(self, state: dict, name: str, value: torch.Tensor, storage: str, signed: bool):
        if storage == "8bit":
            state[f"{name}_codes"], state[f"{name}_absmax"] = quantize_blockwise(
                value, signed, self.block_size
            )
        else:  # fp32, or bf16 rounded to nearest
            state[name] = value.to(torch.float32 if storage == "fp32" else torch.bfloat16)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state, storage = self.state[p], self._storage(p)
                if not state:
                    state["step"] = torch.tensor(0.0)
                    for name, signed in (("exp_avg", True), ("exp_avg_sq", False)):
                        zeros = torch.zeros_like(p, dtype=torch.float32)  # one tensor each
                        self._write(state, name, zeros, storage, signed)
                state["step"] += 1
                step = state["step"].item()
                grad = p.grad.float()
                # torch.optim.AdamW's single-tensor update, in fp32.
                p.mul_(1 - group["lr"] * group["weight_decay"])
                exp_avg = self._read(state, "exp_avg", True).lerp_(grad, 1 - beta1)
                exp_avg_sq = self._read(state, "exp_avg_sq", False)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = group["lr"] / (1 - beta1**step)
                denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(group["eps"])
                p.addcdiv_(exp_avg.to(p.dtype), denom.to(p.dtype), value=-step_size)
                self._write(state, "exp_avg", exp_avg, storage, signed=True)
                self._write(state, "exp_avg_sq", exp_avg_sq, storage, signed=False)
        return loss


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor holds; a tensor subclass (torchao's 8-bit state) counts its inner tensors."""
    if hasattr(t, "__tensor_flatten__") and type(t) is not torch.Tensor:
        names, _ = t.__tensor_flatten__()
        return sum(tensor_bytes(getattr(t, name)) for name in names)
    return t.numel() * t.element_size()


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in ``optimizer.state`` (moments, codes, scales, step counters)."""
    return sum(
        tensor_bytes(value)
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    )


def bytes_per_parameter(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """Weights, gradients and optimizer state of ``model``, in bytes per parameter (measured)."""
    params = [p for p in model.parameters() if p.requires_grad]
    count = sum(p.numel() for p in params)
    grads = sum(tensor_bytes(p.grad) for p in params if p.grad is not None)
    return {
        "weights": sum(tensor_bytes(p) for p in params) / count,
        "gradients": grads / count,
        "optimizer state": state_bytes(optimizer) / count,
    }
