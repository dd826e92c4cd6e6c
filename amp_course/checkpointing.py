"""Activation checkpointing: keep a block's input only and recompute its activations in backward."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .autocast_trace import ATEN_TO_DOCUMENTED, TracedOp, _DtypeRecorder
from .memory import saved_tensor_bytes
from .models import VIT_PRESETS, build_vit, example_input
from .training import autocast

# Forward ops that no backward formula calls (a Linear's backward uses mm, layer norm has
# native_layer_norm_backward, and so on): when one runs during backward, a checkpoint is
# recomputing the forward.
FORWARD_ONLY_OPS = frozenset(
    {"addmm", "native_layer_norm", "gelu", "_softmax", "convolution"}
    | {op for op, name in ATEN_TO_DOCUMENTED.items() if name == "scaled_dot_product_attention"}
)


class Checkpointed(nn.Module):
    """``block`` under non-reentrant activation checkpointing (``use_reentrant=False``).

    The forward keeps only the block's inputs; backward runs the block again to rebuild its
    activations, in the autocast state the forward had (torch.utils.checkpoint records it).
    """

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, *args):
        return checkpoint(self.block, *args, use_reentrant=False)


def encoder_blocks(model: nn.Module) -> nn.Sequential:
    """The encoder blocks of a torchvision VisionTransformer."""
    if not hasattr(model, "encoder") or not hasattr(model.encoder, "layers"):
        raise TypeError(f"expected a torchvision VisionTransformer, got {type(model).__name__}")
    return model.encoder.layers


def checkpoint_blocks(model: nn.Module) -> nn.Module:
    """Wrap every encoder block of a torchvision ViT in ``Checkpointed``, in place; returns it."""
    blocks = encoder_blocks(model)
    for name, block in list(blocks.named_children()):
        if not isinstance(block, Checkpointed):
            setattr(blocks, name, Checkpointed(block))
    return model


def trace_step(module, inputs, *, device, dtype) -> tuple[list[TracedOp], list[TracedOp]]:
    """Aten ops of a forward under autocast and of the backward that follows (outside autocast).

    The backward runs outside autocast, as in a training loop, so any op it runs in the autocast
    dtype got that dtype from the forward: from its saved tensors, or from a checkpoint that
    replays the forward's autocast state while recomputing.
    """
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    forward = _DtypeRecorder()
    with forward, autocast(device, dtype):
        output = module(*inputs)
    backward = _DtypeRecorder()
    with backward:
        output.float().square().mean().backward()
    return forward.rows, backward.rows


def recomputed_ops(backward_rows: list[TracedOp]) -> list[TracedOp]:
    """The rows of a backward trace that recompute forward ops (empty without checkpointing)."""
    return [row for row in backward_rows if row.op in FORWARD_ONLY_OPS]


@dataclass(frozen=True)
class ActivationEstimate:
    """Bytes a ViT keeps for backward per image: a fixed part plus a part per encoder block."""

    fixed: float  # patch embedding, class token, final norm and head
    per_block: float
    num_blocks: int
    weight_copies: int  # low-precision weight copies saved for backward (0 in fp32)

    @property
    def per_image(self) -> float:
        return self.fixed + self.per_block * self.num_blocks


def vit_activation_bytes(
    preset: str,
    *,
    device,
    autocast_dtype,
    checkpointed: bool = False,
    probe: bool = False,
    batch_size: int = 1,
) -> ActivationEstimate:
    """Measure what a ViT preset saves for backward per image, with or without checkpointing.

    ``probe=False`` measures the full model and the model without encoder blocks (the fixed
    part). ``probe=True`` measures one block of the preset's real width and sequence length
    instead of all of them: every block has the same shapes and saves the same bytes, so this
    gives the full model's figure at a fraction of the compute (CPU smoke runs use it).
    """
    full = VIT_PRESETS[preset].num_layers
    measured = {}
    for depth in (0, 1 if probe else full):
        model = build_vit(preset, num_layers=depth).to(device)
        if checkpointed:
            checkpoint_blocks(model)
        images = example_input(model, batch_size, device=device)
        saved = saved_tensor_bytes(model, images, device=device, autocast_dtype=autocast_dtype)
        measured[depth] = (saved.activations / batch_size, saved.weight_copies)
    (fixed, fixed_copies), (depth, (total, copies)) = measured[0], list(measured.items())[1]
    per_block = (total - fixed) / depth
    per_block_copies = (copies - fixed_copies) / depth
    return ActivationEstimate(fixed, per_block, full, round(fixed_copies + per_block_copies * full))
