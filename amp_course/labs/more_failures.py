"""The more-failures labs' kit: their seeded inputs, and functions that run a lab's code on them and
record what happened (crashes, NaN, dtypes, what each optimizer did).

Everything runs on the CPU, with fp16 autocast and a real ``torch.amp.GradScaler`` where a lab needs
loss scaling, so each symptom shows on any machine. Seed 0 is what the notebook shows; other seeds
(the grader's) draw other sizes, masks and positions. Labs 2 and 3's kit lives in
``masked_attention``, lab 4's in ``rotary``, their common setup in ``failure_cases``. The checks
that judge a fix are in ``amp_course.exercises.labs_more_failures``.
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
from .masked_attention import (  # noqa: F401 - labs 2 and 3
    MASKED_ABOVE,
    MASKED_BF16_FAR_ABOVE,
    MASKED_FAR_ABOVE,
    masked_inputs,
    padded_inputs,
    run_masked,
    run_padded,
    train_padded,
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
    corrupt = int(torch.randint(1, NUM_BATCHES - 3, (), generator=generator))
    after = (corrupt + 1 + torch.randperm(NUM_BATCHES - corrupt - 1, generator=generator)).tolist()
    # The corrupt batch carries parity labels, as the notebook's does: its inf reaches the parity
    # head, so a parity step outside the scaler's inf check shows. Two later batches carry them
    # too: a parity head whose gradients are never cleared keeps that inf and skips its step
    # there (before it, gradients left over were unscaled once more, too small to show). With
    # one, that answer passed 5 seeds of 150, where the parity gradients of that one batch
    # overflowed at the scale of the time and the right loop skipped the step as well. And a
    # batch after the corrupt one carries none: the parity head's gradients exist by then, so a
    # loop that zeroes them (set_to_none=False) and steps on zeros shows (it passed the 20 seeds
    # of 300 whose batches without labels all came first).
    for index in (corrupt, *after[:2]):
        has_aux[index] = True
    has_aux[after[2]] = False
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
