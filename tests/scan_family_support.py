"""Running the scan family (PyCumProd, PyCumMax, PyCumMin, PyLogCumSumExp) in real Caffe2 nets, and
comparing with torch: shared by tests/test_scan_family*.py. The oracle itself is `torch_oracles.torch_scan`."""
import numpy as np
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs the net methods)
from pycumsum_op.kernels import ScanArgumentError
from pycumsum_op.torch_versions import has

#: What a net run raises when a Python op refuses its input: the op's own ScanArgumentError, or, before torch 1.6,
#: Caffe2's RuntimeError carrying its message ("... PythonOp function: ScanArgumentError: <message>").
RUN_ERROR = ScanArgumentError if has("caffe2 python op exception type") else (ScanArgumentError, RuntimeError)


def op_message(error) -> str:
    """The Python op's own message in a `RUN_ERROR`: str(error), or the line Caffe2 carried it in before torch 1.6."""
    if isinstance(error, ScanArgumentError):
        return str(error)
    return str(error).split("ScanArgumentError: ", 1)[1].split("\n", 1)[0]

#: scan name -> the net method users call.
NET_METHODS = {"cumprod": "PyCumProd", "cummax": "PyCumMax", "cummin": "PyCumMin",
               "logcumsumexp": "PyLogCumSumExp"}
#: scans with two outputs (values, int64 indices).
TWO_OUTPUTS = ("cummax", "cummin")


def output_names(scan, prefix="fam"):
    return [prefix + "_values", prefix + "_indices"] if scan in TWO_OUTPUTS else prefix + "_y"


def run_scan(scan, x, w=None, in_place=False, **kwargs):
    """Run net.<scan op>("fam_x", ...) (and, when ``w`` is given, its gradient ops with d(loss)/dy = w)
    in a fresh workspace; returns (list of outputs, grad_x or None)."""
    workspace.ResetWorkspace()
    net = core.Net("family")
    outputs = output_names(scan)
    if in_place:
        outputs = ["fam_x", "fam_indices"] if scan in TWO_OUTPUTS else "fam_x"
    result = getattr(net, NET_METHODS[scan])("fam_x", outputs, **kwargs)
    first = result[0] if scan in TWO_OUTPUTS else result
    grad_name = None
    if w is not None:
        grad_map = net.AddGradientOperators({first: "fam_w"})
        net.AddExternalInput("fam_w")
        workspace.FeedBlob("fam_w", w)
        grad_name = str(grad_map["fam_x"])
    workspace.FeedBlob("fam_x", x)
    workspace.RunNetOnce(net)
    blobs = [workspace.FetchBlob(str(b)) for b in (result if scan in TWO_OUTPUTS else [result])]
    return blobs, (workspace.FetchBlob(grad_name) if grad_name else None)


def torch_reference(torch_scan, scan, x, w=None, exclusive=False, reverse=False, axis=0, dtype=None):
    """torch's outputs (numpy) and, with ``w``, torch.autograd's d/dx sum(w * y) computed in float64."""
    outputs = torch_scan(torch.from_numpy(x), axis, exclusive, reverse, dtype, scan)
    outputs = [t.numpy() for t in (outputs if isinstance(outputs, tuple) else (outputs,))]
    if w is None:
        return outputs, None
    if x.size == 0:  # torch 1.4's autograd cannot differentiate its scans of an empty tensor; nothing to compare
        return outputs, np.zeros(x.shape)
    x64 = torch.tensor(x.astype(np.float64), requires_grad=True)
    y = torch_scan(x64, axis, exclusive, reverse, None, scan)
    y = y[0] if isinstance(y, tuple) else y
    (grad,) = torch.autograd.grad(y, x64, torch.from_numpy(w.astype(np.float64)))
    return outputs, grad.detach().numpy()


def assert_outputs_equal(actual, expected, float_tolerance=None):
    """Same dtypes and shapes; integers exactly; floats within ``float_tolerance`` (default: by dtype)."""
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert got.shape == want.shape, (got.shape, want.shape)
        if want.dtype.kind == "f":
            tolerance = float_tolerance or (1e-6 if want.dtype == np.float32 else 1e-12)
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
        else:
            np.testing.assert_array_equal(got, want)


def assert_gradient_close(actual, reference, dtype):
    """grad_x has ``dtype`` and matches the float64 reference within float32/float64 rounding of its scale."""
    assert actual.dtype == dtype, (actual.dtype, dtype)
    assert actual.shape == reference.shape
    scale = max(1.0, float(np.max(np.abs(reference), initial=0)))
    tolerance = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 2e-5}.get(np.dtype(dtype), 1e-10)
    np.testing.assert_allclose(actual, reference, rtol=tolerance, atol=tolerance * scale)
