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
    assert model(torch.randn(2, 1, 28, 28)).shape == (2, 10)


def test_vit_presets_have_published_sizes():
    # torchvision's vit_b_16 has 86.6 M parameters and vit_l_16 304.3 M.
    assert models.count_parameters(models.build_vit("b16")) == pytest.approx(86.6e6, rel=2e-3)
    assert models.count_parameters(models.build_vit("l16")) == pytest.approx(304.3e6, rel=2e-3)


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
