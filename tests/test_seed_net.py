"""The legacy cumsum net, reproduced on the real Caffe2 runtime, and its EnsureDense fix.

Transpose -> SparseLengthsSum(triangular indices, lengths 0..C-1) -> Transpose over `prediction`
(N, C) runs forward but fails in backward with "Gradient of output …/Transpose is sparse (expected
dense)". It also computes an EXCLUSIVE cumsum: off by one against torch.cumsum. The operators often
suggested instead (ToDense, a native CumSum) do not exist.
"""
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from doctor_support import add_weighted_loss, run_with_gradients, torch_value_and_gradient
from pycumsum_op.idioms import add_sparse_lengths_cumsum

pytestmark = pytest.mark.usefixtures("clean_workspace")
N, C = 4, 6


def legacy_net(ensure_dense=False, exclusive=True):
    net = core.Net("legacy")
    add_sparse_lengths_cumsum(net, "prediction", C, blob_out="pred_cdist", exclusive=exclusive,
                              ensure_dense=ensure_dense)
    add_weighted_loss(net, "pred_cdist")
    return net


def data(seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(N, C).astype(np.float32), rng.randn(N, C).astype(np.float32)


def exclusive_torch_cumsum(x):
    inclusive = torch.cumsum(x, 1)
    return torch.cat([torch.zeros_like(inclusive[:, :1]), inclusive[:, :-1]], 1)


def test_the_legacy_net_runs_forward_but_its_backward_fails_as_reported():
    prediction, w = data()
    net = legacy_net()
    workspace.FeedBlob("prediction", prediction)
    workspace.FeedBlob("w", w)
    workspace.RunNetOnce(net)  # forward works
    with pytest.raises(Exception, match=r"Gradient of output prediction_cumsum_T is sparse \(expected dense\)"):
        net.AddGradientOperators(["loss"])


def test_the_legacy_net_is_an_exclusive_cumsum_off_by_one_against_torch():
    prediction, w = data(1)
    workspace.FeedBlob("prediction", prediction)
    workspace.FeedBlob("w", w)
    workspace.RunNetOnce(legacy_net())
    got = workspace.FetchBlob("pred_cdist")
    np.testing.assert_allclose(got, exclusive_torch_cumsum(torch.from_numpy(prediction)).numpy(), rtol=1e-5, atol=1e-5)
    inclusive = torch.cumsum(torch.from_numpy(prediction), 1).numpy()
    assert np.all(got[:, 0] == 0)
    np.testing.assert_allclose(inclusive - got, prediction, rtol=1e-5, atol=1e-5)  # off by exactly one column


@pytest.mark.parametrize("exclusive", [True, False])
def test_ensure_dense_on_the_data_input_fixes_the_backward(exclusive):
    prediction, w = data(2)
    values, gradients = run_with_gradients(legacy_net(ensure_dense=True, exclusive=exclusive).Proto(),
                                           {"prediction": prediction, "w": w}, wrt=["prediction"],
                                           fetch=["pred_cdist"])
    reference = exclusive_torch_cumsum if exclusive else (lambda x: torch.cumsum(x, 1))
    y_ref, dx_ref = torch_value_and_gradient(reference, prediction, w)
    np.testing.assert_allclose(values["pred_cdist"], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients["prediction"], dx_ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("operator", ["ToDense", "CumSum"])
def test_the_operators_often_suggested_do_not_exist(operator):
    assert not core.IsOperator(operator)  # net.CumSum is pycumsum_op's (tests/test_answers.py), not Caffe2's
    net = core.Net("answers")
    net.Proto().op.extend([core.CreateOperator(operator, ["prediction"], ["out"])])
    with pytest.raises(RuntimeError, match="Cannot create operator of type '{}'".format(operator)):
        workspace.CreateNet(net)
