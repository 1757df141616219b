"""PyCumProd, PyCumMax, PyCumMin and PyLogCumSumExp in real Caffe2 nets against torch 1.10.2.

- torch's own OpInfo sample inputs (``op_db``) for the four ops: forward, and gradient against
  torch.autograd;
- property tests (rank 0-4, sizes 0-4, every axis and flag, every accepted dtype, in place where
  allowed) against conftest's torch oracle;
- the kernels' two paths (``direct``: torch writes into the output; ``staged``: cast / flipped /
  shifted copies) at sizes of at least 64K elements, where torch itself runs its parallel loops;
- the gradient traps: zeros in cumprod lanes, ties and NaN in cummax/cummin, -inf prefixes, +inf and
  magnitudes of 1e4 in logcumsumexp.
"""
import distutils.version  # noqa: F401  (torch's common_methods_invocations needs it imported first)

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace
from hypothesis import given, settings

try:
    from torch.testing._internal.common_methods_invocations import op_db
except ImportError:  # torch < 1.5 has no torch.testing._internal
    op_db = []

from pycumsum_op.kernels import ScanArgumentError, ScanSpec
from pycumsum_op.scans import scan as registered_scan
from pycumsum_op.kernels.spec import RESULT_DTYPES
from pycumsum_op.torch_versions import has
from scan_family_support import (RUN_ERROR, TWO_OUTPUTS, assert_gradient_close, assert_outputs_equal, run_scan,
                                 torch_reference)
from engine_support import scan_route

SCANS = ["cumprod", "cummax", "cummin", "logcumsumexp"]
#: input dtypes each scan takes; for float16 and uint16 torch has no CPU kernel, so the oracle runs
#: in float64 / int32 and its result is cast back.
DTYPES = {
    "cumprod": [np.float32, np.float64, np.int32, np.int64, np.bool_, np.int16, np.uint8, np.float16],
    "cummax": [np.float32, np.float64, np.int32, np.int64, np.bool_, np.int8, np.uint8, np.int16, np.uint16,
               np.float16],
    "logcumsumexp": [np.float32, np.float64, np.float16],
}
DTYPES["cummin"] = DTYPES["cummax"]
ORACLE_DTYPES = {np.dtype(np.float16): np.float64, np.dtype(np.uint16): np.int32}


def oracle(torch_scan, scan, x, w=None, **flags):
    """torch's outputs (and gradient), through a wider dtype where torch has no kernel for x's."""
    wide = ORACLE_DTYPES.get(x.dtype)
    outputs, grad = torch_reference(torch_scan, scan, x if wide is None else x.astype(wide), w, **flags)
    if wide is not None:
        outputs[0] = outputs[0].astype(x.dtype if scan != "cumprod" or x.dtype.kind == "f" else np.int64)
    return outputs, grad


# --- torch's OpInfo samples -------------------------------------------------------------------

OPINFOS = {op.name: op for op in op_db if op.name in SCANS}
needs_opinfos = pytest.mark.skipif(
    len(OPINFOS) < len(SCANS), reason="torch {}'s OpInfo database (torch.testing._internal) has no samples for {} "
    "(the scans are tested by the property tests below)".format(torch.__version__, sorted(set(SCANS) - set(OPINFOS))))


def opinfo_cases():
    """(scan, torch dtype) for each dtype the OpInfo tests on CPU that Caffe2 blobs hold."""
    blob_dtypes = [torch.float32, torch.float64, torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8,
                   torch.bool]
    return [(name, dtype) for name in OPINFOS for dtype in blob_dtypes if dtype in OPINFOS[name].dtypesIfCPU]


@needs_opinfos
def test_every_scan_has_opinfo_samples():
    assert sorted(OPINFOS) == sorted(SCANS)
    assert len(opinfo_cases()) >= 20


@pytest.mark.parametrize("scan, dtype", opinfo_cases())
def test_torch_opinfo_samples(scan, dtype, clean_workspace):
    opinfo = OPINFOS[scan]
    floating = dtype.is_floating_point
    samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=floating))
    assert samples
    rng = np.random.RandomState(0)
    for sample in samples:
        (axis,) = sample.args
        keywords = dict(sample.kwargs)
        x = sample.input.detach().numpy().copy()
        if "dtype" in keywords:
            keywords["dtype"] = np.dtype(str(keywords["dtype"])[len("torch."):])
            if keywords["dtype"] not in RESULT_DTYPES:  # dtype= takes float16/32/64 and int32/64 only
                with pytest.raises(RUN_ERROR, match="PyCumProd: unknown dtype='{}'".format(
                        keywords["dtype"].name)):
                    run_scan(scan, x, axis=axis, **keywords)
                continue
        expected = opinfo.op(sample.input, *sample.args, **sample.kwargs)
        expected = [t.detach().numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
        w = rng.standard_normal(x.shape).astype(expected[0].dtype) if floating else None
        outputs, grad_x = run_scan(scan, x, w, axis=axis, **keywords)
        assert_outputs_equal(outputs, expected)
        if floating:
            # The oracle is torch's autograd in float64: torch 1.9's float32 cumprod gradient is not accurate
            # enough to be one. Its reversed cumsum is `total - cumsum + w`, which cancels to an absolute error
            # of float32's epsilon times the lane's total, and it then divides by x: for an OpInfo element near
            # zero (|x| ~ 1e-6) torch 1.9 is off by up to 1e-2 (a few % relative), where PyCumProd and
            # torch 1.10 stay within 5e-7 of a float64 reference.
            wide = {k: torch.float64 if v in (torch.float16, torch.float32) else v for k, v in sample.kwargs.items()}
            tensor = sample.input.detach().to(torch.float64).requires_grad_()
            y = opinfo.op(tensor, *sample.args, **wide)
            y = y[0] if isinstance(y, tuple) else y
            (reference,) = torch.autograd.grad(y, tensor, torch.from_numpy(w).to(y.dtype))
            assert_gradient_close(grad_x, reference.numpy(), x.dtype)


# --- property tests ---------------------------------------------------------------------------

def elements(scan, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        bound = 6 if scan == "cumprod" else 1000  # products of 4 stay exact
        return st.integers(max(info.min, -bound), min(info.max, bound))
    if scan == "cumprod":  # zeros included; |products| of 4 elements stay in float16's range
        return st.one_of(st.just(0.0), st.floats(-8, 8, width=16))
    return st.floats(-50, 50, width=16 if dtype == np.float16 else 32)


@st.composite
def family_cases(draw, scan):
    """(x, w, axis, flags) with rank 0-4 and sizes 0-4 on every dimension; w shaped like x."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    dtype = np.dtype(draw(st.sampled_from(DTYPES[scan])))
    x = draw(hnp.arrays(dtype, shape, elements=elements(scan, dtype)))
    w = draw(hnp.arrays(np.float64 if dtype == np.float64 else np.float32, shape,
                        elements=st.floats(-10, 10, width=32)))
    span = max(len(shape), 1)
    flags = {name: draw(st.booleans()) for name in ("exclusive", "reverse") if name in registered_scan(scan).arguments}
    return x, w, draw(st.integers(-span, span - 1)), flags


@pytest.mark.slow  # 120 examples of each scan
@pytest.mark.parametrize("scan", SCANS)
@settings(max_examples=120)
@given(data=st.data())
def test_forward_and_gradient_match_torch(scan, data, torch_scan):
    x, w, axis, flags = data.draw(family_cases(scan))
    in_place = scan in TWO_OUTPUTS and data.draw(st.booleans())
    floating = x.dtype.kind == "f"
    w = w.astype(x.dtype) if floating else w  # the oracle gets the incoming gradient as the op does (float16 too)
    outputs, grad_x = run_scan(scan, x, w, in_place, axis=axis, **flags)
    expected, reference = oracle(torch_scan, scan, x, w, axis=axis, **flags)
    assert_outputs_equal(outputs, expected, 1e-3 if x.dtype == np.float16 else None)
    if floating:
        assert_gradient_close(grad_x, reference, x.dtype)
    else:  # an integer or bool input's gradient flows back in the incoming gradient's dtype
        assert_gradient_close(grad_x, reference.astype(w.dtype), w.dtype)


# --- both kernel paths at >= 64K elements -----------------------------------------------------

LARGE_CASES = [  # shape, axis, flags; x along the scan axis is in [0.9, 1.1) so that products stay finite
    ((4, 32768), 1, {}),
    ((4, 32768), 0, {}),
    ((300, 300), 0, {"reverse": True}),
    ((64, 32, 64), 1, {"exclusive": True}),
    ((2, 65536), -1, {"exclusive": True, "reverse": True}),
]


@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("shape, axis, flags", LARGE_CASES)
def test_large_inputs_on_both_paths(scan, shape, axis, flags, torch_scan, clean_workspace, large_oracle):
    large_oracle(scan)
    if "exclusive" in flags and "exclusive" not in registered_scan(scan).arguments:
        flags = {"reverse": True}
    rng = np.random.RandomState(len(shape) + axis)
    x = rng.uniform(0.9, 1.1, shape).astype(np.float32)
    w = rng.standard_normal(shape).astype(np.float32)
    found = scan_route(scan, shape, x.dtype, axis, flags.get("exclusive", False), flags.get("reverse", False),
                       accelerator=False)
    assert found.variant == ("out=" if not flags else "staged")
    outputs, grad_x = run_scan(scan, x, w, axis=axis, **flags)
    expected, reference = oracle(torch_scan, scan, x, w, axis=axis, **flags)
    assert_outputs_equal(outputs, expected, 1e-5)
    assert_gradient_close(grad_x, reference, np.float32)


@st.composite
def large_cases(draw):
    """(scan, x, w, axis, flags): 64K-290K random elements of rank 2-3 (seeded numpy data: drawing them
    element by element would be slow), any axis and flag; torch runs its parallel loops at these sizes."""
    scan = draw(st.sampled_from(SCANS))
    target = draw(st.integers(1 << 16, 1 << 18))
    sides = [draw(st.integers(1, 512))] + ([draw(st.integers(1, 64))] if draw(st.booleans()) else [])
    sides = draw(st.permutations(sides + [-(-target // int(np.prod(sides)))]))  # >= target elements
    rank = len(sides)
    rng = np.random.RandomState(draw(st.integers(0, 2 ** 31 - 1)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    x = rng.uniform(0.95, 1.05, sides).astype(dtype)
    x[rng.rand(*sides) < 1e-4] = 0  # a few zeros (cumprod's gradient) and exact ties (cummax)
    flags = {name: draw(st.booleans()) for name in ("exclusive", "reverse") if name in registered_scan(scan).arguments}
    return scan, x, rng.standard_normal(sides).astype(dtype), draw(st.integers(-rank, rank - 1)), flags


@pytest.mark.slow  # large inputs
@settings(max_examples=16)
@given(case=large_cases())
def test_large_random_inputs_match_torch(case, torch_scan, large_oracle):
    scan, x, w, axis, flags = case
    large_oracle(scan)
    outputs, grad_x = run_scan(scan, x, w, axis=axis, **flags)
    expected, reference = oracle(torch_scan, scan, x, w, axis=axis, **flags)
    assert_outputs_equal(outputs, expected, 1e-5 if x.dtype == np.float32 else 1e-12)
    assert_gradient_close(grad_x, reference, x.dtype)


@pytest.mark.parametrize("scan", ["cumprod", "logcumsumexp"])
def test_large_integer_cast_takes_the_staged_path(scan, torch_scan, clean_workspace):
    """int32 -> int64 (cumprod) and float16 -> float64 (logcumsumexp) inputs are cast, then scanned."""
    rng = np.random.RandomState(5)
    if scan == "cumprod":
        x = rng.choice([-1, 1, 1, 1], size=(8, 16384)).astype(np.int32)
        outputs, _ = run_scan(scan, x, axis=1)
    else:
        x = rng.uniform(-3, 3, (8, 16384)).astype(np.float16)
        outputs, _ = run_scan(scan, x, axis=1)
    expected, _ = oracle(torch_scan, scan, x, axis=1)
    assert_outputs_equal(outputs, expected, 1e-3)


def test_kernel_writes_into_an_overlapping_output():
    """The kernels called directly with out = x (as an edited in-place net would) still give torch's result."""
    x = np.random.RandomState(2).uniform(0.5, 1.5, (3, 5))
    for scan in SCANS:
        kernel = registered_scan(scan)
        expected = kernel.forward(x.copy(), ScanSpec(kernel.op_name, 1))
        data = x.copy()
        out = (data, np.empty(data.shape, np.int64)) if scan in TWO_OUTPUTS else data
        kernel.forward(data, ScanSpec(kernel.op_name, 1), out)
        np.testing.assert_array_equal(data, expected[0] if scan in TWO_OUTPUTS else expected)


# --- gradient traps ---------------------------------------------------------------------------

@pytest.mark.parametrize("lane", [
    [0., 2., 3., 4.], [2., 0., 3., 4.], [2., 3., 4., 0.], [0., 0., 3., 4.], [2., 0., 3., 0.], [0., 0., 0., 0.],
    [2., 0., 0., 5.], [1e-30, 1e-30, 0., 1e30],
])
@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, False), (False, True), (True, True)])
def test_cumprod_gradient_with_zeros_is_torchs(lane, exclusive, reverse, torch_scan, clean_workspace):
    x = np.array([lane, lane[::-1]])
    w = np.array([[1., -2., 3., 0.5], [0.25, 4., -1., 2.]])
    outputs, grad_x = run_scan("cumprod", x, w, axis=1, exclusive=exclusive, reverse=reverse)
    expected, reference = oracle(torch_scan, "cumprod", x, w, axis=1, exclusive=exclusive, reverse=reverse)
    assert np.isfinite(grad_x).all()
    assert_outputs_equal(outputs, expected)
    assert_gradient_close(grad_x, reference, np.float64)


def test_cumprod_gradient_with_zeros_float32_large(torch_scan, clean_workspace):
    """Zeros scattered through 64K-element float32 lanes, including several in one lane."""
    rng = np.random.RandomState(9)
    x = rng.uniform(0.95, 1.05, (8, 8192)).astype(np.float32)
    x[rng.rand(*x.shape) < 0.0005] = 0
    x[0, 0] = x[1, -1] = 0
    w = rng.standard_normal(x.shape).astype(np.float32)
    _, grad_x = run_scan("cumprod", x, w, axis=1)
    _, reference = oracle(torch_scan, "cumprod", x, w, axis=1)
    assert_gradient_close(grad_x, reference, np.float32)


@pytest.mark.parametrize("scan", TWO_OUTPUTS)
@pytest.mark.parametrize("reverse", [False, True])
def test_ties_and_nan_follow_torch_and_gradient_goes_to_the_winner(scan, reverse, torch_scan, clean_workspace):
    x = np.array([[1., 3., 3., 2., 3., 1., 1.], [2., np.nan, 5., np.nan, 1., -0., 0.]], np.float32)
    w = np.arange(1., 15.).reshape(2, 7).astype(np.float32)
    outputs, grad_x = run_scan(scan, x, w, axis=1, reverse=reverse)
    expected, _ = oracle(torch_scan, scan, x, axis=1, reverse=reverse)
    np.testing.assert_array_equal(outputs[0], expected[0])  # NaN == NaN here
    np.testing.assert_array_equal(outputs[1], expected[1])
    tensor = torch.tensor(x, requires_grad=True)
    values, _ = torch_scan(tensor, 1, False, reverse, None, scan)
    (reference,) = torch.autograd.grad(values, tensor, torch.from_numpy(w))
    np.testing.assert_array_equal(grad_x, reference.numpy())
    winners = np.zeros_like(w)
    for row in range(2):
        np.add.at(winners[row], outputs[1][row], w[row])
    np.testing.assert_array_equal(grad_x, winners)


def test_logcumsumexp_gradient_is_zero_where_torchs_is_nan(torch_scan, clean_workspace):
    """x = -inf inside a lane's all -inf prefix: torch 1.10.2 gives NaN, the true weights are 0."""
    inf = np.inf
    x = np.array([[-inf, -inf, 1., 2.], [-inf, 0., -inf, 3.], [-inf, -inf, -inf, -inf]])
    w = np.array([[1., 2., 3., 4.], [1., -1., 2., 0.5], [1., 1., 1., 1.]])
    outputs, grad_x = run_scan("logcumsumexp", x, w, axis=1)
    expected, reference = oracle(torch_scan, "logcumsumexp", x, w, axis=1)
    np.testing.assert_array_equal(outputs[0], expected[0])
    assert np.isnan(reference).any(), "torch no longer returns NaN here"
    torch_nan = np.isnan(reference)
    assert (x[torch_nan] == -inf).all()
    np.testing.assert_array_equal(grad_x[torch_nan], 0)
    np.testing.assert_allclose(grad_x[~torch_nan], reference[~torch_nan], rtol=1e-12)
    assert (grad_x[x == -inf] == 0).all()


@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, False), (False, True), (True, True)])
def test_logcumsumexp_positive_infinity_gets_its_limit(exclusive, reverse, torch_scan, clean_workspace):
    """+inf inputs: torch gives NaN; the oracle replaces +inf by 1e4 (finite values are within +-3),
    so each +inf element takes 1/m of y[i] (m = how many +inf are in the sum)."""
    x = np.array([[1., np.inf, 2., np.inf, -1.], [np.inf, 0., 0., 0., np.inf]])
    w = np.array([[1., 2., 3., 4., 5.], [-1., 2., 0.5, 1., 3.]])
    outputs, grad_x = run_scan("logcumsumexp", x, w, axis=1, exclusive=exclusive, reverse=reverse)
    expected, _ = oracle(torch_scan, "logcumsumexp", x, axis=1, exclusive=exclusive, reverse=reverse)
    np.testing.assert_array_equal(outputs[0], expected[0])
    _, limit = oracle(torch_scan, "logcumsumexp", np.where(np.isinf(x), 1e4, x), w, axis=1, exclusive=exclusive,
                      reverse=reverse)
    assert np.isfinite(grad_x).all()
    np.testing.assert_allclose(grad_x, limit, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logcumsumexp_is_stable_at_1e4(dtype, torch_scan, clean_workspace):
    if dtype == np.float32 and not has("torch.logcumsumexp -inf"):
        pytest.skip("torch {}: the float32 prefix oracle rounds differently from the kernel by up to 0.4% at "
                    "magnitudes of 1e4 (float64 is checked)".format(torch.__version__))
    rng = np.random.RandomState(4)
    x = (rng.standard_normal((3, 50)) * 1e4).astype(dtype)
    w = rng.standard_normal((3, 50)).astype(dtype)
    outputs, grad_x = run_scan("logcumsumexp", x, w, axis=1, reverse=True)
    expected, reference = oracle(torch_scan, "logcumsumexp", x, w, axis=1, reverse=True)
    assert np.isfinite(outputs[0]).all() and np.isfinite(grad_x).all()
    assert_outputs_equal(outputs, expected)
    tensor = torch.tensor(x, requires_grad=True)  # torch in x's own dtype, as autograd would run it
    (same_dtype,) = torch.autograd.grad(torch_scan(tensor, 1, False, True, None, "logcumsumexp"), tensor,
                                        torch.from_numpy(w))
    assert_gradient_close(grad_x, same_dtype.numpy().astype(np.float64), dtype)
    # float32 carries x - y at 1e4 to ~5e-4: the float64 reference agrees to that
    np.testing.assert_allclose(grad_x, reference, atol=5e-3 * np.abs(reference).max())


def test_the_backward_checks_by_the_scans_own_dtype_rule(clean_workspace):
    """The gradient checks its incoming gradient by the scan's `DtypeRule`, not cumsum's (which takes any number):
    logcumsumexp's takes floats only, so an int64 gradient is refused naming the gradient op; cummax's keeps an
    integer input's dtype, so an int32 gradient of int32 values comes back as int32."""
    net = core.Net("own_rule")
    net.PyLogCumSumExp("rule_x", "rule_y", axis=0)
    net.AddGradientOperators({"rule_y": "rule_g"})
    net.AddExternalInput("rule_g")
    workspace.FeedBlob("rule_x", np.array([0.0, 1.0, 2.0]))
    workspace.FeedBlob("rule_g", np.ones(3, np.int64))
    with pytest.raises(Exception, match=r"PyLogCumSumExpGradient: input of shape \(3,\) has dtype int64; expected "
                                        r"one of float16, float32, float64"):
        workspace.RunNetOnce(net)
    with pytest.raises(ScanArgumentError, match=r"PyLogCumSumExp: input of shape \(3,\) has dtype int64"):
        registered_scan("logcumsumexp").backward(np.ones(3, np.int64), np.zeros(3), ScanSpec("PyLogCumSumExp", 0))
    x = np.array([[3, 1, 4, 1, 5]], np.int32)
    values, indices = registered_scan("cummax").forward(x, ScanSpec("PyCumMax", 1))
    grad_x = registered_scan("cummax").backward(np.arange(5, dtype=np.int32).reshape(1, 5), x,
                                                 ScanSpec("PyCumMaxGradient", 1), indices=indices)
    assert values.dtype == np.int32 and grad_x.dtype == np.int32
    np.testing.assert_array_equal(grad_x, [[1, 0, 5, 0, 4]])
