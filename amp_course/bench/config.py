"""The bench's run: which precisions and workloads, at which sizes (``BenchConfig``), and the
matrix's cells (``variant.Variant``) it makes of them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from .. import precisions
from .variant import Variant

PRECISIONS = precisions.NAMES  # their names; tf32: fp32 with TF32 matmuls (CUDA, sm_80+)
WORKLOADS = ("matmul", "mnist_cnn", "vit_b16", "vit_l16", "max_batch", "ladder")
# The default run: the precision matrix. The MFU ladder (lesson 10) runs when named.
MATRIX_WORKLOADS = WORKLOADS[:-1]
MNIST_TRAIN_SIZE = 60_000  # an epoch of the MNIST tutorial's CNN is one pass over these digits


@dataclass
class BenchConfig:
    """What to run and at which sizes; ``smoke()`` and ``full()`` give the two standard sizes.

    ``precisions`` holds rows of ``ac.precisions``: given names (any spelling ``precisions.get``
    reads, "bfloat16" as "bf16") are read once, here, and an unknown one is refused with the valid
    ones."""

    precisions: tuple[precisions.Precision, ...] = tuple(precisions.PRECISIONS.values())
    workloads: tuple[str, ...] = MATRIX_WORKLOADS
    compile: bool = False  # add a torch.compile variant of every precision
    fused: bool = False  # add a fused-AdamW variant of every precision
    rounds: int = 3  # round-robin passes over the modes (A/B interleaving)
    min_run_time: float = 0.5  # seconds of timed calls per mode per round
    matmul_sizes: tuple[int, ...] = (1024, 2048, 4095, 4096, 8192)  # 4095: not a multiple of 8
    mnist_batch_size: int = 128
    mnist_batches: int = 32  # distinct batches cycled through by the timed steps
    mnist_width_divisor: int = 1  # 1: the scenario's CNN
    vit_batch_size: dict = field(default_factory=lambda: {"b16": 64, "l16": 32})
    vit_overrides: dict = field(default_factory=dict)  # preset -> build_vit overrides
    max_batch_limit: int = 4096  # the search for the largest batch stops here
    threads: int | None = None  # CPU threads for the run (None: leave torch's setting)
    ladder_rungs: tuple[str, ...] | None = None  # the ladder's rungs to run (None: all)
    smoke: bool = False

    def __post_init__(self):
        self.precisions = tuple(precisions.get(p) for p in self.precisions)

    def to_dict(self) -> dict:
        """The config as the report's JSON keeps it: the precisions by their names."""
        return {**asdict(self), "precisions": [p.name for p in self.precisions]}

    @classmethod
    def full(cls, **changes) -> BenchConfig:
        return replace(cls(), **changes)

    @classmethod
    def smoke_config(cls, **changes) -> BenchConfig:
        """Tiny sizes for a CPU: the whole matrix in seconds, nothing meant as a speed figure.

        One thread: a parallel step waits for its slowest thread, so on a shared machine more
        threads stall on the cores other processes hold. It is not chosen for speed: at these
        sizes a second thread makes some steps faster and others slower.
        """
        tiny = dict(image_size=32, patch_size=16, num_heads=2, hidden_dim=32, mlp_dim=64)
        base = cls(
            rounds=2,
            min_run_time=0.02,
            matmul_sizes=(64, 128),
            mnist_batch_size=8,
            mnist_batches=4,
            mnist_width_divisor=32,
            vit_batch_size={"b16": 2, "l16": 2},
            vit_overrides={"b16": {**tiny, "num_layers": 1}, "l16": {**tiny, "num_layers": 2}},
            max_batch_limit=64,
            threads=1,
            smoke=True,
        )
        return replace(base, **changes)

    def validate(self) -> None:
        """Clear errors for unknown workloads and impossible sizes (unknown precisions are refused
        when the config is made)."""
        for name in self.workloads:
            if name not in WORKLOADS:
                raise ValueError(
                    f"Unknown workload {name!r}. Valid choices: {', '.join(WORKLOADS)}."
                )
        if self.rounds < 1 or self.min_run_time <= 0:
            raise ValueError("rounds must be >= 1 and min_run_time > 0.")
        if any(n < 1 for n in self.matmul_sizes):
            raise ValueError(f"matmul sizes must be positive, got {self.matmul_sizes}.")

    def variants(self) -> list[Variant]:
        """The matrix's cells: every precision, then its compiled and fused variants if asked."""
        cell = Variant.matrix
        cells = [cell(p) for p in self.precisions]
        cells += [cell(p, compile=True) for p in self.precisions if self.compile]
        cells += [cell(p, fused=True) for p in self.precisions if self.fused]
        # Both together: the fastest recipe a learner would use (compiled model, fused AdamW).
        both = self.compile and self.fused
        cells += [cell(p, compile=True, fused=True) for p in self.precisions if both]
        return cells
