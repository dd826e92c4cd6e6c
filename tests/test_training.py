import copy

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from amp_course import training
from amp_course.recipe import AmpRecipe

FP32 = AmpRecipe("cpu")
FP16 = AmpRecipe("cpu", torch.float16)


def _setup(seed=0, n=64, batch=16):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    x, y = torch.randn(n, 8), torch.randint(0, 3, (n,))
    loader = DataLoader(TensorDataset(x, y), batch_size=batch)
    return model, loader


def test_fp32_epoch_matches_a_plain_loop():
    model, loader = _setup()
    reference = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    result = training.train_epoch(
        model, loader, opt, nn.functional.cross_entropy, recipe=FP32, progress=False
    )
    for x, y in loader:
        ref_opt.zero_grad()
        nn.functional.cross_entropy(reference(x), y).backward()
        ref_opt.step()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q)
    assert result.optimizer_steps == 4 and len(result.losses) == 4


def test_bf16_epoch_runs_under_autocast_and_stays_close_to_fp32():
    model, loader = _setup()
    amp_model = copy.deepcopy(model)
    start = [p.detach().clone() for p in model.parameters()]
    seen = []
    amp_model[0].register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    for m, dtype in [(model, None), (amp_model, torch.bfloat16)]:
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        training.train_epoch(
            m,
            loader,
            opt,
            nn.functional.cross_entropy,
            recipe=AmpRecipe("cpu", dtype),
            progress=False,
        )
    assert seen and all(d is torch.bfloat16 for d in seen)
    assert all(p.dtype is torch.float32 for p in amp_model.parameters())  # master weights stay fp32

    # The epoch moved the weights, and bf16's rounding moved them elsewhere by a small part of that
    # (2.4% here): an epoch that did not train under autocast is as far from fp32's as fp32 moved.
    def distance(these, those):
        return torch.cat([(a - b).flatten() for a, b in zip(these, those, strict=True)]).norm()

    with torch.no_grad():
        moved = distance(list(model.parameters()), start)
        gap = distance(list(model.parameters()), list(amp_model.parameters()))
    assert moved > 0.05 and gap < 0.1 * moved, (float(moved), float(gap))


# 4 batches of 16 with accumulation_steps=4: one step over all 64 samples. 6 batches: groups of
# 4 and 2 batches, so two steps; the short last group divided by 4 instead of 2 would get half
# the gradient of the large batch it stands for.
@pytest.mark.parametrize("num_samples, groups", [(64, [(0, 64)]), (96, [(0, 64), (64, 96)])])
def test_each_accumulation_group_equals_its_large_batch(num_samples, groups):
    model, loader = _setup(n=num_samples, batch=16)
    big = copy.deepcopy(model)
    result = training.train_epoch(
        model,
        loader,
        torch.optim.SGD(model.parameters(), lr=0.1),
        nn.functional.cross_entropy,
        recipe=FP32,
        accumulation_steps=4,
        progress=False,
    )
    assert result.optimizer_steps == len(groups) and len(result.losses) == num_samples // 16
    big_opt = torch.optim.SGD(big.parameters(), lr=0.1)
    x, y = loader.dataset.tensors
    for start, stop in groups:
        big_opt.zero_grad()
        nn.functional.cross_entropy(big(x[start:stop]), y[start:stop]).backward()
        big_opt.step()
    for p, q in zip(model.parameters(), big.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5)


def test_clipping_sees_unscaled_norms_with_fp16_scaler():
    model, loader = _setup()
    fp32_model = copy.deepcopy(model)
    scaler = FP16.scaler(init_scale=2.0**10)
    assert scaler.is_enabled()
    res = training.train_epoch(
        model,
        loader,
        torch.optim.SGD(model.parameters(), lr=0.0),
        nn.functional.cross_entropy,
        recipe=FP32,
        scaler=scaler,
        max_grad_norm=1e9,
        max_batches=1,
        progress=False,
    )
    ref = training.train_epoch(
        fp32_model,
        loader,
        torch.optim.SGD(fp32_model.parameters(), lr=0.0),
        nn.functional.cross_entropy,
        recipe=FP32,
        max_grad_norm=1e9,
        max_batches=1,
        progress=False,
    )
    # With clipping after unscale_, the norm is the true one, not 1024x larger.
    assert res.grad_norms[0] == pytest.approx(ref.grad_norms[0], rel=0.05)


def test_skipped_step_is_counted_and_weights_untouched():
    model, loader = _setup()
    before = [p.detach().clone() for p in model.parameters()]
    scaler = FP16.scaler()

    def exploding_loss(logits, targets):
        return nn.functional.cross_entropy(logits, targets) * float("inf")

    res = training.train_epoch(
        model,
        loader,
        torch.optim.SGD(model.parameters(), lr=0.1),
        exploding_loss,
        recipe=FP16,
        scaler=scaler,
        max_batches=1,
        progress=False,
    )
    assert res.skipped_steps == 1
    for p, q in zip(model.parameters(), before, strict=True):
        assert torch.equal(p, q)


def test_scaler_disabled_for_bf16_and_fp32():
    assert not AmpRecipe("cpu", torch.bfloat16).scaler().is_enabled()
    assert not AmpRecipe("cpu", None).scaler().is_enabled()


def test_evaluate_counts_every_sample_once():
    # The model's logits are its inputs, so it predicts argmax(x); 10 of the 50 labels disagree.
    torch.manual_seed(0)
    x = torch.randn(50, 3)
    y = x.argmax(dim=1)
    y[:10] = (y[:10] + 1) % 3
    model = nn.Linear(3, 3)
    with torch.no_grad():
        model.weight.copy_(torch.eye(3))
        model.bias.zero_()
    loader = DataLoader(TensorDataset(x, y), batch_size=16)  # 16, 16, 16 and a last batch of 2
    loss, accuracy = training.evaluate(model, loader, recipe=FP32)
    assert accuracy == 40 / 50
    # The mean over samples (a mean over batches would weigh the last 2 samples like 16).
    assert loss == pytest.approx(nn.functional.cross_entropy(x, y).item(), rel=1e-6)
    loss_bf16, accuracy_bf16 = training.evaluate(
        model, loader, recipe=AmpRecipe("cpu", torch.bfloat16)
    )
    assert accuracy_bf16 == 40 / 50 and loss_bf16 == pytest.approx(loss, rel=0.02)
    assert model.training  # evaluate puts the model back in training mode


def test_bad_accumulation_steps():
    model, loader = _setup()
    with pytest.raises(ValueError, match="accumulation_steps"):
        training.train_epoch(
            model,
            loader,
            torch.optim.SGD(model.parameters(), lr=0.1),
            nn.functional.cross_entropy,
            recipe=FP32,
            accumulation_steps=0,
        )
