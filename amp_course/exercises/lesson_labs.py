"""Bug-hunt labs: checkers and reference fixes for broken AMP training loops.

Every lab runs the learner's function on the same tiny deterministic setup (a seeded MLP, fixed
real-MNIST batches, fp16 autocast on the CPU, a real ``torch.amp.GradScaler``) and compares its
parameters, scale trajectory, learning rates and warnings with the reference fix.
"""

from __future__ import annotations

import functools
import io
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .. import scaling
from ..data import load_mnist
from ..training import make_scaler, step_and_update
from . import ExerciseFailed, exercise

DEVICE = torch.device("cpu")
AMP_DTYPE = torch.float16
NUM_BATCHES = 9
POISONED = (0, 5)  # batches whose pixels are corrupt (huge), so the fp16 backward overflows
LR = 0.05
SCALER_KWARGS = dict(init_scale=2.0**16, growth_interval=3)
SCHEDULER_WARNING = "lr_scheduler.step()` before `optimizer.step()"


class RecordingScaler(torch.amp.GradScaler):
    """A real GradScaler that also records its scale after every update()."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.history: list[float] = []

    def update(self, new_scale=None):
        super().update(new_scale)
        self.history.append(self.get_scale())


@functools.lru_cache(maxsize=1)
def _clean_batches():
    # The shipped real-MNIST subset: the same digits on every machine, and no torchvision import.
    data = load_mnist(source="subset")
    return tuple(scaling.mnist_batches(NUM_BATCHES, batch_size=16, seed=0, data=data))


def lab_batches(poisoned=POISONED):
    """The labs' fixed MNIST batches; those in ``poisoned`` are corrupted to overflow in fp16."""
    batches = []
    for index, (images, labels) in enumerate(_clean_batches()):
        if index in poisoned:
            images = images * 1e6  # a corrupt batch: fp16 activations overflow to inf
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
    with torch.autocast(DEVICE.type, dtype=AMP_DTYPE):
        return F.cross_entropy(model(images.to(DEVICE)), labels.to(DEVICE))


@dataclass
class Outcome:
    """What a training function did, in terms a learner can compare."""

    params: list[torch.Tensor] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


def _run(train, extra=(), poisoned=POISONED, scheduler=False):
    """Run ``train(model, optimizer, [scheduler,] scaler, batches, *extra)``; record the Outcome."""
    model, optimizer, scaler = lab_setup()
    sched = (
        torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.8) if scheduler else None
    )
    outcome = Outcome()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        args = (model, optimizer, sched, scaler) if scheduler else (model, optimizer, scaler)
        try:
            train(*args, lab_batches(poisoned), *extra)
        except (RuntimeError, ValueError, AssertionError) as error:
            outcome.error = f"{type(error).__name__}: {error}"
    outcome.params = [p.detach().clone() for p in model.parameters()]
    outcome.scales = list(scaler.history)
    outcome.lrs = [group["lr"] for group in optimizer.param_groups]
    outcome.warnings = [str(w.message) for w in caught]
    return outcome


def _compare(mine: Outcome, ref: Outcome, rtol=1e-5, atol=1e-7):
    """Raise ExerciseFailed describing the first way ``mine`` differs from the reference."""
    if mine.error:
        raise ExerciseFailed(f"your loop crashed: {mine.error}")
    if any(SCHEDULER_WARNING in w for w in mine.warnings):
        raise ExerciseFailed(
            "PyTorch warned that lr_scheduler.step() ran before optimizer.step(): "
            "your scheduler stepped on a step the scaler skipped."
        )
    if mine.scales != ref.scales:
        raise ExerciseFailed(
            f"the loss-scale trajectory differs: after each scaler.update() yours was "
            f"{[f'{s:g}' for s in mine.scales]}, the reference {[f'{s:g}' for s in ref.scales]} "
            f"(one update() per optimizer step)."
        )
    if mine.lrs != ref.lrs:
        raise ExerciseFailed(
            f"the final learning rate is {mine.lrs[0]:.6g}, expected {ref.lrs[0]:.6g}."
        )
    for index, (a, b) in enumerate(zip(mine.params, ref.params, strict=True)):
        if not torch.isfinite(a).all():
            raise ExerciseFailed(f"parameter tensor {index} holds inf/NaN after training.")
        if not torch.allclose(a, b, rtol=rtol, atol=atol):
            raise ExerciseFailed(
                f"parameters differ from the reference fix: tensor {index} is off by up to "
                f"{(a - b).abs().max().item():.3g} (tolerance {atol:g} + {rtol:g} x |value|)."
            )


def symptom(train, extra=(), scheduler=False):
    """Print, in plain words, what ``train`` did next to the reference for the lab."""
    out = _run(train, extra, scheduler=scheduler)
    if out.error:
        print("crashed with", out.error)
    print("scale after each update():", [f"{s:g}" for s in out.scales])
    if scheduler:
        print("final learning rate:", f"{out.lrs[0]:.6g}")
    bad = [i for i, p in enumerate(out.params) if not torch.isfinite(p).all()]
    if bad:
        print(f"parameter tensors holding inf/NaN: {bad}")
    for message in out.warnings:
        if "lr_scheduler" in message:
            print("warning:", message[:110], "...")
    return out


# ---- Lab 1: clipping before unscaling ------------------------------------------------------------
MAX_NORM = 0.5


def train_clipped(model, optimizer, scaler, batches, max_norm):
    """Reference: clip the true gradients, i.e. after unscale_."""
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(forward_loss(model, images, labels)).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()


@exercise("labs.clip_after_unscale", solution=train_clipped)
def check_clipped(fn):
    _compare(_run(fn, (MAX_NORM,)), _run(train_clipped, (MAX_NORM,)))


# ---- Lab 2: accumulation with one unscale_ and one update() per optimizer step -------------------
ACCUMULATION_STEPS = 3
ACCUMULATION_MAX_NORM = 4.0  # above the averaged gradient's norm: clips only a loss left undivided


def train_accumulated(model, optimizer, scaler, batches, accumulation_steps, max_norm):
    """Reference: scale every micro-batch's loss; unscale_, clip, step and update once per group."""
    optimizer.zero_grad(set_to_none=True)
    for index, (images, labels) in enumerate(batches):
        loss = forward_loss(model, images, labels) / accumulation_steps
        scaler.scale(loss).backward()
        if (index + 1) % accumulation_steps == 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)


@exercise("labs.accumulation", solution=train_accumulated)
def check_accumulated(fn):
    extra = (ACCUMULATION_STEPS, ACCUMULATION_MAX_NORM)
    _compare(_run(fn, extra), _run(train_accumulated, extra))


# ---- Lab 3: a GradScaler with bf16 ---------------------------------------------------------------
# Reference: ac.training.make_scaler, a real GradScaler enabled only for fp16 autocast.
@exercise("labs.bf16_scaler", solution=make_scaler)
def check_make_scaler(fn):
    for dtype, wanted in (
        (torch.float16, True),
        (torch.bfloat16, False),
        (torch.float32, False),
        (None, False),
    ):
        scaler = fn(DEVICE, dtype)
        if not isinstance(scaler, torch.amp.GradScaler):
            raise ExerciseFailed(
                f"for autocast dtype {dtype} return a torch.amp.GradScaler (enabled or not), "
                f"so the loop keeps one code path; got {type(scaler).__name__}."
            )
        if scaler.is_enabled() != wanted:
            state = "enabled" if scaler.is_enabled() else "disabled"
            raise ExerciseFailed(
                f"for autocast dtype {dtype} your scaler is {state}; "
                f"it should be {'enabled' if wanted else 'disabled'}"
                f"{' (only fp16 needs loss scaling)' if not wanted else ''}."
            )
        if scaler.is_enabled() and scaler.get_scale() != 2.0**16:
            raise ExerciseFailed("keep GradScaler's default init_scale (65536) for fp16.")
    loss = torch.tensor(1.5)
    if fn(DEVICE, torch.bfloat16).scale(loss) is not loss:
        raise ExerciseFailed("with bf16, scaler.scale(loss) should return the loss unchanged.")


# ---- Lab 4: an LR scheduler stepped on a skipped step --------------------------------------------
def train_scheduled(model, optimizer, scheduler, scaler, batches):
    """Reference: step the scheduler only when the optimizer really stepped."""
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(forward_loss(model, images, labels)).backward()
        if not step_and_update(scaler, optimizer):  # the optimizer really stepped
            scheduler.step()


@exercise("labs.scheduler_skip", solution=train_scheduled)
def check_scheduled(fn):
    _compare(_run(fn, scheduler=True), _run(train_scheduled, scheduler=True))


# ---- Lab 5: scaler state lost at resume ----------------------------------------------------------
RESUME_AT = 7


def save_checkpoint(model, optimizer, scaler):
    """Reference: all a run needs to continue exactly: weights, optimizer and scaler state."""
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
    }


def load_checkpoint(checkpoint, model, optimizer, scaler):
    """Restore whatever the checkpoint holds into fresh objects."""
    model.load_state_dict(checkpoint["model"])
    if "optimizer" in checkpoint:
        optimizer.load_state_dict(checkpoint["optimizer"])
    if "scaler" in checkpoint:
        scaler.load_state_dict(checkpoint["scaler"])


def train_steps(model, optimizer, scaler, batches):
    """The plain AMP loop the resume lab interrupts."""
    for images, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(forward_loss(model, images, labels)).backward()
        scaler.step(optimizer)
        scaler.update()


def resumed_run(save):
    """Train RESUME_AT steps, checkpoint with ``save`` through torch.save, resume in fresh objects.

    Returns the resumed (model, scaler) and which states came back intact ({"optimizer", "scaler"}).
    """
    batches = lab_batches()
    model, optimizer, scaler = lab_setup()
    train_steps(model, optimizer, scaler, batches[:RESUME_AT])
    saved = {"optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}
    buffer = io.BytesIO()
    torch.save(save(model, optimizer, scaler), buffer)
    buffer.seek(0)
    model, optimizer, scaler = lab_setup(seed=1)  # a new process: fresh objects, other weights
    load_checkpoint(torch.load(buffer, weights_only=True), model, optimizer, scaler)
    intact = {
        "scaler": scaler.state_dict() == saved["scaler"],
        "optimizer": _same_state(optimizer.state_dict(), saved["optimizer"]),
    }
    train_steps(model, optimizer, scaler, batches[RESUME_AT:])
    return model, scaler, intact


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


@exercise("labs.resume", solution=save_checkpoint)
def check_resume(fn):
    model, scaler, intact = resumed_run(fn)
    if not intact["scaler"]:
        raise ExerciseFailed(
            "after loading your checkpoint the GradScaler is back at its initial state; "
            "its scale and growth tracker (scaler.state_dict()) must be saved and restored."
        )
    if not intact["optimizer"]:
        raise ExerciseFailed(
            "after loading your checkpoint the optimizer lost its state (SGD's momentum); "
            "save optimizer.state_dict() too."
        )
    reference, ref_optimizer, ref_scaler = lab_setup()
    train_steps(reference, ref_optimizer, ref_scaler, lab_batches())
    if scaler.history != ref_scaler.history[RESUME_AT:] or not scaling.same_parameters(
        model, reference
    ):
        raise ExerciseFailed(
            "the resumed run does not continue exactly like the uninterrupted one: "
            f"loss scale {[f'{s:g}' for s in scaler.history]} vs "
            f"{[f'{s:g}' for s in ref_scaler.history[RESUME_AT:]]}; save the model's weights too."
        )


# ---- Lab 6: a .half() model ----------------------------------------------------------------------
def prepare(model, device):
    """Reference: fp32 weights on ``device``, an optimizer over them, an enabled fp16
    GradScaler."""
    device = torch.device(device)
    model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    return model, optimizer, torch.amp.GradScaler(device.type, **SCALER_KWARGS)


@exercise("labs.half_model", solution=prepare)
def check_prepare(fn):
    result = fn(lab_model(), DEVICE)
    if not (isinstance(result, tuple) and len(result) == 3):
        raise ExerciseFailed("prepare should return (model, optimizer, scaler).")
    model, optimizer, scaler = result
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        raise ExerciseFailed(
            f"the model's weights are {sorted(map(str, dtypes))}; keep them float32 and let "
            "autocast make the 16-bit copies (a .half() model cannot be unscaled)."
        )
    if not isinstance(scaler, torch.amp.GradScaler) or not scaler.is_enabled():
        raise ExerciseFailed("fp16 autocast needs an enabled torch.amp.GradScaler.")
    ref_model, ref_opt, ref_scaler = prepare(lab_model(), DEVICE)
    for triple in ((model, optimizer, scaler), (ref_model, ref_opt, ref_scaler)):
        train_steps(*triple, lab_batches())
    if not scaling.same_parameters(model, ref_model):
        raise ExerciseFailed(
            "training with your (model, optimizer, scaler) gives different weights from "
            f"the reference: use SGD(lr={LR}, momentum=0.9) over model.parameters() and "
            f"GradScaler({SCALER_KWARGS})."
        )


# ---- Lab 7: an extra optimizer.step() ------------------------------------------------------------
def train_plain(model, optimizer, scaler, batches):
    """Reference: scaler.step replaces optimizer.step; one update() per step."""
    train_steps(model, optimizer, scaler, batches)


@exercise("labs.extra_step", solution=train_plain)
def check_plain(fn):
    _compare(_run(fn), _run(train_plain))
