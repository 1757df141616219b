"""Lowered nets through Caffe2's mobile_exporter: exactly the declared outputs, no internal blob.

``mobile_exporter.Export`` makes every blob that no op reads a predictor output. A lowering that
reads its result in place (a Reshape of the output) loses the output; one that leaves a blob unread
(Reshape's old shape, Concat's split sizes) adds an internal blob to the outputs. Scan lengths that
are whole numbers of blocks (40, 100, 1000) and those that are not (3, 16, 17, 32) are tried on
every axis of a rank-3 input, for both targets, then run by Caffe2's Predictor against torch.
"""
import itertools

import numpy as np
import pytest
import torch
from caffe2.python import core, workspace
from caffe2.python.predictor import mobile_exporter

import pycumsum_op

LENGTHS = [3, 16, 17, 32, 40, 100, 1000]
FLAGS = [(False, False), (True, False), (False, True), (True, True)]  # (exclusive, reverse)


def exported_outputs(netdef):
    """The outputs ``mobile_exporter.Export`` gives a predictor of ``netdef``."""
    _, predict_net = mobile_exporter.Export(workspace, netdef, [])
    return list(predict_net.external_output)


def scan_net(axis, exclusive, reverse):
    net = core.Net("lower_export")
    net.PyCumSum("le_x", "le_y", axis=axis, exclusive=exclusive, reverse=reverse)
    net.AddExternalOutput(core.BlobReference("le_y"))
    return net


@pytest.mark.parametrize("target", ["aten", "portable"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("length", LENGTHS)
def test_export_keeps_exactly_the_declared_output(length, dtype, target, clean_workspace, torch_scan):
    rng = np.random.RandomState(length)
    for axis, (exclusive, reverse) in zip(range(3), itertools.cycle(FLAGS[length % 4:] + FLAGS)):
        shape = [2, 3, 2]
        shape[axis] = length
        x = (rng.uniform(-1, 1, shape) if dtype == np.float32 else rng.randint(-50, 50, shape)).astype(dtype)
        net = scan_net(axis, exclusive, reverse)
        lowered = pycumsum_op.lower(net, target, shapes={"le_x": x.shape}, dtypes={"le_x": x.dtype})
        init_net, predict_net = mobile_exporter.Export(workspace, lowered, [])
        assert list(predict_net.external_output) == ["le_y"], (axis, exclusive, reverse)
        read = {blob for op in lowered.op for blob in op.input}
        assert "le_y" not in read
        predictor = workspace.Predictor(init_net.SerializeToString(), predict_net.SerializeToString())
        (y,) = predictor.run([x])
        reference = torch_scan(torch.from_numpy(x), axis, exclusive, reverse).numpy()
        assert y.dtype == reference.dtype
        np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-5 * max(1, length ** 0.5))


@pytest.mark.parametrize("target", ["aten", "portable"])
@pytest.mark.parametrize("length", [3, 40, 1000])
def test_training_net_lowered_exports_the_same_outputs(length, target, clean_workspace):
    """Lowering forward and gradient ops leaves the same never-read blobs as the Python-op net."""
    x = np.random.RandomState(1).uniform(-1, 1, (2, length)).astype(np.float32)
    workspace.FeedBlob("lt_x", x)
    workspace.FeedBlob("lt_w", x[::-1].copy())
    net = core.Net("lower_export_training")
    y = net.PyCumSum("lt_x", "lt_y", axis=1, reverse=length % 2 == 0)
    loss = net.SumElements(net.Mul([y, "lt_w"], "lt_yw"), "lt_loss")
    net.AddGradientOperators([loss])
    lowered = pycumsum_op.lower(net, target)
    assert not [op for op in lowered.op if op.type.startswith("Python")]
    assert sorted(exported_outputs(lowered)) == sorted(exported_outputs(net.Proto())) == ["lt_w_grad", "lt_x_grad"]
