"""The three circulating answers for torch.cumsum in Caffe2, typed as a user types them from the answer.

Answer 2, ``net.CumSum(prediction, axes=[1])``, runs after ``import pycumsum_op`` and equals torch.cumsum
with a working gradient (torch.autograd is the oracle). Answers 1 (``net.ToDense``) and 3 (the Slice +
Expand + Add + Concat loop) fail at once with one message naming the cause and the cure; the cures named
work (Caffe2's own AddGradientOperators, torch for the numbers). Caffe2's other errors stay its own.
"""
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs net.CumSum, net.ToDense's error, Expand's check)
from doctor_support import add_weighted_loss, run_with_gradients, torch_scan, torch_value_and_gradient
from pycumsum_op import ScanArgumentError
from pycumsum_op.ops.net_ops import ToDenseError

pytestmark = pytest.mark.usefixtures("clean_workspace")
N, C = 3, 5


def as_blob(array, names=iter(range(10 ** 6))):
    """The answers' helper: a constant blob in the workspace."""
    name = "const_{}".format(next(names))
    workspace.FeedBlob(name, array)
    return core.BlobReference(name)


def test_caffe2_itself_has_neither_cumsum_nor_to_dense():
    assert not core.IsOperator("CumSum") and not core.IsOperator("ToDense") and core.IsOperator("Expand")


# --- answer 2: net.CumSum(prediction, axes=[1]) ----------------------------------------------------

@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (True, True)])
def test_answer_two_as_typed_equals_torch_cumsum_with_its_gradient(exclusive, reverse):
    prediction = np.random.RandomState(exclusive + 2 * reverse).randn(N, C).astype(np.float32)
    weights = np.random.RandomState(7).randn(N, C).astype(np.float32)
    net = core.Net("answer_two")
    net.AddExternalInput("prediction")
    pred_cdist = net.CumSum("prediction", axes=[1], exclusive=exclusive, reverse=reverse)
    add_weighted_loss(net, pred_cdist)
    values, gradients = run_with_gradients(net.Proto(), {"prediction": prediction, "w": weights},
                                           wrt=["prediction"], fetch=[str(pred_cdist)])
    y_ref, dx_ref = torch_value_and_gradient(torch_scan(bool(exclusive), bool(reverse)), prediction, weights)
    np.testing.assert_allclose(values[str(pred_cdist)], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients["prediction"], dx_ref, rtol=1e-5, atol=1e-5)
    assert [op.name for op in net.Proto().op][:1] == ["PyCumSum"]


def test_answer_two_takes_the_axis_as_a_blob_like_onnx_cumsum():
    x = np.random.RandomState(1).randn(4, 2, 3).astype(np.float32)
    net = core.Net("answer_two_axis_blob")
    net.AddExternalInput("x", "axis")
    net.CumSum(["x", "axis"], "y")
    workspace.FeedBlob("x", x)
    workspace.FeedBlob("axis", np.array(-2, dtype=np.int64))
    workspace.RunNetOnce(net)
    np.testing.assert_allclose(workspace.FetchBlob("y"), torch.cumsum(torch.from_numpy(x), -2).numpy(), rtol=1e-6)


@pytest.mark.parametrize("call, words", [
    (lambda net: net.CumSum("x", axes=[0, 1]), "CumSum: axes=[0, 1]: takes exactly one axis"),
    (lambda net: net.CumSum("x", axes=[1], axis=1), "CumSum: got both axes=[1] and axis=1"),
    (lambda net: net.CumSum("x", axes=[1], exclusive=2), "CumSum: exclusive=2: expected 0 or 1"),
    (lambda net: net.CumSum("x"), "axis is required"),
])
def test_answer_two_refuses_what_it_cannot_do_in_one_clear_error(call, words):
    with pytest.raises(ScanArgumentError) as error:
        call(core.Net("answer_two_bad"))
    assert words in str(error.value)


# --- answer 1: net.ToDense(sparse_sum) ------------------------------------------------------------

def answer_one_net():
    """The asker's net up to the point where answer 1 adds ToDense; returns (net, sparse_sum)."""
    net = core.Net("answer_one")
    net.AddExternalInput("prediction")
    sparse_sum = net.SparseLengthsSum([
        net.Transpose("prediction"),
        as_blob(np.array([ix for length in range(C) for ix in range(length)], dtype="int32")),
        as_blob(np.array(list(range(C)), dtype="int32")),
    ])
    return net, sparse_sum


def test_answer_one_as_typed_names_the_cause_and_both_cures():
    net, sparse_sum = answer_one_net()
    data = net.Proto().op[0].output[0]
    with pytest.raises(AttributeError) as error:  # what Caffe2 raises for it too: `except AttributeError` still works
        net.ToDense(sparse_sum)
    assert isinstance(error.value, ToDenseError)
    message = str(error.value)
    for words in ("Method ToDense is not a registered operator: Caffe2 has no ToDense",
                  "born at SparseLengthsSum's DATA input {!r}".format(data),
                  "not at its output {!r}".format(str(sparse_sum)), "net.PyCumSum(x, y, axis=k)",
                  "net.EnsureDense({!r})".format(data), "pycumsum-op doctor"):
        assert words in message, words
    assert len(net.Proto().op) == 2  # nothing was added


def test_to_dense_of_a_blob_no_sparse_op_makes_still_explains():
    net = core.Net("to_dense_elsewhere")
    with pytest.raises(ToDenseError,
                       match=r"Caffe2 has no ToDense.*DATA input of the op that makes it sparse .*not at its output 'x'"):
        net.ToDense("x")


def test_the_ensure_dense_cure_it_names_works_and_is_the_exclusive_sum():
    net = core.Net("answer_one_cured")
    net.AddExternalInput("prediction")
    sparse_sum = net.SparseLengthsSum([
        net.EnsureDense(net.Transpose("prediction")),
        as_blob(np.array([ix for length in range(C) for ix in range(length)], dtype="int32")),
        as_blob(np.array(list(range(C)), dtype="int32")),
    ])
    add_weighted_loss(net, net.Transpose(sparse_sum, "pred_cdist"))
    x, w = np.random.RandomState(3).randn(N, C).astype(np.float32), np.random.RandomState(4).randn(N, C).astype(
        np.float32)
    values, gradients = run_with_gradients(net.Proto(), {"prediction": x, "w": w}, wrt=["prediction"],
                                           fetch=["pred_cdist"])
    y_ref, dx_ref = torch_value_and_gradient(torch_scan(exclusive=True), x, w)
    np.testing.assert_allclose(values["pred_cdist"], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients["prediction"], dx_ref, rtol=1e-5, atol=1e-5)


def test_other_attribute_errors_stay_caffe2s():
    net = core.Net("other_errors")
    with pytest.raises(AttributeError) as error:
        net.NoSuchOperator("x")
    assert type(error.value) is AttributeError
    assert str(error.value).startswith("Method NoSuchOperator is not a registered operator. Did you mean: [")
    with pytest.raises(AttributeError, match="Attribute __no_such__ not found"):
        net.__no_such__


# --- answer 3: the Slice + Expand + Add + Concat loop ---------------------------------------------

def test_answer_three_as_typed_fails_at_once_naming_the_cause_and_the_cure():
    net = core.Net("answer_three")
    prediction = net.AddExternalInput("prediction")
    pred_shape = (N, C)
    current_sum = prediction
    pred_cdist = current_sum
    with pytest.raises(ScanArgumentError) as error:
        for i in range(1, pred_shape[1]):
            prev_sum = net.Slice(current_sum, starts=[0, 0], ends=[pred_shape[0], i])
            expanded_prev = net.Expand(prev_sum, dims=[pred_shape[0], pred_shape[1] - i], axes=[1])
            current_sum = net.Add(current_sum, expanded_prev)
            pred_cdist = net.Concat([pred_cdist, current_sum], axis=1)
    message = str(error.value)
    for words in ("Expand: takes the target shape as a second input blob", "(got axes=[1], dims=[3, 4])",
                  "fails Caffe2's schema check", "not a cumulative sum", "net.PyCumSum(x, y, axis=k)",
                  "net.CumSum(x, axes=[k])"):
        assert words in message, words


def test_expand_with_its_shape_input_is_caffe2s_own():
    net = core.Net("expand_ok")
    net.AddExternalInput("x", "shape")
    net.Expand(["x", "shape"], "y")
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    workspace.FeedBlob("x", x)
    workspace.FeedBlob("shape", np.array([3, 4], dtype=np.int64))
    workspace.RunNetOnce(net)
    np.testing.assert_array_equal(workspace.FetchBlob("y"), np.broadcast_to(x, (3, 4)))
