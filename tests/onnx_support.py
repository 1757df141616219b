"""Shared by the ONNX tests: torch.onnx.export to a ModelProto, the torch and hand-built CumSum models,
onnxruntime (the oracle), saved nets run."""
import io
import warnings

import onnx
import onnxruntime
import pytest
import torch
from caffe2.python import workspace
from onnx import TensorProto, helper

from pycumsum_op.serialization import load_net
from pycumsum_op.torch_versions import has

#: The torch capability pycumsum_op.onnx needs with onnx >= 1.9 (`pycumsum_op.torch_versions`).
ONNX_BACKEND = "caffe2 onnx backend without onnx.optimizer"


def torch_model(module, example, opset):
    """``module`` exported by torch.onnx.export at ``opset`` (input "x", output "y"), as an onnx.ModelProto."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, buffer, opset_version=opset, input_names=["x"], output_names=["y"])
    return onnx.load_from_string(buffer.getvalue())


class CumSum(torch.nn.Module):
    """``torch.cumsum(x, dim, dtype=dtype)`` as a module, for torch.onnx.export."""

    def __init__(self, dim, dtype=None):
        super().__init__()
        self.dim, self.dtype = dim, dtype

    def forward(self, x):
        return torch.cumsum(x, self.dim, dtype=self.dtype)


TORCH_CASES = {
    "1d_dim0": (CumSum(0), torch.randn(7)),
    "2d_negative_dim": (CumSum(-1), torch.randn(3, 5)),
    "3d_dim1": (CumSum(1), torch.randn(2, 4, 3)),
    "3d_dim_minus3": (CumSum(-3), torch.randn(4, 2, 3)),
    "dtype_float64": (CumSum(1, torch.float64), torch.randn(3, 4)),
    "int64_input": (CumSum(0), torch.randint(-50, 50, (6, 2))),
}


class LinearSoftmaxCumSum(torch.nn.Module):
    """An ordinal-regression head: class probabilities -> their cumulative distribution."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(6, 5)

    def forward(self, x):
        return torch.cumsum(torch.softmax(self.linear(x), dim=-1), dim=1)


#: ops whose kernels onnxruntime before 1.19 (1.10.0, the oracle on CPython 3.6 and 3.7) gets wrong or lacks: its
#: Floor and Ceil saturate to the int32 range (Floor(inf) = -2**31), and it has no double Floor/Ceil nor float16 and
#: double IsNaN; 1.19.2 runs them right. Tests of these ops against it are skipped there, with this reason.
OLD_ORACLE_WRONG = frozenset(["Ceil", "Floor", "IsNaN"])
ORACLE_IS_1_19 = tuple(int(part) for part in onnxruntime.__version__.split(".")[:2]) >= (1, 19)


def skip_where_the_oracle_is_wrong(op):
    """Skip a test of ``op`` against an onnxruntime older than 1.19 that gets ``op`` wrong (`OLD_ORACLE_WRONG`)."""
    if op in OLD_ORACLE_WRONG and not ORACLE_IS_1_19:
        pytest.skip("onnxruntime {} gets ONNX {} wrong or has no kernel for it (1.19.2 runs it right)".format(
            onnxruntime.__version__, op))


def oracle_outputs(model, feeds):
    """`onnxruntime_outputs`, but where an onnxruntime older than 1.19 has no kernel for a node (1.10.0, CPython 3.6's:
    no Trilu, no int32 Clip, ...) the test is skipped with that reason instead of failing on the oracle."""
    try:
        return onnxruntime_outputs(model, feeds)
    except Exception as error:  # onnxruntime's NotImplemented
        if ORACLE_IS_1_19 or "NOT_IMPLEMENTED" not in str(error):
            raise
        pytest.skip("onnxruntime {} has no kernel: {}".format(onnxruntime.__version__, str(error).splitlines()[0]))


def onnxruntime_outputs(model, feeds):
    """Every output of ``model`` run by onnxruntime on ``feeds``, its graph optimizations off (they fold and fuse
    nodes: the oracle is the nodes as the model writes them)."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_saved_nets(init_path, predict_path, feeds, output):
    """Load (and verify) saved init and predict nets, run them in a clean workspace; returns blob ``output``."""
    workspace.ResetWorkspace()
    try:
        workspace.RunNetOnce(load_net(str(init_path)))
        for name, value in feeds.items():
            workspace.FeedBlob(name, value)
        workspace.RunNetOnce(load_net(str(predict_path)))
        return workspace.FetchBlob(output)
    finally:
        workspace.ResetWorkspace()


def cumsum_model(elem_type, shape, axis, axis_source, opset, **flags):
    """A one-node CumSum model; the axis an initializer, a Constant node, or a graph input ("input")."""
    axis_type = TensorProto.INT32 if axis % 2 else TensorProto.INT64
    nodes, inputs, initializers = [], [helper.make_tensor_value_info("x", elem_type, shape)], []
    axis_tensor = helper.make_tensor("axis", axis_type, [], [axis])
    if axis_source == "initializer":
        initializers.append(axis_tensor)
    elif axis_source == "constant":
        nodes.append(helper.make_node("Constant", [], ["axis"], value=axis_tensor))
    else:
        inputs.append(helper.make_tensor_value_info("axis", axis_type, []))
    nodes.append(helper.make_node("CumSum", ["x", "axis"], ["y"], **flags))
    graph = helper.make_graph(nodes, "cumsum_" + axis_source, inputs,
                              [helper.make_tensor_value_info("y", elem_type, shape)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


FLAGS = [{}, {"exclusive": 1}, {"reverse": 1}, {"exclusive": 1, "reverse": 1}]
ONNX_TYPES = [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64]


def needs_onnx_backend(test):
    """Skips ``test`` (with the refusal as the reason) where `onnx_backend_refusal` is not None."""
    refusal = onnx_backend_refusal()
    return pytest.mark.skipif(refusal is not None, reason=refusal or "")(test)


def onnx_backend_refusal():
    """The ImportError message of ``import pycumsum_op.onnx`` where this torch's Caffe2 ONNX backend cannot load
    with this onnx (torch < 1.10 with onnx >= 1.9; asserted by tests/test_torch_versions.py), else None."""
    try:
        import pycumsum_op.onnx  # noqa: F401
    except ImportError as error:
        if has(ONNX_BACKEND):
            raise
        return str(error)
    return None
