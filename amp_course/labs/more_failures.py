"""The more-failures labs' kit: their seeded inputs, and functions that run a lab's code on them and
record what happened (crashes, NaN, dtypes, what each optimizer did).

Everything runs on the CPU, with fp16 autocast and a real ``torch.amp.GradScaler`` where a lab needs
loss scaling, so each symptom shows on any machine. Seed 0 is what the notebook shows; other seeds
(the grader's) draw other sizes, masks and positions. Lab 4's kit lives in ``rotary``, their common
setup in ``failure_cases``. The checks that judge a fix are in
``amp_course.exercises.labs_more_failures``.
"""

from __future__ import annotations

import functools
import itertools

import torch
import torch.nn.functional as F
from torch import nn

from ..data import load_mnist
from ..display import error_text
from ..scaling import mnist_batches
from .bug_hunts import RecordingScaler
from .failure_cases import (  # noqa: F401 - the notebook's lab.SCALER_KWARGS, lab.AUTOCAST_CASES
    AUTOCAST_CASES,
    DEVICE_TYPE,
    SCALER_KWARGS,
    autocast,
    seeded,
)
from .rotary import apply_rotary, inverse_frequencies, rope_cases, run_rope  # noqa: F401 - lab 4

# ---- Lab 1: an optimizer none of whose parameters got a gradient ---------------------------------
NUM_BATCHES = 8
# Seed 0: the batches that carry parity labels, and a corrupt one (huge pixels: its fp16 forward
# overflows, so the scaler must skip that step).
AUX_LABELS = (True, False, True, False, False, True, True, False)
CORRUPT = (5,)
LR, AUX_LR = 0.05, 1e-3


class TwoHeads(nn.Module):
    """A shared MLP trunk with a digit head and an auxiliary parity head (trained by its own
    optimizer). ``forward`` returns the trunk's features; the loss picks the heads."""

    def __init__(self, hidden: int = 32):
        super().__init__()
        self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), nn.ReLU())
        self.head, self.aux = nn.Linear(hidden, 10), nn.Linear(hidden, 2)

    def forward(self, images):
        return self.trunk(images)


def multitask_model(seed: int = 0) -> TwoHeads:
    """The lab's model, seeded so two calls build identical weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TwoHeads()


def multitask_optimizers(model: TwoHeads) -> list[torch.optim.Optimizer]:
    """SGD with momentum for the trunk and the digit head, Adam for the parity head."""
    main = itertools.chain(model.trunk.parameters(), model.head.parameters())
    return [
        torch.optim.SGD(main, lr=LR, momentum=0.9),
        torch.optim.Adam(model.aux.parameters(), lr=AUX_LR),
    ]


def multitask_loss(model, images, labels, has_aux):
    """The digit loss under fp16 autocast, plus the parity loss on batches that carry its labels."""
    with torch.autocast(DEVICE_TYPE, dtype=torch.float16):
        features = model(images)
        loss = F.cross_entropy(model.head(features), labels)
        if has_aux:
            loss = loss + F.cross_entropy(model.aux(features), labels % 2)
    return loss


@functools.lru_cache(maxsize=4)
def _digits(seed: int):
    data = load_mnist(source="subset")  # the shipped digits: the same on every machine
    return tuple(mnist_batches(NUM_BATCHES, batch_size=16, seed=seed, data=data))


def multitask_plan(seed: int = 0) -> tuple[tuple[bool, ...], tuple[int, ...]]:
    """(which batches carry parity labels, which are corrupt): the notebook's for seed 0."""
    if seed == 0:
        return AUX_LABELS, CORRUPT
    generator = seeded(seed)
    has_aux = [bool(b) for b in torch.randint(0, 2, (NUM_BATCHES,), generator=generator)]
    corrupt = int(torch.randint(1, NUM_BATCHES - 2, (), generator=generator))
    later = int(torch.randint(corrupt + 1, NUM_BATCHES, (), generator=generator))
    # The corrupt batch carries parity labels, as the notebook's does: its inf reaches the parity
    # head, so a parity step outside the scaler's inf check shows. A later batch carries them
    # too: a parity head whose gradients are never cleared keeps that inf and skips its step
    # there (before it, gradients left over were unscaled once more, too small to show). And a
    # batch after the corrupt one carries none: the parity head's gradients exist by then, so a
    # loop that zeroes them (set_to_none=False) and steps on zeros shows (it passed the 20 seeds
    # of 300 whose batches without labels all came first).
    others = [index for index in range(corrupt + 1, NUM_BATCHES) if index != later]
    without = others[int(torch.randint(len(others), (), generator=generator))]
    has_aux[corrupt] = has_aux[later] = True
    has_aux[without] = False
    return tuple(has_aux), (corrupt,)


def multitask_batches(seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor, bool]]:
    """(images, labels, has_aux) for each batch of real MNIST digits; corrupt ones overflow fp16."""
    has_aux, corrupt = multitask_plan(seed)
    return [
        (images * (1e6 if index in corrupt else 1.0), labels.clone(), has_aux[index])
        for index, (images, labels) in enumerate(_digits(seed))
    ]


def run_multitask(train, seed: int = 0) -> dict:
    """Run ``train(model, optimizers, scaler, batches)``; record after each update() the scale and
    the optimizer steps each optimizer had taken, then the weights of both parts."""
    model = multitask_model(seed)
    optimizers = multitask_optimizers(model)
    scaler = RecordingScaler(DEVICE_TYPE, **SCALER_KWARGS)
    steps, updates = [0, 0], []
    for index, optimizer in enumerate(optimizers):
        optimizer.register_step_post_hook(lambda *_, i=index: steps.__setitem__(i, steps[i] + 1))
    scaler.on_update = lambda: updates.append([scaler.get_scale(), *steps])
    has_aux, corrupt = multitask_plan(seed)
    observed = {"error": None, "has_aux": list(has_aux), "corrupt": list(corrupt)}
    try:
        train(model, optimizers, scaler, multitask_batches(seed))
    except Exception as error:  # noqa: BLE001 - the learner's loop: a crash is what it did
        observed["error"] = error_text(error)
    observed["updates"] = updates
    main = itertools.chain(model.trunk.parameters(), model.head.parameters())
    observed["main"] = [p.detach().clone() for p in main]
    observed["aux"] = [p.detach().clone() for p in model.aux.parameters()]
    # Adam's running mean of the gradients it stepped on: scaled gradients show here, where
    # Adam's near scale-invariant steps hide them in the weights.
    state = optimizers[1].state
    observed["aux_moments"] = [
        state[p]["exp_avg"].clone() if "exp_avg" in state[p] else torch.zeros_like(p)
        for p in model.aux.parameters()
    ]
    return observed


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
                out, weight = fn(q, k, v, keep), fn(q, k, indicator, keep)
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
                out = fn(q, k, v, keep)
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
