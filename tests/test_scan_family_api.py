"""The scan family's public surface: net methods, function forms, brew helpers, argument errors, and
the ops under Caffe2's own checkers (hypothesis_test_util: finite-difference gradient checks and
reference checks against torch)."""
import caffe2.python.hypothesis_test_util as hu
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from caffe2.python import brew, core, model_helper, workspace
from hypothesis import given, settings

import pycumsum_op
from scan_family_support import RUN_ERROR, NET_METHODS, TWO_OUTPUTS, assert_gradient_close, run_scan, torch_reference

X = np.array([[1., -2., 3., 0.5], [4., 0.5, -6., 2.]], np.float32)
W = np.array([[1., 2., 3., 4.], [-1., 0.5, 2., -3.]], np.float32)
SCANS = list(NET_METHODS)


# --- the ways in -----------------------------------------------------------------------------

@pytest.mark.parametrize("scan", SCANS)
def test_net_method_function_form_and_brew_give_torchs_result(scan, clean_workspace, torch_scan):
    expected, _ = torch_reference(torch_scan, scan, X, axis=1)
    names = [["a_v", "a_i"], ["b_v", "b_i"], ["c_v", "c_i"]] if scan in TWO_OUTPUTS else ["a_y", "b_y", "c_y"]
    net = core.Net("three_ways")
    by_method = getattr(net, NET_METHODS[scan])("api_x", names[0], axis=1)
    by_function = getattr(pycumsum_op, scan)(net, "api_x", names[1], dim=-1)
    model = model_helper.ModelHelper(name="three_ways_brew")
    by_brew = getattr(brew, scan)(model, "api_x", names[2], axis=1)
    workspace.FeedBlob("api_x", X)
    workspace.RunNetOnce(net)
    workspace.RunNetOnce(model.net)
    for result, blob_names in zip((by_method, by_function, by_brew), names):
        results = result if scan in TWO_OUTPUTS else (result,)
        assert all(isinstance(blob, core.BlobReference) for blob in results)
        assert [str(blob) for blob in results] == (blob_names if scan in TWO_OUTPUTS else [blob_names])
        for blob, want in zip(results, expected):
            fetched = workspace.FetchBlob(str(blob))
            assert fetched.dtype == want.dtype
            np.testing.assert_allclose(fetched, want, rtol=1e-6)


@pytest.mark.parametrize("blob_out", [None, 2])
def test_cummax_names_both_outputs_when_asked(blob_out, clean_workspace, torch_scan):
    net = core.Net("unnamed")
    values, indices = net.PyCumMax("api_x", blob_out, axis=0)
    assert [list(op.output) for op in net.Proto().op] == [[str(values), str(indices)]]
    workspace.FeedBlob("api_x", X)
    workspace.RunNetOnce(net)
    expected = torch_scan(torch.from_numpy(X), 0, scan="cummax")[1]
    np.testing.assert_array_equal(workspace.FetchBlob(str(indices)), expected)


def test_cummax_values_in_place_with_gradient(clean_workspace, torch_scan):
    """values may overwrite the input: the gradient needs only the indices."""
    w = np.random.RandomState(1).standard_normal(X.shape).astype(np.float32)
    outputs, grad_x = run_scan("cummax", X.copy(), w, in_place=True, axis=1)
    expected, reference = torch_reference(torch_scan, "cummax", X, w, axis=1)
    np.testing.assert_array_equal(outputs[0], expected[0])
    assert_gradient_close(grad_x, reference, np.float32)


def test_brew_helpers_inside_an_arg_scope_shared_with_fc(clean_workspace, torch_scan):
    """brew passes every arg_scope keyword (order=) to each helper listed; they ignore those."""
    model = model_helper.ModelHelper(name="family_scope")
    with brew.arg_scope([brew.cumprod, brew.cummin, brew.logcumsumexp, brew.fc], order="NCHW"):
        hidden = brew.fc(model, "scope_x", "scope_hidden", dim_in=4, dim_out=3)
        product = brew.cumprod(model, hidden, "scope_prod", axis=1)
        smallest, _ = brew.cummin(model, product, ["scope_min", "scope_argmin"], axis=1)
        y = brew.logcumsumexp(model, smallest, "scope_y", axis=1, reverse=True)
    workspace.RunNetOnce(model.param_init_net)
    weight, bias = (torch.from_numpy(workspace.FetchBlob(name)) for name in ("scope_hidden_w", "scope_hidden_b"))
    w = W[:, :3].copy()
    grad_map = model.net.AddGradientOperators({y: "scope_w"})
    model.net.AddExternalInput("scope_w")
    workspace.FeedBlob("scope_x", X)
    workspace.FeedBlob("scope_w", w)
    workspace.RunNetOnce(model.net)

    x = torch.tensor(X, requires_grad=True)
    chain = torch_scan(torch.cumprod(x @ weight.T + bias, 1), 1, scan="cummin")[0]
    expected = torch_scan(chain, 1, reverse=True, scan="logcumsumexp")
    (expected * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(workspace.FetchBlob("scope_y"), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(workspace.FetchBlob(str(grad_map["scope_x"])), x.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("scan", SCANS)
def test_brew_helpers_refuse_misspelled_keywords(scan):
    model = model_helper.ModelHelper(name="family_typo")
    with pytest.raises(TypeError, match=r"{} \(brew.{}\): unexpected keyword argument\(s\) axs".format(
            NET_METHODS[scan], scan)):
        getattr(brew, scan)(model, "api_x", ["v", "i"] if scan in TWO_OUTPUTS else "y", axs=1)


# --- argument errors --------------------------------------------------------------------------

@pytest.mark.parametrize("scan", SCANS)
def test_axis_is_required_and_must_be_an_integer(scan):
    method = getattr(core.Net("no_axis"), NET_METHODS[scan])
    with pytest.raises(RUN_ERROR, match=r"{}: axis is required.*dim".format(NET_METHODS[scan])):
        method("api_x")
    with pytest.raises(RUN_ERROR, match=r"{}: axis must be an integer.*axis=1.5".format(NET_METHODS[scan])):
        method("api_x", axis=1.5)
    with pytest.raises(RUN_ERROR, match=r"{}: got both axis=1 and dim=0".format(NET_METHODS[scan])):
        method("api_x", axis=1, dim=0)


@pytest.mark.parametrize("scan, argument, value, accepted", [
    ("cummax", "exclusive", True, "axis, reverse"),
    ("cummin", "dtype", "double", "axis, reverse"),
    ("logcumsumexp", "dtype", "float", "axis, exclusive, reverse"),
])
def test_arguments_a_scan_does_not_take(scan, argument, value, accepted):
    """add_scan_op is public: it refuses flags the op does not have (the net methods have no such keyword)."""
    with pytest.raises(RUN_ERROR, match=r"{}: takes no {}= argument \(it takes {}\)".format(
            NET_METHODS[scan], argument, accepted)):
        pycumsum_op.ops.add_scan_op(core.Net("flags"), scan, "api_x", axis=0, **{argument: value})
    with pytest.raises(TypeError, match=argument):
        getattr(core.Net("flags"), NET_METHODS[scan])("api_x", axis=0, **{argument: value})


@pytest.mark.parametrize("scan", ["cummax", "cummin"])
@pytest.mark.parametrize("blob_out, message", [
    ("only_values", r"takes exactly 2 output blobs \(values, indices\), got 1: \['only_values'\]"),
    (["a", "b", "c"], r"takes exactly 2 output blobs \(values, indices\), got 3"),
    (1, r"takes exactly 2 output blobs \(values, indices\), got blob_out=1"),
])
def test_two_outputs_are_required(scan, blob_out, message):
    with pytest.raises(RUN_ERROR, match=NET_METHODS[scan] + ": " + message):
        getattr(core.Net("outputs"), NET_METHODS[scan])("api_x", blob_out, axis=0)


@pytest.mark.parametrize("scan", ["cumprod", "logcumsumexp"])
def test_in_place_is_refused_when_the_gradient_needs_the_input(scan, clean_workspace, run_net):
    op_name = NET_METHODS[scan]
    with pytest.raises(RUN_ERROR, match=r"{}: cannot run in place \(blob_out == blob_in == 'api_x'\): "
                                                r"its gradient needs the input's values".format(op_name)):
        getattr(core.Net("in_place"), op_name)("api_x", "api_x", axis=0)
    net = core.Net("edited_in_place")  # a hand-edited saved net is caught when it runs
    getattr(net, op_name)("api_x", "api_y", axis=0)
    net.Proto().op[0].output[0] = "api_x"
    with pytest.raises(RUN_ERROR, match=op_name + r": cannot run in place \(an output blob is the input"):
        run_net(net, {"api_x": X})


def test_logcumsumexp_refuses_integer_inputs_naming_the_shape(clean_workspace, run_net):
    net = core.Net("integer_lcse")
    net.PyLogCumSumExp("api_x", "api_y", axis=0)
    with pytest.raises(RUN_ERROR, match=r"PyLogCumSumExp: input of shape \(2, 3\) has dtype int32; "
                                                r"expected one of float16, float32, float64"):
        run_net(net, {"api_x": np.ones((2, 3), np.int32)})


@pytest.mark.parametrize("scan", SCANS)
def test_axis_out_of_range_names_the_shape(scan, clean_workspace, run_net):
    net = core.Net("axis_range")
    getattr(net, NET_METHODS[scan])("api_x", ["v", "i"] if scan in TWO_OUTPUTS else "y", axis=2)
    with pytest.raises(RUN_ERROR, match=r"{}: axis=2 is out of range for an input of shape \(2, 4\) "
                                                r"\(rank 2\); valid axes are -2..1".format(NET_METHODS[scan])):
        run_net(net, {"api_x": X})


@pytest.mark.parametrize("scan", SCANS)
def test_zero_dim_and_empty_inputs(scan, clean_workspace, torch_scan):
    for x in (np.array(1.5, np.float32), np.zeros((3, 0, 2), np.float32)):
        w = np.ones(x.shape, np.float32)
        outputs, grad_x = run_scan(scan, x, w, axis=-1)
        expected, reference = torch_reference(torch_scan, scan, x, w, axis=-1)
        for got, want in zip(outputs, expected):
            assert got.shape == x.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        assert_gradient_close(grad_x, reference, np.float32)


@pytest.mark.parametrize("scan, x_dtype, result", [
    ("cumprod", np.int32, np.int64), ("cumprod", np.bool_, np.int64), ("cumprod", np.float32, np.float32),
    ("cummax", np.int16, np.int16), ("cummax", np.bool_, np.bool_), ("cummin", np.uint8, np.uint8),
    ("logcumsumexp", np.float64, np.float64),
])
def test_result_dtypes_are_torchs(scan, x_dtype, result, clean_workspace, torch_scan):
    x = np.array([[1, 0, 1], [1, 1, 0]], x_dtype)
    outputs, _ = run_scan(scan, x, axis=1)
    assert outputs[0].dtype == result
    torch_result = torch_scan(torch.from_numpy(x), 1, scan=scan)
    assert (torch_result[0] if scan in TWO_OUTPUTS else torch_result).numpy().dtype == result
    if scan in TWO_OUTPUTS:
        assert outputs[1].dtype == np.int64


def test_cumprod_wider_dtype_gradient_keeps_the_input_dtype(clean_workspace, torch_scan):
    """dtype="double" on float32 x: y is float64, grad_x float32 (torch autograd's rule), values torch's.
    (torch 1.10.2's own backward of cumprod(dtype=) fails on a lane with a zero, "masked_scatter: expected
    self and source to have same dtypes": the reference is the same gradient through x.double().)"""
    x = np.array([[0.5, 2., 0., 3.], [1.5, -1., 2., 0.25]], np.float32)
    w = np.random.RandomState(6).standard_normal(x.shape)
    outputs, grad_x = run_scan("cumprod", x, w, axis=1, dtype="double")
    np.testing.assert_array_equal(outputs[0], torch.cumprod(torch.from_numpy(x), 1, dtype=torch.float64).numpy())
    tensor = torch.tensor(x, requires_grad=True)
    (reference,) = torch.autograd.grad(torch.cumprod(tensor.double(), 1), tensor, torch.from_numpy(w))
    assert outputs[0].dtype == np.float64
    assert_gradient_close(grad_x, reference.numpy().astype(np.float64), np.float32)


def test_brew_helper_takes_axis_positionally_too(clean_workspace):
    model = model_helper.ModelHelper(name="positional")
    brew.cumprod(model, "api_x", "api_y", 1)
    workspace.FeedBlob("api_x", X)
    workspace.RunNetOnce(model.net)
    np.testing.assert_array_equal(workspace.FetchBlob("api_y"), torch.cumprod(torch.from_numpy(X), 1).numpy())


def test_cumprod_dtype_casts_first_like_torch(clean_workspace):
    x = np.array([1.6, 2.6, -1.7, 3.2], np.float32)
    outputs, _ = run_scan("cumprod", x, axis=0, dtype="int32")
    expected = torch.cumprod(torch.from_numpy(x), 0, dtype=torch.int32).numpy()
    assert outputs[0].dtype == np.int32
    np.testing.assert_array_equal(outputs[0], expected)


# --- Caffe2's checkers -------------------------------------------------------------------------

def family_operator(scan, axis, exclusive, reverse):
    net = core.Net("checked_family")
    flags = {"reverse": reverse}
    if scan not in TWO_OUTPUTS:
        flags["exclusive"] = exclusive
    getattr(net, NET_METHODS[scan])("X", ["V", "I"] if scan in TWO_OUTPUTS else "Y", axis=axis, **flags)
    (op,) = net.Proto().op
    return op


def distinct_tensors(scan):
    """Rank 1-3 float64 tensors with values at least 0.01 apart (no ties within the checkers' steps: cummax is
    differentiable there); cumprod values stay away from 0, logcumsumexp's span +-5."""
    low, high = (50, 200) if scan == "cumprod" else (-500, 500)
    shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3)
    return shapes.flatmap(lambda shape: st.lists(st.integers(low, high), min_size=int(np.prod(shape)),
                                                 max_size=int(np.prod(shape)), unique=True).map(
        lambda values: np.array(values, np.float64).reshape(shape) / 100))


class TestScanFamilyWithCaffe2Checkers(hu.HypothesisTestCase):
    @pytest.fixture(autouse=True)
    def _oracle(self, torch_scan):
        self.torch_scan = torch_scan

    def check(self, scan, X, axis_pick, exclusive, reverse, gc):
        axis = axis_pick % (2 * X.ndim) - X.ndim
        op = family_operator(scan, axis, exclusive, reverse)
        exclusive = exclusive and scan not in TWO_OUTPUTS
        if not (exclusive and scan == "logcumsumexp"):  # its first output is -inf: the checker's loss is inf
            self.assertGradientChecks(gc, op, [X], 0, [0], stepsize=1e-4, threshold=1e-4)

        def reference(X):
            result = self.torch_scan(torch.from_numpy(X), axis, exclusive, reverse, None, scan)
            return tuple(t.numpy() for t in (result if isinstance(result, tuple) else (result,)))

        def gradient_reference(grad_y, outputs, inputs):
            x = torch.tensor(inputs[0], requires_grad=True)
            y = self.torch_scan(x, axis, exclusive, reverse, None, scan)
            y = y[0] if isinstance(y, tuple) else y
            return (torch.autograd.grad(y, x, torch.from_numpy(grad_y))[0].numpy(),)

        self.assertReferenceChecks(gc, op, [X], reference, output_to_grad=op.output[0],
                                   grad_reference=gradient_reference)

    @settings(max_examples=25)
    @given(X=distinct_tensors("cumprod"), axis_pick=st.integers(0, 5), exclusive=st.booleans(),
           reverse=st.booleans(), **hu.gcs_cpu_only)
    def test_cumprod(self, X, axis_pick, exclusive, reverse, gc, dc):
        self.check("cumprod", X, axis_pick, exclusive, reverse, gc)

    @settings(max_examples=25)
    @given(X=distinct_tensors("cummax"), axis_pick=st.integers(0, 5), reverse=st.booleans(),
           scan=st.sampled_from(TWO_OUTPUTS), **hu.gcs_cpu_only)
    def test_cummax_cummin(self, X, axis_pick, reverse, scan, gc, dc):
        self.check(scan, X, axis_pick, False, reverse, gc)

    @settings(max_examples=25)
    @given(X=distinct_tensors("logcumsumexp"), axis_pick=st.integers(0, 5), exclusive=st.booleans(),
           reverse=st.booleans(), **hu.gcs_cpu_only)
    def test_logcumsumexp(self, X, axis_pick, exclusive, reverse, gc, dc):
        self.check("logcumsumexp", X, axis_pick, exclusive, reverse, gc)
