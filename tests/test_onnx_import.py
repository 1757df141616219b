"""ONNX -> Caffe2: models with CumSum prepared by pycumsum_op.onnx and run on the real Caffe2 runtime.

Oracles: torch (models made by torch.onnx.export, outputs compared with the torch module's),
onnxruntime (hand-built CumSum models of every type, axis source and flag), numpy in float64.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

import pycumsum_op.onnx
from pycumsum_op import ScanArgumentError
from pycumsum_op.onnx.importer import CumSumBackend
from pycumsum_op.onnx.facts import GraphFacts
from pycumsum_op.onnx.ops.scan import scan_operator
from onnx_support import (FLAGS, ONNX_TYPES, TORCH_CASES, LinearSoftmaxCumSum, cumsum_model, onnxruntime_outputs,
                          run_saved_nets, torch_model)


@pytest.mark.parametrize("opset", [11, 13, 14])
@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_torch_export_round_trip_equals_torch(case, opset):
    module, example = TORCH_CASES[case]
    model = torch_model(module, example, opset)
    assert "CumSum" in [node.op_type for node in model.graph.node]
    outputs = pycumsum_op.onnx.prepare(model).run([example.numpy()])
    expected = module(example).numpy()
    assert outputs.y.dtype == expected.dtype
    np.testing.assert_array_equal(outputs.y, expected)  # PyCumSum sums as torch does on CPU


@pytest.mark.parametrize("opset", [11, 13, 14])
def test_linear_softmax_cumsum_model(opset):
    module = LinearSoftmaxCumSum().eval()
    x = torch.randn(8, 6)
    rep = pycumsum_op.onnx.prepare(torch_model(module, x, opset))
    for batch in (x, torch.randn(8, 6)):  # runs again with new data (the init net ran once)
        np.testing.assert_allclose(rep.run([batch.numpy()]).y, module(batch).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert [op.name for op in rep.predict_net.op if op.type == "Python"] == ["PyCumSum"]


@pytest.mark.parametrize("axis_source", ["initializer", "constant", "input"])
@pytest.mark.parametrize("elem_type", ONNX_TYPES)
@pytest.mark.parametrize("flags", FLAGS, ids=["inclusive", "exclusive", "reverse", "exclusive_reverse"])
def test_cumsum_models_equal_onnxruntime(elem_type, axis_source, flags):
    rng = np.random.default_rng(elem_type)
    dtype = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type]
    x = (rng.standard_normal((3, 4, 5)) * 100).astype(dtype)
    for axis in (-1, 1, 0):
        model = cumsum_model(elem_type, x.shape, axis, axis_source, 11, **flags)
        feeds = {"x": x}
        if axis_source == "input":
            feeds["axis"] = np.array(axis, np.int32 if axis % 2 else np.int64)
        rep = pycumsum_op.onnx.prepare(model)
        ours = rep.run(feeds).y
        expected = onnxruntime_outputs(model, feeds)[0]
        assert ours.dtype == expected.dtype == dtype  # CumSum keeps int32 (PyCumSum alone gives int64)
        np.testing.assert_allclose(ours, expected, rtol=1e-6)
        uses_axis_argument = axis_source != "input"
        assert [op.input[1:] == [] for op in rep.predict_net.op if op.type == "Python"] == [uses_axis_argument]


def test_runtime_axis_changes_between_runs():
    rep = pycumsum_op.onnx.prepare(cumsum_model(TensorProto.DOUBLE, (3, 4), 0, "input", 11))
    x = np.arange(12.0).reshape(3, 4)
    for axis in (0, 1, -1, -2):
        np.testing.assert_array_equal(rep.run({"x": x, "axis": np.array(axis, np.int64)}).y, np.cumsum(x, axis))


def test_runtime_axis_out_of_range_is_a_clear_error():
    rep = pycumsum_op.onnx.prepare(cumsum_model(TensorProto.FLOAT, (3, 4), 0, "input", 11))
    with pytest.raises(ScanArgumentError, match=r"PyCumSum: axis=2 is out of range for an input of shape \(3, 4\)"):
        rep.run({"x": np.ones((3, 4), np.float32), "axis": np.array(2, np.int64)})


def test_float16_at_opset_14():
    rng = np.random.default_rng(16)
    x = rng.standard_normal(3000).astype(np.float16)
    model = cumsum_model(TensorProto.FLOAT16, x.shape, 0, "initializer", 14)
    ours = pycumsum_op.onnx.prepare(model).run([x]).y
    assert ours.dtype == np.float16
    # PyCumSum sums in float64 and rounds each output once (numpy's own float16 cumsum sums in float16)
    np.testing.assert_array_equal(ours, np.cumsum(x.astype(np.float64)).astype(np.float16))
    np.testing.assert_allclose(ours.astype(np.float64), onnxruntime_outputs(model, {"x": x})[0], rtol=2e-3, atol=2e-3)
    ones = np.ones(3000, np.float16)  # a float16 running sum would stall at 2048
    assert np.cumsum(ones)[-1] == 2048
    assert pycumsum_op.onnx.prepare(model).run([ones]).y[-1] == onnxruntime_outputs(model, {"x": ones})[0][-1] == 3000


@pytest.mark.parametrize("elem_type", [TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL])
def test_unsupported_types_are_refused_by_name(elem_type):
    model = cumsum_model(elem_type, (4,), 0, "initializer", 11)
    with pytest.raises(ValueError, match=r"^ONNX CumSum node 'y' \(opset 11\): input 0 'x' is {}; Caffe2 runs CumSum "
                                           r"right on FLOAT, INT32, INT64, FLOAT16, DOUBLE only$".format(
                                               TensorProto.DataType.Name(elem_type))):
        pycumsum_op.onnx.prepare(model)


def test_unknown_input_type_is_refused():
    graph = helper.make_graph([helper.make_node("CumSum", ["h", "axis"], ["y"])], "untyped", [], [])
    model = helper.make_model(graph)
    with pytest.raises(ValueError, match=r"the element type of input 'h' is unknown"):
        scan_operator(model.graph.node[0], GraphFacts(model.graph), 11)


def test_matrix_axis_constant_is_refused():
    model = cumsum_model(TensorProto.FLOAT, (2, 3), 0, "initializer", 11)
    model.graph.initializer[0].CopyFrom(helper.make_tensor("axis", TensorProto.INT64, [2], [0, 1]))
    with pytest.raises(ValueError, match=r"the axis 'axis' must be a 0-d int32 or int64 tensor, got shape \(2,\)"):
        pycumsum_op.onnx.prepare(model)


def test_cumsum_in_a_subgraph_is_refused():
    body = helper.make_graph([helper.make_node("CumSum", ["x", "axis"], ["inner"])], "then", [],
                             [helper.make_tensor_value_info("inner", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], then_branch=body, else_branch=body)], "nested",
        [helper.make_tensor_value_info(name, elem, shape) for name, elem, shape in
         [("cond", TensorProto.BOOL, []), ("x", TensorProto.FLOAT, [3]), ("axis", TensorProto.INT64, [])]],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    with pytest.raises(ValueError, match=r"scans inside subgraphs \(If > CumSum inner, If > CumSum inner\) are not supported"):
        pycumsum_op.onnx.prepare(model)


def test_backend_run_model_and_run_node():
    x = np.arange(10, dtype=np.int32).reshape(2, 5)
    model = cumsum_model(TensorProto.INT32, x.shape, 1, "initializer", 11, reverse=1)
    np.testing.assert_array_equal(pycumsum_op.onnx.backend.run_model(model, [x])[0], onnxruntime_outputs(model, {"x": x})[0])
    node = helper.make_node("CumSum", ["a", "b"], ["c"], exclusive=1)
    (result,) = CumSumBackend.run_node(node, [x, np.array(-1, np.int64)])
    np.testing.assert_array_equal(result, np.cumsum(x, 1) - x)
    (relu,) = CumSumBackend.run_node(helper.make_node("Relu", ["a"], ["b"]), [np.array([-1.0, 2.0], np.float32)])
    np.testing.assert_array_equal(relu, [0.0, 2.0])
    assert CumSumBackend.supports_device("CPU")


def test_to_caffe2_nets_are_safe_to_load_and_run(tmp_path):
    module = LinearSoftmaxCumSum().eval()
    x = torch.randn(4, 6)
    init_net, predict_net = pycumsum_op.onnx.to_caffe2(torch_model(module, x, 11))
    (tmp_path / "init.pb").write_bytes(init_net.SerializeToString())
    (tmp_path / "predict.pb").write_bytes(predict_net.SerializeToString())
    y = run_saved_nets(tmp_path / "init.pb", tmp_path / "predict.pb", {"x": x.numpy()}, "y")
    np.testing.assert_allclose(y, module(x).detach().numpy(), rtol=1e-5, atol=1e-6)


INSTALL_SCRIPT = textwrap.dedent("""
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np
    from onnx import TensorProto, helper
    import caffe2.python.onnx.backend as stock
    import pycumsum_op.onnx

    graph = helper.make_graph([helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              [helper.make_tensor("axis", TensorProto.INT64, [], [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    x = np.array([1, 2, 3, 4], np.float32)
    try:
        stock.prepare(model)
    except RuntimeError as error:
        print("before:", "Don't know how to translate op CumSum" in str(error))
    pycumsum_op.onnx.install()
    pycumsum_op.onnx.install()
    print("after:", stock.prepare(model).run([x]).y.tolist())
    print("run_model:", stock.run_model(model, [x])[0].tolist())
""")


@pytest.mark.slow  # a fresh process
def test_install_is_an_explicit_idempotent_opt_in():
    """In a fresh process: importing pycumsum_op.onnx changes nothing; install() (twice) makes stock prepare work."""
    result = subprocess.run([sys.executable, "-c", INSTALL_SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, timeout=300, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["before: True", "after: [0.0, 1.0, 3.0, 6.0]",
                                          "run_model: [0.0, 1.0, 3.0, 6.0]"]


def test_int32_cumsum_wraps_as_int32_arithmetic_does():
    """ONNX CumSum on int32 stays int32; a sum past 2**31 - 1 wraps as in onnxruntime and numpy's int32 cumsum."""
    x = np.array([2 ** 31 - 1, 1, 5, -7], np.int32)
    model = cumsum_model(TensorProto.INT32, x.shape, 0, "initializer", 11)
    ours = pycumsum_op.onnx.prepare(model).run([x]).y
    np.testing.assert_array_equal(ours, np.cumsum(x, dtype=np.int32))
    np.testing.assert_array_equal(ours, onnxruntime_outputs(model, {"x": x})[0])
