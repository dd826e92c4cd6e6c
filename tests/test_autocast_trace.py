"""Traced op dtypes inside a real ViT encoder block agree with the lists autocast applies."""

import matplotlib.pyplot as plt
import pytest
import torch
from conftest import run_tagged

import amp_course as ac
from amp_course import autocast_trace
from amp_course.recipe import AmpRecipe


@pytest.fixture(scope="module")
def block():
    vit = ac.models.build_vit("tiny")
    return vit.encoder.layers[0], torch.randn(2, 5, vit.hidden_dim)


def _ops(rows):
    return {row.op for row in rows}


@pytest.mark.parametrize("autocast_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("train", [True, False])
def test_cpu_trace_agrees_with_the_cpu_lists(block, autocast_dtype, train):
    module, x = block
    module.train(train)
    rows = autocast_trace.trace_op_dtypes(module, x, recipe=AmpRecipe("cpu", autocast_dtype))
    assert autocast_trace.compare_with_lists(rows, "cpu", autocast_dtype) == []
    # The block really exercised both kinds of op: matmuls in low precision, layer norm in fp32.
    low = [r for r in rows if autocast_trace.autocast_policy(r.documented_name, "cpu") == "lower"]
    assert low and all(r.output_dtype == autocast_dtype for r in low)
    norms = [r for r in rows if r.documented_name == "layer_norm"]
    assert len(norms) == 2 and all(r.output_dtype == torch.float32 for r in norms)
    assert any(r.is_cast for r in rows)


def test_a_trace_without_autocast_is_flagged(block):
    # The comparison can fail: an fp32 run disagrees with what the lists promise under bf16.
    module, x = block
    rows = autocast_trace.trace_op_dtypes(module, x, recipe=AmpRecipe("cpu", None))
    problems = autocast_trace.compare_with_lists(rows, "cpu", torch.bfloat16)
    assert problems and any(p.startswith(("addmm", "mm")) for p in problems)
    assert not any(r.is_cast for r in rows)


def test_the_lists_differ_between_cpu_and_cuda():
    policy = autocast_trace.autocast_policy
    assert policy("layer_norm", "cuda") == "float32" and policy("layer_norm", "cpu") is None
    assert policy("softmax", "cuda") == "float32" and policy("softmax", "cpu") is None
    assert policy("binary_cross_entropy", "cpu") == "float32"
    assert policy("linear", "cpu") == policy("linear", "cuda") == "lower"
    assert policy("scaled_dot_product_attention", "cpu") == "lower"
    assert policy("scaled_dot_product_attention", "cuda") == "lower"  # the docs page omits it
    assert policy("binary_cross_entropy", "cuda") == "refused"
    assert policy("add", "cuda") is None
    with pytest.raises(ValueError, match="known: cuda, cpu"):
        policy("mm", "tpu")


def test_loss_and_softmax_ops_follow_the_cpu_lists():
    logits = torch.randn(4, 10)
    target = torch.randint(0, 10, (4,))

    def head(z):
        return (
            torch.nn.functional.cross_entropy(z @ torch.randn(10, 10), target) + z.softmax(-1).sum()
        )

    rows = autocast_trace.trace_op_dtypes(head, logits, recipe=AmpRecipe("cpu", torch.bfloat16))
    assert autocast_trace.compare_with_lists(rows, "cpu", torch.bfloat16) == []
    by_op = {r.documented_name: r for r in rows}
    assert by_op["mm"].output_dtype == torch.bfloat16
    assert by_op["nll_loss"].output_dtype == torch.float32  # a documented fp32 loss


def test_summary_rows_hide_views_and_name_the_list(block):
    module, x = block
    rows = autocast_trace.trace_op_dtypes(module, x, recipe=AmpRecipe("cpu", torch.bfloat16))
    table = autocast_trace.summarise(rows, "cpu", torch.bfloat16)
    assert {"lower", "unlisted", "cast"} <= {r["list"] for r in table}
    assert not any(r["op"].startswith(("view", "transpose")) for r in table)


@pytest.mark.gpu
@pytest.mark.parametrize("autocast_dtype", [torch.float16, torch.bfloat16])
def test_cuda_trace_agrees_with_the_cuda_lists(block, autocast_dtype):
    if autocast_dtype is torch.bfloat16 and torch.cuda.get_device_capability()[0] < 8:
        pytest.skip("bf16 needs compute capability >= 8.0")
    module, x = block
    module = module.to("cuda")
    rows = autocast_trace.trace_op_dtypes(
        module, x.to("cuda"), recipe=AmpRecipe("cuda", autocast_dtype)
    )
    assert autocast_trace.compare_with_lists(rows, "cuda", autocast_dtype) == []
    norms = [r for r in rows if r.documented_name == "layer_norm"]
    assert norms and all(r.output_dtype == torch.float32 for r in norms)


def test_summary_markdown_has_a_row_per_shown_op(block):
    module, x = block
    rows = autocast_trace.trace_op_dtypes(module, x, recipe=AmpRecipe("cpu", torch.bfloat16))
    text = autocast_trace.summary_markdown(rows, "cpu", torch.bfloat16)
    assert text.count("\n") == len(autocast_trace.summarise(rows, "cpu", torch.bfloat16)) + 1
    assert "`addmm`" in text and "| lower |" in text


def test_the_dispatcher_answers_for_both_devices_without_a_gpu():
    # This torch is a CUDA build: its dispatcher holds the CUDA autocast kernels without a GPU.
    assert autocast_trace.autocast_keys("scaled_dot_product_attention") == ["cpu", "cuda"]
    assert autocast_trace.autocast_keys("einsum") == ["cuda"]
    assert autocast_trace.autocast_keys("add") == []


def test_drift_and_keys_say_none_where_the_dispatcher_cannot_be_asked(monkeypatch):
    from amp_course.autocast_trace import registry

    monkeypatch.delattr(torch._C, "_dispatch_get_all_op_names")
    registry.registered_ops.cache_clear()
    try:
        assert autocast_trace.autocast_keys("mm") is None
        assert autocast_trace.drift_from_lists("cuda") is None
    finally:
        monkeypatch.undo()
        registry.registered_ops.cache_clear()


@pytest.mark.parametrize("autocast_dtype", [torch.bfloat16, torch.float16])
def test_lesson_02s_strip_names_in_its_legend_only_the_dtypes_it_plots(block, autocast_dtype):
    """A CPU's bf16 trace runs no op in fp16: the legend once named float16 all the same."""
    module, x = block
    rows = autocast_trace.trace_op_dtypes(module, x, recipe=AmpRecipe("cpu", autocast_dtype))
    namespace = {"ac": ac, "plt": plt, "rows": rows, "device": torch.device("cpu")}
    namespace["amp_dtype"] = autocast_dtype
    run_tagged("02_autocast", "dtype-strip", namespace=namespace)
    legend = [t.get_text() for t in namespace["ax"].get_legend().get_texts()]
    plt.close("all")
    assert legend == ["float32", str(autocast_dtype).removeprefix("torch.")]
