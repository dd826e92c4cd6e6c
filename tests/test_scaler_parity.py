"""PyTorch's own GradScaler tests, ported to the CPU, run on torch.amp.GradScaler and lesson 03's
from-scratch LossScaler alike.

The tests follow the ``test_grad_scaling_*`` family of PyTorch's test suite (``test/test_cuda.py``,
later made device-generic in ``test/test_torch.py``; shared helpers ``_create_scaling_case`` and
``_create_scaling_models_optimizers`` in ``torch/testing/_internal/common_cuda.py``): the same
models, data, skipped iteration and expected scales, with ``torch.autocast("cpu", float16)`` for
CUDA autocast. Every test runs on ``torch.amp.GradScaler("cpu")`` too, which proves the port, and
on the lesson's scaler, which proves the lesson. Dropped from the port, because lesson 03 leaves
them out and says so: scaling lists of losses, sparse and multi-device gradients, fused optimizers
that unscale inside their kernel, closures, pickling and the getters/setters.
"""

import copy

import pytest
import torch
from conftest import run_tagged

from amp_course.exercises.solutions import lesson_03 as solutions_03


def notebook_namespace():
    """Run the lesson's ``loss-scaler`` cell on the course's reference of the core the learner
    writes (``03.scaler_core``), as the lesson does before the exercise is done."""
    namespace = {"torch": torch, "Core": solutions_03.ScalerCore}
    return run_tagged("03_grad_scaler", "scaler-helpers", "loss-scaler", namespace=namespace)


def grad_scaler(**kwargs):
    return torch.amp.GradScaler("cpu", **kwargs)


SCALERS = {"GradScaler": grad_scaler, "LossScaler": notebook_namespace()["LossScaler"]}


@pytest.fixture(params=list(SCALERS))
def make_scaler(request):
    return SCALERS[request.param]


def is_enabled(scaler):
    return scaler.is_enabled() if isinstance(scaler, torch.amp.GradScaler) else scaler.enabled


def create_scaling_models_optimizers(optimizer_ctor=torch.optim.SGD, optimizer_kwargs=None):
    """A module and optimizer that will use scaling, and an identical control pair that will not."""
    mod_control = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    mod_scaling = copy.deepcopy(mod_control)
    kwargs = {"lr": 1.0, **(optimizer_kwargs or {})}
    opt_control = optimizer_ctor(mod_control.parameters(), **kwargs)
    opt_scaling = optimizer_ctor(mod_scaling.parameters(), **kwargs)
    return mod_control, mod_scaling, opt_control, opt_scaling


def create_scaling_case(optimizer_ctor=torch.optim.SGD, optimizer_kwargs=None):
    data = [(torch.randn(8, 8), torch.randn(8, 8)) for _ in range(4)]
    skip_iter = 2
    models = create_scaling_models_optimizers(optimizer_ctor, optimizer_kwargs)
    return (*models, data, torch.nn.MSELoss(), skip_iter)


@pytest.fixture(autouse=True)
def seeded():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        yield


def run_scaling_case(make_scaler, run, unskipped, skipped, atol=1e-7, **case_kwargs):
    """Scaled and unscaled runs end equal; the scale grew `unskipped`, fell `skipped` times."""
    for enabled in True, False:
        mod_control, mod_scaling, opt_control, opt_scaling, data, loss_fn, skip_iter = (
            create_scaling_case(**case_kwargs)
        )
        # A modest initial scale and growth after every step magnify growth-handling errors.
        scaler = make_scaler(
            init_scale=128.0, growth_factor=2.0, enabled=enabled, growth_interval=1
        )
        run(data, mod_control, opt_control, scaler, loss_fn, skip_iter, False)
        run(data, mod_scaling, opt_scaling, scaler, loss_fn, skip_iter, True)
        if enabled:
            assert scaler.get_scale() == 128.0 * 2.0**unskipped * 0.5**skipped
        else:
            assert scaler.get_scale() == 1.0
        for c, s in zip(mod_control.parameters(), mod_scaling.parameters(), strict=True):
            torch.testing.assert_close(c.grad, s.grad, atol=atol, rtol=1e-5)
            c_state, s_state = opt_control.state[c], opt_scaling.state[s]
            for key in c_state:
                torch.testing.assert_close(c_state[key], s_state[key], atol=atol, rtol=1e-5)
            torch.testing.assert_close(c, s, atol=atol, rtol=1e-5)


def one_step(scaler, weight, optimizer, inf=False):
    """scale -> backward -> (inf injected) -> step -> update on a one-parameter model."""
    optimizer.zero_grad()
    scaler.scale((weight * 2.0**-100).sum()).backward()  # small: even a 2^127 scale stays finite
    if inf:
        weight.grad.fill_(float("inf"))
    scaler.step(optimizer)
    scaler.update()


def test_grad_scaling_scale(make_scaler):
    scaler = make_scaler(init_scale=2.0)
    loss = torch.full((1,), 4.0)
    scaled = scaler.scale(loss)
    assert scaled.dtype == loss.dtype and torch.equal(scaled, torch.full((1,), 8.0))


def test_grad_scaling_update_scale(make_scaler):
    weight = torch.nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    scaler = make_scaler(init_scale=4.0, growth_factor=2.0, backoff_factor=0.25, growth_interval=2)
    one_step(scaler, weight, optimizer)  # two consecutive unskipped iterations
    assert scaler.state_dict()["_growth_tracker"] == 1 and scaler.get_scale() == 4.0
    one_step(scaler, weight, optimizer)
    assert scaler.state_dict()["_growth_tracker"] == 0 and scaler.get_scale() == 8.0
    one_step(scaler, weight, optimizer, inf=True)  # a skipped iteration
    assert scaler.state_dict()["_growth_tracker"] == 0 and scaler.get_scale() == 2.0


@pytest.mark.parametrize("bad", [None, float("inf"), float("nan")])
@pytest.mark.parametrize("where", range(4))
def test_grad_scaling_unscale(make_scaler, bad, where):
    # Contiguous, transposed (dense, not contiguous) and sliced (not dense) gradients: torch routes
    # them through different kernels, so an inf or NaN must be found in each.
    g = torch.full((20, 20), 4.0)
    grads = [g.clone(), g.clone().t(), g.clone()[:, :5], g.clone()[:, :5]]
    if bad is not None:
        grads[where][2, 2] = bad
    params = [torch.nn.Parameter(torch.zeros_like(grad)) for grad in grads]
    for param, grad in zip(params, grads, strict=True):
        param.grad = grad
    optimizer = torch.optim.SGD(params, lr=1.0)
    scaler = make_scaler(init_scale=4.0)
    scaler.scale(torch.ones(()))
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    if bad is None:
        for grad in grads:
            torch.testing.assert_close(grad, torch.ones_like(grad), rtol=1e-5, atol=1e-7)
        assert scaler.get_scale() == 4.0
        assert all(torch.equal(p, -torch.ones_like(p)) for p in params)
    else:
        assert scaler.get_scale() == 2.0  # found: the step was skipped and the scale backed off
        assert all(torch.equal(p, torch.zeros_like(p)) for p in params)


def test_unscale_refuses_fp16_gradients(make_scaler):
    weight = torch.nn.Parameter(torch.ones(3, dtype=torch.float16))
    weight.grad = torch.ones_like(weight)
    scaler = make_scaler()
    scaler.scale(torch.ones(()))
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.unscale_(torch.optim.SGD([weight], lr=1.0))


@pytest.mark.parametrize("lazy_init_scale", [True, False])
def test_grad_scaling_state_dict(make_scaler, lazy_init_scale):
    s0 = make_scaler(init_scale=3.0, growth_factor=4.0, backoff_factor=0.5, growth_interval=2)
    s1 = make_scaler(init_scale=6.0, growth_factor=7.0, backoff_factor=0.8, growth_interval=1)
    if lazy_init_scale:
        s1.scale(torch.full((1,), 4.0))  # GradScaler creates its scale tensor here
    s1.load_state_dict(s0.state_dict())
    assert s1.get_scale() == 3.0
    assert s1.state_dict() == {
        "scale": 3.0,
        "growth_factor": 4.0,
        "backoff_factor": 0.5,
        "growth_interval": 2,
        "_growth_tracker": 0,
    }
    assert make_scaler(enabled=False).state_dict() == {}
    with pytest.raises(RuntimeError, match="state dict is empty"):
        s1.load_state_dict({})


def test_state_dict_resume_matches_an_uninterrupted_run(make_scaler):
    weight = torch.nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    infs = {1, 4}
    kwargs = dict(init_scale=2.0**10, growth_factor=3.0, backoff_factor=0.375, growth_interval=2)
    whole = make_scaler(**kwargs)
    for i in range(8):
        one_step(whole, weight, optimizer, inf=i in infs)
    first = make_scaler(**kwargs)
    for i in range(5):
        one_step(first, weight, optimizer, inf=i in infs)
    resumed = make_scaler()  # default settings: everything must come from the state dict
    resumed.load_state_dict(first.state_dict())
    for i in range(5, 8):
        one_step(resumed, weight, optimizer, inf=i in infs)
    assert resumed.state_dict() == whole.state_dict()


def scaled_step(scaler, model, optimizer, loss, skip, after_backward=None, after_inf=None):
    """scale -> backward -> an inf at the skipped iteration -> step -> update."""
    scaler.scale(loss).backward()
    if after_backward:
        after_backward()
    if skip and is_enabled(scaler):
        model[1].weight.grad.data.fill_(float("inf"))
    if after_inf:
        after_inf()
    scaler.step(optimizer)
    scaler.update()


def control_step(scaler, optimizer, loss, skip, after_backward=None):
    """The unscaled control: backward, then step unless the scaled run skips this iteration."""
    loss.backward()
    if after_backward:
        after_backward()
    if not is_enabled(scaler) or not skip:
        optimizer.step()


def autocast_run(data, model, optimizer, scaler, loss_fn, skip_iter, try_scaling_api):
    """No scaling and no autocast (control) against scaling under fp16 autocast."""
    for i, (inputs, target) in enumerate(data):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=try_scaling_api):
            loss = loss_fn(model(inputs), target)
        if try_scaling_api:
            scaled_step(scaler, model, optimizer, loss, i == skip_iter)
        else:
            control_step(scaler, optimizer, loss, i == skip_iter)


@pytest.mark.parametrize("foreach", [False, True])
def test_grad_scaling_autocast(make_scaler, foreach):
    # atol 1e-3: pure fp32 against a mixture of fp16 and fp32.
    run_scaling_case(
        make_scaler,
        autocast_run,
        unskipped=3,
        skipped=1,
        atol=1e-3,
        optimizer_kwargs={"foreach": foreach},
    )


MAX_NORM = 0.2  # a value that actually clips


def test_grad_scaling_clipping(make_scaler):
    def run(data, model, optimizer, scaler, loss_fn, skip_iter, try_scaling_api):
        def clip(max_norm):
            return lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)

        for i, (inputs, target) in enumerate(data):
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), target)
            if try_scaling_api:  # clip the scaled gradients against a scaled threshold
                clip_scaled = clip(MAX_NORM * scaler.get_scale())
                scaled_step(scaler, model, optimizer, loss, i == skip_iter, clip_scaled)
            else:
                control_step(scaler, optimizer, loss, i == skip_iter, clip(MAX_NORM))

    run_scaling_case(make_scaler, run, unskipped=3, skipped=1, atol=1e-5)


def test_grad_scaling_clipping_separate_unscale(make_scaler):
    def run(data, model, optimizer, scaler, loss_fn, skip_iter, try_scaling_api):
        def unscale_and_clip():
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM, error_if_nonfinite=False)

        def clip():
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)

        for i, (inputs, target) in enumerate(data):
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), target)
            if try_scaling_api:
                scaled_step(
                    scaler, model, optimizer, loss, i == skip_iter, after_inf=unscale_and_clip
                )
            else:
                control_step(scaler, optimizer, loss, i == skip_iter, clip)

    run_scaling_case(make_scaler, run, unskipped=3, skipped=1)


def test_grad_scaling_penalty(make_scaler):
    def run(data, model, optimizer, scaler, loss_fn, skip_iter, try_scaling_api):
        for i, (inputs, target) in enumerate(data):
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), target)
            if try_scaling_api:
                grad_params = torch.autograd.grad(
                    scaler.scale(loss), model.parameters(), create_graph=True
                )
                inv_scale = 1.0 / scaler.get_scale()
                grad_params = [p * inv_scale for p in grad_params]
            else:
                grad_params = torch.autograd.grad(loss, model.parameters(), create_graph=True)
            loss = loss + sum(grad.pow(2).sum() for grad in grad_params).sqrt()
            if try_scaling_api:
                scaled_step(scaler, model, optimizer, loss, i == skip_iter)
            else:
                control_step(scaler, optimizer, loss, i == skip_iter)

    run_scaling_case(make_scaler, run, unskipped=3, skipped=1)


def test_grad_scaling_accumulation(make_scaler):
    def run(data, model, optimizer, scaler, loss_fn, skip_iter, try_scaling_api):
        iters_to_accumulate = 2
        for i, (inputs, target) in enumerate(data):
            loss = loss_fn(model(inputs), target) / iters_to_accumulate
            if try_scaling_api:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if (i + 1) % iters_to_accumulate == 0:
                if try_scaling_api:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad()

    run_scaling_case(make_scaler, run, unskipped=2, skipped=0)


def run_two_optimizers(data, loss_fn, skip_iter, scaler, models, optimizers, try_scaling_api):
    """Two models and two optimizers that both receive gradients from two losses."""
    model0, model1 = models
    optimizer0, optimizer1 = optimizers
    for i, (inputs, target) in enumerate(data):
        optimizer0.zero_grad()
        optimizer1.zero_grad()
        output0, output1 = model0(inputs), model1(inputs)
        loss0 = loss_fn(0.3 * output0 + 0.7 * output1, target)
        loss1 = loss_fn(0.6 * output0 - 0.4 * output1, target)
        if try_scaling_api:
            scaler.scale(loss0).backward(retain_graph=True)
            scaler.scale(loss1).backward()
            if i == skip_iter and is_enabled(scaler):
                model1[1].weight.grad.data.fill_(float("inf"))
            scaler.unscale_(optimizer0)  # as an additional stress test, one is unscaled apart
            scaler.step(optimizer0)
            scaler.step(optimizer1)
            scaler.update()
        else:
            loss0.backward(retain_graph=True)
            loss1.backward()
            optimizer0.step()
            if not is_enabled(scaler) or i != skip_iter:
                optimizer1.step()


def test_grad_scaling_multiple(make_scaler):
    for enabled in True, False:
        mod_control0, mod_scaling0, opt_control0, opt_scaling0, data, loss_fn, skip_iter = (
            create_scaling_case()
        )
        mod_control1, mod_scaling1, opt_control1, opt_scaling1 = create_scaling_models_optimizers()
        scaler = make_scaler(
            init_scale=128.0, growth_factor=2.0, enabled=enabled, growth_interval=1
        )
        case = (data, loss_fn, skip_iter, scaler)
        run_two_optimizers(*case, (mod_control0, mod_control1), (opt_control0, opt_control1), False)
        run_two_optimizers(*case, (mod_scaling0, mod_scaling1), (opt_scaling0, opt_scaling1), True)
        # Grown 3 times, backed off once.
        assert scaler.get_scale() == (128.0 * 2.0**3 * 0.5 if enabled else 1.0)
        for c, s in zip(
            [*mod_control0.parameters(), *mod_control1.parameters()],
            [*mod_scaling0.parameters(), *mod_scaling1.parameters()],
            strict=True,
        ):
            torch.testing.assert_close(c, s, rtol=1e-5, atol=1e-7)


def test_each_optimizer_is_unscaled_once_and_skips_on_its_own_gradients(make_scaler):
    models = [torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
    before = [copy.deepcopy(m.state_dict()) for m in models]
    scaler = make_scaler(init_scale=8.0)
    loss = sum(m(torch.ones(2, 4)).sum() for m in models)
    scaler.scale(loss).backward()
    models[1].weight.grad[0, 0] = float("inf")
    scaler.unscale_(optimizers[0])  # unscale_(a) then unscale_(b): per-optimizer state
    scaler.unscale_(optimizers[1])
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        scaler.unscale_(optimizers[0])
    torch.testing.assert_close(models[0].weight.grad, torch.full((1, 4), 2.0))
    for optimizer in optimizers:
        scaler.step(optimizer)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(optimizers[0])
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step\\(\\)"):
        scaler.unscale_(optimizers[0])
    scaler.update()
    assert not torch.equal(models[0].weight, before[0]["weight"])  # a stepped
    assert torch.equal(models[1].weight, before[1]["weight"])  # b skipped
    assert scaler.get_scale() == 4.0  # one skip anywhere backs the shared scale off
    with pytest.raises(AssertionError, match="No inf checks"):
        scaler.update()  # nothing was unscaled since the last update()


def test_grad_scale_will_not_overflow(make_scaler):
    model = torch.nn.Linear(5, 1)
    optimizer = torch.optim.Adam(model.parameters())
    scaler = make_scaler(growth_interval=1, growth_factor=2**4, init_scale=1e38)
    optimizer.zero_grad()
    loss = ((model(torch.randn(1, 5)) - 1e-30 * torch.randn(1, 1)) ** 2).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scale = torch.tensor(scaler.get_scale())
    assert torch.isfinite(scale) and scale == torch.tensor(1e38, dtype=torch.float32).item()


@pytest.mark.parametrize("optimizer_ctor", [torch.optim.Adam, torch.optim.AdamW])
@pytest.mark.parametrize("foreach", [False, True])
def test_params_invalidated_with_grads_invalidated_between_unscale_and_step(
    make_scaler, optimizer_ctor, foreach
):
    model, _, optimizer, _, data, loss_fn, _ = create_scaling_case(
        optimizer_ctor=optimizer_ctor, optimizer_kwargs={"foreach": foreach}
    )
    scaler = make_scaler(init_scale=128.0)
    for inputs, target in data:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = loss_fn(model(inputs), target)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        for j, param in enumerate(model.parameters()):  # break the grads after the inf check
            param.grad.copy_(torch.tensor(torch.inf if j % 2 else torch.nan))
        scaler.step(optimizer)
        scaler.update()
    assert all(p.isnan().any() or p.isinf().any() for p in model.parameters())


def scale_trajectory(scaler, infs, steps=40):
    weight = torch.nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    trajectory = []
    for i in range(steps):
        one_step(scaler, weight, optimizer, inf=i in infs)
        trajectory.append((scaler.get_scale(), scaler.state_dict()["_growth_tracker"]))
    return trajectory


FACTORS = dict(init_scale=1000.1, growth_factor=1.7, backoff_factor=0.3, growth_interval=2)
INFS = {0, 1, 9, 10, 11, 25}


def test_non_power_of_two_factors_equal_grad_scaler_bit_for_bit():
    # GradScaler keeps the scale in float32 and multiplies in float64, then rounds; with factors
    # that are not powers of two every step rounds, so any other arithmetic drifts apart.
    reference = scale_trajectory(grad_scaler(**FACTORS), INFS)
    assert scale_trajectory(SCALERS["LossScaler"](**FACTORS), INFS) == reference
    assert len({scale for scale, _ in reference}) > 10


def test_the_parity_tests_catch_a_float64_scaler(monkeypatch):
    # The lesson's scaler with Python floats instead of float32 rounding must fail the test above.
    monkeypatch.setattr(solutions_03, "_fp32", float)
    float64_scaler = notebook_namespace()["LossScaler"]
    reference = scale_trajectory(grad_scaler(**FACTORS), INFS)
    assert scale_trajectory(float64_scaler(**FACTORS), INFS) != reference


def test_growth_stops_below_float32_overflow(make_scaler, monkeypatch):
    # From the largest power of two in float32, one more doubling would be inf: it must not happen.
    top = 2.0**127
    trajectory = scale_trajectory(make_scaler(init_scale=top, growth_interval=1), set(), steps=3)
    assert [scale for scale, _ in trajectory] == [top, top, top]
    monkeypatch.setattr(solutions_03, "math", type("M", (), {"isfinite": lambda x: True}))
    unguarded = notebook_namespace()
    scales = scale_trajectory(unguarded["LossScaler"](init_scale=top, growth_interval=1), set(), 1)
    assert scales[0][0] == float("inf")  # without the guard the test above would fail
