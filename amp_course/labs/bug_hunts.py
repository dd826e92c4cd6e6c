"""The bug-hunt labs' kit: their fixed setup, and running a training loop on it.

Every lab runs a loop (the broken one, the learner's, the reference fix) on the same tiny setup
(a seeded MLP, real-MNIST batches, fp16 autocast on the CPU, a real ``torch.amp.GradScaler``) and
records its parameters, scale trajectory, learning rates and warnings (an ``Outcome``). Seed 0 is
the setup the notebook shows; other seeds (the grader's) pick other digits and other corrupt
batches. The checks that judge an outcome are in ``amp_course.exercises.labs_bug_hunts``.
"""

from __future__ import annotations

import functools
import io
import warnings
from dataclasses import dataclass, field, fields

import torch
import torch.nn.functional as F

from .. import scaling
from ..data import load_mnist
from ..display import error_text, kind_of
from ..recipe import AmpRecipe
from ..training import amp_step
from .failure_cases import Returned

DEVICE = torch.device("cpu")
AMP_DTYPE = torch.float16
RECIPE = AmpRecipe(DEVICE, AMP_DTYPE)
NUM_BATCHES = 9
POISONED = (0, 5)  # batches whose pixels are corrupt (huge), so the fp16 backward overflows
LR = 0.05
SCALER_KWARGS = dict(init_scale=2.0**16, growth_interval=3)
SCHEDULER_GAMMA = 0.8  # the labs' StepLR lowers the learning rate by this after every step
SCHEDULER_WARNING = "lr_scheduler.step()` before `optimizer.step()"
MAX_NORM = 0.5  # lab 1's clipping threshold
# Lab 2: 9 batches in groups of 2, so the last group holds one batch and must count like the others.
ACCUMULATION_STEPS = 2
# Below most averaged gradients' norms (1.9 to 3.7 over the seeds): most steps clip, so a loop
# that leaves clipping out is seen.
ACCUMULATION_MAX_NORM = 2.0
RESUME_AT = 7  # lab 5: steps before the checkpoint


class RecordingScaler(torch.amp.GradScaler):
    """A real GradScaler that also records its scale after every update()."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.history: list[float] = []
        self.on_update = None  # run() counts the optimizer steps taken by each update()

    def update(self, new_scale=None):
        super().update(new_scale)
        self.history.append(self.get_scale())
        if self.on_update is not None:
            self.on_update()


@functools.lru_cache(maxsize=4)
def _clean_batches(seed: int = 0):
    # The shipped real-MNIST subset: the same digits on every machine, and no torchvision import.
    data = load_mnist(source="subset")
    return tuple(scaling.mnist_batches(NUM_BATCHES, batch_size=16, seed=seed, data=data))


def poisoned_for(seed: int) -> tuple[int, ...]:
    """Which batches are corrupt: POISONED for seed 0, two others drawn from the seed otherwise."""
    if seed == 0:
        return POISONED
    order = torch.randperm(NUM_BATCHES, generator=torch.Generator().manual_seed(seed))
    return tuple(sorted(int(i) for i in order[:2]))


def lab_batches(poisoned=POISONED, seed: int = 0, bright=()):
    """The labs' fixed MNIST batches; those in ``poisoned`` are corrupted to overflow in fp16, those
    in ``bright`` only brightened: their loss is finite, their scaled gradients overflow."""
    batches = []
    for index, (images, labels) in enumerate(_clean_batches(seed)):
        if index in poisoned:
            images = images * 1e6  # a corrupt batch: fp16 activations overflow to inf
        elif index in bright:
            # A finite loss; times any scale the labs reach, gradients past fp16's (at x10 some
            # seeds' steps ran after an earlier backoff had lowered the scale)
            images = images * 100
        batches.append((images.clone(), labels.clone()))
    return batches


def lab_model(seed: int = 0):
    """The labs' model: a seeded two-layer MLP in fp32."""
    return scaling.mlp(seed, hidden=32, device=DEVICE)


def lab_setup(seed: int = 0):
    """A fresh (model, optimizer, scaler) triple, identical on every call."""
    model = lab_model(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    return model, optimizer, RecordingScaler(DEVICE.type, **SCALER_KWARGS)


def forward_loss(model, images, labels):
    """The labs' loss under fp16 autocast."""
    with RECIPE.autocast():
        return F.cross_entropy(model(images.to(DEVICE)), labels.to(DEVICE))


def train_steps(model, optimizer, scaler, batches):
    """The plain AMP loop the labs build on (scale, backward, scaler.step, update): the course's
    ``amp_step`` on each batch."""
    for images, labels in batches:
        amp_step(model, optimizer, scaler, RECIPE, (images.to(DEVICE), labels.to(DEVICE)))


@dataclass
class Outcome:
    """What a training function did, in terms a learner can compare."""

    params: list[torch.Tensor] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    # The gradient norm at each optimizer.step() that ran (seen by a step pre-hook: after
    # unscale_ and clipping); skipped steps never call it.
    step_norms: list[float] = field(default_factory=list)
    # How many optimizer.step() calls had run when each update() returned.
    steps_at_update: list[int] = field(default_factory=list)
    # The LR scheduler's own count of its step() calls (None: the loop was given none).
    scheduler_steps: int | None = None

    def plain(self) -> dict:
        """The outcome as plain data for the grader."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def run(train, extra=(), poisoned=POISONED, scheduler=False, seed=0, bright=()) -> Outcome:
    """Run ``train(model, optimizer, [scheduler,] scaler, batches, *extra)`` on the batches
    ``lab_batches(poisoned, seed, bright)``; record the Outcome."""
    model, optimizer, scaler = lab_setup(seed)
    sched = (
        torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=SCHEDULER_GAMMA)
        if scheduler
        else None
    )
    outcome = Outcome()
    grads = lambda: [p.grad for p in model.parameters() if p.grad is not None]  # noqa: E731
    optimizer.register_step_pre_hook(
        lambda *_: outcome.step_norms.append(torch.nn.utils.get_total_norm(grads()).item())
    )
    scaler.on_update = lambda: outcome.steps_at_update.append(len(outcome.step_norms))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = (model, optimizer, sched, scaler) if scheduler else (model, optimizer, scaler)
        try:
            train(*args, lab_batches(poisoned, seed, bright), *extra)
        except Exception as error:  # the learner's loop: a crash is part of what it did
            outcome.error = error_text(error)
    outcome.params = [p.detach().clone() for p in model.parameters()]
    outcome.scales = list(scaler.history)
    outcome.lrs = [group["lr"] for group in optimizer.param_groups]
    outcome.scheduler_steps = None if sched is None else sched.last_epoch
    outcome.warnings = [str(w.message) for w in caught]
    return outcome


def symptom(train, extra=(), scheduler=False, label="the broken loop"):
    """Print, in plain words and under ``label``, what ``train`` did on the labs' setup."""
    out = run(train, extra, scheduler=scheduler)
    print(f"{label}:")
    if out.error:
        print("  crashed with", out.error)
    print("  scale after each update():", [f"{s:g}" for s in out.scales])
    print(f"  optimizer steps that ran: {len(out.step_norms)} of {NUM_BATCHES} batches")
    totals = out.steps_at_update
    per_update = [b - a for a, b in zip([0, *totals][:-1], totals, strict=True)]
    print("  optimizer steps that ran before each update():", per_update)
    if scheduler:
        print("  final learning rate:", f"{out.lrs[0]:.6g}")
    bad = [i for i, p in enumerate(out.params) if not torch.isfinite(p).all()]
    if bad:
        print(f"  parameter tensors holding inf/NaN: {bad}")
    for message in out.warnings:
        if "lr_scheduler" in message:
            print("  warning:", message)
    return out


# ---- Lab 5: a run that checkpoints, resumes in fresh objects and trains on -----------------------
def resume_point(seed: int) -> int:
    """How many steps run before the checkpoint: RESUME_AT for seed 0; otherwise the first step
    from 3 + seed % 5 on (or else the last before it) after which the growth tracker is not 0,
    so that a checkpoint which loses it (a fresh scaler's is 0) changes what the resumed scaler
    holds; among those, one after which the scale is not init_scale either, where the seed's
    batches give one (a checkpoint that kept the tracker and lost the scale passed the seeds
    whose scale was back at init_scale: 2 of 40 still give no such step)."""
    if seed == 0:
        return RESUME_AT
    model, optimizer, scaler = lab_setup(seed)
    counting, moved = [], []  # after which the tracker is not 0; and the scale not the first
    for step, batch in enumerate(lab_batches(poisoned_for(seed), seed)[:-1]):
        train_steps(model, optimizer, scaler, [batch])
        state = scaler.state_dict()
        if state["_growth_tracker"] != 0:
            counting.append(step + 1)
            if state["scale"] != SCALER_KWARGS["init_scale"]:
                moved.append(step + 1)
    start = 3 + seed % 5
    for steps in (moved, counting):
        if steps:
            return next((n for n in steps if n >= start), steps[-1])
    return start


def load_checkpoint(checkpoint, model, optimizer, scaler):
    """Restore whatever the checkpoint holds into fresh objects."""
    model.load_state_dict(checkpoint["model"])
    if "optimizer" in checkpoint:
        optimizer.load_state_dict(checkpoint["optimizer"])
    if "scaler" in checkpoint:
        scaler.load_state_dict(checkpoint["scaler"])


def resumed_run(save, seed: int = 0):
    """Train, checkpoint with ``save`` through torch.save, resume in fresh objects, train on.

    Seed 0 resumes after RESUME_AT of the notebook's batches; other seeds elsewhere, on other
    batches. Returns the resumed (model, scaler) and what came back different from the state at
    the checkpoint: ``{"scaler": {field: [after loading, saved]}, "optimizer": text or None}``.
    """
    batches = lab_batches(poisoned_for(seed), seed)
    resume_at = resume_point(seed)
    model, optimizer, scaler = lab_setup(seed)
    train_steps(model, optimizer, scaler, batches[:resume_at])
    saved = {"optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}
    buffer, checkpoint = io.BytesIO(), save(model, optimizer, scaler)
    if not isinstance(checkpoint, dict):  # what lab.load_checkpoint reads
        raise Returned(
            f"save_checkpoint returned {kind_of(checkpoint)}; lab.load_checkpoint reads a dict "
            "(checkpoint['model'], and 'optimizer' and 'scaler' where present)"
        )
    objects = _objects_in(checkpoint)
    if objects:  # say so before torch.load refuses them in words about its own options
        raise TypeError(
            f"the checkpoint holds {objects}; torch.load(..., weights_only=True), which the lab "
            "loads it with, reads only tensors, Python numbers and strings, and dicts, lists and "
            "tuples of them."
        )
    torch.save(checkpoint, buffer)
    buffer.seek(0)
    model, optimizer, scaler = lab_setup(seed + 1)  # a new process: fresh objects, other weights
    load_checkpoint(torch.load(buffer, weights_only=True), model, optimizer, scaler)
    restored = scaler.state_dict()
    differs = {
        "scaler": {
            key: [restored.get(key), value]
            for key, value in saved["scaler"].items()
            if restored.get(key) != value
        },
        "optimizer": _optimizer_difference(optimizer.state_dict(), saved["optimizer"]),
    }
    train_steps(model, optimizer, scaler, batches[resume_at:])
    return model, scaler, differs


def _objects_in(value, where: str = "checkpoint") -> str:
    """The first value in ``value`` that weights_only loading refuses, as "a GradScaler at
    checkpoint['scaler']"; "" if there is none."""
    if isinstance(value, dict):
        found = (_objects_in(item, f"{where}[{key!r}]") for key, item in value.items())
    elif isinstance(value, (list, tuple)):
        found = (_objects_in(item, f"{where}[{i}]") for i, item in enumerate(value))
    elif value is None or isinstance(value, (torch.Tensor, torch.dtype)):
        return ""
    elif type(value) in (bool, int, float, str):  # exactly: torch.__version__ (a str subclass)
        return ""  # and numpy scalars (float subclasses) are refused by weights_only loading
    else:
        kind = "GradScaler" if isinstance(value, torch.amp.GradScaler) else type(value).__name__
        return f"a {kind} object at {where}"
    return next((text for text in found if text), "")


def _optimizer_difference(restored: dict, saved: dict) -> str | None:
    """How an optimizer's state_dict() after loading differs from the saved one, in words."""
    if _same_state(restored, saved):
        return None
    have, had = restored["state"], saved["state"]
    if have.keys() != had.keys():
        return f"per-parameter state for {len(have)} parameters, saved for {len(had)}"
    if not _same_state(have, had):
        fields = sorted({key for entry in had.values() for key in entry})
        return f"per-parameter state ({', '.join(fields)}) with other values than saved"
    return "param_groups other than saved"


def _same_state(a, b):
    if isinstance(a, dict):
        return (
            isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
        )
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same_state, a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b
