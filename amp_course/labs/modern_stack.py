"""The modern-stack labs' kit: their seeded inputs, and functions that run a lab's code on them and
record what happened (crashes, dtypes, values, what an optimizer, a scheduler and an EMA did).

Everything runs on the CPU: torch.compile's CPU backend, the TF32 flags (which any build lets you
set and read), fp16 and bf16 autocast, a real ``torch.amp.GradScaler``, float8 casts. Seed 0 is what
the notebook shows; other seeds (the grader's) draw other sizes, values and flag settings. The
checks that judge a fix are in ``amp_course.exercises.labs_modern_stack``.
"""

from __future__ import annotations

import functools
import itertools
import warnings

import torch
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_post_hook

from .. import scaling
from ..data import load_mnist
from .custom_matmul import mm_inputs, run_mm  # noqa: F401
from .failure_cases import AUTOCAST_CASES, DEVICE_TYPE, attempt, autocast, seeded
from .fp8_scale import FP8, FP8_MAX, fp8_roundings, fp8_tensors, run_fp8  # noqa: F401
from .tf32_flags import TF32_CASES, TF32_SETTERS, reset_tf32, run_tf32, tf32_cases  # noqa: F401

# ---- Lab 1: a dtype mix that compiled code accepts and eager refuses ----------------------------
NUM_CLASSES = 10


def feature_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 features [rows, width] and class labels: classes with no row, and one class (the first
    row's) with an odd number of rows above 256, a count bf16 cannot hold (it keeps whole numbers
    exact only up to 256), so class means divided by counts held in bf16 are off there.

    The last class never has a row (counts from ``bincount`` without ``minlength`` are one short
    only then); other seeds than 0 leave out another class, drawn, as well."""
    generator = seeded(seed)
    rows = 256 if seed == 0 else int(torch.randint(128, 512, (), generator=generator))
    width = 8 if seed == 0 else int(torch.randint(4, 17, (), generator=generator))
    last = NUM_CLASSES - 1
    absent = last if seed == 0 else int(torch.randint(0, last, (), generator=generator))
    labels = torch.randint(0, last - (absent != last), (rows,), generator=generator)
    crowded = 257 + 2 * int(torch.randint(0, 64, (), generator=generator))
    extra = crowded - int((labels == labels[0]).sum())
    labels = torch.cat([labels, labels[:1].expand(extra)])
    labels = labels[torch.randperm(len(labels), generator=generator)]
    features = 1 + torch.randn(len(labels), width, generator=generator)
    return features, labels + (labels >= absent).long()


def run_class_means(fn, seed: int = 0) -> dict:
    """``fn(features, labels, NUM_CLASSES)`` in each autocast case, on features in that case's
    dtype (as a forward under that autocast returns them): what it returns. It runs eagerly, even
    where ``fn`` was compiled (torch.compile's "force_eager" stance)."""
    observed = {}
    for case, dtype in AUTOCAST_CASES.items():
        features, labels = feature_batch(seed)
        with autocast(dtype), torch.compiler.set_stance("force_eager"):
            out, error = attempt(fn, features.to(dtype or torch.float32), labels, NUM_CLASSES)
        observed[case] = {"error": error, "out": out}
    return observed


# ---- Lab 2: the legacy TF32 switches and the fp32_precision API ---------------------------------
# Its settings and its run are in tf32_flags.py; the notebook reaches them from here.


# ---- Lab 3: a scheduler and an EMA around steps the scaler skips --------------------------------
NUM_STEPS, WARMUP, EMA_DECAY, LR = 12, 6, 0.8, 0.05
# A loss scale far above what fp16 gradients fit: the first steps overflow until the scale has
# backed off, and a short growth interval makes it overflow again later.
HIGH_SCALER_KWARGS = dict(init_scale=2.0**24, growth_interval=2)


@functools.lru_cache(maxsize=4)
def _digits(seed: int):
    data = load_mnist(source="subset")  # the shipped digits: the same on every machine
    return tuple(scaling.mnist_batches(NUM_STEPS, batch_size=16, seed=seed, data=data))


def digit_batches(seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Real MNIST (images, labels) batches, fresh copies."""
    return [(images.clone(), labels.clone()) for images, labels in _digits(seed)]


def digit_loss(model, images, labels):
    """Cross-entropy under fp16 autocast."""
    with torch.autocast(DEVICE_TYPE, dtype=torch.float16):
        return F.cross_entropy(model(images), labels)


def warmup(step: int) -> float:
    """The LR factor after ``step`` scheduler steps: linear warm-up from 0 over WARMUP updates,
    then 1. Starting at 0, as many warm-ups do, the first update leaves the weights unchanged."""
    return min(1.0, step / WARMUP)


def ema_setup(seed: int = 0):
    """(model, optimizer, scheduler, ema, scaler): SGD with momentum, a LambdaLR warm-up, an EMA
    of the weights (``swa_utils.AveragedModel``) and a GradScaler whose scale starts high."""
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    model = scaling.mlp(seed, hidden=32)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(EMA_DECAY))
    scaler = torch.amp.GradScaler(DEVICE_TYPE, **HIGH_SCALER_KWARGS)
    return model, optimizer, scheduler, ema, scaler


class FetchedBatches(list):
    """A list of batches that notes which of them a loop fetched (in a for loop, by index or in a
    slice)."""

    def __init__(self, batches):
        super().__init__(batches)
        self.fetched: set[int] = set()

    def __getitem__(self, index):
        picked = range(len(self))[index]  # one index, or a range for a slice
        self.fetched.update(picked if isinstance(picked, range) else (picked,))
        return super().__getitem__(index)

    def __iter__(self):
        return (self[index] for index in range(len(self)))


class RecordingBatches(FetchedBatches):
    """The batches a loop goes through, noting after each batch the optimizer's steps, the
    learning rate and the EMA's count: when the loop fetches the next batch, or, for a loop that
    fetches batches before it trains on them (``list(batches)``), when the model's forward starts
    on the next one; and at the end."""

    def __init__(self, batches, model, optimizer, scheduler, ema):
        super().__init__(batches)
        self.records, self.steps = [], 0
        self.optimizer, self.scheduler, self.ema = optimizer, scheduler, ema
        optimizer.register_step_post_hook(lambda *_: setattr(self, "steps", self.steps + 1))
        # The EMA's copy of the model was made before this hook, so only the model's forwards count.
        self.forwards, self.forwards_at_fetch, self.ahead = 0, 0, False
        model.register_forward_pre_hook(self._forward)

    def __getitem__(self, index):
        if not self.ahead:
            # A slice, or no forward since the last fetch: the loop fetches batches ahead.
            idle = index != 0 and self.forwards == self.forwards_at_fetch
            if not isinstance(index, int) or idle:
                self.ahead = True
            else:
                while len(self.records) < index:  # the batches before this one are done
                    self._record()
            self.forwards_at_fetch = self.forwards
        return super().__getitem__(index)

    def _forward(self, module, args) -> None:
        self.forwards += 1
        # The batch whose images the forward runs on says which batches are done; a loop that
        # also runs a forward of its own on a batch (a logged loss) then counts no extra batch.
        # Inputs that are no batch's images (a copy) count one batch per forward.
        index = self._batch_of(args[0] if args else None)
        done = index if index is not None else self.forwards - 1
        while self.ahead and len(self.records) < done:  # the batches before it are done
            self._record()

    def _batch_of(self, x) -> int | None:
        """The index of the batch whose images ``x`` is (the same memory and shape), if any."""
        if not isinstance(x, torch.Tensor):
            return None
        for index in range(len(self)):
            images = list.__getitem__(self, index)[0]
            if images.shape == x.shape and images.data_ptr() == x.data_ptr():
                return index
        return None

    def finish(self) -> None:
        """The record after the last batch the loop fetched."""
        while len(self.records) < max(self.fetched, default=-1) + 1:
            self._record()

    def _record(self) -> None:
        self.records.append(
            {
                "steps": self.steps,
                "scheduler_steps": int(self.scheduler.last_epoch),
                "lr": self.optimizer.param_groups[0]["lr"],
                "ema_count": int(self.ema.n_averaged),
            }
        )


def _overflows_without_inf(seed: int) -> bool:
    """Whether some step of the seed's run overflows into NaN gradients and no inf (a step the
    scaler skips all the same): the seed's own model and digits, the warm-up moving only with the
    steps taken, as in the lab's fix (the EMA, which does not feed back, left out)."""
    model, optimizer, scheduler, _, scaler = ema_setup(seed)
    for images, labels in digit_batches(seed):
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(digit_loss(model, images, labels)).backward()
        grads = [p.grad for p in model.parameters()]
        nan, inf = (any(bad(g).any() for g in grads) for bad in (torch.isnan, torch.isinf))
        if nan and not inf:
            return True
        scaler.step(optimizer)
        scaler.update()
        if not inf:  # the scaler stepped (no NaN-only step came before this one)
            scheduler.step()
    return False


@functools.lru_cache(maxsize=16)
def ema_case(seed: int) -> int:
    """The seed whose model and digits a run for ``seed`` uses: 0, the notebook's, for 0; for any
    other seed the first of seed and then seeds drawn from it with a step whose gradients
    overflow into NaN and no inf (about one seed in 17: where every overflow held an inf, a loop
    that told a skipped step by inf alone passed)."""
    if seed == 0:
        return 0
    generator = torch.Generator().manual_seed(seed)
    drawn = (int(torch.randint(1, 2**31, (), generator=generator)) for _ in itertools.count())
    return next(s for s in itertools.chain([seed], drawn) if _overflows_without_inf(s))


def run_ema(train, seed: int = 0) -> dict:
    """Run ``train(model, optimizer, scheduler, ema, scaler, batches)`` on ``ema_case(seed)``'s
    model and digits; record after each batch the optimizer's steps, the scheduler's, the learning
    rate and the EMA's count, and the scale after each update(); at the end the model's and the
    EMA's weights, and the warnings raised."""
    seed = ema_case(seed)
    model, optimizer, scheduler, ema, scaler = ema_setup(seed)
    batches = RecordingBatches(digit_batches(seed), model, optimizer, scheduler, ema)
    scales, update = [], scaler.update

    def recorded_update(new_scale=None):
        update(new_scale)
        scales.append(scaler.get_scale())

    scaler.update = recorded_update
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, error = attempt(train, model, optimizer, scheduler, ema, scaler, batches)
    batches.finish()
    return {
        "error": error,
        "warnings": [str(warning.message) for warning in caught],
        "records": batches.records,
        "scales": scales,
        "model": [p.detach().clone() for p in model.parameters()],
        "ema": [p.detach().clone() for p in ema.module.parameters()],
    }


# ---- Lab 5: Adam on fp16 parameters -------------------------------------------------------------
# Not Adam's default learning rate (1e-3): a loop that drops the lr it is given shows.
ADAM_STEPS, ADAM_LR = 6, 2e-5


def adam_model(seed: int = 0) -> torch.nn.Module:
    """The fp32 MLP the lab fine-tunes, seeded."""
    return scaling.mlp(seed, hidden=32)


# The settings of an optimizer that change its update: the lab asks for Adam's defaults but lr.
ADAM_SETTINGS = ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize")


def run_adam(train, seed: int = 0) -> dict:
    """``train(model, batches, lr)`` on a fresh fp32 model and real digits: the weights of the
    model it returns (or of the model it was given, if it returns None), their dtypes, the batches
    it fetched, and the class and settings of each torch optimizer that stepped (none for an
    update written by hand)."""
    model = adam_model(seed)
    batches = FetchedBatches(digit_batches(seed)[:ADAM_STEPS])
    optimizers = []

    def note(optimizer, args, kwargs):
        group = optimizer.param_groups[0]
        settings = {key: group[key] for key in ADAM_SETTINGS if key in group}
        if "betas" in settings:  # a tuple or a list, as the learner gave it
            settings["betas"] = list(settings["betas"])
        settings = {"class": type(optimizer).__name__, **settings}
        if settings not in optimizers:
            optimizers.append(settings)

    hook = register_optimizer_step_post_hook(note)
    try:
        returned, error = attempt(train, model, batches, ADAM_LR)
    finally:
        hook.remove()
    trained = returned if isinstance(returned, torch.nn.Module) else model
    named = {name: p.detach().clone() for name, p in trained.named_parameters()}
    return {
        "error": error,
        "names": list(named),
        "dtypes": [str(p.dtype).removeprefix("torch.") for p in named.values()],
        "params": [p.float() for p in named.values()],
        "initial": [p.detach() for p in adam_model(seed).parameters()],
        "fetched": sorted(batches.fetched),
        "optimizers": optimizers,
    }
