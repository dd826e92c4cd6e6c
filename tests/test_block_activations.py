"""The block account of a ViT's activations (lessons 00 and 09): what it keeps plain and with every
block checkpointed agrees with counted forwards, and its peak adds one block's recompute."""

import pytest
import torch

from amp_course import checkpointing, memory, models
from amp_course.recipe import AmpRecipe

TINY = models.VIT_PRESETS["tiny"]
TOKENS = (TINY.image_size // TINY.patch_size) ** 2 + 1


def _count(num_layers, dtype, checkpointed=False, input_dtype=torch.float32):
    def build():
        model = models.build_vit("tiny", num_layers=num_layers)
        if input_dtype != torch.float32:
            model = model.to(input_dtype)
        return checkpointing.checkpoint_blocks(model) if checkpointed else model

    shape = (2, TINY.in_channels, TINY.image_size, TINY.image_size)
    return memory.count_saved_bytes(
        build, shape, recipe=AmpRecipe("cpu", dtype), input_dtype=input_dtype
    )


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_checkpointed_blocks_keep_exactly_their_fp32_inputs(dtype):
    # An independent oracle: the counted forward of a checkpointed model, against the account
    # built from the plain model's counts and the block input's shape (fp32: the residual stream).
    stack = memory.BlockActivations(
        whole=_count(3, dtype).activations,
        outside=_count(0, dtype).activations,
        num_blocks=3,
        block_input=2 * TOKENS * TINY.hidden_dim * 4,
    )
    assert stack.kept(checkpointed=True) == _count(3, dtype, checkpointed=True).activations
    assert stack.kept(checkpointed=False) == stack.whole == stack.peak(checkpointed=False)


def test_peak_adds_one_block_recompute_less_its_input():
    stack = memory.BlockActivations(whole=1000, outside=40, num_blocks=24, block_input=10)
    assert stack.per_block == 40
    assert stack.kept(True) == 40 + 24 * 10
    assert stack.peak(True) == stack.kept(True) + 40 - 10
    assert stack.peak(True) < stack.peak(False)


def test_pure_bf16_keeps_fewer_bytes_than_autocast():
    # What lesson 09 prints for one ViT-L block: bf16 weights store the residual stream in bf16.
    amp = _count(1, torch.bfloat16).activations - _count(0, torch.bfloat16).activations
    pure = (
        _count(1, None, input_dtype=torch.bfloat16).activations
        - _count(0, None, input_dtype=torch.bfloat16).activations
    )
    assert 0.5 < pure / amp < 1.0
