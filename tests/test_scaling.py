"""The loss-scaling helpers and the lesson-03 scaler, checked against torch.amp.GradScaler on
CPU."""

import pytest
import torch
from conftest import run_tagged

from amp_course import scaling
from amp_course.exercises.solutions.lesson_03 import ScalerCore

LESSON = "03_grad_scaler"


def notebook_loss_scaler():
    """The LossScaler class exactly as the lesson-03 notebook defines it, on the reference core."""
    namespace = {"torch": torch, "Core": ScalerCore}
    return run_tagged(LESSON, "scaler-helpers", "loss-scaler", namespace=namespace)["LossScaler"]


@pytest.fixture(scope="module")
def batches():
    return scaling.mnist_batches(50, 32, seed=0)


def test_from_scratch_scaler_matches_grad_scaler_for_50_steps(batches):
    mine, ref = scaling.compare_scalers(
        notebook_loss_scaler(),
        batches,
        device="cpu",
        inject_inf_at={20},
        init_scale=2.0**16,
        growth_interval=10,
    )
    assert ref.skipped[20], "the injected inf must make GradScaler skip step 20"
    assert ref.scales[20] == ref.scales[19] / 2  # backoff
    assert mine.scales == ref.scales
    assert mine.skipped == ref.skipped
    assert scaling.same_parameters(mine.model, ref.model)


def test_scaler_regrows_after_growth_interval(batches):
    mine, ref = scaling.compare_scalers(
        notebook_loss_scaler(),
        batches[:30],
        device="cpu",
        inject_inf_at={0},
        init_scale=2.0**10,
        growth_interval=5,
    )
    assert ref.scales[0] == 2.0**9 and ref.skipped[0]
    assert ref.scales[5] == 2.0**10  # five clean steps later it doubles
    # The from-scratch scaler backs off and regrows on the same steps as torch's.
    assert mine.scales == ref.scales
    assert mine.skipped == ref.skipped


def test_disabled_scaler_is_a_pass_through(batches):
    scaler = notebook_loss_scaler()(enabled=False)
    loss = torch.tensor(3.0)
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    assert torch.amp.GradScaler("cpu", enabled=False).scale(loss) is loss


def test_a_wrong_scaler_is_caught(batches):
    class NoSkip(notebook_loss_scaler()):
        def step(self, optimizer):
            self.unscale_(optimizer)
            return optimizer.step()  # steps even on inf

    mine, ref = scaling.compare_scalers(NoSkip, batches[:25], device="cpu", inject_inf_at={20})
    assert not scaling.same_parameters(mine.model, ref.model)


def test_fp16_fate_counts_underflow_and_overflow():
    grads = torch.tensor([2.0**-30, 2.0**-20, 2.0**-10, 1.0, 2.0**17])
    fate = scaling.fp16_fate(grads, 1.0)
    assert fate.underflow == pytest.approx(1 / 5) and fate.subnormal == pytest.approx(1 / 5)
    assert fate.overflow == pytest.approx(1 / 5)
    assert scaling.fp16_fate(grads, 2.0**8).underflow == 0.0


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="positive"):
        scaling.fp16_fate(torch.ones(3), 0)
    with pytest.raises(ValueError, match="nonzero"):
        scaling.fp16_fate(torch.zeros(3), 1.0)
    with pytest.raises(ValueError, match=r"need 32000000 training digits; there are \d+ here \("):
        scaling.mnist_batches(10**6, 32)  # names the data, so a learner sees it is smoke's subset


def test_collect_gradients_matches_autograd():
    model = scaling.mlp(0)
    x, y = torch.randn(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    grads = scaling.collect_gradients(model, x, y, device="cpu")
    torch.nn.functional.cross_entropy(model(x), y).backward()
    expected = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert torch.equal(grads, expected[expected != 0])


def _slider_cells(interactive):
    """Run lesson 03's gradient and slider cells on a narrow CNN; returns their namespace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import amp_course as ac

    namespace = {
        "ac": ac,
        "torch": torch,
        "plt": plt,
        "device": torch.device("cpu"),
        "WIDTH_DIVISOR": 16,
        "batches": [(torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,)))],
        "INTERACTIVE": interactive,
    }
    run_tagged(LESSON, "scale-histogram", "scale-slider", namespace=namespace)
    plt.close("all")
    return namespace


def test_the_slider_is_live_on_a_cpu_and_static_states_stand_in_without_widgets(
    capsys, monkeypatch
):
    import ipywidgets

    shown = []
    monkeypatch.setattr(ipywidgets, "interact", lambda fn, **kw: shown.append(kw) or fn(0))
    live = _slider_cells(True)  # a CPU, smoke sizes: the slider is there all the same
    (slider,) = [kw["log2_scale"] for kw in shown]
    assert slider.description == "log2 scale" and (slider.min, slider.max) == (0, 30)
    assert "loss scale 2^0: becomes 0" in capsys.readouterr().out
    ax = live["plot_gradients"](30)  # the top of the slider: the right tail stays on the axis
    assert ax.get_xlim()[1] >= live["edges"][-1].item() + 30
    _slider_cells(False)
    assert "The slider's key states" in capsys.readouterr().out
