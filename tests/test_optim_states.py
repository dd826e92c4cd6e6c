"""ac.optim_states: AdamW with fp32 moments is torch.optim.AdamW step for step; bf16 and 8-bit
moments are stored as they claim; the byte counts read what the optimizer holds."""

import pytest
import torch
import torch.nn.functional as F

from amp_course import optim_states


def _train(make_optimizer, steps=12, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 3))
    optimizer = make_optimizer(model.parameters())
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(16, 64, generator=generator)
        y = torch.randint(0, 3, (16,), generator=generator)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model, optimizer


def test_fp32_state_is_torchs_adamw_step_for_step():
    kwargs = dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)
    ours, _ = _train(lambda p: optim_states.AdamW(p, **kwargs))
    torchs, _ = _train(lambda p: torch.optim.AdamW(p, foreach=False, **kwargs))
    for a, b in zip(ours.parameters(), torchs.parameters(), strict=True):
        assert torch.equal(a, b)


def test_each_state_precision_stores_what_it_says():
    model, optimizer = _train(lambda p: optim_states.AdamW(p, state="bf16"))
    assert {s["exp_avg"].dtype for s in optimizer.state.values()} == {torch.bfloat16}
    model, optimizer = _train(
        lambda p: optim_states.AdamW(p, state="8bit", min_quantized_size=4096)
    )
    large, small = model[0].weight, model[2].weight  # 8192 values; 384 values
    state = optimizer.state[large]
    assert (
        state["exp_avg_codes"].dtype == torch.uint8 and state["exp_avg_codes"].shape == large.shape
    )
    assert state["exp_avg_absmax"].shape == (8192 // 256,)
    assert optimizer.state[small]["exp_avg"].dtype == torch.float32  # under 4096 values: fp32
    with pytest.raises(ValueError, match="Unknown state precision"):
        optim_states.AdamW(model.parameters(), state="fp8")


def test_8bit_training_follows_fp32_closely():
    fp32, _ = _train(lambda p: optim_states.AdamW(p, lr=1e-3), steps=30)
    q8, _ = _train(lambda p: optim_states.AdamW(p, lr=1e-3, state="8bit"), steps=30)
    for a, b in zip(fp32.parameters(), q8.parameters(), strict=True):
        assert (a - b).abs().max() < 5e-3


def test_dynamic_maps_have_256_sorted_codes():
    signed, unsigned = optim_states.dynamic_map(True), optim_states.dynamic_map(False)
    for table in (signed, unsigned):
        assert len(table) == len(table.unique()) == 256 and torch.equal(table, table.sort().values)
        assert 0.0 in table.tolist() and table.max() == 1.0
    assert unsigned.min() == 0 and signed.min() > -1  # the signed map has no -1
    # The smallest positive code: the middle of [0.1, 1] x 10^-6, split once (signed) or twice.
    assert signed[signed > 0].min().item() == pytest.approx(0.55e-6)
    assert unsigned[unsigned > 0].min().item() == pytest.approx(0.325e-6)


def test_blockwise_quantization_picks_the_nearest_code():
    x = torch.randn(4, 256)
    codes, absmax = optim_states.quantize_blockwise(x, True, 256)
    back = optim_states.dequantize_blockwise(codes, absmax, True)
    table = optim_states.dynamic_map(True)
    nearest = (x / absmax[:, None]).unsqueeze(-1).sub(table).abs().argmin(-1)
    assert torch.equal(codes.long(), nearest)
    # A block's largest value comes back exactly where it is positive (the code 1); the signed
    # map's most negative code is above -1.
    positive = x.amax(dim=1) == absmax
    assert torch.equal(back.amax(dim=1)[positive], absmax[positive])
    assert (back.abs().amax(dim=1) >= absmax * table.min().abs()).all()


def test_bytes_per_parameter_counts_what_the_optimizer_holds():
    model, optimizer = _train(lambda p: torch.optim.AdamW(p))
    counts = optim_states.bytes_per_parameter(model, optimizer)
    assert counts["weights"] == 4 and counts["gradients"] == 4
    num_tensors, num_params = 4, sum(p.numel() for p in model.parameters())
    assert counts["optimizer state"] == pytest.approx(8 + 4 * num_tensors / num_params)
    model, optimizer = _train(lambda p: optim_states.AdamW(p, state="8bit"))
    state = optim_states.state_bytes(optimizer)
    large = 8192 * 2 + (8192 // 256) * 4 * 2  # codes and absmax of two moments
    small = (128 + 384 + 3) * 8  # fp32 moments of the other tensors
    assert state == large + small + 4 * num_tensors
