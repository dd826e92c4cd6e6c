"""Models: the mixed-precision MNIST tutorial's CNN and Vision Transformer presets built on
torchvision, optionally with a leaner attention path (``build_vit(..., lean=True)``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# The scenario's CNN configuration (from the mixed-precision MNIST tutorial this configuration
# comes from): one row per conv block, [in_channels, out_channels, kernel_size, stride, padding].
# 14 blocks, 1024 channels out.
MNIST_CNN_CONFIG = (
    (1, 32, 3, 1, 1),
    (32, 64, 3, 1, 1),
    (64, 64, 2, 2, 0),
    (64, 128, 3, 1, 1),
    (128, 128, 3, 1, 1),
    (128, 128, 3, 1, 1),
    (128, 128, 2, 2, 0),
    (128, 256, 3, 1, 1),
    (256, 256, 2, 1, 0),
    (256, 512, 3, 1, 1),
    (512, 512, 3, 1, 1),
    (512, 512, 3, 1, 1),
    (512, 512, 2, 2, 0),
    (512, 1024, 3, 1, 1),
)


class ConvBlock(nn.Sequential):
    """Conv, batch norm, ReLU: the scenario's BasicBlock."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__(
            nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )


class MnistCNN(nn.Module):
    """The MNIST tutorial's 14-block CNN with a 1024-wide head; far bigger than MNIST needs, on
    purpose."""

    def __init__(self, config=MNIST_CNN_CONFIG, num_classes: int = 10, width_divisor: int = 1):
        super().__init__()
        # width_divisor shrinks every channel count for CPU smoke runs; 1 is the text's model.
        config = [
            (max(1, cin // width_divisor) if i else cin, max(1, cout // width_divisor), k, s, p)
            for i, (cin, cout, k, s, p) in enumerate(config)
        ]
        self.features = nn.Sequential(*(ConvBlock(*row) for row in config))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        width = config[-1][1]
        hidden = max(1, 1000 // width_divisor)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(width, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.avgpool(self.features(x)))


@dataclass(frozen=True)
class ViTPreset:
    """The shape of a torchvision VisionTransformer."""

    image_size: int
    patch_size: int
    num_layers: int
    num_heads: int
    hidden_dim: int
    mlp_dim: int
    in_channels: int = 3


VIT_PRESETS = {
    # A ViT small enough to train on 28x28 MNIST digits on a CPU in seconds.
    "tiny": ViTPreset(
        image_size=28,
        patch_size=7,
        num_layers=4,
        num_heads=4,
        hidden_dim=64,
        mlp_dim=128,
        in_channels=1,
    ),
    # ViT-B/16 and ViT-L/16 as in Dosovitskiy et al. and torchvision's vit_b_16 / vit_l_16.
    "b16": ViTPreset(
        image_size=224, patch_size=16, num_layers=12, num_heads=12, hidden_dim=768, mlp_dim=3072
    ),
    "l16": ViTPreset(
        image_size=224, patch_size=16, num_layers=24, num_heads=16, hidden_dim=1024, mlp_dim=4096
    ),
}


class PackedSelfAttention(nn.MultiheadAttention):
    """torchvision's ``nn.MultiheadAttention`` (batch first, one packed in-projection) for
    self-attention, computed as timm's ``Attention`` computes it.

    One ``addmm`` makes q, k and v for every token; views split the heads and merge them after
    ``F.scaled_dot_product_attention``, and the backward joins the three gradients with one
    ``stack`` already in the in-projection's layout. ``F.multi_head_attention_forward`` works on
    sequence-first tensors instead, which costs copies both ways (lesson 10 counts them). Still a
    ``MultiheadAttention`` with the same parameters under the same names: code that reads them,
    and state dicts, work with either.
    """

    def __init__(self, attention: nn.MultiheadAttention):
        packed = attention._qkv_same_embed_dim and attention.in_proj_bias is not None
        if not attention.batch_first or not packed:
            raise ValueError("PackedSelfAttention takes a batch-first, packed MultiheadAttention.")
        if attention.bias_k is not None or attention.add_zero_attn:
            raise ValueError("PackedSelfAttention takes no bias_k/bias_v and no add_zero_attn.")
        # Built on the meta device (nothing allocated), then given the attention's parameters.
        width, heads = attention.embed_dim, attention.num_heads
        super().__init__(width, heads, attention.dropout, batch_first=True, device="meta")
        self.in_proj_weight = attention.in_proj_weight
        self.in_proj_bias = attention.in_proj_bias
        self.out_proj = attention.out_proj

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        """``nn.MultiheadAttention``'s call, for self-attention without masks or weights."""
        if key is not query or value is not query or need_weights:
            raise ValueError("PackedSelfAttention is self-attention: pass x, x, x, no weights.")
        if key_padding_mask is not None or attn_mask is not None or is_causal:
            raise ValueError("PackedSelfAttention takes no masks.")
        batch, tokens, width = query.shape
        packed = F.linear(query, self.in_proj_weight, self.in_proj_bias)
        q, k, v = (
            part.transpose(1, 2)  # (batch, heads, tokens, head size), a view
            for part in packed.view(batch, tokens, 3, self.num_heads, -1).unbind(2)
        )
        dropout = self.dropout if self.training else 0.0
        heads = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        return self.out_proj(heads.transpose(1, 2).reshape(batch, tokens, width)), None


def lean_attention(model: nn.Module) -> nn.Module:
    """``model`` with every ``nn.MultiheadAttention`` replaced, in place, by a
    ``PackedSelfAttention`` holding the same parameters."""
    for module in list(model.modules()):
        for name, child in module.named_children():
            if type(child) is nn.MultiheadAttention:
                setattr(module, name, PackedSelfAttention(child))
    return model


def build_vit(
    preset: str = "tiny", num_classes: int | None = None, lean: bool = False, **overrides
) -> nn.Module:
    """A torchvision VisionTransformer from a preset name; ``overrides`` change single fields.

    ``lean=True``: the same model, parameters and outputs, its attention computed as timm's is
    (``PackedSelfAttention``: fewer operators and bytes per step; lesson 10 accounts both).
    """
    # Imported here: torchvision takes seconds to import, and most helpers never need it.
    from torchvision.models.vision_transformer import VisionTransformer

    if preset not in VIT_PRESETS:
        raise ValueError(f"Unknown ViT preset {preset!r}. Valid choices: {', '.join(VIT_PRESETS)}.")
    fields = {**VIT_PRESETS[preset].__dict__, **overrides}
    in_channels = fields.pop("in_channels")
    if num_classes is None:
        num_classes = 10 if preset == "tiny" else 1000
    model = VisionTransformer(num_classes=num_classes, **fields)
    if in_channels != 3:
        # torchvision's patch embedding expects RGB; MNIST digits have one channel.
        model.conv_proj = nn.Conv2d(
            in_channels, fields["hidden_dim"], fields["patch_size"], fields["patch_size"]
        )
    return lean_attention(model) if lean else model


def build_model(name: str, **kwargs) -> nn.Module:
    """A course model by name: ``"mnist_cnn"`` or ``"vit_tiny"``, ``"vit_b16"``, ``"vit_l16"``."""
    if name == "mnist_cnn":
        return MnistCNN(**kwargs)
    if name.startswith("vit_"):
        return build_vit(name.removeprefix("vit_"), **kwargs)
    valid = ["mnist_cnn", *(f"vit_{p}" for p in VIT_PRESETS)]
    raise ValueError(f"Unknown model {name!r}. Valid choices: {', '.join(valid)}.")


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def example_input(model: nn.Module, batch_size: int = 1, device=None) -> torch.Tensor:
    """A random batch shaped for ``model``: MNIST digits for the CNN, images for a ViT."""
    if hasattr(model, "conv_proj") and hasattr(model, "image_size"):  # a torchvision ViT
        channels = model.conv_proj.in_channels
        size = model.image_size
    else:
        channels, size = 1, 28
    return torch.randn(batch_size, channels, size, size, device=device)


class UpscaledViT(nn.Module):
    """A torchvision ViT on MNIST digits upscaled on the device, 28 px to the ViT's image size.

    The capstone's workload. A ViT-B/16 at 64 px cuts a digit into 4x4 patches of 16 px, each
    holding 7x7 of its pixels: 17 tokens with the class token. At batch 512 its matmuls have
    512 x 17 = 8,704 token rows, of the order of the scenario's ViT-B/16 at 224 px and batch 64
    (64 x 197 = 12,608): large enough for tensor cores to pay. ``overrides`` change single fields
    of the preset (the capstone trains ``num_layers=6``: the same layers, half of them).
    """

    def __init__(self, preset: str = "b16", image_size: int = 64, **overrides):
        super().__init__()
        self.vit = build_vit(
            preset, num_classes=10, image_size=image_size, in_channels=1, **overrides
        )
        self.image_size = image_size
        # Bilinear resizing of a 1-channel digit; at 28 px there is nothing to resize.
        self.upscale = (
            nn.Identity()
            if image_size == 28
            else nn.Upsample(size=(image_size, image_size), mode="bilinear", align_corners=False)
        )

    def forward(self, digits: torch.Tensor) -> torch.Tensor:
        return self.vit(self.upscale(digits))
