"""Activation checkpointing helpers: same gradients, recompute in the forward's autocast dtype,
and a checkpointed ViT that keeps only its blocks' inputs for backward."""

import pytest
import torch

import amp_course as ac
from amp_course import checkpointing


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(0)
    return ac.models.build_vit("tiny").encoder.layers[0]


def _grads(module, tokens):
    module.zero_grad()
    tokens = tokens.detach().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = module(tokens)
    out.float().square().mean().backward()
    return [tokens.grad, *(p.grad for p in module.parameters())]


def test_checkpointed_block_gives_the_plain_gradients(block):
    tokens = torch.randn(2, 17, 64)
    plain = [g.clone() for g in _grads(block, tokens)]
    wrapped = _grads(checkpointing.Checkpointed(block), tokens)
    for a, b in zip(plain, wrapped, strict=True):
        torch.testing.assert_close(a, b)


def test_recompute_runs_in_the_forward_autocast_dtype(block):
    tokens = torch.randn(2, 17, 64, requires_grad=True)
    recipe = ac.recipe.AmpRecipe("cpu", torch.bfloat16)
    _, plain_backward = checkpointing.trace_step(block, tokens, recipe=recipe)
    forward, backward = checkpointing.trace_step(
        checkpointing.Checkpointed(block), tokens, recipe=recipe
    )
    recomputed = checkpointing.recomputed_ops(backward)
    assert not checkpointing.recomputed_ops(plain_backward)
    assert {row.op for row in recomputed} >= {"addmm", "native_layer_norm"}
    assert {row.output_dtype for row in recomputed if row.op == "addmm"} == {torch.bfloat16}
    assert all(
        (r.op, r.output_dtype) in {(f.op, f.output_dtype) for f in forward} for r in recomputed
    )


def test_checkpoint_blocks_wraps_every_block_once():
    model = ac.models.build_vit("tiny")
    checkpointing.checkpoint_blocks(checkpointing.checkpoint_blocks(model))
    blocks = list(checkpointing.encoder_blocks(model))
    assert all(isinstance(b, checkpointing.Checkpointed) for b in blocks)
    assert not any(isinstance(b.block, checkpointing.Checkpointed) for b in blocks)
    with pytest.raises(TypeError, match="VisionTransformer"):
        checkpointing.encoder_blocks(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_checkpointing_keeps_only_block_inputs(dtype):
    preset = ac.models.VIT_PRESETS["tiny"]
    shape = (2, preset.in_channels, preset.image_size, preset.image_size)

    def saved(num_layers, checkpointed):
        def build():
            model = ac.models.build_vit("tiny", num_layers=num_layers)
            return checkpointing.checkpoint_blocks(model) if checkpointed else model

        counted = ac.memory.count_saved_bytes(
            build, shape, recipe=ac.recipe.AmpRecipe("cpu", dtype)
        )
        return counted.activations

    outside_blocks = saved(0, False)
    plain = saved(preset.num_layers, False) - outside_blocks
    kept = saved(preset.num_layers, True) - outside_blocks
    tokens = (preset.image_size // preset.patch_size) ** 2 + 1
    # Each block keeps one fp32 (tokens x width) input per image: the residual stream stays fp32.
    assert kept == preset.num_layers * shape[0] * tokens * preset.hidden_dim * 4
    assert plain > 5 * kept
