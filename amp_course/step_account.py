"""A training step's account: its operators phase by phase (forward, backward, optimizer) and
kind by kind, the bytes each kind moves, and what one step runs that another does not.

The operators are ``op_costs.record_ops``'s (each roughly one kernel of an eager step, with the
bytes it reads and writes); views, which move no data, are counted apart. ``without_data=True``
runs the step on tensors that have shapes, dtypes and a device but no values (torch's
``FakeTensorMode``, as ``memory.count_saved_bytes`` does): autocast and autograd choose the same
operators as on real CPU tensors (tests/test_step_account.py checks it), so a ViT-B/16 step at a
GPU's batch is accounted in seconds on a CPU.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .op_costs import OpCost, OpRecorder
from .precisions import Precision
from .recipe import AmpRecipe
from .training import optimizer_step

PHASES = ("forward", "backward", "optimizer")

# Each operator's kind, by its ATen name; any other is "element-wise" (adds, bias sums, the
# optimizer's updates). "copy" is data moved only to change its layout or gather its parts.
KINDS = {
    "matmul": ("mm", "addmm", "bmm", "baddbmm", "convolution", "convolution_backward"),
    "cast": ("_to_copy",),
    "copy": ("clone", "copy_", "stack", "cat", "select_backward", "slice_backward"),
    "layer norm": ("native_layer_norm", "native_layer_norm_backward"),
    "dropout": ("native_dropout", "native_dropout_backward", "bernoulli_", "dropout"),
    "activation": ("gelu", "gelu_backward"),
    "loss": ("_log_softmax", "_log_softmax_backward_data", "nll_loss_forward", "nll_loss_backward"),
}
_KIND_OF = {name: kind for kind, names in KINDS.items() for name in names}


def kind_of(name: str) -> str:
    """The kind of an operator named as ``OpCost.name`` ("mm.default") or as its packet ("mm")."""
    packet = name.rsplit(".", 1)[0] if "." in name else name
    if "attention" in packet:
        return "attention"
    return _KIND_OF.get(packet, "element-wise")


@dataclass
class StepAccount:
    """One recorded training step: its operators per phase and its views (no data moved)."""

    label: str
    batch_size: int
    phases: dict[str, list[OpCost]]
    views: Counter = field(default_factory=Counter)  # view operator name -> calls

    @property
    def ops(self) -> list[OpCost]:
        return [op for phase in PHASES for op in self.phases[phase]]

    @property
    def bytes(self) -> int:
        return sum(op.bytes for op in self.ops)

    def by_kind(self, phases: tuple[str, ...] = PHASES) -> dict[str, dict]:
        """Calls and bytes per kind over ``phases``, most bytes first."""
        table: dict[str, dict] = {}
        for phase in phases:
            for op in self.phases[phase]:
                row = table.setdefault(kind_of(op.name), {"calls": 0, "bytes": 0})
                row["calls"] += 1
                row["bytes"] += op.bytes
        return dict(sorted(table.items(), key=lambda item: -item[1]["bytes"]))

    def by_name(self) -> dict[str, dict]:
        """Calls and bytes per operator name over the whole step."""
        table: dict[str, dict] = {}
        for op in self.ops:
            row = table.setdefault(op.name, {"calls": 0, "bytes": 0})
            row["calls"] += 1
            row["bytes"] += op.bytes
        return table


@dataclass(frozen=True)
class Difference:
    """What one step runs that another does not, for one operator: extra calls and bytes
    (negative where the other runs more)."""

    name: str
    calls: int
    bytes: int

    @property
    def kind(self) -> str:
        return kind_of(self.name)


def differences(step: StepAccount, other: StepAccount) -> list[Difference]:
    """Per operator name, the calls and bytes ``step`` runs beyond ``other``; most bytes first."""
    mine, theirs = step.by_name(), other.by_name()
    empty = {"calls": 0, "bytes": 0}
    found = [
        Difference(
            name,
            mine.get(name, empty)["calls"] - theirs.get(name, empty)["calls"],
            mine.get(name, empty)["bytes"] - theirs.get(name, empty)["bytes"],
        )
        for name in sorted(set(mine) | set(theirs))
    ]
    changed = [d for d in found if d.calls or d.bytes]
    return sorted(changed, key=lambda d: (-abs(d.bytes), d.name))


class _StepRecorder(OpRecorder):
    """``OpRecorder`` that also counts the views it leaves out."""

    def __init__(self):
        super().__init__()
        self.views: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "aten" and func.is_view:
            self.views[func._overloadpacket.__name__] += 1
        return super().__torch_dispatch__(func, types, args, kwargs)


def account_step(
    build_model: Callable[[], torch.nn.Module],
    batch_size: int,
    *,
    label: str = "",
    precision: Precision | str = "bf16",
    image_size: int | None = None,
    channels: int = 3,
    num_classes: int = 1000,
    without_data: bool = True,
) -> StepAccount:
    """Account one CPU training step of ``build_model()`` on a batch of ``batch_size`` images:
    the forward and cross-entropy loss under autocast in ``precision`` (a row of ``ac.precisions``
    or its name; "fp32": no autocast), the
    backward, then AdamW's step and ``zero_grad``, the course's step (``training.amp_step``).

    A first step, not recorded, creates AdamW's state. ``image_size``: the images' side (None:
    the model's ``image_size``). ``without_data``: on tensors without values (see the module).
    """
    device = torch.device("cpu")
    if without_data:
        # A private module of torch, but the one its compiler and torch.export use for this job.
        from torch._subclasses.fake_tensor import FakeTensorMode

        with torch.device("meta"):  # shapes only: no memory, no initialisation
            model = build_model()
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = model.to_empty(device=device)
            images, labels = _batch(
                batch_size, channels, image_size or model.image_size, num_classes
            )
    else:
        model = build_model().to(device)
        images, labels = _batch(batch_size, channels, image_size or model.image_size, num_classes)
    # Its first step runs outside the fake mode: the step counters AdamW makes stay real numbers.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    recipe = AmpRecipe(device, precision)
    scaler = recipe.scaler()

    def forward():  # training.scaled_backward's forward, which records no phases
        with recipe.autocast():
            return F.cross_entropy(model(images), labels)

    def update():  # as training.amp_step ends its step
        optimizer_step(model, optimizer, scaler, check_skipped=False)
        optimizer.zero_grad(set_to_none=True)

    scaler.scale(forward()).backward()
    update()
    phases, recorder = {}, _StepRecorder()
    with recorder:
        loss = forward()
        phases["forward"] = list(recorder.ops)
        scaler.scale(loss).backward()
        phases["backward"] = recorder.ops[len(phases["forward"]) :]
        update()
    done = len(phases["forward"]) + len(phases["backward"])
    phases["optimizer"] = recorder.ops[done:]
    return StepAccount(label, batch_size, phases, recorder.views)


def _batch(batch_size: int, channels: int, size: int, num_classes: int):
    """Random images and class labels (fake ones inside a fake mode)."""
    images = torch.randn(batch_size, channels, size, size)
    return images, torch.randint(0, num_classes, (batch_size,))
