"""net.PyCumSum forward, run in real Caffe2 nets, against torch.cumsum as the oracle.

Covers rank 0-4, sizes 0 and 1, every axis (positive and negative), exclusive/reverse,
input dtypes float32/float64/int32/int64/bool (and int16/uint8), ``dtype=`` given as a numpy
dtype or a Caffe2 name, result dtypes exactly as torch's, and in-place runs; inputs of up to 128K
elements drawn around the engine's thresholds reach each of its paths (tests/engine_support.py).
"""
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace
from hypothesis import Phase, find, given, settings

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from engine_support import NEEDS_NUMBA, accelerator, engine_cases, engine_input, forward_path

INPUT_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.int16, np.uint8]
#: dtype= as users write it -> the numpy dtype torch would produce (written out here, not read from the package).
DTYPE_OVERRIDES = {
    "float": np.float32, "double": np.float64, "int32": np.int32, "int64": np.int64,
    np.float32: np.float32, np.float64: np.float64, np.int32: np.int32, np.int64: np.int64,
    np.dtype("float64"): np.float64, "float32": np.float32,
}


def elements(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(max(info.min, -1000), min(info.max, 1000))
    return st.floats(-1000, 1000, width=dtype.itemsize * 8)


@st.composite
def scan_cases(draw, dtypes=INPUT_DTYPES, overrides=tuple(DTYPE_OVERRIDES)):
    """(x, axis, exclusive, reverse, dtype=) with rank 0-4 and sizes 0-4 on every dimension."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    dtype = draw(st.sampled_from(dtypes))
    x = draw(hnp.arrays(dtype, shape, elements=elements(dtype)))
    span = max(len(shape), 1)
    axis = draw(st.integers(-span, span - 1))
    override = draw(st.one_of(st.none(), st.sampled_from(overrides)))
    return x, axis, draw(st.booleans()), draw(st.booleans()), override


def run_pycumsum(x, in_place=False, **kwargs):
    """Run ``net.PyCumSum`` on x in a fresh workspace; returns the output array."""
    workspace.ResetWorkspace()
    out = "fwd_x" if in_place else "fwd_y"
    net = core.Net("forward")
    net.PyCumSum("fwd_x", out, **kwargs)
    workspace.FeedBlob("fwd_x", x)
    workspace.RunNetOnce(net)
    return workspace.FetchBlob(out)


def expected(torch_scan, to_torch_dtype, x, axis, exclusive, reverse, override):
    torch_dtype = to_torch_dtype(None if override is None else DTYPE_OVERRIDES[override])
    return torch_scan(torch.from_numpy(x), axis, exclusive, reverse, torch_dtype).numpy()


def assert_same_result(actual, reference):
    assert actual.dtype == reference.dtype, (actual.dtype, reference.dtype)
    assert actual.shape == reference.shape
    if reference.dtype.kind == "f":
        tolerance = 1e-6 if reference.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(actual, reference, rtol=tolerance, atol=tolerance)
    else:
        np.testing.assert_array_equal(actual, reference)


@pytest.mark.slow  # 500 nets
@settings(max_examples=500)
@given(case=scan_cases(), in_place=st.booleans())
def test_matches_torch_cumsum(case, in_place, torch_scan, to_torch_dtype):
    x, axis, exclusive, reverse, override = case
    in_place = in_place and override is None  # dtype= in place is refused (see test_errors)
    actual = run_pycumsum(x, in_place, axis=axis, exclusive=exclusive, reverse=reverse, dtype=override)
    assert_same_result(actual, expected(torch_scan, to_torch_dtype, x, axis, exclusive, reverse, override))


@pytest.mark.parametrize("dtype, result_dtype", [
    (np.float32, np.float32), (np.float64, np.float64),
    (np.int32, np.int64), (np.int64, np.int64), (np.bool_, np.int64),
])
def test_default_result_dtype_is_torchs(dtype, result_dtype, clean_workspace):
    x = np.array([[1, 0, 1], [1, 1, 0]], dtype)
    actual = run_pycumsum(x, axis=1)
    assert actual.dtype == result_dtype
    assert torch.cumsum(torch.from_numpy(x), 1).numpy().dtype == result_dtype
    np.testing.assert_array_equal(actual, np.array([[1, 1, 2], [1, 2, 2]]))


def test_zero_dim_and_empty_tensors(clean_workspace):
    scalar = np.array(2.5, np.float32)
    for axis in (0, -1):
        assert run_pycumsum(scalar, axis=axis).shape == ()
        assert run_pycumsum(scalar, axis=axis) == np.float32(2.5)
    assert run_pycumsum(scalar, axis=0, exclusive=True) == 0
    empty = np.zeros((3, 0, 2), np.int32)
    result = run_pycumsum(empty, axis=1)
    assert result.shape == (3, 0, 2) and result.dtype == np.int64


def test_exclusive_and_reverse_follow_onnx_cumsum(clean_workspace):
    """The four flag combinations of ONNX CumSum's own example (opset 14 spec)."""
    x = np.array([1., 2., 3.], np.float64)
    assert run_pycumsum(x, axis=0).tolist() == [1., 3., 6.]
    assert run_pycumsum(x, axis=0, exclusive=True).tolist() == [0., 1., 3.]
    assert run_pycumsum(x, axis=0, reverse=True).tolist() == [6., 5., 3.]
    assert run_pycumsum(x, axis=0, exclusive=True, reverse=True).tolist() == [5., 3., 0.]


def test_in_place_changes_dtype(clean_workspace):
    """int32 blob scanned into itself becomes an int64 blob with torch's values."""
    x = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    actual = run_pycumsum(x, in_place=True, axis=0)
    assert actual.dtype == np.int64
    np.testing.assert_array_equal(actual, torch.cumsum(torch.from_numpy(x), 0).numpy())


def test_dtype_narrowing_casts_before_summing_like_torch(clean_workspace):
    x = np.array([0.6, 0.6, 0.6, -1.7], np.float32)
    actual = run_pycumsum(x, axis=0, dtype="int32")
    reference = torch.cumsum(torch.from_numpy(x), 0, dtype=torch.int32).numpy()
    assert actual.dtype == np.int32
    np.testing.assert_array_equal(actual, reference)
    np.testing.assert_array_equal(actual, [0, 0, 0, -1])


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_nan_and_inf_propagate_like_torch(clean_workspace, torch_scan, to_torch_dtype):
    x = np.array([[1., np.nan, 2.], [np.inf, 1., -np.inf]], np.float32)
    for exclusive in (False, True):
        for reverse in (False, True):
            actual = run_pycumsum(x, axis=1, exclusive=exclusive, reverse=reverse)
            reference = expected(torch_scan, to_torch_dtype, x, 1, exclusive, reverse, None)
            np.testing.assert_array_equal(actual, reference)


def test_runs_repeatedly_in_one_net(clean_workspace, run_net):
    """A created net keeps working when run again with new input shapes."""
    net = core.Net("repeat")
    net.PyCumSum("rep_x", "rep_y", axis=-1)
    for shape in [(2, 3), (5,), (1, 4, 2)]:
        x = np.random.RandomState(0).randn(*shape).astype(np.float32)
        run_net(net, {"rep_x": x})
        np.testing.assert_allclose(workspace.FetchBlob("rep_y"), torch.cumsum(torch.from_numpy(x), -1).numpy(),
                                   rtol=1e-6)


@pytest.mark.parametrize("path", ["numpy", "torch", "lanes", "rows", pytest.param("compiled", marks=NEEDS_NUMBA)])
def test_the_engine_cases_reach_every_forward_path(path):
    """`engine_cases` draws inputs for each path the engine has (the thresholds are the engine's own)."""
    case = find(engine_cases(), lambda case: forward_path(*case) == path,
                settings=settings(max_examples=2000, database=None, phases=[Phase.generate]))  # no shrinking
    assert forward_path(*case) == path


@pytest.mark.slow  # inputs of up to 128K elements
@settings(max_examples=150, deadline=None)
@given(case=engine_cases(), in_place=st.booleans())
def test_matches_torch_cumsum_bit_for_bit_on_every_engine_path(case, in_place, torch_scan):
    dtype, shape, axis, exclusive, reverse, seed, accelerated = case
    x = engine_input(dtype, shape, seed)
    in_place = in_place and dtype.kind == "f"  # an integer input in place becomes int64 (tested above)
    with accelerator(accelerated):
        actual = run_pycumsum(x, in_place, axis=axis, exclusive=exclusive, reverse=reverse)
    reference = torch_scan(torch.from_numpy(x), axis, exclusive, reverse).numpy()
    assert actual.dtype == reference.dtype and actual.shape == reference.shape
    np.testing.assert_array_equal(actual, reference)
