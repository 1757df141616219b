"""lower(target="aten") of PyCumProd, PyCumMax, PyCumMin and PyLogCumSumExp, against torch 1.10.2.

Forward: every input dtype the ops accept (float16 refused), ``dtype=`` (cumprod), every flag the op
takes and every axis (negative too) on 0-d, empty, rank 1 and rank 3 inputs, and >= 64K-element inputs:
equal to torch bit for bit (indices too). Gradients of cumprod (zeros in the lanes), cummax and cummin
(ties) and logcumsumexp (+-inf, 1e4): AddGradientOperators on the lowered net, and the net's own gradient
ops lowered, both against torch.autograd. Refusals: target "portable", float16, a reversed negative axis
of unknown rank — each a LoweringError naming the op index, its type and the scan.
"""
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op
from pycumsum_op.lowering import LoweringError
from pycumsum_op.scans import scan as registered_scan
from pycumsum_op.torch_versions import SINCE, has
from scan_family_support import NET_METHODS, TWO_OUTPUTS, assert_gradient_close, output_names
from test_scan_family import DTYPES, oracle

SCANS = sorted(NET_METHODS)
SHAPES = [(), (4,), (2, 0, 3), (2, 3, 4)]
#: cumprod's dtype= values (the Caffe2 names PyCumProd takes; float16 is refused, tested below).
CUMPROD_OVERRIDES = {"float": np.float32, "double": np.float64, "int32": np.int32, "int64": np.int64}


def flag_sets(scan):
    arguments = registered_scan(scan).arguments
    return [(exclusive, reverse) for exclusive in ((False, True) if "exclusive" in arguments else (False,))
            for reverse in (False, True)]


def build(scan, with_gradient_ops=False, **kwargs):
    """A net with net.<op>("lf_x", ...) (and its gradient ops for d(loss)/d(first output) = "lf_w")."""
    net = core.Net("lower_family")
    result = getattr(net, NET_METHODS[scan])("lf_x", output_names(scan, "lf"), **kwargs)
    first = result[0] if scan in TWO_OUTPUTS else result
    if with_gradient_ops:
        net.AddGradientOperators({first: "lf_w"})
        net.AddExternalInput("lf_w")
    return net, [str(b) for b in (result if scan in TWO_OUTPUTS else [result])]


def missing_capability(scan, gradient=False):
    """The torch capability (`torch_versions`) that the ATen form of ``scan`` (its gradient too) lacks here."""
    form = registered_scan(scan).aten
    needed = [form.needs] + ([form.backward_needs] if gradient else [])
    return next((capability for capability in needed if capability and not has(capability)), None)


def lower_or_refuse(scan, lower, gradient=False):
    """``lower()``; where this torch lacks the form's ATen operators, assert the one LoweringError naming the
    torch version it needs, then skip the numeric checks."""
    missing = missing_capability(scan, gradient)
    if missing is None:
        return lower()
    with pytest.raises(LoweringError, match=r"needs torch >= {}\.{} \(this is torch ".format(*SINCE[missing])):
        lower()
    pytest.skip("the ATen form of {} is refused on torch {} (asserted): {}".format(scan, torch.__version__, missing))


def lowered_outputs(scan, x, **kwargs):
    workspace.ResetWorkspace()
    workspace.FeedBlob("lf_x", x)
    net, names = build(scan, **kwargs)
    lowered = lower_or_refuse(scan, lambda: pycumsum_op.lower(net, "aten"))
    assert [op.type for op in lowered.op if op.type.startswith("Python")] == []
    workspace.RunNetOnce(lowered)
    return [workspace.FetchBlob(name) for name in names]


def assert_identical(actual, expected):
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert (got.dtype, got.shape) == (want.dtype, want.shape)
        np.testing.assert_array_equal(got, want)  # NaN == NaN here; bit-identical values otherwise


def sample(dtype, shape, rng, zeros=False):
    if dtype == np.bool_:
        return rng.randint(0, 2, shape).astype(dtype)
    if np.dtype(dtype).kind in "iu":  # small values: products stay exact, ties are common
        return rng.randint(0 if zeros else 1, 4, shape).astype(dtype)
    return rng.choice([-1.5, -0.5, 0.0 if zeros else 0.25, 0.5, 2.0, 1.0], shape).astype(dtype)


def axes(shape):
    span = max(len(shape), 1)
    return range(-span, span)


@pytest.mark.slow  # every dtype, flag and axis
@pytest.mark.parametrize("scan", SCANS)
def test_forward_every_dtype_flag_and_axis_equals_torch(scan, torch_scan):
    rng = np.random.RandomState(7)
    overrides = [None] + (list(CUMPROD_OVERRIDES) if scan == "cumprod" else [])
    for dtype in DTYPES[scan]:
        if dtype == np.float16:
            continue  # refused: test_float16_is_refused
        for override in overrides:
            for shape in SHAPES:
                x = sample(dtype, shape, rng, zeros=True)
                for axis in axes(shape):
                    for exclusive, reverse in flag_sets(scan):
                        flags = dict(exclusive=exclusive) if exclusive else {}
                        if override:
                            flags["dtype"] = override
                        actual = lowered_outputs(scan, x, axis=axis, reverse=reverse, **flags)
                        torch_dtype = None if override is None else getattr(
                            torch, np.dtype(CUMPROD_OVERRIDES[override]).name)
                        expected, _ = oracle(torch_scan, scan, x, exclusive=exclusive, reverse=reverse, axis=axis,
                                             dtype=torch_dtype)
                        assert_identical(actual, expected)


@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("shape, axis", [((70000,), 0), ((3, 30000), -1), ((40000, 2), 0)])
def test_forward_on_64k_elements_equals_torch(scan, shape, axis, torch_scan, large_oracle):
    large_oracle(scan)
    rng = np.random.RandomState(8)
    x = rng.uniform(0.9, 1.1, shape).astype(np.float64 if scan == "cumprod" else np.float32)
    x[tuple(rng.randint(0, n, 5) for n in shape)] = 1.0  # ties for cummax / cummin
    for exclusive, reverse in flag_sets(scan):
        flags = dict(exclusive=exclusive) if exclusive else {}
        expected, _ = oracle(torch_scan, scan, x, exclusive=exclusive, reverse=reverse, axis=axis)
        assert_identical(lowered_outputs(scan, x, axis=axis, reverse=reverse, **flags), expected)


GRADIENT_SCANS = SCANS


def lowered_gradient(scan, x, w, lowered_gradient_ops, **kwargs):
    """grad_x of sum(w * first output) through the lowered net: its gradient ops lowered, or
    AddGradientOperators run on the lowered forward net."""
    workspace.ResetWorkspace()
    workspace.FeedBlob("lf_x", x)
    workspace.FeedBlob("lf_w", w)
    net, names = build(scan, with_gradient_ops=lowered_gradient_ops, **kwargs)

    def lower():
        lowered = core.Net(pycumsum_op.lower(net, "aten"))
        if not lowered_gradient_ops:
            lowered.AddGradientOperators({names[0]: "lf_w"})
            lowered.AddExternalInput("lf_w")
        return lowered
    lowered = lower_or_refuse(scan, lower, gradient=True)
    assert [op.type for op in lowered.Proto().op if op.type.startswith("Python")] == []
    workspace.RunNetOnce(lowered)
    return workspace.FetchBlob("lf_x_grad")


@pytest.mark.slow
@pytest.mark.parametrize("lowered_gradient_ops", [False, True])
@pytest.mark.parametrize("scan", GRADIENT_SCANS)
def test_gradient_every_flag_and_axis_equals_torch_autograd(scan, lowered_gradient_ops, torch_scan):
    rng = np.random.RandomState(9)
    for dtype in (np.float32, np.float64):
        for shape in SHAPES + [(3, 5)]:
            x, w = sample(dtype, shape, rng, zeros=True), rng.uniform(-1, 1, shape).astype(dtype)
            for axis in axes(shape):
                for exclusive, reverse in flag_sets(scan):
                    flags = dict(exclusive=exclusive) if exclusive else {}
                    actual = lowered_gradient(scan, x, w, lowered_gradient_ops, axis=axis, reverse=reverse, **flags)
                    _, reference = oracle(torch_scan, scan, x, w, exclusive=exclusive, reverse=reverse, axis=axis)
                    assert_gradient_close(actual, reference, dtype)


@pytest.mark.parametrize("lowered_gradient_ops", [False, True])
def test_cumprod_gradient_with_zeros_and_dtype(lowered_gradient_ops, torch_scan):
    """Zeros at a lane's start, middle and end, one or several; dtype=double on a float32 input."""
    x = np.array([[0., 2., 3., 4.], [2., 0., 3., 0.], [2., 3., 4., 0.], [0., 0., 1., 2.]], np.float32)
    w = np.random.RandomState(10).uniform(-1, 1, x.shape).astype(np.float32)
    for exclusive, reverse in flag_sets("cumprod"):
        actual = lowered_gradient("cumprod", x, w, lowered_gradient_ops, axis=1, exclusive=exclusive,
                                  reverse=reverse, dtype="double")
        _, reference = oracle(torch_scan, "cumprod", x, w, exclusive=exclusive, reverse=reverse, axis=1)
        assert_gradient_close(actual, reference, np.float32)


@pytest.mark.slow  # 64K elements
@pytest.mark.parametrize("lowered_gradient_ops", [False, True])
@pytest.mark.parametrize("scan", GRADIENT_SCANS)
def test_gradient_on_64k_elements_equals_torch_autograd(scan, lowered_gradient_ops, torch_scan, large_oracle):
    large_oracle(scan)
    rng = np.random.RandomState(11)
    x = rng.uniform(0.99, 1.01, (2, 33000)).astype(np.float64)
    x[:, ::997] = 1.0  # ties
    # no zero here: torch 1.10's cumprod_backward (the oracle's and the lowered net's) is quadratic in a lane
    # with a zero (about a minute at this size); zeros are tested on small lanes above
    w = rng.uniform(-1, 1, x.shape)
    for exclusive, reverse in flag_sets(scan):
        flags = dict(exclusive=exclusive) if exclusive else {}
        actual = lowered_gradient(scan, x, w, lowered_gradient_ops, axis=-1, reverse=reverse, **flags)
        _, reference = oracle(torch_scan, scan, x, w, exclusive=exclusive, reverse=reverse, axis=-1)
        assert_gradient_close(actual, reference, np.float64)


@pytest.mark.parametrize("lowered_gradient_ops", [False, True])
def test_logcumsumexp_gradient_at_infinities_and_large_magnitudes(lowered_gradient_ops, torch_scan):
    """0 where x = -inf (torch: NaN inside an all -inf prefix); at x = +inf the limit, which torch.autograd
    gives for a huge finite value in its place; magnitudes of 1e4 stay finite."""
    inf = np.inf
    x = np.array([[-inf, -inf, 0.5, -inf, 2.0], [-inf, 1.0, inf, 0.0, inf], [1e4, -1e4, 1e4, 3.0, -2.0],
                  [inf, -inf, 1.0, inf, inf]])
    w = np.random.RandomState(13).uniform(-1, 1, x.shape)
    stand_in = np.where(x == inf, 1e3, x)  # exp(1e3 - y) of the other entries underflows to exactly 0
    for exclusive, reverse in flag_sets("logcumsumexp"):
        actual = lowered_gradient("logcumsumexp", x, w, lowered_gradient_ops, axis=1, exclusive=exclusive,
                                  reverse=reverse)
        _, reference = oracle(torch_scan, "logcumsumexp", stand_in, w, exclusive=exclusive, reverse=reverse, axis=1)
        reference = np.where(np.isnan(reference) & (x == -inf), 0.0, reference)  # torch's NaN at -inf
        assert np.all(np.isfinite(actual))
        assert_gradient_close(actual, reference, np.float64)


@pytest.mark.parametrize("scan", SCANS)
def test_portable_target_is_refused_with_the_reason(scan):
    net, names = build(scan, axis=0)
    with pytest.raises(LoweringError, match=r"op 0 \(Python '{}': lf_x -> {}\): scan '{}' \({}\) cannot be lowered "
                                            r"to target 'portable': .*(not exact|indices)".format(
                                                NET_METHODS[scan], ", ".join(names), scan, NET_METHODS[scan])):
        pycumsum_op.lower(net, "portable", shapes={"lf_x": (3,)}, dtypes={"lf_x": np.float32})


@pytest.mark.parametrize("scan", SCANS)
def test_float16_is_refused(scan):
    net, _ = build(scan, axis=0)
    with pytest.raises(LoweringError, match=r"op 0 \(Python '{}'.*its float16 input 'lf_x' cannot be lowered to "
                                            r"target 'aten': torch 1.10's CPU {} has no Half kernel".format(
                                                NET_METHODS[scan], scan)):
        pycumsum_op.lower(net, "aten", dtypes={"lf_x": np.float16})
    if scan == "cumprod":
        net, _ = build(scan, axis=0, dtype="float16")
        with pytest.raises(LoweringError, match="dtype=float16 cannot be lowered"):
            pycumsum_op.lower(net, "aten")


@pytest.mark.parametrize("scan", TWO_OUTPUTS)
def test_reversed_negative_axis_of_unknown_rank_is_refused(scan):
    workspace.ResetWorkspace()
    net, _ = build(scan, axis=-1, reverse=True)
    lower_or_refuse(scan, lambda: pycumsum_op.lower(net, "aten", shapes={"lf_x": (2, 3)}))  # (torch >= 1.5)
    with pytest.raises(LoweringError, match=r"op 0 .*reverse=True with axis=-1 needs the rank of its input 'lf_x'"):
        pycumsum_op.lower(net, "aten")


@pytest.mark.parametrize("scan", SCANS)
def test_lowered_before_anything_is_known(scan, torch_scan):
    """No shape or dtype when lowering (nothing fed, no init net): the ATen form still equals torch."""
    workspace.ResetWorkspace()
    flags = dict(exclusive=True) if "exclusive" in registered_scan(scan).arguments else {}
    net, names = build(scan, axis=1, reverse=True, **flags)
    lowered = lower_or_refuse(scan, lambda: pycumsum_op.lower(net, "aten"))
    x = np.random.RandomState(12).randint(0, 4, (2, 5, 3)).astype(np.float64 if scan == "logcumsumexp" else np.int32)
    workspace.FeedBlob("lf_x", x)
    workspace.RunNetOnce(lowered)
    expected, _ = oracle(torch_scan, scan, x, exclusive=bool(flags), reverse=True, axis=1)
    assert_identical([workspace.FetchBlob(name) for name in names], expected)
