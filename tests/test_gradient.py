"""net.PyCumSum backward (via net.AddGradientOperators) against torch.autograd.

The gradient fed into the net is a random w, so the net computes d/dx sum(w * y); torch
computes the same with autograd through torch.cumsum (plus flips and a shift for
reverse/exclusive). Floating inputs get grad_x in their own dtype, as in torch. Inputs of up to 128K
elements drawn around the engine's thresholds run the backward's reverse scan on each engine path.
"""
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace
from hypothesis import Phase, find, given, settings

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from engine_support import NEEDS_NUMBA, accelerator, backward_path, engine_cases, engine_input
from pycumsum_op.torch_versions import has

#: dtype= override -> torch dtype of y (floating only: torch has no gradient through integer results).
FLOAT_OVERRIDES = {None: None, "float": torch.float32, "double": torch.float64, np.float64: torch.float64}


@st.composite
def gradient_cases(draw):
    """(x, w, axis, exclusive, reverse, dtype=): x of rank 0-4 and sizes 0-4, w shaped like y."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    x = draw(hnp.arrays(dtype, shape, elements=st.floats(-100, 100, width=32)))
    override = draw(st.sampled_from(list(FLOAT_OVERRIDES)))
    y_dtype = np.dtype(dtype) if override is None else np.dtype(str(FLOAT_OVERRIDES[override])[len("torch."):])
    w = draw(hnp.arrays(y_dtype, shape, elements=st.floats(-100, 100, width=32)))
    span = max(len(shape), 1)
    return x, w, draw(st.integers(-span, span - 1)), draw(st.booleans()), draw(st.booleans()), override


def run_pycumsum_gradient(x, w, in_place=False, **kwargs):
    """Run net.PyCumSum and its gradient ops with d(loss)/dy = w; returns (y, grad_x)."""
    workspace.ResetWorkspace()
    out = "grad_x_in" if in_place else "grad_y_out"
    net = core.Net("gradient")
    y = net.PyCumSum("grad_x_in", out, **kwargs)
    grad_map = net.AddGradientOperators({y: "grad_w_in"})
    net.AddExternalInput("grad_w_in")
    workspace.FeedBlob("grad_x_in", x)
    workspace.FeedBlob("grad_w_in", w)
    workspace.RunNetOnce(net)
    return workspace.FetchBlob(out), workspace.FetchBlob(str(grad_map["grad_x_in"]))


def torch_gradient(torch_scan, x, w, axis, exclusive, reverse, y_dtype=None):
    """d/dx sum(w * scan(x)) by torch.autograd; x keeps its dtype (float64 stands in for integers)."""
    if x.size == 0:  # torch 1.4's autograd cannot differentiate cumsum of an empty tensor; nothing to compare
        return np.zeros(x.shape, x.dtype if x.dtype.kind == "f" else np.float64)
    x_tensor = torch.tensor(x if x.dtype.kind == "f" else x.astype(np.float64), requires_grad=True)
    y = torch_scan(x_tensor, axis, exclusive, reverse, y_dtype)
    (y * torch.from_numpy(w)).sum().backward()
    return x_tensor.grad.numpy()


def assert_gradient_close(actual, reference, dtype):
    assert actual.dtype == dtype, (actual.dtype, dtype)
    assert actual.shape == reference.shape
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(actual, reference, rtol=tolerance, atol=tolerance * 100)


@pytest.mark.slow  # 400 nets
@settings(max_examples=400)
@given(case=gradient_cases(), in_place=st.booleans())
def test_gradient_matches_torch_autograd(case, in_place, torch_scan):
    x, w, axis, exclusive, reverse, override = case
    in_place = in_place and override is None  # dtype= in place is refused (see test_errors)
    _, grad_x = run_pycumsum_gradient(x, w, in_place, axis=axis, exclusive=exclusive, reverse=reverse,
                                      dtype=override)
    reference = torch_gradient(torch_scan, x, w, axis, exclusive, reverse, FLOAT_OVERRIDES[override])
    assert_gradient_close(grad_x, reference, x.dtype)


@pytest.mark.parametrize("x_dtype", [np.float32, np.float64])
def test_gradient_keeps_float_dtype_when_result_is_wider(x_dtype, clean_workspace, torch_scan):
    """dtype="double" on a float32 input: y is float64, grad_x is float32 (torch autograd's rule)."""
    rng = np.random.RandomState(1)
    x = rng.randn(3, 4).astype(x_dtype)
    w = rng.randn(3, 4)
    y, grad_x = run_pycumsum_gradient(x, w, axis=0, dtype="double")
    assert y.dtype == np.float64
    assert_gradient_close(grad_x, torch_gradient(torch_scan, x, w, 0, False, False, torch.float64), x_dtype)


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("x_dtype", [np.int32, np.int64, np.bool_])
def test_gradient_of_integer_input_takes_the_incoming_dtype(x_dtype, in_place, clean_workspace, torch_scan):
    """Integer/bool x: y is int64 (in place too: an int32 blob becomes int64); the gradient
    flows back in w's dtype (float32 here)."""
    x = np.array([[1, 0, 1, 1], [0, 1, 1, 0]], x_dtype)
    w = np.random.RandomState(2).randn(2, 4).astype(np.float32)
    y, grad_x = run_pycumsum_gradient(x, w, in_place, axis=-1, reverse=True)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, torch.cumsum(torch.from_numpy(np.flip(x, -1).copy()), -1).flip(-1).numpy())
    assert_gradient_close(grad_x, torch_gradient(torch_scan, x, w, -1, False, True).astype(np.float32),
                          np.float32)


@pytest.mark.parametrize("x_dtype", [np.float32, np.float64])
def test_gradient_op_in_place_on_its_gradient_blob(x_dtype, clean_workspace, torch_scan):
    """x -> PyCumSum in place -> Scale -> z: Scale's gradient writes x_grad and PyCumSum's
    gradient op then reads and overwrites that same blob (float64: Caffe2's Scale has it from torch 1.8)."""
    if x_dtype == np.float64 and not has("caffe2 Scale double"):
        pytest.skip("Caffe2's Scale has no float64 on torch {}".format(torch.__version__))
    x = np.arange(-3, 9, dtype=x_dtype).reshape(3, 4)
    w = np.random.RandomState(3).randn(3, 4).astype(x_dtype)
    net = core.Net("gradient_in_place")
    net.PyCumSum("ip_x", "ip_x", axis=1, exclusive=True)
    net.Scale("ip_x", "ip_z", scale=2.0)
    grad_map = net.AddGradientOperators({"ip_z": "ip_w"})
    net.AddExternalInput("ip_w")
    (scan_gradient,) = [op for op in net.Proto().op if op.type == "PythonGradient"]
    assert scan_gradient.output[0] == scan_gradient.input[2], "the scan's gradient op is not in place"
    workspace.FeedBlob("ip_x", x)
    workspace.FeedBlob("ip_w", w)
    workspace.RunNetOnce(net)

    x_tensor = torch.tensor(x, requires_grad=True)
    z = 2.0 * torch_scan(x_tensor, 1, exclusive=True)
    (z * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(workspace.FetchBlob("ip_z"), z.detach().numpy(), rtol=1e-6)
    assert_gradient_close(workspace.FetchBlob(str(grad_map["ip_x"])), x_tensor.grad.numpy(), x_dtype)


ENGINE_FLOAT_DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("path", ["numpy", "torch", "lanes", "rows", pytest.param("compiled", marks=NEEDS_NUMBA)])
def test_the_engine_cases_reach_every_backward_path(path):
    """`engine_cases` draws gradients for each path the engine has (the thresholds are the engine's own)."""
    case = find(engine_cases(ENGINE_FLOAT_DTYPES), lambda case: backward_path(*case) == path,
                settings=settings(max_examples=2000, database=None, phases=[Phase.generate]))  # no shrinking
    assert backward_path(*case) == path


@pytest.mark.slow  # inputs of up to 128K elements
@settings(max_examples=100, deadline=None)
@given(case=engine_cases(ENGINE_FLOAT_DTYPES), in_place=st.booleans())
def test_gradient_matches_torch_autograd_on_every_engine_path(case, in_place, torch_scan):
    dtype, shape, axis, exclusive, reverse, seed, accelerated = case
    x = engine_input(dtype, shape, seed)
    w = engine_input(dtype, shape, seed + 1)
    with accelerator(accelerated):
        y, grad_x = run_pycumsum_gradient(x, w, in_place, axis=axis, exclusive=exclusive, reverse=reverse)
    np.testing.assert_array_equal(y, torch_scan(torch.from_numpy(x), axis, exclusive, reverse).numpy())
    if np.dtype(dtype).kind == "f" and not has("torch autograd reversed cumsum by flips"):
        # Before torch 1.10 autograd's reversed cumsum is total - cumsum + w, which cancels on these long lanes
        # (`torch_versions`): the oracle is torch's own scan of w the other way, the gradient's definition.
        reference = torch_scan(torch.from_numpy(w), axis, exclusive, not reverse).numpy()
    else:
        reference = torch_gradient(torch_scan, x, w, axis, exclusive, reverse)
    assert_gradient_close(grad_x, reference, dtype)
