"""pycumsum_op.lower: PyCumSum nets as C++ operators ("aten" and "portable"), against torch.

Forward: every input dtype × dtype= × exclusive × reverse × axis (negative too) on rank 0-4 with empty
and 1-element axes, plus long lanes that take every Hillis–Steele step; "aten" must equal torch bit for
bit. Gradients: AddGradientOperators on a lowered net, and lowering a net that already has PyCumSum's
gradient ops, both against torch.autograd. Also: what stays unchanged, what is refused and how.
"""
import re

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace
from hypothesis import given, settings

import pycumsum_op
from pycumsum_op.lowering import LoweringError, portable
from pycumsum_op.ops import scan_backward, scan_forward
from pycumsum_op.torch_versions import has
from test_forward import elements, expected, scan_cases
from test_gradient import FLOAT_OVERRIDES, assert_gradient_close, gradient_cases, torch_gradient

TARGETS = ["aten", "portable"]


def python_ops(netdef):
    return [op.type for op in netdef.op if op.type.startswith("Python")]


def lower_and_run(x, target, known_from, in_place=False, **kwargs):
    """Build a PyCumSum net, lower it (input facts from the workspace or from shapes=/dtypes=), run it."""
    workspace.ResetWorkspace()
    out = "lw_x" if in_place else "lw_y"
    net = core.Net("lower_forward")
    net.PyCumSum("lw_x", out, **kwargs)
    if known_from == "workspace":
        workspace.FeedBlob("lw_x", x)
        lowered = pycumsum_op.lower(net, target)
    else:
        lowered = pycumsum_op.lower(net, target, shapes={"lw_x": x.shape}, dtypes={"lw_x": x.dtype})
        workspace.FeedBlob("lw_x", x)
    assert python_ops(lowered) == []
    workspace.RunNetOnce(lowered)
    return workspace.FetchBlob(out)


def assert_lowered_result(actual, reference, target, x, axis):
    """aten: bit-identical to torch. portable: exact for integers; floats within the error bound of a
    log-depth sum in the result dtype: 2·(ceil(log2 n) + 1)·eps·sum(|x| along the lane)."""
    assert actual.dtype == reference.dtype and actual.shape == reference.shape, (actual.dtype, actual.shape)
    if target == "aten" or reference.dtype.kind != "f":
        np.testing.assert_array_equal(actual, reference)
        return
    magnitude = np.abs(x.astype(np.float64)).reshape(reference.shape)
    length = 1
    if reference.ndim:
        length = reference.shape[axis]
        magnitude = np.sum(magnitude, axis=axis, keepdims=True)
    eps = np.finfo(reference.dtype).eps
    bound = 2 * (np.ceil(np.log2(max(length, 1))) + 1) * eps * magnitude
    assert np.all(np.abs(actual.astype(np.float64) - reference) <= bound)


@pytest.mark.slow  # 150 lowered nets
@settings(max_examples=150)
@given(case=scan_cases(), target=st.sampled_from(TARGETS), known_from=st.sampled_from(["workspace", "arguments"]),
       in_place=st.booleans())
def test_forward_matches_torch(case, target, known_from, in_place, torch_scan, to_torch_dtype):
    x, axis, exclusive, reverse, override = case
    in_place = in_place and override is None
    actual = lower_and_run(x, target, known_from, in_place, axis=axis, exclusive=exclusive, reverse=reverse,
                           dtype=override)
    assert_lowered_result(actual, expected(torch_scan, to_torch_dtype, x, axis, exclusive, reverse, override), target,
                          x, axis)


@st.composite
def long_lane_cases(draw):
    """Rank 1-3 with the scanned axis 1..70 long: every Hillis–Steele step count up to 7."""
    rank = draw(st.integers(1, 3))
    axis = draw(st.integers(-rank, rank - 1))
    shape = [draw(st.integers(1, 3)) for _ in range(rank)]
    shape[axis] = draw(st.integers(1, 70))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64]))
    x = draw(hnp.arrays(dtype, tuple(shape), elements=elements(dtype)))
    return x, axis, draw(st.booleans()), draw(st.booleans())


@pytest.mark.slow  # long lanes
@settings(max_examples=60)
@given(case=long_lane_cases(), target=st.sampled_from(TARGETS))
def test_long_lanes_match_torch(case, target, torch_scan, to_torch_dtype):
    x, axis, exclusive, reverse = case
    actual = lower_and_run(x, target, "arguments", axis=axis, exclusive=exclusive, reverse=reverse)
    assert_lowered_result(actual, expected(torch_scan, to_torch_dtype, x, axis, exclusive, reverse, None), target,
                          x, axis)


def run_lowered_gradient(x, w, target, lowered_gradient_ops, **kwargs):
    """y = PyCumSum(x) with d(loss)/dy = w, lowered to ``target``: either the net's PyCumSum gradient op is
    lowered, or AddGradientOperators runs on the lowered net. Returns (y, grad_x)."""
    workspace.ResetWorkspace()
    workspace.FeedBlob("lg_x", x)
    workspace.FeedBlob("lg_w", w)
    net = core.Net("lower_gradient")
    y = net.PyCumSum("lg_x", "lg_y", **kwargs)
    if lowered_gradient_ops:
        net.AddGradientOperators({y: "lg_w"})
        net.AddExternalInput("lg_w")
    lowered = core.Net(pycumsum_op.lower(net, target))
    if not lowered_gradient_ops:
        lowered.AddGradientOperators({"lg_y": "lg_w"})
        lowered.AddExternalInput("lg_w")
    assert python_ops(lowered.Proto()) == []
    workspace.RunNetOnce(lowered)
    return workspace.FetchBlob("lg_y"), workspace.FetchBlob("lg_x_grad")


@pytest.mark.slow  # 100 lowered nets with gradients
@settings(max_examples=100)
@given(case=gradient_cases(), target=st.sampled_from(TARGETS), lowered_gradient_ops=st.booleans())
def test_gradient_matches_torch_autograd(case, target, lowered_gradient_ops, torch_scan):
    """Either the net's PyCumSum gradient ops are lowered, or AddGradientOperators runs on the lowered net."""
    x, w, axis, exclusive, reverse, override = case
    _, actual = run_lowered_gradient(x, w, target, lowered_gradient_ops, axis=axis, exclusive=exclusive,
                                     reverse=reverse, dtype=override)
    reference = torch_gradient(torch_scan, x, w, axis, exclusive, reverse, FLOAT_OVERRIDES[override])
    assert actual.dtype == x.dtype and actual.shape == reference.shape
    # Caffe2's Cast gradient runs the scan in y's dtype, torch in x's: float32 precision when either is float32.
    tolerance = 1e-5 if np.float32 in (x.dtype, w.dtype) else 1e-12
    np.testing.assert_allclose(actual, reference, rtol=tolerance, atol=tolerance * 100)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lowered_gradient_ops", [False, True])
@pytest.mark.parametrize("shape, axis, exclusive, reverse", [
    ((3, 1100), 1, False, True), ((1100, 2), 0, True, False),   # blocks of 20, totals scanned directly
    ((2, 1072), 1, True, True), ((3, 67), -1, True, False),     # totals blocked again (67: padded); padding
    ((2, 100, 3), 1, False, True), ((2, 45, 3), -2, True, True),  # long middle axis (moved last); short one
    ((64, 2, 3), 0, False, False), ((4, 3, 20), 2, True, False),  # long axis 0; a short rank-3 last axis
    ((2, 33), 1, False, False), ((67, 2), 0, True, True), ((2, 1072, 1), 1, False, True),  # padded, blocked twice
    ((300,), 0, True, True), ((5,), -1, False, True),           # one lane, long and short
])
def test_gradient_on_long_float32_lanes(target, lowered_gradient_ops, shape, axis, exclusive, reverse,
                                        clean_workspace, torch_scan):
    rng = np.random.RandomState(sum(shape))
    x, w = rng.uniform(-1, 1, shape).astype(np.float32), rng.uniform(-1, 1, shape).astype(np.float32)
    y, grad_x = run_lowered_gradient(x, w, target, lowered_gradient_ops, axis=axis, exclusive=exclusive,
                                     reverse=reverse)
    reference = torch_scan(torch.from_numpy(x), axis, exclusive, reverse).numpy()
    np.testing.assert_allclose(y, reference, rtol=1e-4, atol=1e-4)
    assert_gradient_close(grad_x, torch_gradient(torch_scan, x, w, axis, exclusive, reverse), np.float32)


#: (shape, axis, exclusive, reverse) through each part of the portable form: a scalar, one lane short and long, one
#: Add per entry (up to `portable.DIRECT` in a large input), blocks padded and blocked again, first, middle and last
#: axes, an empty dimension.
SHARED_BLOB_CASES = [((), 0, False, True), ((5,), 0, True, False), ((300,), 0, False, True), ((3, 7), 1, True, True),
                     ((2, 131), -1, True, False), ((80, 2, 3), 0, False, True), ((2, 1072, 3), 1, True, True),
                     ((3, 0, 4), 2, True, False), ((2, 70), 0, True, False), ((64, 1100), 0, True, True)]


@pytest.mark.parametrize("widened_alone", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("shape, axis, exclusive, reverse", SHARED_BLOB_CASES)
def test_portable_gradient_as_lowered_before_torch_1_8_adds_no_sum(shape, axis, exclusive, reverse, dtype,
                                                                    widened_alone, monkeypatch, clean_workspace,
                                                                    torch_scan):
    """Lowered as torch < 1.8 lowers it (its Caffe2 Sum, which adds the gradient parts of a blob read by several
    ops, has no float64 or int64): AddGradientOperators over the net adds no Sum, and the forward and the gradient
    are torch's, on every torch; the slices widened one by one (as large inputs' are) or the input at once."""
    monkeypatch.setattr(portable, "has", lambda capability: capability != "caffe2 Sum double" and has(capability))
    monkeypatch.setattr(portable, "WIDENED_ALONE_FROM", 0 if widened_alone else float("inf"))
    rng = np.random.RandomState(len(shape))
    floats = np.dtype(dtype).kind == "f"
    x = (rng.uniform(-1, 1, shape) if floats else rng.randint(-9, 9, shape)).astype(dtype)
    w = (rng.uniform(-1, 1, shape) if floats else rng.randint(-9, 9, shape)).astype(dtype if floats else np.int64)
    workspace.FeedBlob("ls_x", x)
    workspace.FeedBlob("ls_w", w)
    net = core.Net("lower_shared")
    net.PyCumSum("ls_x", "ls_y", axis=axis, exclusive=exclusive, reverse=reverse)
    lowered = core.Net(pycumsum_op.lower(net, "portable"))
    lowered.AddGradientOperators({"ls_y": "ls_w"})
    lowered.AddExternalInput("ls_w")
    assert [op.type for op in lowered.Proto().op if op.type == "Sum"] == []
    workspace.RunNetOnce(lowered)
    reference = torch_scan(torch.from_numpy(x), axis, exclusive, reverse).numpy()
    assert_lowered_result(workspace.FetchBlob("ls_y"), reference, "portable", x, axis)
    gradient = workspace.FetchBlob("ls_x_grad")
    # the gradient of a sum is the sum the other way: torch's forward scan of w (exact for integers)
    reference = torch_scan(torch.from_numpy(w), axis, exclusive, not reverse).numpy().astype(dtype)
    if floats:
        assert_gradient_close(gradient, reference, dtype)
    else:
        np.testing.assert_array_equal(gradient, reference)
        assert gradient.dtype == dtype


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, True)])
def test_portable_blocked_lanes_of_other_dtypes(dtype, exclusive, reverse, clean_workspace, torch_scan,
                                                to_torch_dtype):
    """Long last axes of other dtypes: Hillis–Steele within padded blocks and over block totals, blocked
    twice (4099 = 256·16 + 3): exact for integers far beyond float32's 2^24."""
    rng = np.random.RandomState(5)
    x = (rng.uniform(-1, 1, (3, 4099)) if dtype == np.float64 else rng.randint(-2 ** 30, 2 ** 30, (3, 4099)))
    x = x.astype(dtype)
    actual = lower_and_run(x, "portable", "workspace", axis=-1, exclusive=exclusive, reverse=reverse)
    assert_lowered_result(actual, expected(torch_scan, to_torch_dtype, x, -1, exclusive, reverse, None), "portable",
                          x, -1)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape, axis", [((4, 100000), 1), ((100000, 3), 0)])
def test_float32_accuracy_on_long_lanes(target, shape, axis, clean_workspace):
    """Relative error of float32 results against float64 on 10^5-long lanes: at most 1e-6."""
    x = np.random.RandomState(0).uniform(0.5, 1.5, shape).astype(np.float32)
    for reverse in (False, True):
        actual = lower_and_run(x, target, "workspace", axis=axis, reverse=reverse)
        values = torch.from_numpy(x.astype(np.float64))
        reference = (values.flip(axis).cumsum(axis).flip(axis) if reverse else values.cumsum(axis)).numpy()
        assert np.max(np.abs(actual - reference) / reference) <= 1e-6


def test_other_ops_arguments_and_external_blobs_unchanged(clean_workspace):
    net = core.Net("lower_keep")
    net.Relu("k_in", "k_relu")
    net.PyCumSum("k_relu", "k_scan", axis=-1)
    net.Scale("k_scan", "k_out", scale=3.0)
    net.AddExternalOutput(core.BlobReference("k_out"))
    before = net.Proto().SerializeToString()
    lowered = pycumsum_op.lower(net, "aten")
    assert net.Proto().SerializeToString() == before  # the input net is untouched
    assert lowered.op[0] == net.Proto().op[0] and lowered.op[-1] == net.Proto().op[-1]
    assert (lowered.name, lowered.external_input, lowered.external_output) == (
        net.Proto().name, net.Proto().external_input, net.Proto().external_output)
    assert [op.type for op in lowered.op] == ["Relu", "ATen", "Scale"]  # a forward scan: no flip, no rank check
    assert pycumsum_op.verify_net(lowered) == []  # no Python op: portable for verify_net


@pytest.mark.parametrize("dtype", [np.float32, np.float64])  # summed in float64 after a Cast, and as it is
def test_portable_checks_rank_and_scan_length_and_allows_another_batch_size(dtype, clean_workspace, torch_scan):
    net = core.Net("lower_lengths")
    net.PyCumSum("ll_x", "ll_y", axis=1)
    lowered = pycumsum_op.lower(net, "portable", shapes={"ll_x": (2, 5)}, dtypes={"ll_x": dtype})
    other_batch = np.random.RandomState(4).randn(7, 5).astype(dtype)
    workspace.FeedBlob("ll_x", other_batch)
    workspace.RunNetOnce(lowered)
    np.testing.assert_allclose(workspace.FetchBlob("ll_y"), torch_scan(torch.from_numpy(other_batch), 1).numpy(),
                               rtol=1e-5)
    for shape, words in [((2, 4), "scan length 5 along axis 1 of 'll_x'"), ((2, 9), "scan length 5"),
                         ((2, 5, 3), "rank-2 input 'll_x'"), ((10,), "rank-2")]:
        workspace.FeedBlob("ll_x", np.ones(shape, dtype))
        with pytest.raises(RuntimeError, match=words + ".*lower the net again"):
            workspace.RunNetOnce(lowered)


def test_portable_needs_the_shape_and_says_how_to_give_it(clean_workspace):
    net = core.Net("lower_unknown")
    net.PyCumSum("lu_x", "lu_y", axis=0)
    with pytest.raises(LoweringError, match=r"op 0 \(Python 'PyCumSum': lu_x -> lu_y\): target 'portable' needs "
                                            r"the shape and dtype of its input 'lu_x'.*shapes=\{'lu_x'"):
        pycumsum_op.lower(net, "portable")
    with pytest.raises(LoweringError, match="needs the dtype of its input 'lu_x'"):
        pycumsum_op.lower(net, "portable", shapes={"lu_x": (3,)})


def test_shapes_come_from_caffe2_inference_over_the_init_net(clean_workspace, torch_scan):
    init, net = core.Net("lower_init"), core.Net("lower_inferred")
    init.GivenTensorFill([], "li_w", shape=[2, 6], values=list(np.arange(12.0)))
    net.Mul(["li_w", "li_w"], "li_sq")
    net.PyCumSum("li_sq", "li_y", axis=-1, exclusive=True)
    lowered = pycumsum_op.lower(net, "portable", init_net=init)
    workspace.RunNetOnce(init)
    workspace.RunNetOnce(lowered)
    squares = torch.arange(12.0, dtype=torch.float32).reshape(2, 6) ** 2
    np.testing.assert_allclose(workspace.FetchBlob("li_y"), torch_scan(squares, -1, exclusive=True).numpy())


@pytest.mark.parametrize("lowered_gradient_ops", [False, True])
@pytest.mark.parametrize("shape, axis", [((3, 0), 1), ((3, 0), -1), ((0, 4), 0), ((0, 4), -2), ((2, 0, 3), 1),
                                         ((0,), 0)])
def test_aten_exclusive_on_an_empty_scan_axis(shape, axis, lowered_gradient_ops, clean_workspace, torch_scan):
    """ATen's index_fill refuses index 0 of a 0-long axis: the lowered net fills the first entry only when there is
    one (read off Shape at run time), forward and backward."""
    x, w = np.zeros(shape, np.float32), np.ones(shape, np.float32)
    for reverse in (False, True):
        y, grad_x = run_lowered_gradient(x, w, "aten", lowered_gradient_ops, axis=axis, exclusive=True,
                                         reverse=reverse)
        reference = torch_scan(torch.from_numpy(x), axis, True, reverse).numpy()
        assert y.shape == reference.shape == shape and y.dtype == reference.dtype
        assert_gradient_close(grad_x, torch_gradient(torch_scan, x, w, axis, True, reverse), np.float32)


def _not_pycumsum(inputs, outputs):
    outputs[0].feed(inputs[0].data)


@pytest.mark.parametrize("make_op, words", [
    (lambda net: net.Python(_not_pycumsum)(["lo_x"], ["lo_z"]), "token form"),
    (lambda net: net.Python((_not_pycumsum, (), {}))(["lo_x"], ["lo_z"]), "not a PyCumSum op"),
])
def test_other_python_ops_are_refused_by_index(make_op, words, clean_workspace):
    net = core.Net("lower_refuse")
    net.PyCumSum("lo_x", "lo_y", axis=0)
    make_op(net)
    with pytest.raises(LoweringError, match=r"op 1 \(Python.*lo_x -> lo_z\).*" + words):
        pycumsum_op.lower(net, "aten")


def test_unknown_target_is_refused():
    with pytest.raises(LoweringError, match="unknown target='mobile'; use one of aten, portable"):
        pycumsum_op.lower(core.Net("lower_target"), "mobile")


@pytest.mark.parametrize("target", TARGETS)
def test_built_then_lowered_has_no_python_op_and_a_gradient(target, clean_workspace, torch_scan):
    """Build with net.PyCumSum, then lower: the one way to a net without Python ops."""
    x = np.random.RandomState(5).randn(3, 6).astype(np.float32)
    w = np.random.RandomState(6).randn(3, 6).astype(np.float32)
    net = core.Net("lower_build")
    y = net.PyCumSum("lb_x", "lb_y", axis=1, reverse=True)
    lowered = core.Net(pycumsum_op.lower(net, target, shapes={"lb_x": x.shape}, dtypes={"lb_x": x.dtype}))
    assert python_ops(lowered.Proto()) == []
    lowered.AddGradientOperators({y: "lb_w"})
    lowered.AddExternalInput("lb_w")
    workspace.FeedBlob("lb_x", x)
    workspace.FeedBlob("lb_w", w)
    workspace.RunNetOnce(lowered)
    reference = torch_gradient(torch_scan, x, w, 1, False, True)
    np.testing.assert_allclose(workspace.FetchBlob("lb_y"), torch_scan(torch.from_numpy(x), 1, reverse=True).numpy(),
                               rtol=1e-5, atol=1e-5)
    assert_gradient_close(workspace.FetchBlob("lb_x_grad"), reference, np.float32)


def test_the_build_api_has_no_algorithm_switch():
    """net.PyCumSum builds the Python op; C++ operators come from lower(), not from a flag."""
    with pytest.raises(TypeError, match="implementation"):
        core.Net("lower_no_impl").PyCumSum("lb3_x", "lb3_y", axis=0, implementation="aten")


def test_bad_shapes_and_dtypes_are_refused_by_name(clean_workspace):
    net = core.Net("lower_bad_args")
    net.PyCumSum("lb2_x", "lb2_y", axis=0)
    with pytest.raises(LoweringError, match=r"shapes\['lb2_x'\] = \(3, -1\) is not a shape"):
        pycumsum_op.lower(net, "portable", shapes={"lb2_x": (3, -1)}, dtypes={"lb2_x": "float"})
    with pytest.raises(LoweringError, match=r"dtypes\['lb2_x'\] = 'complex' is not a tensor dtype"):
        pycumsum_op.lower(net, "portable", shapes={"lb2_x": (3,)}, dtypes={"lb2_x": "complex"})


def test_caffe2_dtype_names_mean_what_they_mean_in_pycumsum(clean_workspace):
    """dtypes={"x": "float"} is float32 (Caffe2's name), as PyCumSum's own dtype= reads it."""
    net = core.Net("lower_names")
    net.PyCumSum("ln_x", "ln_y", axis=0)
    lowered = pycumsum_op.lower(net, "portable", shapes={"ln_x": (3,)}, dtypes={"ln_x": "float"})
    casts = [arg.i for op in lowered.op if op.type == "Cast" for arg in op.arg if arg.name == "to"]
    # float32 summed in float64: each entry widened, each running sum narrowed
    assert casts[0] == caffe2_pb2.TensorProto.DOUBLE and casts[-1] == caffe2_pb2.TensorProto.FLOAT
    assert set(casts) == {caffe2_pb2.TensorProto.DOUBLE, caffe2_pb2.TensorProto.FLOAT}
    workspace.FeedBlob("ln_x", np.array([1, 2, 3], np.float32))
    workspace.RunNetOnce(lowered)
    assert workspace.FetchBlob("ln_y").tolist() == [1, 3, 6]


def _custom_gradient(inputs, outputs):
    outputs[0].feed(inputs[2].data)


def test_a_gradient_op_with_another_gradient_builder_is_refused(clean_workspace):
    """A Python op whose forward is PyCumSum's builder but whose grad_f is not: its gradient is not a cumsum's."""
    from pycumsum_op.ops.builders import scan_forward
    net = core.Net("lower_custom_grad")
    params = {"scan": "cumsum", "axis": 0, "exclusive": False, "reverse": False, "dtype": None}
    net.Python((scan_forward, (), params), grad_f=(_custom_gradient, (), {}))(["lc_x"], ["lc_y"])
    net.AddGradientOperators({"lc_y": "lc_w"})
    with pytest.raises(LoweringError, match=r"op 1 \(PythonGradient.*its gradient builder is refused"):
        pycumsum_op.lower(net, "aten")


#: The grid of item 7: 0-d, empty, rank 1-4, a lane longer than one portable block; every axis, negative ones too.
GRID_SHAPES = [(), (0,), (5,), (3, 0, 2), (2, 3, 4), (2, 1, 3, 33)]
GRID_FLAGS = [(exclusive, reverse) for exclusive in (False, True) for reverse in (False, True)]


def grid_axes(shape):
    span = max(len(shape), 1)
    return range(-span, span)


@pytest.mark.slow  # every dtype, flag and axis
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_forward_grid_every_dtype_flag_and_axis(target, dtype, clean_workspace, torch_scan, to_torch_dtype):
    rng = np.random.RandomState(11)
    for shape in GRID_SHAPES:
        x = (rng.randint(0, 2, shape) if dtype == np.bool_ else rng.uniform(-50, 50, shape)).astype(dtype)
        for axis in grid_axes(shape):
            for exclusive, reverse in GRID_FLAGS:
                actual = lower_and_run(x, target, "arguments", axis=axis, exclusive=exclusive, reverse=reverse)
                reference = expected(torch_scan, to_torch_dtype, x, axis, exclusive, reverse, None)
                assert_lowered_result(actual, reference, target, x, axis)


@pytest.mark.slow
@pytest.mark.parametrize("lowered_gradient_ops", [False, True])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_grid_every_flag_and_axis(dtype, target, lowered_gradient_ops, clean_workspace, torch_scan):
    rng = np.random.RandomState(12)
    for shape in GRID_SHAPES:
        x, w = rng.uniform(-1, 1, shape).astype(dtype), rng.uniform(-1, 1, shape).astype(dtype)
        for axis in grid_axes(shape):
            for exclusive, reverse in GRID_FLAGS:
                _, grad_x = run_lowered_gradient(x, w, target, lowered_gradient_ops, axis=axis, exclusive=exclusive,
                                                 reverse=reverse)
                assert_gradient_close(grad_x, torch_gradient(torch_scan, x, w, axis, exclusive, reverse), dtype)


@pytest.mark.parametrize("call, message", [
    (lambda: pycumsum_op.lower("a_net.pb"), "lower: net must be a Caffe2 core.Net or NetDef, got str"),
    (lambda: pycumsum_op.lower(core.Net("lower_types"), init_net=[]), "lower: init_net must be a Caffe2 core.Net or "
                                                                      "NetDef, got list"),
    (lambda: pycumsum_op.doctor.fix(None, ["loss"]), "fix: net must be a Caffe2 core.Net or NetDef, got NoneType"),
])
def test_what_is_not_a_net_is_a_type_error_naming_the_call_and_argument(call, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        call()


def test_the_run_time_axis_form_is_refused_naming_its_axis_blob(clean_workspace):
    """ONNX CumSum's form (the axis a blob read at run time) has no build-time axis to lower with."""
    net = core.Net("lower_axis_input")
    net.PyCumSum(["la_x", "la_axis"], "la_y")
    with pytest.raises(LoweringError, match=r"op 0 .*reads its axis from input blob 'la_axis' at run time"):
        pycumsum_op.lower(net, "aten")


def test_builder_arguments_given_by_position_lower_like_keywords(clean_workspace, torch_scan):
    """A builder tuple may pass its arguments by position, as Caffe2 calls it: lower reads them the same way."""
    net = core.Net("lower_positional")
    net.Python((scan_forward, ("cumsum", 1, False, True), {}), grad_f=(scan_backward, ("cumsum", 1, False, True), {}))(
        ["lp_x"], ["lp_y"], name="PyCumSum")
    x = np.random.RandomState(0).uniform(-1, 1, (3, 5)).astype(np.float32)
    lowered = pycumsum_op.lower(net, "aten")
    assert not [op for op in lowered.op if op.type.startswith("Python")]
    workspace.FeedBlob("lp_x", x)
    workspace.RunNetOnce(lowered)
    np.testing.assert_array_equal(workspace.FetchBlob("lp_y"), torch_scan(torch.from_numpy(x), 1, reverse=True).numpy())


def test_a_pycumsum_op_with_extra_blobs_is_refused(clean_workspace):
    """A PyCumSum Python op given two inputs (not a form lower knows) is refused, not half-lowered."""
    net = core.Net("lower_two_inputs")
    net.PyCumSum("l2_x", "l2_y", axis=0)
    net.Proto().op[0].input.append("l2_axis")
    with pytest.raises(LoweringError, match=r"op 0 .*with 2 input\(s\) and 1 output\(s\) cannot be lowered"):
        pycumsum_op.lower(net, "aten")
