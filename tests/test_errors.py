"""Bad input to PyCumSum: one clear exception naming the op, the argument and the shape or rank,
raised at net construction when the problem is visible there, else when the net runs; and the
workspace (its blobs and its other nets) keeps working after a failed run."""
import numpy as np
import pytest
from caffe2.python import core, workspace

from scan_family_support import RUN_ERROR


def build(*args, **kwargs):
    """net.PyCumSum(*args, **kwargs) on a new net; returns the net."""
    net = core.Net("bad_input")
    net.PyCumSum(*args, **kwargs)
    return net


# --- caught at net construction -------------------------------------------------------------

@pytest.mark.parametrize("axis", [1.0, "1", True, [0], np.float32(0)])
def test_non_integer_axis(axis):
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: axis must be an integer.*axis="):
        build("err_x", "err_y", axis=axis)


def test_numpy_integer_axis_is_accepted(clean_workspace, run_net):
    net = build("err_x", "err_y", axis=np.int64(-1))
    run_net(net, {"err_x": np.ones((2, 3), np.float32)})
    np.testing.assert_array_equal(workspace.FetchBlob("err_y"), [[1, 2, 3], [1, 2, 3]])


@pytest.mark.parametrize("blobs_in, blobs_out, count", [
    (["err_a", "err_b", "err_c"], "err_y", "1 input blob, got 3"),
    ([], "err_y", "1 input blob, got 0"),
    ("err_x", ["err_y", "err_z"], "1 output blob, got 2"),
    ("err_x", 2, "1 output blob, got blob_out=2"),
])
def test_wrong_number_of_blobs(blobs_in, blobs_out, count):
    with pytest.raises(RUN_ERROR, match="PyCumSum: takes exactly " + count):
        build(blobs_in, blobs_out, axis=0)


def test_axis_given_twice_in_the_onnx_form():
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: the axis is the second input blob 'err_axis'; "
                                                 r"axis=/dim= cannot be given too"):
        build(["err_x", "err_axis"], "err_y", axis=0)


@pytest.mark.parametrize("dtype", ["foo", "complex64", "bool", np.int8, object, "S5"])
def test_unknown_dtype(dtype):
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: unknown dtype=.*double, float, int32, int64"):
        build("err_x", "err_y", axis=0, dtype=dtype)


@pytest.mark.parametrize("flag", ["exclusive", "reverse"])
def test_flags_must_be_booleans(flag):
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: {} must be True or False, got {}='no'".format(flag, flag)):
        build("err_x", "err_y", axis=0, **{flag: "no"})


def test_dtype_override_in_place_is_refused():
    """In place, the input's dtype would be gone when the gradient needs it."""
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: dtype=float64 cannot be used in place.*'err_x'"):
        build("err_x", "err_x", axis=0, dtype="double")


# --- caught when the net runs (the input's shape and dtype are known only then) ------------

@pytest.mark.parametrize("shape, axis, rank_text", [
    ((2, 3), 2, r"shape \(2, 3\) \(rank 2\); valid axes are -2..1"),
    ((2, 3), -3, r"shape \(2, 3\) \(rank 2\)"),
    ((), 1, r"shape \(\) \(rank 0\); valid axes are -1..0"),
    ((4,), -2, r"shape \(4,\) \(rank 1\)"),
])
def test_axis_out_of_range(shape, axis, rank_text, clean_workspace, run_net):
    net = build("err_x", "err_y", axis=axis)
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: axis={} is out of range .*{}".format(axis, rank_text)):
        run_net(net, {"err_x": np.zeros(shape, np.float32)})


def test_string_tensor(clean_workspace, run_net):
    net = build("err_x", "err_y", axis=0)
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: input of shape \(2,\) has dtype object; expected a "
                                                r"numeric or bool tensor"):
        run_net(net, {"err_x": np.array(["a", "b"], dtype=object)})


def test_edited_operator_with_two_inputs_fails_at_run(clean_workspace, run_net):
    """An OperatorDef edited after construction (e.g. a hand-edited saved net) is checked at run."""
    net = build("err_x", "err_y", axis=0)
    net.Proto().op[0].input.append("err_extra")
    net.AddExternalInput("err_extra")
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: expected 1 input blob\(s\), got 2"):
        run_net(net, {"err_x": np.ones(3, np.float32), "err_extra": np.ones(3, np.float32)})


def test_gradient_of_the_wrong_shape(clean_workspace, run_net):
    net = core.Net("bad_gradient")
    y = net.PyCumSum("err_x", "err_y", axis=1)
    net.AddGradientOperators({y: "err_w"})
    net.AddExternalInput("err_w")
    with pytest.raises(RUN_ERROR, match=r"PyCumSumGradient: .*gradient has shape \(2, 4\), the input "
                                                r"has shape \(2, 3\)"):
        run_net(net, {"err_x": np.ones((2, 3), np.float32), "err_w": np.ones((2, 4), np.float32)})


def test_workspace_and_other_nets_keep_working_after_a_failed_run(clean_workspace, run_net):
    good = core.Net("good")
    good.PyCumSum("ok_x", "ok_y", axis=0)
    bad = core.Net("bad")
    bad.PyCumSum("ok_x", "bad_y", axis=3)
    run_net(good, {"ok_x": np.array([1, 2, 3], np.int32)})
    workspace.CreateNet(bad)
    for attempt in range(2):
        with pytest.raises(RUN_ERROR, match="axis=3 is out of range"):
            workspace.RunNet(bad.Proto().name)
        assert workspace.RunNet(good.Proto().name)
        np.testing.assert_array_equal(workspace.FetchBlob("ok_y"), [1, 3, 6])
    workspace.FeedBlob("ok_x", np.ones((2, 2, 2, 2), np.float32))  # now axis=3 exists
    assert workspace.RunNet(bad.Proto().name)
    np.testing.assert_array_equal(workspace.FetchBlob("bad_y")[0, 0, 0], [1, 2])
    assert sorted(workspace.Blobs()) == ["bad_y", "ok_x", "ok_y"]
