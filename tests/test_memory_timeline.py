"""ac.memory.timeline: classifying a CUDA allocator history (a hand-made one here, a real one on a
GPU) and the account of a step's memory by phase."""

import matplotlib
import pytest
import torch
import torch.nn.functional as F

from amp_course import models
from amp_course.memory import timeline

matplotlib.use("Agg")

A0, A1, A2, A3, A4 = 0x100, 0x200, 0x300, 0x400, 0x500  # the markers' blocks
X, T, G, S, U = 0x1000, 0x2000, 0x3000, 0x4000, 0x5000

# The shape of a real history: blocks freed in two events, an address reused, a block from
# before the step, markers between the phases.
EVENTS = [
    {"action": "alloc", "addr": 0x900, "size": 512},  # 0: before the step started
    {"action": "alloc", "addr": A0, "size": 512},  # 1: start
    {"action": "alloc", "addr": X, "size": 1000},  # 2: kept for backward
    {"action": "alloc", "addr": T, "size": 200},  # 3: a temporary of the forward
    {"action": "free_requested", "addr": T, "size": 200},  # 4
    {"action": "free_completed", "addr": T, "size": 200},  # 5
    {"action": "alloc", "addr": A1, "size": 512},  # 6: forward done
    {"action": "alloc", "addr": G, "size": 400},  # 7: a gradient
    {"action": "alloc", "addr": T, "size": 300},  # 8: a temporary of the backward, same address
    {"action": "free_completed", "addr": X, "size": 1000},  # 9: the activation is used up
    {"action": "free_completed", "addr": T, "size": 300},  # 10
    {"action": "segment_alloc", "addr": 0x9000, "size": 2**21},  # 11: not a tensor's block
    {"action": "alloc", "addr": A2, "size": 512},  # 12: backward done
    {"action": "alloc", "addr": S, "size": 800},  # 13: optimizer state created
    {"action": "alloc", "addr": U, "size": 100},  # 14: the optimizer's temporary
    {"action": "free_completed", "addr": U, "size": 100},  # 15
    {"action": "alloc", "addr": A3, "size": 512},  # 16: optimizer step done
    {"action": "free_completed", "addr": G, "size": 400},  # 17: zero_grad(set_to_none=True)
    {"action": "alloc", "addr": A4, "size": 512},  # 18: gradients freed
]


@pytest.fixture
def traced():
    return timeline.timeline_from_trace(
        EVENTS,
        [A0, A1, A2, A3, A4],
        {"parameters": 5000},
        gradient_addresses={G},
        state_addresses={S},
    )


def test_blocks_are_classified_by_phase_and_address(traced):
    at = {name: values for name, values in traced.bytes.items()}
    assert at["parameters"] == [5000] * len(EVENTS)
    assert at["activations"][2] == 1000 and at["activations"][6] == 1000
    assert at["activations"][9] == 0
    assert at["temporaries"][3] == 200 and at["temporaries"][5] == 0
    assert at["temporaries"][8] == 300 and at["temporaries"][14] == 100
    assert at["gradients"][7] == 400 and at["gradients"][17] == 0
    assert at["optimizer state"][13] == 800 and at["optimizer state"][-1] == 800
    assert traced.phases == {
        "forward done": 6.0,
        "backward done": 12.0,
        "optimizer step done": 16.0,
        "gradients freed": 18.0,
    }
    total, parts = traced.peak()
    assert total == 5000 + 1000 + 400 + 300  # the backward's temporary on top of both
    assert parts["activations"] == 1000 and parts["gradients"] == 400


def test_account_timeline_tells_the_same_story():
    account = timeline.account_timeline(400, 800, 3000, 400)
    assert account.totals() == [1200, 4200, 1600, 1600, 1200]
    assert account.peak() == (
        4200,
        {"parameters": 400, "optimizer state": 800, "gradients": 0, "activations": 3000},
    )
    assert "not measured" in account.source
    # Autocast's weight copies are their own band, beside the activations, not inside them.
    amp = timeline.account_timeline(400, 800, 3000, 400, weight_copy_bytes=200)
    assert amp.peak()[1]["activations"] == 3000 and amp.peak()[1]["weight copies"] == 200


def test_plot_marks_the_phases(traced):
    ax = timeline.plot(traced, title="toy")
    (phases,) = ax.child_axes
    labels = {t.get_text() for t in phases.get_xticklabels()}
    assert set(timeline.PHASES) == labels and ax.get_ylabel() == "MiB"


@pytest.mark.gpu
def test_a_real_cuda_step():
    device = torch.device("cuda")
    model = models.build_vit("tiny").to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    images = torch.randn(64, 1, 28, 28, device=device)
    labels = torch.randint(0, 10, (64,), device=device)

    def forward():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return F.cross_entropy(model(images), labels)

    forward().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    traced = timeline.record_cuda_step(model, optimizer, forward, device)
    params = sum(p.numel() * 4 for p in model.parameters())
    forward_done = int(traced.phases["forward done"])
    backward_done = int(traced.phases["backward done"])
    assert traced.bytes["activations"][forward_done] > 0
    assert traced.bytes["gradients"][backward_done] >= params  # blocks round up
    assert traced.bytes["parameters"][0] == params
    assert traced.totals()[-1] == pytest.approx(traced.totals()[0], abs=4096)
