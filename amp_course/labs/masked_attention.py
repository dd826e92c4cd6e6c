"""Labs 2 and 3 of the more-failures labs: masked attention under autocast (the seeded inputs, the
cases a check runs, and runs that record the learner's output, the weight its masked keys get, its
gradients, and a short padded training run). ``more_failures`` gives the notebook these under
``lab.``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..display import error_text
from .failure_cases import (
    AUTOCAST_CASES,
    DEVICE_TYPE,
    SCALER_KWARGS,
    autocast,
    returned_tensor,
    seeded,
)


# ---- Labs 2 and 3: masked attention under autocast -----------------------------------------------
def _near_minus_12000(q, k, magnitude: float = 55.0, spread: float = 1.0):
    """q and k whose scores q . k / 4 are near -55 * 55 * 16 / 4 = -12100 (below -1e4, above
    -65504), each key's 55 below the key before it, give or take a few: keys that far apart give
    each query one-hot weights however its scores were rounded (fp16's spacing there is 8).
    ``magnitude`` 160 puts them near -102400, below what fp16 holds, for fp32 and bf16, each key
    ``spread`` times 160 below the one before: bf16's spacing there is 512, so bf16 needs a spread
    of 16 (2560 apart) for its weights to be one-hot too."""
    step = 0.25 * spread * torch.arange(k.shape[-2], dtype=k.dtype)[:, None]  # 55*16*0.25/4 = 55
    return -magnitude + 0.5 * q, magnitude + 0.1 * k + step


def masked_inputs(seed: int, large: bool = False, magnitude: float = 55.0, spread: float = 1.0):
    """q, k, v (fp32, [batch, heads, length, dim]) and ``keep`` (True: the query may attend to the
    key), for right-padded sequences: every query has at least one key. ``large`` gives the kept
    keys scores near -12000, in fp16's range, as a query pointing away from them gives, and the
    masked keys scores near 0, far above: a mask must hold whatever the masked keys score, so a
    penalty added to their scores, or a fill value above the kept scores, lets them through."""
    generator = seeded(seed)
    length = 6 if seed == 0 else int(torch.randint(4, 10, (), generator=generator))
    shape = (2, 2, length, 16)
    q, k, v = (torch.randn(shape, generator=generator) for _ in range(3))
    lengths = torch.randint(1, length, (2,), generator=generator)
    if int(lengths.max()) < 2:  # a query with two keys or more: an output that the scores move
        lengths[0] = 2
    keep = (torch.arange(length) < lengths[:, None])[:, None, None, :]
    if large:
        q, far = _near_minus_12000(q, k, magnitude, spread)
        k = torch.where(keep.transpose(-1, -2), far, 0.01 * k)  # masked keys: scores near 0
    return q, k, v, keep


# Lab 2's cases whose masked keys score far above its kept ones: in fp16's range, and in fp32 and
# bf16 below it (a fill of fp16's lowest value in every dtype passed every seed without the
# second, and in every 16-bit dtype without the third).
MASKED_ABOVE = "fp16 autocast, scores near -12000 for kept keys and near 0 for masked ones"
MASKED_FAR_ABOVE = "fp32, scores near -100000 for kept keys and near 0 for masked ones"
MASKED_BF16_FAR_ABOVE = (
    "bf16 autocast, scores near -100000 for kept keys and near 0 for masked ones"
)
MAGNITUDES = {MASKED_ABOVE: 55.0, MASKED_FAR_ABOVE: 160.0, MASKED_BF16_FAR_ABOVE: 160.0}
SPREADS = {MASKED_BF16_FAR_ABOVE: 16.0}


def run_masked(fn, seed: int = 0) -> dict:
    """``fn(q, k, v, keep)`` in each autocast case, and on kept keys' scores near -12000 (fp16)
    and near -100000 (fp32, bf16) with the masked keys' near 0: its output, and the weight it
    gives the masked keys (its output for values 1 at masked keys, 0 elsewhere)."""
    cases = {
        **AUTOCAST_CASES,
        MASKED_ABOVE: torch.float16,
        MASKED_FAR_ABOVE: None,
        MASKED_BF16_FAR_ABOVE: torch.bfloat16,
    }
    observed = {}
    for case, dtype in cases.items():
        large = case in MAGNITUDES
        q, k, v, keep = masked_inputs(
            seed, large, MAGNITUDES.get(case, 55.0), SPREADS.get(case, 1.0)
        )
        masked = (~keep).transpose(-1, -2).expand(-1, q.shape[1], -1, v.shape[-1])
        indicator = masked.to(v.dtype).contiguous()
        try:
            with autocast(dtype):
                out, weight = (
                    returned_tensor(fn(q, k, values, keep), "the attention's output")
                    for values in (v, indicator)
                )
            observed[case] = {"error": None, "out": out.detach(), "masked_weight": weight[..., 0]}
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed[case] = {"error": error_text(error)}
    return observed


def padded_inputs(
    seed: int, large: bool = False, random_mask: bool = False, magnitude=55.0, spread=1.0
):
    """q, k, v and ``keep`` for a left-padded causal batch (the padding queries have no key), with
    scores near -12000 if ``large`` (-100000 at ``magnitude`` 160); ``random_mask``: each key
    kept or not at random instead."""
    generator = seeded(seed)
    length = 6 if seed == 0 else int(torch.randint(5, 10, (), generator=generator))
    q, k, v = (torch.randn(3, 2, length, 16, generator=generator) for _ in range(3))
    if large:
        q, k = _near_minus_12000(q, k, magnitude, spread)
    lengths = torch.randint(1, length, (3,), generator=generator)
    lengths[-1] = length  # one sequence without padding
    valid = torch.arange(length) >= (length - lengths)[:, None]  # left padding
    keep = torch.ones(length, length, dtype=torch.bool).tril() & valid[:, None, None, :]
    if random_mask:
        keep = torch.rand(3, 1, length, length, generator=generator) < 0.5
        keep[0, 0, 0], keep[0, 0, 1, :2] = False, torch.tensor([True, False])  # no key; not its own
    return q, k, v, keep


# Lab 3's cases: (autocast dtype, padded_inputs' keywords).
PADDED_CASES = {
    **{case: (dtype, {}) for case, dtype in AUTOCAST_CASES.items()},
    "fp16 autocast, scores near -12000": (torch.float16, {"large": True}),
    "fp32, keys drawn at random": (None, {"random_mask": True}),
    # Below what fp16 holds: a fill of fp16's lowest value lets the masked keys through in fp32,
    # and in bf16.
    "fp32, scores near -100000": (None, {"large": True, "magnitude": 160.0}),
    "bf16 autocast, scores near -100000": (
        torch.bfloat16,
        {"large": True, "magnitude": 160.0, "spread": 16.0},
    ),
}


def run_padded(fn, seed: int = 0) -> dict:
    """``fn(q, k, v, keep)`` in each of PADDED_CASES, then backward through a loss on the queries
    that have keys (as a model that ignores its padding positions): output and gradients."""
    observed = {}
    for case, (dtype, inputs) in PADDED_CASES.items():
        q, k, v, keep = padded_inputs(seed, **inputs)
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        has_key = keep.any(-1, keepdim=True).expand(-1, q.shape[1], -1, -1)
        weights = torch.randn(q.shape, generator=seeded(seed + 1)) * has_key
        try:
            with autocast(dtype):
                out = returned_tensor(fn(q, k, v, keep), "the attention's output")
            (out.float() * weights).sum().backward()
        except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
            observed[case] = {"error": error_text(error)}
            continue
        grads = {name: t.grad for name, t in zip("qkv", (q, k, v), strict=True)}
        missing = [name for name, grad in grads.items() if grad is None]
        observed[case] = {
            "error": f"no gradient reached {', '.join(missing)}" if missing else None,
            "out": out.detach(),
            "has_key": has_key[..., 0],
            **{f"grad_{name}": grad for name, grad in grads.items() if grad is not None},
        }
    return observed


class PaddedClassifier(nn.Module):
    """Tokens, one attention layer (``attention(q, k, v, keep)``), the last token, two classes."""

    def __init__(self, attention, vocab: int = 12, width: int = 16):
        super().__init__()
        self.attention, self.embed = attention, nn.Embedding(vocab, width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, 2)

    def forward(self, tokens, keep):
        q, k, v = self.qkv(self.embed(tokens))[:, None].chunk(3, dim=-1)  # one head
        return self.out(self.attention(q, k, v, keep)[:, 0, -1])


def train_padded(attention, steps: int = 6, seed: int = 0) -> list[dict]:
    """Train a PaddedClassifier with fp16 autocast and a GradScaler on left-padded causal batches
    (token 0 pads; the label: does token 1 occur?); per step: the loss, the scale after update()
    and whether the optimizer stepped."""
    generator = seeded(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = PaddedClassifier(attention)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler, history, stepped = torch.amp.GradScaler(DEVICE_TYPE, **SCALER_KWARGS), [], []
    optimizer.register_step_post_hook(lambda *_: stepped.append(len(history)))
    for _ in range(steps):
        lengths = torch.randint(2, 7, (8,), generator=generator)
        valid = torch.arange(6) >= (6 - lengths)[:, None]
        tokens = torch.randint(1, 12, (8, 6), generator=generator) * valid
        keep = torch.ones(6, 6, dtype=torch.bool).tril() & valid[:, None, None, :]
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(DEVICE_TYPE, dtype=torch.float16):
            loss = F.cross_entropy(model(tokens, keep), (tokens == 1).any(-1).long())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        history.append({"loss": loss.item(), "scale": scaler.get_scale()})
        history[-1]["stepped"] = len(history) - 1 in stepped
    return history
