import pytest
import torch
from torch import nn

from amp_course import models


def test_mnist_cnn_matches_the_scenario_configuration():
    model = models.MnistCNN()
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 14
    assert [
        (c.in_channels, c.out_channels, c.kernel_size[0], c.stride[0], c.padding[0]) for c in convs
    ] == [tuple(r) for r in models.MNIST_CNN_CONFIG]
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert [(lin.in_features, lin.out_features) for lin in linears] == [
        (1024, 1000),
        (1000, 1000),
        (1000, 10),
    ]
    # The tutorial's strides and paddings take a 28 x 28 digit to 3 x 3 before the pooling
    # (28, then 14, 7, 6 and 3 at its four 2 x 2 convolutions), which the pooling would hide.
    digits = torch.randn(2, 1, 28, 28)
    assert model.features(digits).shape == (2, 1024, 3, 3)
    assert model(digits).shape == (2, 10)


def test_vit_presets_have_published_sizes():
    # torchvision's vit_b_16 has 86.6 M parameters and vit_l_16 304.3 M. Built on the meta device
    # (as lesson 07 counts them): the same parameters, shapes only, no weights initialised.
    with torch.device("meta"):
        b16, l16 = models.build_vit("b16"), models.build_vit("l16")
    assert models.count_parameters(b16) == pytest.approx(86.6e6, rel=2e-3)
    assert models.count_parameters(l16) == pytest.approx(304.3e6, rel=2e-3)


def test_tiny_vit_takes_mnist_digits():
    model = models.build_vit("tiny")
    assert model(torch.randn(3, 1, 28, 28)).shape == (3, 10)


def test_unknown_names_list_choices():
    with pytest.raises(ValueError, match="tiny"):
        models.build_vit("huge")
    with pytest.raises(ValueError, match="mnist_cnn"):
        models.build_model("resnet")


def test_example_input_shapes():
    assert models.example_input(models.build_vit("tiny"), 2).shape == (2, 1, 28, 28)
    assert models.example_input(models.MnistCNN(width_divisor=8), 2).shape == (2, 1, 28, 28)


def _output_and_gradients(model, images, labels):
    model.zero_grad(set_to_none=True)
    logits = model(images)
    nn.functional.cross_entropy(logits, labels).backward()
    return logits.detach(), {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize(
    "preset, overrides",
    [("tiny", {}), ("b16", dict(image_size=64, num_layers=2, hidden_dim=96, mlp_dim=192))],
)
def test_the_lean_vit_computes_torchvisions_outputs_and_gradients(preset, overrides):
    torch.manual_seed(0)
    course = models.build_vit(preset, **overrides)
    lean = models.build_vit(preset, lean=True, **overrides)
    lean.load_state_dict(course.state_dict())  # the same names: torchvision's weights load
    assert [n for n, _ in lean.named_parameters()] == [n for n, _ in course.named_parameters()]
    assert models.count_parameters(lean) == models.count_parameters(course)
    images = models.example_input(course, 3)
    labels = torch.tensor([1, 0, 7])
    logits, gradients = _output_and_gradients(course, images, labels)
    lean_logits, lean_gradients = _output_and_gradients(lean, images, labels)
    torch.testing.assert_close(lean_logits, logits, rtol=1e-5, atol=1e-5)
    for name, gradient in gradients.items():
        torch.testing.assert_close(lean_gradients[name], gradient, rtol=1e-4, atol=1e-6)


def test_the_lean_vit_replaces_every_multihead_attention():
    lean = models.build_vit("tiny", lean=True)
    assert not any(type(m) is nn.MultiheadAttention for m in lean.modules())
    assert sum(isinstance(m, models.PackedSelfAttention) for m in lean.modules()) == 4
    # Still MultiheadAttention: code that reads its parameters (lesson 06's checks) works as is.
    attention = lean.encoder.layers[0].self_attention
    assert isinstance(attention, nn.MultiheadAttention) and attention.embed_dim == 64


def test_packed_self_attention_refuses_what_it_does_not_compute():
    attention = models.PackedSelfAttention(nn.MultiheadAttention(8, 2, batch_first=True))
    x = torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match="self-attention"):
        attention(x, x.clone(), x, need_weights=False)
    with pytest.raises(ValueError, match="masks"):
        attention(x, x, x, need_weights=False, attn_mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="batch-first"):
        models.PackedSelfAttention(nn.MultiheadAttention(8, 2))
