"""Activation checkpointing: keep a block's input only and recompute its activations in backward."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .autocast_trace import ATEN_TO_DOCUMENTED, DtypeRecorder, TracedOp
from .recipe import AmpRecipe

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


def trace_step(module, inputs, *, recipe: AmpRecipe) -> tuple[list[TracedOp], list[TracedOp]]:
    """Aten ops of a forward under ``recipe``'s autocast and of the backward that follows (outside
    autocast).

    The backward runs outside autocast, as in a training loop, so any op it runs in the autocast
    dtype got that dtype from the forward: from its saved tensors, or from a checkpoint that
    replays the forward's autocast state while recomputing.
    """
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    forward = DtypeRecorder()
    with forward, recipe.autocast():
        output = module(*inputs)
    backward = DtypeRecorder()
    with backward:
        output.float().square().mean().backward()
    return forward.rows, backward.rows


def recomputed_ops(backward_rows: list[TracedOp]) -> list[TracedOp]:
    """The rows of a backward trace that only a forward runs (empty without checkpointing): the
    recompute's norms, attention, biased matmuls and activations. Its other ops (an ``mm`` whose
    bias is added apart, casts, views) are ops a backward runs too: a trace cannot tell them
    apart."""
    return [row for row in backward_rows if row.op in FORWARD_ONLY_OPS]
