"""After `pycumsum_op.onnx.install()`, Caffe2's own ``prepare`` takes away no model it imported right before: a node
whose form pycumsum_op's forms refuse goes to the stock converter when the stock backend is proven right on its form
(`pycumsum_op.onnx.stock_forms.STOCK_FORMS`, measured on onnx's node tests by tests/onnx_stock_forms.py), and a
form the stock backend gets wrong is still refused in one line. Node tests run in child processes
(`onnx_node_suite.outcomes(..., stock="installed")`).
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import io
import warnings

import numpy as np
import onnx

import onnx_node_suite
import onnx_stock_forms
import pycumsum_op.onnx
from onnx_support import onnxruntime_outputs
from pycumsum_op.onnx.ops.contract import NEWEST
from pycumsum_op.onnx.stock_forms import STOCK_FORMS, StockForm

STOCK = onnx_stock_forms.read_outcomes()
PASSED = sorted(name for name, kind in STOCK.items() if kind == "pass")
WRONG = sorted(name for name, kind in STOCK.items() if kind == "wrong")
BATCHES = 2


def test_the_measured_outcomes_are_onnx_node_tests():
    assert sorted(STOCK) == sorted(onnx_node_suite.node_tests())
    assert len(PASSED) == 303 and len(WRONG) == 35


def test_the_table_is_the_measurement():
    """STOCK_FORMS is what tests/onnx_stock_forms.py derives from the recorded outcomes, no more."""
    namespace = {"StockForm": StockForm, "_F": onnx.TensorProto}
    derived = eval("{" + onnx_stock_forms.render(onnx_stock_forms.derive(STOCK, NEWEST)) + "}", namespace)
    assert derived == STOCK_FORMS


@pytest.mark.parametrize("batch", range(BATCHES))
def test_every_pass_of_the_stock_backend_still_passes_after_install(batch):
    """(The 303 node tests take about 11 s of CPU in all: the whole set runs in the normal suite.)"""
    names = PASSED[batch::BATCHES]
    results = onnx_node_suite.outcomes(names, stock="installed")
    problems = ["{}: {} {}".format(name, *results[name]) for name in names if results[name][0] != "pass"]
    assert problems == []


def test_what_the_stock_backend_gets_wrong_is_refused_after_install():
    """Each node test the stock backend gets wrong is, after install(), what pycumsum_op's own backend makes of it:
    refused in one line as its refusal list says, or translated right by pycumsum_op (pools with auto_pad, TopK of
    the smallest, ...)."""
    refused = onnx_node_suite.read_refusals()
    results = onnx_node_suite.outcomes(WRONG, stock="installed")
    assert {name: kind for name, (kind, _) in results.items()
            if kind != ("refused" if name in refused else "pass")} == {}
    assert {name: detail for name, (kind, detail) in results.items()
            if kind == "refused" and detail != refused[name]} == {}
    assert results["test_top_k_smallest"][0] == "pass"  # pycumsum_op's TopK, where the stock converter is wrong


def test_resnet18_at_opset_11_imports_through_the_stock_prepare_after_install():
    import torch
    torchvision = pytest.importorskip("torchvision", reason="torchvision==0.11.3 (requirements-dev.txt)")
    from caffe2.python.onnx import backend as stock

    torch.manual_seed(0)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torchvision.models.resnet18().eval(), torch.randn(1, 3, 64, 64), buffer, opset_version=11,
                          input_names=["images"], output_names=["logits"])
    model = onnx.load_from_string(buffer.getvalue())
    images = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    pycumsum_op.onnx.install()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = stock.prepare(model).run([images])[0]
    want = onnxruntime_outputs(model, {"images": images})[0]
    assert got.shape == (1, 1000)
    assert np.abs(got - want).max() <= 1e-4


def test_a_model_with_cumsum_and_a_stock_form_imports_after_install_and_only_through_the_stock_prepare():
    from caffe2.python.onnx import backend as stock
    from onnx import TensorProto, helper

    from pycumsum_op.onnx.ops.contract import FormRefused

    def model(size):
        graph = helper.make_graph(
            [helper.make_node("LRN", ["x"], ["a"], size=size),
             helper.make_node("CumSum", ["a", "axis"], ["y"])], "lrn_cumsum",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 5])],
            [helper.make_tensor("axis", TensorProto.INT64, [], [1])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])

    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    pycumsum_op.onnx.install()
    np.testing.assert_allclose(stock.prepare(model(3)).run([x])[0], onnxruntime_outputs(model(3), {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(FormRefused, match=r"^ONNX LRN node 'a' \(opset 11\): the op has no form proven"):
        pycumsum_op.onnx.prepare(model(3))
    with pytest.raises(FormRefused, match=r"^ONNX LRN node 'a' \(opset 11\): "):
        stock.prepare(model(5))  # size 5: no node test covers it
