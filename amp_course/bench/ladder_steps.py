"""Building the ladder's steps: one model per kind (the course's ViT or timm's), one compiled
wrapper per compile mode and attention kernel, one AdamW per fused flag, shared by the rungs."""

from __future__ import annotations

import itertools

import torch

from .. import data as _data
from .. import models
from ..attention import sdpa_context
from ..precision import AmpRecipe
from .timm_vit import build_timm_vit
from .workloads import clear_state, train_step


class LadderModels:
    """One model per kind, one compiled wrapper per compile mode (and attention kernel), one
    AdamW per fused flag: ``step(rung)`` returns the step of a ``ladder.Rung``."""

    def __init__(self, config, device: torch.device):
        self.config, self.device = config, device
        self.models: dict[str, torch.nn.Module] = {}
        self.compiled: dict[tuple, torch.nn.Module] = {}
        self.optimizers: dict[tuple[str, bool], torch.optim.Optimizer] = {}

    def build(self, kind: str) -> torch.nn.Module:
        overrides = self.config.vit_overrides
        if kind == "timm":
            return build_timm_vit("b16", **overrides)
        return models.build_vit("b16", **overrides)

    def step(self, rung):
        if rung.model not in self.models:
            self.models[rung.model] = self.build(rung.model).to(self.device)
        model = self.models[rung.model]
        if rung.compile:
            key = (rung.model, rung.compile, rung.attention)
            if key not in self.compiled:
                # Static shapes: a rung at another batch compiles its own graph, never a
                # dynamic-shape one.
                self.compiled[key] = torch.compile(model, mode=rung.compile, dynamic=False)
            model_fn = self.compiled[key]
        else:
            model_fn = model
        key = (rung.model, rung.fused)
        if key not in self.optimizers:
            self.optimizers[key] = torch.optim.AdamW(
                model.parameters(), lr=1e-4, fused=rung.fused or None
            )
        size = model_image_size(model)
        images, labels = _data.synthetic_images(rung.batch, image_size=size, device=self.device)
        recipe = AmpRecipe(self.device, self.config.precision)
        batches = itertools.repeat((images, labels))
        inner = train_step(model_fn, self.optimizers[key], recipe, batches)

        def step():
            with sdpa_context(rung.attention):
                inner()

        return step

    def clear_state(self) -> None:
        clear_state(self.optimizers.values(), self.models.values(), self.device)


def model_image_size(model: torch.nn.Module) -> int:
    """The input side of a torchvision or timm ViT."""
    if hasattr(model, "image_size"):
        return model.image_size
    return model.patch_embed.img_size[0]
