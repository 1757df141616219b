"""Faults inside PyCumSum at run time surface as Python exceptions carrying the op's own message,
and the next run with good input succeeds (results checked against torch)."""
import pickle

import numpy as np
import pytest
import torch
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace
from caffe2.python.predictor import mobile_exporter

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from pycumsum_op.ops.builders import scan_backward, scan_forward
from scan_family_support import RUN_ERROR, op_message

GOOD = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
AXIS_MESSAGE = "PyCumSum: axis=1 is out of range for an input of shape (4,) (rank 1); valid axes are -1..0"


def expect_cumsum(blob, x, axis, torch_scan):
    np.testing.assert_allclose(workspace.FetchBlob(blob), torch_scan(torch.tensor(x), axis).numpy(),
                               rtol=1e-6, atol=1e-6)


def forward_net(name, net_type=None):
    net = core.Net(name)
    if net_type:
        net.Proto().type = net_type
        net.Proto().num_workers = 4
    net.PyCumSum("fx", "fy", axis=1)
    net.PyCumSum("fx", "fz", axis=0)
    return net


@pytest.mark.parametrize("net_type", [None, "dag"])
def test_bad_axis_at_run_time_raises_the_ops_message_then_good_input_runs(clean_workspace, torch_scan, net_type):
    net = forward_net("faults_axis", net_type)
    workspace.FeedBlob("fx", GOOD)
    workspace.CreateNet(net)
    for _ in range(3):  # fail, recover, fail again, recover again...
        workspace.FeedBlob("fx", GOOD[0])
        with pytest.raises(RUN_ERROR) as caught:
            workspace.RunNet(net.Proto().name)
        assert op_message(caught.value) == AXIS_MESSAGE
        workspace.FeedBlob("fx", GOOD)
        assert workspace.RunNet(net.Proto().name)
        expect_cumsum("fy", GOOD, 1, torch_scan)
        expect_cumsum("fz", GOOD, 0, torch_scan)


def test_non_numeric_input_raises_then_good_input_runs(clean_workspace, torch_scan):
    net = forward_net("faults_dtype")
    workspace.FeedBlob("fx", np.array([[b"a", b"b"]], dtype=object))
    workspace.CreateNet(net)
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: input of shape \(1, 2\) has dtype object; "
                                                r"expected a numeric or bool tensor"):
        workspace.RunNet(net.Proto().name)
    workspace.FeedBlob("fx", GOOD)
    workspace.RunNet(net.Proto().name)
    expect_cumsum("fy", GOOD, 1, torch_scan)


def test_gradient_op_fault_then_good_gradient_runs(clean_workspace, torch_scan):
    net = core.Net("faults_grad")
    y = net.PyCumSum("gx", "gy", axis=1)
    net.AddExternalInput("gy_grad")
    net.AddGradientOperators({y: "gy_grad"})
    workspace.FeedBlob("gx", GOOD)
    workspace.FeedBlob("gy_grad", np.ones(4, np.float32))
    workspace.CreateNet(net)
    with pytest.raises(RUN_ERROR, match=r"(^|ScanArgumentError: )PyCumSumGradient: .*\(4,\).*\(3, 4\)"):
        workspace.RunNet(net.Proto().name)
    grad = np.random.RandomState(0).standard_normal((3, 4)).astype(np.float32)
    workspace.FeedBlob("gy_grad", grad)
    workspace.RunNet(net.Proto().name)
    x = torch.tensor(GOOD, requires_grad=True)
    (expected,) = torch.autograd.grad(torch_scan(x, 1), [x], [torch.tensor(grad)])
    np.testing.assert_allclose(workspace.FetchBlob("gx_grad"), expected.numpy(), rtol=1e-6, atol=1e-6)


def test_predictor_run_fault_then_good_input(clean_workspace, torch_scan):
    net = core.Net("faults_predictor")
    net.PyCumSum("px", "py", axis=1)
    workspace.FeedBlob("px", GOOD)
    workspace.RunNetOnce(net)
    predictor = workspace.Predictor(*mobile_exporter.Export(workspace, net, []))
    with pytest.raises(RUN_ERROR) as caught:
        predictor.run([GOOD[0]])
    assert op_message(caught.value) == AXIS_MESSAGE
    (result,) = predictor.run([GOOD])
    np.testing.assert_allclose(result, torch_scan(torch.tensor(GOOD), 1).numpy(), rtol=1e-6, atol=1e-6)


def test_bad_builder_params_fail_at_net_creation_and_the_workspace_stays_usable(clean_workspace, torch_scan):
    """A saved op whose params its builder rejects: CreateNet raises the builder's message."""
    params = {"scan": "cumsum", "axis": "1", "exclusive": False, "reverse": False, "dtype": None}
    bad = caffe2_pb2.NetDef(name="faults_bad_params")
    op = bad.op.add(type="Python", name="PyCumSum", input=["fx"], output=["fy"])
    op.arg.add(name="pickled_builder", s=pickle.dumps((scan_forward, (), params)))
    op.arg.add(name="pickled_grad_builder", s=pickle.dumps((scan_backward, (), params)))
    op.arg.add(name="pass_workspace", i=0)
    workspace.FeedBlob("fx", GOOD)
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: axis must be an integer .* got axis='1'"):
        workspace.CreateNet(bad)
    good = forward_net("faults_good_after_bad")
    workspace.CreateNet(good)
    workspace.RunNet(good.Proto().name)
    expect_cumsum("fy", GOOD, 1, torch_scan)
