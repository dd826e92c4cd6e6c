"""The account of training memory: weights, gradients, optimizer state, activations (any device)."""

from __future__ import annotations

import copy
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..display import shown
from ..recipe import AmpRecipe
from . import fake_cuda

# Bytes per parameter of optimizer state kept in fp32: Adam/AdamW keep two moments (m and v).
OPTIMIZER_STATE_BYTES = {"sgd": 0, "sgd_momentum": 4, "adam": 8, "adamw": 8}


def _amount(function: str, name: str, value, *, whole: bool = False, least: float = 0):
    """``value`` when it is a real number (a whole one where ``whole``) of at least ``least``;
    else an error naming the function, the argument and what was given ('10' as a str made the
    account of a string repeated: '10101010' bytes)."""
    kinds = numbers.Integral if whole else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "a whole number" if whole else "a number"
        raise TypeError(f"{function}: {name} must be {kind}, not {shown(value)}.")
    if not value >= least:  # NaN too
        raise ValueError(f"{function}: {name} must be at least {least:g}, not {value}.")
    return value


@dataclass
class MemoryBreakdown:
    """Training memory in bytes, split by what holds it."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    weight_copies: int = 0  # low-precision copies of weights that autocast keeps for backward

    PARTS = ("parameters", "gradients", "optimizer_state", "weight_copies", "activations")

    @property
    def total(self) -> int:
        return sum(getattr(self, k) for k in self.PARTS)

    def as_gib(self) -> dict[str, float]:
        """Each part and the total in GiB."""
        parts = {k: getattr(self, k) / 2**30 for k in self.PARTS}
        parts["total"] = self.total / 2**30
        return parts


@dataclass
class SavedBytes:
    """Bytes autograd keeps from one forward pass for the backward pass."""

    activations: int
    weight_copies: int


@dataclass
class BlockActivations:
    """Activation bytes per image of a model built from ``num_blocks`` identical blocks (a ViT).

    The parts come from counted forwards (``count_saved_bytes``): ``whole`` is what the whole
    model keeps for backward, ``outside`` what the model without its blocks keeps (patch
    embedding, class token, final norm, head), ``block_input`` one block's input, which is all a
    checkpointed block keeps. Lessons 00 and 09 both read the scenario's memory from here.
    """

    whole: float
    outside: float
    num_blocks: int
    block_input: float

    @property
    def per_block(self) -> float:
        """What one plain block keeps for backward (its input included)."""
        return (self.whole - self.outside) / self.num_blocks

    def kept(self, checkpointed: bool) -> float:
        """Bytes kept for backward at the end of the forward pass."""
        if not checkpointed:
            return self.whole
        return self.outside + self.num_blocks * self.block_input

    def peak(self, checkpointed: bool) -> float:
        """Bytes alive at the step's peak: all that was kept, and with every block checkpointed,
        also one block's activations while backward recomputes it (less its input, already kept).
        Gradients in flight and kernels' workspace are not counted."""
        recompute = self.per_block - self.block_input if checkpointed else 0.0
        return self.kept(checkpointed) + recompute


def training_memory(
    num_params: int,
    activation_bytes: int,
    optimizer: str = "adamw",
    weight_copy_bytes: int = 0,
    param_bytes: int = 4,
    grad_bytes: int = 4,
) -> MemoryBreakdown:
    """The memory of one training step: fp32 weights, grads and optimizer state plus activations.

    Under AMP the weights, their gradients and the optimizer state stay fp32 (4 + 4 + 8 = 16 bytes
    per parameter with Adam); the activations saved for backward shrink, and autocast adds
    low-precision copies of the weights (``weight_copy_bytes``, 2 bytes per parameter).
    """
    names = ("num_params", "activation_bytes", "weight_copy_bytes", "param_bytes", "grad_bytes")
    amounts = (num_params, activation_bytes, weight_copy_bytes, param_bytes, grad_bytes)
    for name, value in zip(names, amounts, strict=True):
        _amount("training_memory", name, value)
    key = optimizer.lower() if isinstance(optimizer, str) else None
    if key not in OPTIMIZER_STATE_BYTES:
        raise ValueError(
            f"Unknown optimizer {optimizer!r}. Valid: {', '.join(OPTIMIZER_STATE_BYTES)}."
        )
    return MemoryBreakdown(
        parameters=num_params * param_bytes,
        gradients=num_params * grad_bytes,
        optimizer_state=num_params * OPTIMIZER_STATE_BYTES[key],
        activations=int(activation_bytes),
        weight_copies=int(weight_copy_bytes),
    )


def saved_tensor_bytes(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    *,
    recipe: AmpRecipe,
) -> SavedBytes:
    """Measure the bytes one forward pass on ``recipe``'s device, under its autocast, saves for
    backward: activations and weight copies.

    This is measured, not estimated: ``saved_tensors_hooks`` sees every tensor the forward
    keeps for the backward pass. Storages are counted once; the parameters' own storages are
    left out (``training_memory`` counts them). A saved low-precision tensor with a parameter's
    shape (or its transpose) is a copy of that weight made by autocast, and is counted apart.
    """
    return _saved_bytes(model, inputs.to(recipe.device), recipe.autocast())


def _saved_bytes(model: torch.nn.Module, inputs: torch.Tensor, autocast) -> SavedBytes:
    """``saved_tensor_bytes`` of a training forward of ``model`` run inside ``autocast``."""

    def storage_id(tensor: torch.Tensor) -> int:
        # The storage object's address (not its data pointer, which fake tensors lack).
        return tensor.untyped_storage()._cdata

    param_storages = {storage_id(p) for p in model.parameters()}
    # Linear layers may save the transposed copy, so match both orders of the dimensions.
    param_shapes = {tuple(p.shape) for p in model.parameters()}
    param_shapes |= {shape[::-1] for shape in param_shapes}
    activations: dict[int, int] = {}
    weight_copies: dict[int, int] = {}

    def pack(tensor: torch.Tensor):
        key = storage_id(tensor)
        if key in param_storages:
            return tensor
        is_copy = tensor.dtype != torch.float32 and tuple(tensor.shape) in param_shapes
        (weight_copies if is_copy else activations)[key] = tensor.untyped_storage().nbytes()
        return tensor

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with autocast:
            output = model(inputs)
    del output
    return SavedBytes(
        activations=sum(activations.values()), weight_copies=sum(weight_copies.values())
    )


def saved_tensor_bytes_without_data(
    meta_model: torch.nn.Module,
    input_shape: tuple[int, ...],
    *,
    recipe: AmpRecipe,
    input_dtype: torch.dtype = torch.float32,
    gpu: str = fake_cuda.DEFAULT_GPU,
) -> SavedBytes:
    """``saved_tensor_bytes`` of a forward pass on ``recipe``'s device under its autocast, run on
    tensors that have no data.

    ``meta_model`` is built under ``with torch.device("meta"):`` (no memory, no initialisation).
    The forward runs under torch's ``FakeTensorMode``: every tensor has its real shape, dtype and
    device but no values, so no arithmetic is done, while autocast and autograd decide exactly
    as they do on real tensors what to cast and what to keep. On the CPU the bytes are therefore
    those of a real CPU forward (tests/test_memory.py checks this), at a cost that grows with
    the number of ops, not with their FLOPs. On a CUDA device, which needs no GPU here, they are
    those of a forward on ``gpu``: CUDA's autocast lists and the attention kernel that GPU picks
    (``fake_cuda``). What a real step adds on top, the allocator's rounding, kernels' workspaces
    and the backward pass's own buffers, no count of saved tensors sees.
    """
    # A private module of torch, but the one its compiler and torch.export use for this job.
    from torch._subclasses.fake_tensor import FakeTensorMode

    device = recipe.device
    model = copy.deepcopy(meta_model)  # to_empty replaces parameters in place
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = model.to_empty(device=device)
        inputs = torch.empty(input_shape, dtype=input_dtype, device=device)
        if device.type != "cuda":
            return _saved_bytes(model, inputs, recipe.autocast())
        with fake_cuda.attention_kernels(gpu):
            return _saved_bytes(model, inputs, fake_cuda.cuda_autocast(recipe.precision))


def count_saved_bytes(
    build_model: Callable[[], torch.nn.Module],
    input_shape: tuple[int, ...],
    *,
    recipe: AmpRecipe,
    input_dtype: torch.dtype = torch.float32,
    gpu: str | None = None,
) -> SavedBytes:
    """What one training forward of ``build_model()`` saves for backward, counted on ``recipe``'s
    device under its autocast.

    On a CUDA device with a GPU present (and ``gpu`` None) the model runs a real forward on random
    inputs (``saved_tensor_bytes``, under CUDA's autocast lists). Otherwise ``build_model`` runs
    under ``with torch.device("meta"):`` and the forward is counted without data
    (``saved_tensor_bytes_without_data``): on the CPU exactly the bytes of a real CPU forward, in
    seconds even for a ViT-L/16 whose real forward under emulated bf16 would take minutes; on a
    CUDA device those of a forward on ``gpu`` (``fake_cuda.DEFAULT_GPU`` when None), on any
    machine. ``input_dtype`` is the images' dtype: bf16 for a model whose weights are bf16.
    """
    device = recipe.device
    if gpu is not None and device.type != "cuda":
        raise ValueError(f"gpu={gpu!r} names a CUDA GPU to count for: pass a recipe on 'cuda'")
    if device.type == "cuda" and gpu is None and torch.cuda.is_available():
        model = build_model().to(device)
        inputs = torch.randn(input_shape, device=device, dtype=input_dtype)
        return saved_tensor_bytes(model, inputs, recipe=recipe)
    with torch.device("meta"):  # shapes only: no memory, no initialisation
        meta_model = build_model()
    return saved_tensor_bytes_without_data(
        meta_model,
        input_shape,
        recipe=recipe,
        input_dtype=input_dtype,
        gpu=gpu or fake_cuda.DEFAULT_GPU,
    )


def gpus_needed(
    static_bytes: int,
    activation_bytes_per_sample: int,
    global_batch: int,
    gpu_bytes: int,
    usable_fraction: float = 0.9,
    *,
    sharded_bytes: int = 0,
) -> int | None:
    """Fewest data-parallel GPUs that fit the step, each holding its share of the global batch.

    Every GPU holds ``static_bytes`` in full, ``sharded_bytes`` divided among the GPUs (state
    that ZeRO-3 or FSDP shards) and the activations of its ``ceil(global_batch / gpus)`` samples,
    within ``usable_fraction`` of ``gpu_bytes``. Returns None when no count up to one sample per
    GPU fits.
    """
    for name, value in [
        ("static_bytes", static_bytes),
        ("activation_bytes_per_sample", activation_bytes_per_sample),
        ("sharded_bytes", sharded_bytes),
        ("gpu_bytes", gpu_bytes),
    ]:
        _amount("gpus_needed", name, value)
    _amount("gpus_needed", "global_batch", global_batch, whole=True, least=1)
    if not 0 < _amount("gpus_needed", "usable_fraction", usable_fraction) <= 1:
        raise ValueError(f"gpus_needed: usable_fraction must be in (0, 1], not {usable_fraction}.")
    usable = gpu_bytes * usable_fraction
    for gpus in range(1, global_batch + 1):
        per_gpu_batch = -(-global_batch // gpus)
        used = static_bytes + sharded_bytes / gpus + activation_bytes_per_sample * per_gpu_batch
        if used <= usable:
            return gpus
    return None
