"""PyCumSum's two-input form (ONNX CumSum's): ``net.PyCumSum([x, axis_blob], y)``, the axis read on every run.

Forward and gradient against the torch oracle; the gradient flows to x only.
"""
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace
from hypothesis import given, settings
from hypothesis import strategies as st

import pycumsum_op
from scan_family_support import RUN_ERROR


def two_input_net(name, **flags):
    net = core.Net(name)
    for blob in ("ax_x", "ax_axis", "ax_y_grad"):
        net.AddExternalInput(blob)
    net.PyCumSum(["ax_x", "ax_axis"], "ax_y", **flags)
    net.AddGradientOperators({"ax_y": "ax_y_grad"})
    return net


@settings(max_examples=40)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data(),
       exclusive=st.booleans(), reverse=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), axis_dtype=st.sampled_from([np.int32, np.int64]))
def test_forward_and_gradient_equal_torch(run_net, torch_scan, shape, data, exclusive, reverse,
                                          dtype, axis_dtype):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype)
    grad_y = np.random.default_rng(7).standard_normal(shape).astype(dtype)
    net = two_input_net("axis_input_grad", exclusive=exclusive, reverse=reverse)
    run_net(net, {"ax_x": x, "ax_axis": np.array(axis, axis_dtype), "ax_y_grad": grad_y})
    tensor = torch.from_numpy(x).requires_grad_()
    expected = torch_scan(tensor, axis, exclusive, reverse)
    expected.backward(torch.from_numpy(grad_y))
    np.testing.assert_array_equal(workspace.FetchBlob("ax_y"), expected.detach().numpy())
    np.testing.assert_allclose(workspace.FetchBlob("ax_x_grad"), tensor.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_gradient_goes_to_the_input_only():
    net = two_input_net("axis_input_grad_ops")
    gradient_op = net.Proto().op[-1]
    assert (gradient_op.type, list(gradient_op.input), list(gradient_op.output)) == (
        "PythonGradient", ["ax_x", "ax_axis", "ax_y", "ax_y_grad"], ["ax_x_grad"])
    assert [op.builders for op in pycumsum_op.verify_net(net)][0] == (
        "pycumsum_op.ops.builders.scan_forward", "pycumsum_op.ops.builders.scan_backward")


def test_integer_input_follows_torch_and_dtype_is_kept(clean_workspace, run_net):
    net = core.Net("axis_input_int")
    net.PyCumSum(["ai_x", "ai_axis"], "ai_y")
    net.PyCumSum(["ai_x", "ai_axis"], "ai_y32", dtype="int32")
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    run_net(net, {"ai_x": x, "ai_axis": np.array(1, np.int64)})
    assert workspace.FetchBlob("ai_y").dtype == np.int64 and workspace.FetchBlob("ai_y32").dtype == np.int32
    np.testing.assert_array_equal(workspace.FetchBlob("ai_y32"), np.cumsum(x, 1))


@pytest.mark.parametrize("axis", [np.array([0, 1], np.int64), np.array(0.0, np.float32), np.zeros((1, 1), np.int32)])
def test_axis_blob_must_be_a_scalar_integer(clean_workspace, run_net, axis):
    net = core.Net("axis_input_bad")
    net.PyCumSum(["ab_x", "ab_axis"], "ab_y")
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: the axis input must be a 0-d int32 or int64 tensor "
                                                 r"\(as in ONNX CumSum\), got shape .* \(the input has shape \(2, 3\)\)"):
        run_net(net, {"ab_x": np.ones((2, 3), np.float32), "ab_axis": axis})
