"""A new scan op is one registry entry: registered here, in the test, it gets the net method, the function
API and the brew helper, its gradient, save_net / load_net / verify_net, and lowering where a target can
express it (else the entry's refusal reason in the LoweringError) — against torch as the oracle.

Three scans are registered, each with its own kernels written below:

- ``cummean`` (``PyCumMean``): the running mean along an axis (``reverse`` too); no ATen or portable form,
  so lowering and ONNX export refuse it with the entry's reasons.
- ``runningsum`` (``PyRunningSum``): a plain running sum, declared with the ATen operator ``cumsum`` and
  the portable ``Add`` form, so both targets lower it (and its gradient op) from the entry alone.
- ``runningproduct`` (``PyRunningProduct``): a routed scan with the accelerator's product loop, its kernel facts
  (`ScanKernel`: identity, loop, compute dtypes, runner) declared here with its entry; its routes, `explain`, the
  op and the ATen lowering follow from them.
"""
import contextlib
import functools
import re

import numpy as np
import pytest
import torch
from caffe2.python import brew, core, gradient_checker, model_helper, workspace

import pycumsum_op
from pycumsum_op import scans, torch_versions
from pycumsum_op.kernels import DtypeRule, ScanArgumentError, compiled
from pycumsum_op.kernels.route import forward
from pycumsum_op.kernels.spec import PRODUCT_LOOP, ScanKernel, backward_check_and_out
from pycumsum_op.kernels.torch_scans import runner
from pycumsum_op.ops import add_scan_op, scan_function
from pycumsum_op.scans import AtenForm, PortableForm, Refused, Scan, aten_backward
from engine_support import NEEDS_NUMBA, record_paths
from onnx_support import needs_onnx_backend

FLOATING = DtypeRule((np.dtype(np.float32), np.dtype(np.float64)), integers_to_int64=False)


def _lanes(array, spec, checked):
    """``array`` with at least one dimension, flipped along the axis when the scan is reversed."""
    lanes = array.reshape(1) if array.ndim == 0 else array
    return np.flip(lanes, checked.axis) if spec.reverse else lanes


def _counts(lanes, axis):
    """1, 2, ..., n along ``axis``, shaped to broadcast against ``lanes``."""
    return np.arange(1, lanes.shape[axis] + 1, dtype=np.float64).reshape((-1,) + (1,) * (lanes.ndim - axis - 1))


def _write(out, spec, checked, result):
    out[...] = (np.flip(result, checked.axis) if spec.reverse else result).reshape(out.shape)
    return out


def cummean_forward(x, spec, out=None, checked=None):
    checked = FLOATING.check(spec, x) if checked is None else checked
    out = np.empty(x.shape, checked.result_dtype) if out is None else out
    lanes = _lanes(x, spec, checked)
    return _write(out, spec, checked, np.cumsum(lanes, checked.axis, dtype=np.float64) / _counts(lanes, checked.axis))


def cummean_backward(grad_y, x, spec, out=None, checked=None):
    """grad_x[j] = sum over i >= j of grad_y[i] / (i + 1): a reversed running sum of the weighted gradient."""
    checked, out = backward_check_and_out(FLOATING, spec, grad_y, x, out, checked)
    weighted = _lanes(grad_y, spec, checked) / _counts(_lanes(grad_y, spec, checked), checked.axis)
    return _write(out, spec, checked, np.flip(np.cumsum(np.flip(weighted, checked.axis), checked.axis), checked.axis))


def running_sum_forward(x, spec, out=None, checked=None):
    checked = DtypeRule().check(spec, x) if checked is None else checked
    out = np.empty(x.shape, checked.result_dtype) if out is None else out
    return _write(out, spec, checked, np.cumsum(_lanes(x, spec, checked), checked.axis, dtype=checked.accumulate_dtype))


def running_sum_backward(grad_y, x, spec, out=None, checked=None):
    checked, out = backward_check_and_out(DtypeRule(), spec, grad_y, x, out, checked)
    lanes = _lanes(grad_y, spec, checked)
    return _write(out, spec, checked, np.flip(np.cumsum(np.flip(lanes, checked.axis), checked.axis, dtype=np.float64),
                                           checked.axis))


CUMMEAN = Scan(
    "cummean", "PyCumMean", cummean_forward, cummean_backward,
    doc="Append ``blob_out`` = the running mean of ``blob_in`` along ``axis``; returns the output BlobReference.",
    arguments=frozenset(["reverse"]), dtypes=FLOATING,
    aten=Refused("torch has no running-mean operator for Caffe2's ATen op to call"),
    portable=Refused("a running mean is a running sum divided by counts that depend on the scan length"),
    onnx=Refused("ONNX has no running-mean operator"))
RUNNING_SUM = Scan(
    "runningsum", "PyRunningSum", running_sum_forward, running_sum_backward,
    doc="Append ``blob_out`` = the running sum of ``blob_in`` along ``axis``; returns the output BlobReference.",
    arguments=frozenset(["reverse"]), dtypes=DtypeRule(), self_adjoint=True,
    aten=AtenForm("cumsum", needs=None, backward=aten_backward.cumsum_backward),
    portable=PortableForm("Add", blocked=True))


def torch_running_product(t, axis, reverse=False, exclusive=False):
    lanes = t.flip(axis) if reverse else t
    if exclusive:
        lanes = torch.cat([torch.ones_like(lanes.narrow(axis, 0, 1)), lanes.narrow(axis, 0, lanes.shape[axis] - 1)],
                          axis)
    products = lanes.cumprod(axis)
    return products.flip(axis) if reverse else products


def running_product_backward(grad_y, x, spec, out=None, checked=None):
    """torch autograd's gradient of the scan (the plumbing is under test here, not this kernel)."""
    checked, out = backward_check_and_out(DtypeRule(), spec, grad_y, x, out, checked)
    t = torch.from_numpy(np.array(x, np.float64, ndmin=1)).requires_grad_()
    torch_running_product(t, checked.axis, spec.reverse, spec.exclusive).backward(
        torch.from_numpy(np.array(grad_y, np.float64, ndmin=1)))
    out[...] = t.grad.numpy().reshape(out.shape)
    return out


#: Its kernel's facts: what an exclusive scan starts with, the accelerator's loop, the dtypes torch scans in,
#: and how a route runs (torch.cumprod, or the accelerator's product loop where the route takes it).
RUNNING_PRODUCT_KERNEL = ScanKernel(
    "runningproduct", identity=1.0, loop=PRODUCT_LOOP,
    compute=((np.dtype(np.float16), np.dtype(np.float64)), (np.dtype(np.int32), np.dtype(np.int64))),
    run=runner(torch.cumprod))
RUNNING_PRODUCT = Scan(
    "runningproduct", "PyRunningProduct", functools.partial(forward, RUNNING_PRODUCT_KERNEL, DtypeRule()),
    running_product_backward,
    doc="Append ``blob_out`` = the running product of ``blob_in`` along ``axis``; returns the output BlobReference.",
    saves=("input",), dtypes=DtypeRule(), kernel=RUNNING_PRODUCT_KERNEL,
    aten=AtenForm("cumprod", needs=None, backward=aten_backward.cumprod_backward,
                  backward_needs="aten cumprod_backward(grad, input)"),
    portable=Refused("no exact portable product is declared"))


def torch_cummean(t, axis, reverse=False):
    lanes = t.flip(axis) if reverse else t
    counts = torch.arange(1, lanes.shape[axis] + 1, dtype=t.dtype).reshape((-1,) + (1,) * (t.dim() - axis % t.dim() - 1))
    means = lanes.cumsum(axis) / counts
    return means.flip(axis) if reverse else means


def torch_running_sum(t, axis, reverse=False):
    return t.flip(axis).cumsum(axis).flip(axis) if reverse else t.cumsum(axis)


ORACLES = {"cummean": torch_cummean, "runningsum": torch_running_sum, "runningproduct": torch_running_product}


@contextlib.contextmanager
def registered(*entries):
    """The scans registered for the block, and taken out again after it, whatever happens."""
    for entry in entries:
        scans.register(entry)
    try:
        yield
    finally:
        for entry in entries:
            if entry.name in scans.SCANS:
                scans.unregister(entry.name)


@pytest.fixture
def new_scans(clean_workspace):
    with registered(CUMMEAN, RUNNING_SUM, RUNNING_PRODUCT):
        yield
    for entry in (CUMMEAN, RUNNING_SUM, RUNNING_PRODUCT):  # the registration is gone without a trace
        assert entry.name not in scans.SCANS and not hasattr(core.Net, entry.op_name)
        assert not hasattr(pycumsum_op, entry.name)
        assert not brew.has_helper(entry.name)


def gradient_net(name, op_name, x, axis, weights, **flags):
    """``op(x)`` with its gradient op, ``weights`` the output's gradient; runs it, returns (net, y, x's gradient)."""
    net = core.Net(name)
    getattr(net, op_name)("nx", "ny", axis=axis, **flags)
    net.AddGradientOperators({"ny": "ny_grad_in"})
    net.AddExternalInput("ny_grad_in")
    workspace.FeedBlob("nx", x)
    workspace.FeedBlob("ny_grad_in", weights)
    workspace.RunNetOnce(net)
    return net, workspace.FetchBlob("ny"), workspace.FetchBlob("nx_grad")


def torch_gradient(scan, x, axis, reverse, weights):
    t = torch.from_numpy(x.copy()).requires_grad_()
    y = ORACLES[scan](t, axis, reverse)
    (y * torch.from_numpy(weights)).sum().backward()
    return y.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("scan, op_name", [("cummean", "PyCumMean"), ("runningsum", "PyRunningSum"),
                                           ("runningproduct", "PyRunningProduct")])
@pytest.mark.parametrize("shape, axis, reverse", [((3, 5), 1, False), ((3, 5), 0, True), ((2, 3, 4), -2, True),
                                                  ((7,), 0, False), ((0, 3), 1, True)])
def test_net_method_and_gradient_match_torch(new_scans, scan, op_name, shape, axis, reverse):
    rng = np.random.RandomState(3)
    x, weights = rng.uniform(-2, 2, shape), rng.uniform(-1, 1, shape)
    _, y, grad_x = gradient_net("new_" + scan, op_name, x, axis, weights, reverse=reverse)
    expected_y, expected_grad = torch_gradient(scan, x, axis, reverse, weights)
    np.testing.assert_allclose(y, expected_y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad_x, expected_grad, rtol=1e-12, atol=1e-12)


def test_function_api_and_brew_helper_come_from_the_entry(new_scans):
    x = np.random.RandomState(4).uniform(-1, 1, (2, 6)).astype(np.float32)
    workspace.FeedBlob("fx", x)
    net = core.Net("new_function")
    cummean = scan_function("cummean")
    assert cummean.__doc__ == CUMMEAN.doc
    assert pycumsum_op.cummean is pycumsum_op.cummean and pycumsum_op.cummean.__doc__ == CUMMEAN.doc
    assert "cummean" in dir(pycumsum_op)
    pycumsum_op.cummean(net, "fx", "f_forward", axis=1)
    model = model_helper.ModelHelper(name="new_brew")
    brew.cummean(model, "fx", "f_brewed", axis=1, reverse=True)
    workspace.RunNetOnce(net)
    workspace.RunNetOnce(model.net)
    t = torch.from_numpy(x)
    np.testing.assert_allclose(workspace.FetchBlob("f_forward"), torch_cummean(t, 1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(workspace.FetchBlob("f_brewed"), torch_cummean(t, 1, reverse=True).numpy(), rtol=1e-6)
    assert workspace.FetchBlob("f_forward").dtype == np.float32  # the entry's dtype rule: floats keep theirs


def test_caffe2_gradient_checker_passes_the_new_op(new_scans):
    net = core.Net("new_checked")
    net.PyCumMean("cx", "cy", axis=1, reverse=True)
    op = net.Proto().op[0]
    checker = gradient_checker.GradientChecker(stepsize=1e-4, threshold=1e-6, device_option=core.DeviceOption(0),
                                               workspace_name="new_scan_gradient")
    x = np.random.RandomState(5).uniform(-1, 1, (3, 4))
    passed, gradient, numeric = checker.CheckSimple(op, [x], 0, [0])
    assert passed, (gradient, numeric)


def test_the_entry_refuses_what_it_does_not_declare(new_scans):
    net = core.Net("new_refusals")
    with pytest.raises(TypeError, match=r"cummean\(net, blob_in, blob_out=None, axis=None, reverse=False, dim=None\): "
                                        r"got an unexpected keyword argument 'exclusive'"):
        net.PyCumMean("rx", "ry", axis=0, exclusive=True)
    with pytest.raises(ScanArgumentError, match=r"PyCumMean: takes no exclusive= argument \(it takes axis, reverse\)"):
        add_scan_op(net, "cummean", "rx", "ry", axis=0, exclusive=True)
    net.PyCumMean("rx", "ry", axis=0)
    workspace.FeedBlob("rx", np.arange(3, dtype=np.int32))
    with pytest.raises(Exception, match=r"PyCumMean: input of shape \(3,\) has dtype int32; expected one of "
                                        r"float32, float64"):
        workspace.RunNetOnce(net)


def test_registering_checks_the_entry_and_clashes():
    with pytest.raises(ScanArgumentError, match=r"an exclusive scan needs an identity"):
        scans.register(CUMMEAN._replace(arguments=frozenset(["exclusive", "reverse"])))
    with pytest.raises(ScanArgumentError, match=r"saves names \['x'\]"):
        scans.register(CUMMEAN._replace(saves=("x",)))
    with pytest.raises(ScanArgumentError, match=r"dtypes must state the scan's DtypeRule"):
        scans.register(CUMMEAN._replace(dtypes=None))  # no fallback to another scan's rule
    with pytest.raises(ScanArgumentError, match=r"clashes with the registered scan 'cumsum'"):
        scans.register(CUMMEAN._replace(op_name="PyCumSum"))
    proto = core.Net.Proto
    with pytest.raises(ScanArgumentError, match=r"core.Net already has an attribute 'Proto'"):
        scans.register(CUMMEAN._replace(op_name="Proto"))
    assert core.Net.Proto is proto
    with pytest.raises(ScanArgumentError, match=r"brew already has a helper 'fc'"):
        scans.register(CUMMEAN._replace(name="fc"))
    assert brew.has_helper("fc") and not hasattr(core.Net, "PyCumMean")  # nothing half-registered stays
    model = model_helper.ModelHelper(name="brew_fc_kept")
    assert brew.fc(model, "in", "out", dim_in=2, dim_out=3) == "out"  # brew's own fc, untouched
    lower = pycumsum_op.lower
    with pytest.raises(ScanArgumentError, match=r"pycumsum_op already has an attribute 'lower'"):
        scans.register(CUMMEAN._replace(name="lower", op_name="PyCumMean"))
    assert pycumsum_op.lower is lower and not hasattr(core.Net, "PyCumMean") and not brew.has_helper("lower")
    assert "cummean" not in scans.SCANS and "fc" not in scans.SCANS and "lower" not in scans.SCANS


def test_save_load_verify_round_trip_and_only_registered_scans_load(new_scans, tmp_path):
    net = core.Net("new_saved")
    net.PyCumMean("sx", "sy", axis=-1)
    net.AddGradientOperators({"sy": "sy_grad_in"})
    net.AddExternalInput("sy_grad_in")
    path = str(tmp_path / "cummean.pb")
    pycumsum_op.save_net(net, path)
    x = np.random.RandomState(6).uniform(-1, 1, (2, 5))
    g = np.random.RandomState(7).uniform(-1, 1, (2, 5))
    loaded = pycumsum_op.load_net(path)
    assert len(pycumsum_op.verify_net(loaded)) == 2  # the forward op and its gradient op, both checked
    workspace.FeedBlob("sx", x)
    workspace.FeedBlob("sy_grad_in", g)
    workspace.RunNetOnce(loaded)
    expected_y, expected_grad = torch_gradient("cummean", x, -1, False, g)
    np.testing.assert_allclose(workspace.FetchBlob("sy"), expected_y, rtol=1e-12)
    np.testing.assert_allclose(workspace.FetchBlob("sx_grad"), expected_grad, rtol=1e-12)

    scans.unregister("cummean")  # the restricted loader fails closed: an unknown scan is refused
    with pytest.raises(pycumsum_op.UnsafeNetError, match=r"unknown scan='cummean'; known scans: .*'runningsum'"):
        pycumsum_op.load_net(path)
    with pytest.raises(pycumsum_op.UnsafeNetError, match=r"unknown scan='cummean'"):
        pycumsum_op.verify_net(loaded)


@pytest.mark.parametrize("target", ["aten", "portable"])
def test_lowering_refuses_with_the_entrys_reason(new_scans, target):
    net = core.Net("new_refused_" + target)
    net.PyCumMean("lx", "ly", axis=1)
    reason = CUMMEAN.form(target).reason
    with pytest.raises(pycumsum_op.LoweringError, match=r"op 0 \(Python 'PyCumMean': lx -> ly\): scan 'cummean' "
                       r"\(PyCumMean\) cannot be lowered to target '{}': {}; lowered there: .*runningsum".format(
                           target, re.escape(reason))):
        pycumsum_op.lower(net, target=target, shapes={"lx": (2, 3)}, dtypes={"lx": np.float64})


@needs_onnx_backend
def test_onnx_export_refuses_with_the_entrys_reason(new_scans):
    from pycumsum_op.onnx import export
    from onnx import TensorProto
    net = core.Net("new_export")
    net.PyCumMean("ex", "ey", axis=1)
    net.AddExternalOutput(core.BlobReference("ey"))
    with pytest.raises(ValueError, match=r"scan 'cummean' \(PyCumMean\) has no ONNX form: ONNX has no running-mean"):
        export(net, value_info={"ex": (TensorProto.DOUBLE, (2, 3))})


@pytest.mark.parametrize("target", ["aten", "portable"])
@pytest.mark.parametrize("reverse", [False, True])
def test_a_scan_with_declared_forms_lowers_with_its_gradient(new_scans, target, reverse):
    rng = np.random.RandomState(8)
    x, weights = rng.uniform(-2, 2, (3, 40)).astype(np.float32), rng.uniform(-1, 1, (3, 40)).astype(np.float32)
    net, _, _ = gradient_net("new_lowered_" + target, "PyRunningSum", x, 1, weights, reverse=reverse)
    lowered = pycumsum_op.lower(net, target=target, shapes={"nx": x.shape}, dtypes={"nx": x.dtype})
    assert not any(op.type.startswith("Python") for op in lowered.op)
    if target == "aten":
        assert {"cumsum"} <= {op.arg[0].s.decode() for op in lowered.op if op.type == "ATen"}
    for blob in ("ny", "nx_grad"):  # what the Python ops wrote is overwritten, so the lowered ops are checked
        workspace.FeedBlob(blob, np.full(x.shape, np.nan, np.float32))
    workspace.RunNetOnce(lowered)
    expected_y, expected_grad = torch_gradient("runningsum", x.astype(np.float64), 1, reverse,
                                               weights.astype(np.float64))
    np.testing.assert_allclose(workspace.FetchBlob("ny"), expected_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(workspace.FetchBlob("nx_grad"), expected_grad, rtol=1e-5, atol=1e-5)


def test_the_aten_gradient_of_a_scan_reads_its_entry(new_scans):
    """``AddGradientOperators`` on a lowered net: the ATen gradient maker finds the operator in the registry."""
    net = core.Net("new_aten_backward")
    net.PyRunningSum("ax", "ay", axis=0)
    lowered = core.Net(pycumsum_op.lower(net, target="aten"))
    lowered.AddGradientOperators({"ay": "ay_grad_in"})
    lowered.AddExternalInput("ay_grad_in")
    x, g = np.arange(1.0, 5.0), np.array([1.0, 10.0, 100.0, 1000.0])
    workspace.FeedBlob("ax", x)
    workspace.FeedBlob("ay_grad_in", g)
    workspace.RunNetOnce(lowered)
    np.testing.assert_array_equal(workspace.FetchBlob("ax_grad"), torch_gradient("runningsum", x, 0, False, g)[1])


# --- a routed scan with an accelerator loop: its kernel's facts are all its routes, explain and the op need

FLAGS = [(False, False), (True, False), (False, True), (True, True)]  # (exclusive, reverse)


def signs(shape, seed):
    """+-1 (products neither overflow nor round: every path gives the same bits) and weights for the gradient."""
    rng = np.random.RandomState(seed)
    return rng.choice([-1.0, 1.0], shape).astype(np.float32), rng.uniform(-1, 1, shape).astype(np.float32)


def running_product_gradient(x, weights, axis, exclusive, reverse):
    t = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    y = torch_running_product(t, axis, reverse, exclusive)
    y.backward(torch.from_numpy(weights.astype(np.float64)))
    return y.detach().numpy().astype(x.dtype), t.grad.numpy().astype(x.dtype)


@pytest.mark.parametrize("accelerated", [pytest.param(True, marks=NEEDS_NUMBA), False],
                         ids=["accelerated", "plain"])
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
def test_a_routed_scan_runs_the_route_explain_names(new_scans, monkeypatch, accelerated, exclusive, reverse):
    """The op runs the route its kernel's facts make, the one `explain` names (the accelerator's product loop, else
    torch's scan), on its first run and on a repeated one (the kept route); forward and gradient equal torch."""
    monkeypatch.setenv(compiled.SWITCH, "1" if accelerated else "0")
    shape = (2000, 64)  # rows of 64 lanes: the accelerator's row loops, where it is on
    explained = pycumsum_op.explain(shape, 0, "float32", op="PyRunningProduct", exclusive=exclusive, reverse=reverse)
    assert explained.route.path == ("compiled" if accelerated else "torch")
    assert explained.plain.variant == ("out=" if not (exclusive or reverse) else "staged")
    taken = record_paths(monkeypatch)
    for seed in (1, 2):
        x, weights = signs(shape, seed)
        _, y, grad_x = gradient_net("new_routed", "PyRunningProduct", x, 0, weights, exclusive=exclusive,
                                    reverse=reverse)
        expected_y, expected_grad = running_product_gradient(x, weights, 0, exclusive, reverse)
        np.testing.assert_array_equal(y, expected_y)
        np.testing.assert_allclose(grad_x, expected_grad, rtol=1e-5, atol=1e-5)
    assert taken == ["compiled"] * (2 if accelerated else 0)


def test_a_routed_scan_takes_its_compute_dtypes_and_dtype_rule(new_scans):
    """int32 is multiplied in int64 (the kernel's compute dtypes) and given as int64 (the entry's dtype rule)."""
    net = core.Net("new_routed_int")
    net.PyRunningProduct("ix", "iy", axis=1, exclusive=True)
    x = np.array([[2, 3, 4], [5, -1, 7]], np.int32)
    workspace.FeedBlob("ix", x)
    workspace.RunNetOnce(net)
    np.testing.assert_array_equal(workspace.FetchBlob("iy"), np.array([[1, 2, 6], [1, 5, -5]], np.int64))


@pytest.mark.parametrize("exclusive, reverse", FLAGS)
def test_a_routed_scan_lowers_to_aten_with_its_gradient(new_scans, exclusive, reverse):
    """The entry's ATen form, with its identity (from its kernel) where the lowering shifts an exclusive scan."""
    x, weights = signs((3, 40), 9)
    net, _, _ = gradient_net("new_routed_lowered", "PyRunningProduct", x, 1, weights, exclusive=exclusive,
                             reverse=reverse)
    lower = functools.partial(pycumsum_op.lower, net, target="aten", shapes={"nx": x.shape}, dtypes={"nx": x.dtype})
    needed = RUNNING_PRODUCT.aten.backward_needs
    if not torch_versions.has(needed):  # torch < 1.8: the entry's gradient form is refused by name
        with pytest.raises(pycumsum_op.LoweringError, match=r"needs torch >= {}\.{} \(this is torch ".format(
                *torch_versions.SINCE[needed])):
            lower()
        pytest.skip("the ATen gradient of cumprod is refused on torch {} (asserted)".format(torch.__version__))
    lowered = lower()
    assert not any(op.type.startswith("Python") for op in lowered.op)
    for blob in ("ny", "nx_grad"):
        workspace.FeedBlob(blob, np.full(x.shape, np.nan, np.float32))
    workspace.RunNetOnce(lowered)
    expected_y, expected_grad = running_product_gradient(x, weights, 1, exclusive, reverse)
    np.testing.assert_array_equal(workspace.FetchBlob("ny"), expected_y)
    np.testing.assert_allclose(workspace.FetchBlob("nx_grad"), expected_grad, rtol=1e-5, atol=1e-5)


def test_a_routed_scan_saves_and_loads(new_scans, tmp_path):
    net = core.Net("new_routed_saved")
    net.PyRunningProduct("px", "py", axis=0, exclusive=True, reverse=True)
    path = str(tmp_path / "runningproduct.pb")
    pycumsum_op.save_net(net, path)
    loaded = pycumsum_op.load_net(path)
    assert len(pycumsum_op.verify_net(loaded)) == 1
    x, _ = signs((2000, 64), 11)
    workspace.FeedBlob("px", x)
    workspace.RunNetOnce(loaded)
    np.testing.assert_array_equal(workspace.FetchBlob("py"),
                                  torch_running_product(torch.from_numpy(x), 0, True, True).numpy())


def test_a_routed_scan_needs_its_runner_and_an_exclusive_scan_its_identity():
    with pytest.raises(ScanArgumentError, match=r"a scan's kernel states the runner of its routes"):
        scans.register(RUNNING_PRODUCT._replace(kernel=RUNNING_PRODUCT_KERNEL._replace(run=None)))
    with pytest.raises(ScanArgumentError, match=r"an exclusive scan needs an identity"):
        scans.register(RUNNING_PRODUCT._replace(kernel=None))
    assert "runningproduct" not in scans.SCANS
