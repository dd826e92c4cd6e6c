"""timm's ViT, shaped like a course preset, for timing the course's step against a widely used one.

timm is optional (``pip install -e ".[bench]"``); ``unavailable()`` says why it cannot run here.
"""

from __future__ import annotations

import importlib.util

from torch import nn

from ..models import VIT_PRESETS

TIMM_MODEL = "vit_base_patch16_224"  # timm's ViT-B/16; every shape below overrides its defaults
INSTALL = 'pip install -e ".[bench]"'


def unavailable() -> str | None:
    """Why timm cannot be used here, or None when it can."""
    if importlib.util.find_spec("timm") is None:
        return f"timm is not installed ({INSTALL})"
    return None


def build_timm_vit(preset: str = "b16", num_classes: int = 1000, **overrides) -> nn.Module:
    """timm's VisionTransformer with the shape of ``ac.models.build_vit(preset, **overrides)``.

    No pretrained weights (nothing is downloaded). Both models have a class token, pre-norm
    blocks with biases everywhere, GELU MLPs and no dropout, so they have the same parameters
    and FLOPs (tests/test_ladder.py counts both).
    """
    import timm

    fields = {**VIT_PRESETS[preset].__dict__, **overrides}
    return timm.create_model(
        TIMM_MODEL,
        pretrained=False,
        num_classes=num_classes,
        img_size=fields["image_size"],
        patch_size=fields["patch_size"],
        in_chans=fields["in_channels"],
        depth=fields["num_layers"],
        num_heads=fields["num_heads"],
        embed_dim=fields["hidden_dim"],
        mlp_ratio=fields["mlp_dim"] / fields["hidden_dim"],
    )
