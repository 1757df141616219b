"""Caffe2 -> ONNX: nets with PyCumSum exported by pycumsum_op.onnx.export.

Every exported model passes onnx.checker (inside export); onnxruntime, an independent runtime, must
give the Caffe2 net's outputs, and importing the model back into Caffe2 must give them exactly.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import os

import numpy as np
from caffe2.python import brew, core, model_helper, workspace
from onnx import TensorProto, helper

import pycumsum_op
import pycumsum_op.onnx
from pycumsum_op import UnsafeNetError
from pycumsum_op.onnx.export import check_node_opset
from pycumsum_op.ops.builders import scan_backward, scan_forward
from onnx_support import onnxruntime_outputs


def output_net(name, *outputs):
    net = core.Net(name)
    return net, lambda: [net.AddExternalOutput(core.BlobReference(blob)) for blob in outputs]


def caffe2_outputs(net, feeds, init_net=None):
    workspace.ResetWorkspace()
    if init_net is not None:
        workspace.RunNetOnce(init_net)
    for name, value in feeds.items():
        workspace.FeedBlob(name, value)
    workspace.RunNetOnce(net)
    outputs = [workspace.FetchBlob(str(blob)) for blob in net.Proto().external_output]
    workspace.ResetWorkspace()
    return outputs


def assert_same(actual, expected, exact):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if exact:
        np.testing.assert_array_equal(actual, expected)
    else:  # onnxruntime sums float32 in float32; PyCumSum (like torch) in float64
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


# name -> (input dtype, PyCumSum keyword arguments); each net is x -> PyCumSum -> y
CASES = {
    "float32_last_axis": (np.float32, dict(axis=-1)),
    "float64_exclusive": (np.float64, dict(axis=0, exclusive=True)),
    "int32_promoted_to_int64": (np.int32, dict(axis=1, reverse=True)),
    "int64_exclusive_reverse": (np.int64, dict(axis=-2, exclusive=True, reverse=True)),
    "bool_counts": (np.bool_, dict(axis=1)),
    "dtype_double": (np.float32, dict(axis=1, dtype="double")),
    "dtype_int32_from_int64": (np.int64, dict(axis=0, dtype="int32")),
}


def case_input(dtype, shape=(3, 4)):
    rng = np.random.default_rng(3)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    return (rng.standard_normal(shape) * 50).astype(dtype)


@pytest.mark.parametrize("opset", [11, 13, 14])
@pytest.mark.parametrize("case", sorted(CASES))
def test_export_equals_caffe2_in_onnxruntime_and_round_trips(case, opset):
    dtype, kwargs = CASES[case]
    net, declare = output_net("export_" + case, "ex_y")
    net.PyCumSum("ex_x", "ex_y", **kwargs)
    declare()
    x = case_input(dtype)
    model = pycumsum_op.onnx.export(net, value_info={"ex_x": (dtype, x.shape)}, opset=opset)
    assert [node.op_type for node in model.graph.node][-1] == "CumSum"
    (expected,) = caffe2_outputs(net, {"ex_x": x})
    (runtime,) = onnxruntime_outputs(model, {"ex_x": x})
    assert_same(runtime, expected, exact=expected.dtype != np.float32)
    (back,) = pycumsum_op.onnx.prepare(model).run([x])
    assert_same(back, expected, exact=True)


def test_in_place_and_two_input_form():
    net, declare = output_net("export_forms", "ef_x", "ef_z")
    net.PyCumSum("ef_x", "ef_x", axis=1)  # in place: SSA names it anew
    net.PyCumSum(["ef_x", "ef_axis"], "ef_z", reverse=True)
    declare()
    feeds = {"ef_x": case_input(np.float64), "ef_axis": np.array(0, np.int64)}
    model = pycumsum_op.onnx.export(net, value_info={"ef_x": (TensorProto.DOUBLE, (3, 4)),
                                                     "ef_axis": (TensorProto.INT64, ())})
    assert [(node.op_type, list(node.input)[1:]) for node in model.graph.node][1] == ("CumSum", ["ef_axis"])
    expected = caffe2_outputs(net, feeds)
    for actual, wanted in zip(onnxruntime_outputs(model, feeds), expected):
        assert_same(actual, wanted, exact=True)
    for actual, wanted in zip(pycumsum_op.onnx.prepare(model).run(feeds), expected):
        assert_same(actual, wanted, exact=True)


def test_float16_exports_at_opset_14_only():
    net, declare = output_net("export_half", "eh_y")
    net.PyCumSum("eh_x", "eh_y", axis=0)
    declare()
    x = np.random.default_rng(4).standard_normal(2000).astype(np.float16)
    with pytest.raises(ValueError, match=r"Caffe2 op Python 'PyCumSum' \(eh_x -> eh_y\): a float16 PyCumSum exports "
                                         r"as float16 CumSum, which needs opset >= 14, not 13"):
        pycumsum_op.onnx.export(net, value_info={"eh_x": (np.float16, x.shape)}, opset=13)
    model = pycumsum_op.onnx.export(net, value_info={"eh_x": (np.float16, x.shape)}, opset=14)
    (expected,) = caffe2_outputs(net, {"eh_x": x})
    (runtime,) = onnxruntime_outputs(model, {"eh_x": x})
    assert runtime.dtype == np.float16
    np.testing.assert_allclose(runtime.astype(np.float64), expected.astype(np.float64), rtol=2e-3, atol=2e-3)
    assert_same(pycumsum_op.onnx.prepare(model).run([x])[0], expected, exact=True)


def mlp_with_cumsum():
    """FC -> Relu -> PyCumSum with its parameters in a GivenTensorFill init net."""
    model = model_helper.ModelHelper("export_mlp")
    brew.fc(model, "em_data", "em_fc", 6, 5)
    model.net.Relu("em_fc", "em_relu")
    model.net.PyCumSum("em_relu", "em_y", axis=1)
    model.net.AddExternalOutput(core.BlobReference("em_y"))
    workspace.ResetWorkspace()
    workspace.RunNetOnce(model.param_init_net)
    init_net = core.Net("export_mlp_init")
    for param in model.params:
        value = workspace.FetchBlob(str(param))
        init_net.GivenTensorFill([], str(param), values=value.ravel().tolist(), shape=value.shape)
    return model.net, init_net


@pytest.mark.parametrize("opset", [11, 14])
def test_model_with_parameters(opset):
    net, init_net = mlp_with_cumsum()
    data = np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)
    model = pycumsum_op.onnx.export(net, init_net, {"em_data": (TensorProto.FLOAT, (4, 6))}, opset=opset)
    assert [node.op_type for node in model.graph.node] == ["Gemm", "Relu", "CumSum"]
    (expected,) = caffe2_outputs(net, {"em_data": data}, init_net)
    assert_same(onnxruntime_outputs(model, {"em_data": data})[0], expected, exact=False)
    assert_same(pycumsum_op.onnx.prepare(model).run({"em_data": data}).em_y, expected, exact=False)


def test_softmax_at_opset_13_is_exported_only_on_the_last_axis():
    net, declare = output_net("export_softmax", "es_y")
    net.Softmax("es_x", "es_p")
    net.PyCumSum("es_p", "es_y", axis=1)
    declare()
    x = case_input(np.float32, (4, 5))
    model = pycumsum_op.onnx.export(net, value_info={"es_x": (TensorProto.FLOAT, (4, 5))}, opset=13)
    assert_same(onnxruntime_outputs(model, {"es_x": x})[0], caffe2_outputs(net, {"es_x": x})[0], exact=False)
    with pytest.raises(ValueError, match=r"Caffe2 op Softmax \(es_x -> es_p\): Caffe2's exporter writes it as "
                                         r"opset-9 Softmax, which normalises along one axis from opset 13"):
        pycumsum_op.onnx.export(net, value_info={"es_x": (TensorProto.FLOAT, (4, 5, 2))}, opset=13)


@pytest.mark.parametrize("make_op, opset, message", [
    (lambda net: net.Slice("eo_x", "eo_s", starts=[0, 0], ends=[2, -1]), 11,
     r"Caffe2 op Slice \(eo_x -> eo_s\): Caffe2's exporter writes it as opset-9 Slice, which takes starts/ends as "
     r"inputs from opset 10; it cannot be exported correctly at opset 11 \(use opset 9 or rewrite the op\)"),
    (lambda net: net.Clip("eo_x", "eo_s", min=0.0), 11, r"Caffe2 op Clip .*takes min/max as inputs from opset 11"),
    (lambda net: net.ReduceSum("eo_x", "eo_s", axes=[1], keepdims=0), 13,
     r"Caffe2 op ReduceSum .*opset-9 ReduceSum, which takes axes as an input from opset 13"),
    (lambda net: net.EnsureDense("eo_x", "eo_s"), 11,
     r"Caffe2 op EnsureDense \(eo_x -> eo_s\): exports as EnsureDense, which is not an ONNX operator at opset 11"),
])
def test_ops_that_cannot_be_exported_correctly_are_named(make_op, opset, message):
    net, declare = output_net("export_bad", "eo_s")
    make_op(net)
    declare()
    with pytest.raises(ValueError, match=message):
        pycumsum_op.onnx.export(net, value_info={"eo_x": (TensorProto.FLOAT, (3, 4))}, opset=opset)


def test_unreviewed_opset_changes_fail_closed():
    node = helper.make_node("Resize", ["a", "roi", "scales"], ["b"])
    op = core.CreateOperator("ResizeNearest", ["a"], ["b"])
    with pytest.raises(ValueError, match=r"Caffe2 op ResizeNearest \(a -> b\): Caffe2's exporter writes it as "
                                         r"opset-9 Resize, which changed at opset 10 in a way pycumsum_op has not checked"):
        check_node_opset(node, 13, op, {})


def test_pycumsum_needs_opset_11():
    net, declare = output_net("export_old", "eold_y")
    net.PyCumSum("eold_x", "eold_y", axis=0)
    declare()
    with pytest.raises(ValueError, match=r"PyCumSum exports as ONNX CumSum, which needs opset >= 11, not 10"):
        pycumsum_op.onnx.export(net, value_info={"eold_x": (TensorProto.FLOAT, (3,))}, opset=10)


def test_foreign_python_ops_are_refused_before_anything_runs(tmp_path):
    marker = tmp_path / "ran"
    net, declare = output_net("export_foreign", "ef2_y")
    net.Python((os.system, ("touch " + str(marker),), {}))(["ef2_x"], ["ef2_y"])
    declare()
    with pytest.raises(UnsafeNetError, match=r"posix.system"):
        pycumsum_op.onnx.export(net, value_info={"ef2_x": (TensorProto.FLOAT, (3,))})
    assert not marker.exists()


def test_gradient_ops_are_refused():
    net = core.Net("export_grad")
    net.AddExternalInput("eg_x")
    net.AddExternalInput("eg_y_grad")
    net.PyCumSum("eg_x", "eg_y", axis=0)
    net.AddGradientOperators({"eg_y": "eg_y_grad"})
    net.AddExternalOutput(core.BlobReference("eg_x_grad"))
    with pytest.raises(ValueError, match=r"Caffe2 op PythonGradient .*: a gradient op has no ONNX form"):
        pycumsum_op.onnx.export(net, value_info={"eg_x": (TensorProto.FLOAT, (3,)),
                                                 "eg_y_grad": (TensorProto.FLOAT, (3,))})


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(value_info={}), ValueError, r"value_info has no \(type, shape\) for input\(s\) ev_x of net"),
    (dict(value_info={"ev_x": (TensorProto.FLOAT, (3,))}, opset=8), ValueError, r"opset must be an integer from 9"),
    (dict(value_info={"ev_x": ("floaty", (3,))}), ValueError, r"value_info\['ev_x'\]: unknown element type 'floaty'"),
    (dict(value_info={"ev_x": (TensorProto.FLOAT, (-1,))}), ValueError, r"negative extent in shape \(-1,\)"),
    (dict(value_info={"ev_x": (TensorProto.FLOAT, (3, 4, 5))}), ValueError,
     r"running net 'export_values.*' on zeros of the given shapes failed: .*axis=3 is out of range for an input "
     r"of shape \(3, 4, 5\)"),
    (dict(value_info=[("ev_x", TensorProto.FLOAT)]), TypeError, r"value_info must be a dict"),
])
def test_bad_arguments(kwargs, error, message):
    net, declare = output_net("export_values", "ev_y")
    net.PyCumSum("ev_x", "ev_y", axis=3)  # out of range for every shape here: only the run notices
    declare()
    with pytest.raises(error, match=message):
        pycumsum_op.onnx.export(net, **kwargs)


def test_builder_arguments_this_version_does_not_know_are_named_before_the_net_runs():
    net, declare = output_net("export_future", "efu_y")
    params = {"scan": "cumsum", "axis": 0, "algorithm": "tree"}  # as a later version might save
    net.Python((scan_forward, (), params), grad_f=(scan_backward, (), params))(["efu_x"], ["efu_y"], name="PyCumSum")
    declare()
    with pytest.raises(UnsafeNetError, match=r"(?s)refusing net 'export_future'.*unexpected keyword argument "
                                             r"'algorithm'"):
        pycumsum_op.onnx.export(net, value_info={"efu_x": (TensorProto.FLOAT, (3,))})
