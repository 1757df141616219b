"""torch 1.10.2's nn.LSTM / nn.GRU exports (one or two layers, batch_first or not, one direction or both) at
opsets 11, 13 and 14, static and dynamic (sequence, batch) axes, through pycumsum_op.onnx.prepare (Caffe2's
RecurrentNetwork), ``lower="aten"``, ``lower="portable"`` (static shapes) and ``pycumsum-op onnx import``: every output (the cumsummed sequence, the
last hidden and cell states) against onnxruntime, dynamic models at another sequence length and batch size
than exported; nn.RNN (tanh, relu); onnx's own LSTM / GRU / RNN node tests. The single-node forms and their
refusals: tests/test_onnx_forms.py.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import io
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
from caffe2.python import workspace

import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from pycumsum_op.serialization import load_net
from onnx_forms_support import outcome
from onnx_support import onnxruntime_outputs

TOLERANCE = 1e-4
#: the input exported with: (sequence, batch, features), or (batch, sequence, features) with batch_first
EXAMPLE = (5, 2, 3)
#: what dynamic models run on besides it: other sequence lengths and batch sizes
OTHERS = [(9, 3, 3), (1, 1, 3)]


class Recurrent(torch.nn.Module):
    """nn.LSTM / nn.GRU's output sequence, cumulatively summed over time, and its last states."""

    def __init__(self, kind, layers, batch_first, bidirectional=False, **options):
        super().__init__()
        torch.manual_seed(0)
        self.rnn = getattr(torch.nn, kind)(3, 4, num_layers=layers, batch_first=batch_first,
                                           bidirectional=bidirectional, **options)

    def forward(self, x):
        out, states = self.rnn(x)
        return (torch.cumsum(out, 1 if self.rnn.batch_first else 0),) + (
            states if isinstance(states, tuple) else (states,))


def exported(kind, layers=1, batch_first=False, opset=13, dynamic=False, bidirectional=False, **options):
    module = Recurrent(kind, layers, batch_first, bidirectional, **options).eval()
    names = ["y", "h"] + (["c"] if kind == "LSTM" else [])
    sequence, batch = (1, 0) if batch_first else (0, 1)
    axes = {"x": {sequence: "sequence", batch: "batch"}} if dynamic else None
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, torch.from_numpy(next(feeds(False, batch_first))["x"]), buffer,
                          opset_version=opset, input_names=["x"], output_names=names, dynamic_axes=axes)
    return onnx.load_from_string(buffer.getvalue())


def feeds(dynamic, batch_first):
    """The example's shape, and with dynamic axes the others (batch_first: the first two dims swapped)."""
    for number, (sequence, batch, features) in enumerate([EXAMPLE] + (OTHERS if dynamic else [])):
        shape = (batch, sequence, features) if batch_first else (sequence, batch, features)
        yield {"x": np.random.default_rng(number).standard_normal(shape).astype(np.float32)}


def difference(ours, expected) -> float:
    """The largest absolute difference over every output (shapes and types must be equal)."""
    assert len(ours) == len(expected)
    worst = 0.0
    for got, want in zip(ours, expected):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))))
    return worst


def prepared(model, lower=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Caffe2's backend warns about every opset above 9
        return pycumsum_op.onnx.prepare(model, lower=lower)


def check(model, dynamic, batch_first, lower=None):
    rep = prepared(model, lower)
    recurrent = [node.op_type for node in model.graph.node if node.op_type in ("LSTM", "GRU", "RNN")]
    assert recurrent and recurrent.count("LSTM") in (0, len(recurrent))
    assert "RecurrentNetwork" in [op.type for op in rep.predict_net.op]
    python_ops = [op for net in (rep.init_net, rep.predict_net) for op in net.op if op.type == "Python"]
    assert len(python_ops) == (0 if lower else 1)  # the CumSum's PyCumSum only
    for feed in feeds(dynamic, batch_first):
        rep.run(feed)  # the net runs again on the same workspace: nothing it changed in place may matter
        assert difference(rep.run(feed), onnxruntime_outputs(model, feed)) <= TOLERANCE


@pytest.mark.slow  # a torch.onnx.export each
@pytest.mark.parametrize("batch_first", [False, True], ids=["sequence_first", "batch_first"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent_exports_equal_onnxruntime(kind, layers, batch_first):
    check(exported(kind, layers, batch_first, opset=13, dynamic=True), True, batch_first)


@pytest.mark.slow
@pytest.mark.parametrize("kind, opset, dynamic", [  # opset 13 with dynamic axes: the test above
    (kind, opset, dynamic) for kind in ("LSTM", "GRU") for opset in (11, 13, 14) for dynamic in (False, True)
    if (opset, dynamic) != (13, True)])
def test_recurrent_exports_at_each_opset(kind, opset, dynamic):
    check(exported(kind, 2, True, opset, dynamic), dynamic, True)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_bidirectional_exports_equal_onnxruntime(kind):
    check(exported(kind, 2, False, opset=14, dynamic=True, bidirectional=True), True, False)


@pytest.mark.slow
@pytest.mark.parametrize("nonlinearity, bidirectional", [("tanh", False), ("relu", True)])
def test_vanilla_rnn_exports_equal_onnxruntime(nonlinearity, bidirectional):
    check(exported("RNN", 2, True, opset=13, dynamic=True, bidirectional=bidirectional, nonlinearity=nonlinearity),
          True, True)


@pytest.mark.slow
def test_lowered_recurrent_export_has_no_python_op():
    check(exported("LSTM", 2, False, opset=13, dynamic=True), True, False, lower="aten")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_portable_lowering_of_a_static_recurrent_export(kind):
    """``lower="portable"`` (static shapes): the CumSum as Caffe2's own operators, the layers as RecurrentNetwork."""
    check(exported(kind, 2, True, opset=13, dynamic=False), False, True, lower="portable")


@pytest.mark.slow  # a subprocess
def test_command_line_import_of_a_recurrent_export(tmp_path):
    model = exported("GRU", 2, True, opset=11, dynamic=True)
    onnx.save(model, str(tmp_path / "m.onnx"))
    command = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")
    subprocess.run([command, "onnx", "import", str(tmp_path / "m.onnx"), "--predict-net", str(tmp_path / "p.pb"),
                    "--init-net", str(tmp_path / "i.pb")], check=True, stdout=subprocess.PIPE)
    predict = load_net(str(tmp_path / "p.pb"))
    for feed in feeds(True, True):
        workspace.ResetWorkspace()
        try:
            workspace.RunNetOnce(load_net(str(tmp_path / "i.pb")))
            workspace.FeedBlob("x", feed["x"])
            workspace.RunNetOnce(predict)
            ours = [workspace.FetchBlob(name) for name in predict.external_output]
        finally:
            workspace.ResetWorkspace()
        assert difference(ours, onnxruntime_outputs(model, feed)) <= TOLERANCE


NODE_TESTS = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
#: onnx's node tests whose form has no translation -> what the refusal names
REFUSED = {"test_gru_batchwise": "attribute layout=1 is not accepted",
           "test_lstm_batchwise": "attribute layout=1 is not accepted",
           "test_simple_rnn_batchwise": "attribute layout=1 is not accepted",
           "test_lstm_with_peepholes": "input 7 (P, the peephole weights) is given"}


@pytest.mark.parametrize("name", sorted(name for name in os.listdir(NODE_TESTS) if name.startswith(
    ("test_lstm_", "test_gru_", "test_rnn_", "test_simple_rnn_"))))
def test_onnx_node_tests_equal_onnxruntime_or_are_refused(name):
    folder = os.path.join(NODE_TESTS, name)
    model = onnx.load(os.path.join(folder, "model.onnx"))
    feeds = {}
    for number, info in enumerate(model.graph.input):
        tensor = onnx.TensorProto()
        with open(os.path.join(folder, "test_data_set_0", "input_{}.pb".format(number)), "rb") as data:
            tensor.ParseFromString(data.read())
        feeds[info.name] = onnx.numpy_helper.to_array(tensor)
    if name in REFUSED:  # onnxruntime has no layout=1 either
        with pytest.raises(FormRefused) as refused:
            prepared(model)
        assert REFUSED[name] in str(refused.value) and len(str(refused.value).splitlines()) == 1, refused.value
    else:
        assert outcome(model, feeds) == ("match", None)
