"""ONNX -> Caffe2 with ``lower="aten"`` / ``"portable"``: CumSum becomes Caffe2's C++ operators, no Python op left.

Oracles: onnx's own node-test data (``test_cumsum_*``, with the axis its test feeds made a constant), torch
(torch.onnx.export round trips, torch.autograd for gradients), onnxruntime (hand-built models of every type
and flag).
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import copy
import glob
import importlib
import io
import os
import re
import warnings

import numpy as np
import onnx
import onnx.backend.test
import torch
from caffe2.python import core, workspace
from onnx import TensorProto, helper, numpy_helper

import pycumsum_op
import pycumsum_op.onnx
from onnx_support import (FLAGS, ONNX_TYPES, TORCH_CASES, CumSum, LinearSoftmaxCumSum, cumsum_model,
                          onnxruntime_outputs, run_saved_nets, torch_model)

TARGETS = ["aten", "portable"]
NODE_TESTS = sorted(glob.glob(os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "node",
                                           "test_cumsum_*")))


def python_ops(*netdefs):
    return [op.type for netdef in netdefs for op in netdef.op if op.type.startswith("Python")]


def read_tensor(path):
    tensor = TensorProto()
    with open(path, "rb") as handle:
        tensor.ParseFromString(handle.read())
    return numpy_helper.to_array(tensor)


def official_case(directory):
    """(model, x, axis, expected y) of one of onnx's test_cumsum_* node tests."""
    data = os.path.join(directory, "test_data_set_0")
    model = onnx.load(os.path.join(directory, "model.onnx"))
    x, axis = (read_tensor(os.path.join(data, "input_{}.pb".format(i))) for i in (0, 1))
    return model, x, axis, read_tensor(os.path.join(data, "output_0.pb"))


def with_constant_axis(model, axis, source):
    """``model`` with its axis input replaced by the constant ``axis``: an initializer, or a Constant node."""
    model = copy.deepcopy(model)
    name = model.graph.node[0].input[1]
    kept = [info for info in model.graph.input if info.name != name]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    tensor = numpy_helper.from_array(axis, name)
    if source == "initializer":
        model.graph.initializer.extend([tensor])
    else:
        model.graph.node.insert(0, helper.make_node("Constant", [], [name], value=tensor))
    onnx.checker.check_model(model)
    return model


def test_all_seven_official_models_are_used():
    assert [os.path.basename(path) for path in NODE_TESTS] == [
        "test_cumsum_1d", "test_cumsum_1d_exclusive", "test_cumsum_1d_reverse", "test_cumsum_1d_reverse_exclusive",
        "test_cumsum_2d_axis_0", "test_cumsum_2d_axis_1", "test_cumsum_2d_negative_axis"]


@pytest.mark.parametrize("source", ["initializer", "constant"])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("directory", NODE_TESTS, ids=os.path.basename)
def test_official_models_with_a_constant_axis_lower_and_equal_onnx_data(directory, target, source):
    model, x, axis, expected = official_case(directory)
    model = with_constant_axis(model, axis, source)
    rep = pycumsum_op.onnx.prepare(model, lower=target)
    assert python_ops(rep.init_net, rep.predict_net) == []
    for _ in range(2):  # the first run also runs the init net (which holds the translated ops too)
        y = rep.run([x]).y
        assert y.dtype == expected.dtype == np.float64
        np.testing.assert_allclose(y, expected, rtol=1e-12)
    np.testing.assert_allclose(y, onnxruntime_outputs(model, {"x": x})[0], rtol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("directory", NODE_TESTS[:1] + NODE_TESTS[-1:], ids=os.path.basename)
def test_official_models_with_their_runtime_axis_are_refused_by_node(directory, target):
    model, x, axis, expected = official_case(directory)
    with pytest.raises(ValueError, match=r"^pycumsum_op.onnx.prepare\(lower='{}'\): ONNX CumSum node 'y': its axis "
                                         r"'axis' is a graph input, known only at run time, but the lowered C\+\+ "
                                         r"operators fix the axis when lowering; make the axis a constant .* or use "
                                         r"lower=None".format(target)):
        pycumsum_op.onnx.prepare(model, lower=target)
    np.testing.assert_allclose(pycumsum_op.onnx.prepare(model).run([x, axis]).y, expected, rtol=1e-12)  # None works


@pytest.mark.parametrize("opset", [11, 13, 14])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_torch_export_round_trip_lowered_equals_torch(case, target, opset):
    module, example = TORCH_CASES[case]
    rep = pycumsum_op.onnx.prepare(torch_model(module, example, opset), lower=target)
    assert python_ops(rep.init_net, rep.predict_net) == []
    expected = module(example).numpy()
    y = rep.run([example.numpy()]).y
    assert y.dtype == expected.dtype
    if target == "aten" or y.dtype.kind == "i":  # aten runs torch's kernel; portable is exact for integers
        np.testing.assert_array_equal(y, expected)
    else:  # portable float32: float64 sums in another order
        np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def lowered_gradient(init_net, predict_net, x, grad_y):
    """d(y . grad_y)/dx by AddGradientOperators on the lowered predict net (run after its init net)."""
    workspace.ResetWorkspace()
    try:
        workspace.RunNetOnce(init_net)
        workspace.FeedBlob("x", x)
        workspace.FeedBlob("y_grad_given", grad_y)
        net = core.Net(predict_net)
        gradients = net.AddGradientOperators({"y": "y_grad_given"})
        net.AddExternalInput("y_grad_given")
        assert python_ops(net.Proto()) == []
        workspace.RunNetOnce(net)
        return workspace.FetchBlob(str(gradients["x"]))
    finally:
        workspace.ResetWorkspace()


# Not dtype_float64: the stock backend translates its ONNX Cast without from_type, which Caffe2's Cast gradient needs.
GRADIENT_CASES = dict({name: case for name, case in TORCH_CASES.items()
                       if case[1].is_floating_point() and case[0].dtype is None},
                      linear_softmax_cumsum=(LinearSoftmaxCumSum().eval(), torch.randn(4, 6)))


@pytest.mark.parametrize("opset", [11, 14])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(GRADIENT_CASES))
def test_gradient_of_lowered_predict_net_equals_torch_autograd(case, target, opset):
    module, example = GRADIENT_CASES[case]
    init_net, predict_net = pycumsum_op.onnx.to_caffe2(torch_model(module, example, opset), lower=target)
    x = example.clone().requires_grad_(True)
    y = module(x)
    grad_y = torch.from_numpy(np.random.default_rng(opset).standard_normal(tuple(y.shape))).to(y.dtype)
    (expected,) = torch.autograd.grad(y, x, grad_y)
    ours = lowered_gradient(init_net, predict_net, example.numpy(), grad_y.numpy())
    assert ours.dtype == expected.numpy().dtype
    np.testing.assert_allclose(ours, expected.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("elem_type", ONNX_TYPES)
def test_every_type_and_flag_equals_onnxruntime(elem_type, target):
    dtype = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type]
    x = (np.random.default_rng(elem_type).standard_normal((3, 70)) * 100).astype(dtype)  # 70: blocked
    for flags in FLAGS:
        for axis, source in ((-1, "initializer"), (0, "constant"), (1, "constant")):
            model = cumsum_model(elem_type, x.shape, axis, source, 11, **flags)
            rep = pycumsum_op.onnx.prepare(model, lower=target)
            assert python_ops(rep.init_net, rep.predict_net) == []
            ours, expected = rep.run([x]).y, onnxruntime_outputs(model, {"x": x})[0]
            assert ours.dtype == expected.dtype == dtype  # int32 stays int32, as CumSum says
            np.testing.assert_allclose(ours, expected, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                       atol=1e-3 if dtype == np.float32 else 0, err_msg=str((flags, axis)))


@pytest.mark.parametrize("target", TARGETS)
def test_int32_wraps_as_onnxruntime(target):
    x = np.array([2 ** 31 - 1, 1, 5, -7], np.int32)
    model = cumsum_model(TensorProto.INT32, x.shape, 0, "initializer", 11)
    ours = pycumsum_op.onnx.prepare(model, lower=target).run([x]).y
    np.testing.assert_array_equal(ours, onnxruntime_outputs(model, {"x": x})[0])


def dynamic_batch_model(opset=13):
    """torch.onnx.export with a symbolic batch size (dim 0) and cumsum over dim 1."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(CumSum(1), torch.randn(2, 5), buffer, opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    return onnx.load_from_string(buffer.getvalue())


@pytest.mark.parametrize("target", TARGETS)
def test_symbolic_batch_size_stays_free(target):
    rep = pycumsum_op.onnx.prepare(dynamic_batch_model(), lower=target)
    for batch in (3, 7):
        x = torch.randn(batch, 5)
        np.testing.assert_allclose(rep.run([x.numpy()]).y, torch.cumsum(x, 1).numpy(), rtol=1e-6, atol=1e-6)


def test_portable_scan_length_that_the_model_leaves_open_is_refused():
    model = cumsum_model(TensorProto.FLOAT, ["batch", "n"], 1, "initializer", 11)
    with pytest.raises(ValueError, match=r"lower='portable'\): ONNX CumSum node 'y': target 'portable' fixes the "
                                         r"scan length when lowering, but the model leaves the length of axis 1 of "
                                         r"input 'x' open \(its dims: \['\?', '\?'\]\); .* or use lower='aten'"):
        pycumsum_op.onnx.prepare(model, lower="portable")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(pycumsum_op.onnx.prepare(model, lower="aten").run([x]).y, np.cumsum(x, 1))


def test_runtime_axis_sources_are_named():
    shared = cumsum_model(TensorProto.FLOAT, (2, 3), 1, "initializer", 11)  # an initializer that is also an input
    shared.graph.input.extend([helper.make_tensor_value_info("axis", TensorProto.INT32, [])])
    computed = cumsum_model(TensorProto.FLOAT, (2, 3), 0, "input", 11)  # axis = Abs(a): computed by a node
    computed.graph.node[0].input[1] = "abs_axis"
    computed.graph.node.insert(0, helper.make_node("Abs", ["axis"], ["abs_axis"], name="make_axis"))
    for model, words in ((shared, "a graph input (its initializer is only a default that a caller may override)"),
                         (computed, "computed by Abs node 'make_axis'")):
        with pytest.raises(ValueError, match=r"CumSum node 'y': its axis '\w+' is {}, known only at run time".format(
                re.escape(words))):
            pycumsum_op.onnx.prepare(model, lower="aten")


def test_float16_and_unknown_targets_are_refused():
    model = cumsum_model(TensorProto.FLOAT16, (4,), 0, "initializer", 14)
    for target in TARGETS:
        with pytest.raises(ValueError, match=r"CumSum node 'y': input 'x' is FLOAT16, which no lowering target "
                                             r"computes on CPU .* use lower=None"):
            pycumsum_op.onnx.prepare(model, lower=target)
    with pytest.raises(ValueError, match=r"unknown lower='python'; use None \(PyCumSum\) or a lowering target: "
                                         r"'aten', 'portable'"):
        pycumsum_op.onnx.prepare(model, lower="python")


@pytest.mark.parametrize("target", TARGETS)
def test_to_caffe2_lowered_nets_load_and_run_without_python_ops(target, tmp_path):
    module, x = LinearSoftmaxCumSum().eval(), torch.randn(4, 6)
    init_net, predict_net = pycumsum_op.onnx.to_caffe2(torch_model(module, x, 13), lower=target)
    assert python_ops(init_net, predict_net) == []
    assert pycumsum_op.verify_net(predict_net) == []  # nothing pickled: deployable without Python
    (tmp_path / "init.pb").write_bytes(init_net.SerializeToString())
    (tmp_path / "predict.pb").write_bytes(predict_net.SerializeToString())
    y = run_saved_nets(tmp_path / "init.pb", tmp_path / "predict.pb", {"x": x.numpy()}, "y")
    np.testing.assert_allclose(y, module(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_the_import_emits_the_targets_operators_without_a_pycumsum_op(target, monkeypatch):
    """Imported for a target, a CumSum becomes its C++ operators directly: no PyCumSum op is built, and no
    builder pickle is read back (both would fail here), and the result is onnxruntime's."""
    def refused(*args, **kwargs):
        raise AssertionError("a PyCumSum op was built or read back")

    monkeypatch.setattr(importlib.import_module("pycumsum_op.onnx.ops.scan"), "add_scan_op", refused)
    monkeypatch.setattr(importlib.import_module("pycumsum_op.lowering.lower"), "inspect_builder", refused)
    model = cumsum_model(TensorProto.FLOAT, [3, 5], 1, "constant", 13, reverse=1)
    x = np.array([[1, np.inf, -np.inf, np.nan, 2], [3e38, 3e38, -3e38, -0.0, 1], [0, 1, 2, 3, 4]], np.float32)
    rep = pycumsum_op.onnx.prepare(model, lower=target)
    assert python_ops(rep.init_net, rep.predict_net) == []
    np.testing.assert_array_equal(rep.run({"x": x})[0], onnxruntime_outputs(model, {"x": x})[0])
