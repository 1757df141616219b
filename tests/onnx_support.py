"""Shared by the ONNX tests: torch.onnx.export to a ModelProto, onnxruntime (the oracle), saved nets run."""
import io
import warnings

import onnx
import onnxruntime
import torch
from caffe2.python import workspace

from pycumsum_op.serialization import load_net


def torch_model(module, example, opset):
    """``module`` exported by torch.onnx.export at ``opset`` (input "x", output "y"), as an onnx.ModelProto."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, buffer, opset_version=opset, input_names=["x"], output_names=["y"])
    return onnx.load_from_string(buffer.getvalue())


class LinearSoftmaxCumSum(torch.nn.Module):
    """An ordinal-regression head: class probabilities -> their cumulative distribution."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(6, 5)

    def forward(self, x):
        return torch.cumsum(torch.softmax(self.linear(x), dim=-1), dim=1)


def onnxruntime_outputs(model, feeds):
    """Every output of ``model`` run by onnxruntime on ``feeds``."""
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
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
