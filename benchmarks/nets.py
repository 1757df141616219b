"""What the benchmark runs: Caffe2 nets (PyCumSum, the scan family, Copy, the seed's SparseLengthsSum idiom)
and torch.

Every net is created once (``workspace.CreateNet``) and run by its proto name, so a timed run is one
``workspace.RunNet`` call. Blob names are fixed: call `feed` in a fresh workspace for each case.
"""
import numpy as np
import torch
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from pycumsum_op.idioms import add_sparse_lengths_cumsum
from pycumsum_op.kernels import ScanSpec, engine
from pycumsum_op.kernels.route import route
from pycumsum_op.scans import scan as registered_scan

X, GRAD_Y = "bench_x", "bench_y_grad"


def feed(shape, low=-1.0, high=1.0, seed=0, dtype=np.float32):
    """Fresh workspace with input and output-gradient blobs of ``shape`` and ``dtype``, uniform in [low, high)."""
    workspace.ResetWorkspace()
    rng = np.random.RandomState(seed)
    x = rng.uniform(low, high, shape).astype(dtype)
    grad_y = rng.uniform(low, high, shape).astype(dtype)
    workspace.FeedBlob(X, x)
    workspace.FeedBlob(GRAD_Y, grad_y)
    return x, grad_y


def _created(net):
    workspace.CreateNet(net)
    name = net.Proto().name
    return lambda: workspace.RunNet(name)


def pycumsum(axis, backward=False):
    """A net with PyCumSum (and, with backward, its gradient op fed by GRAD_Y); returns its runner."""
    net = core.Net("bench_pycumsum")
    y = net.PyCumSum(X, "bench_y_fb" if backward else "bench_y", axis=axis)
    if backward:
        net.AddExternalInput(GRAD_Y)
        net.AddGradientOperators({y: GRAD_Y})
    return _created(net)


#: scan -> net method, for the scan family's rows (cummax / cummin have two outputs).
FAMILY_METHODS = {"cumprod": "PyCumProd", "cummax": "PyCumMax", "cummin": "PyCumMin",
                  "logcumsumexp": "PyLogCumSumExp"}


def family(scan, axis, backward=False):
    """A net with one scan of the family (and, with backward, its gradient op fed by GRAD_Y)."""
    net = core.Net("bench_" + scan)
    suffix = "_fb" if backward else ""
    outputs = ["bench_v" + suffix, "bench_i" + suffix] if scan in ("cummax", "cummin") else "bench_y" + suffix
    result = getattr(net, FAMILY_METHODS[scan])(X, outputs, axis=axis)
    if backward:
        net.AddExternalInput(GRAD_Y)
        net.AddGradientOperators({result[0] if isinstance(result, tuple) else result: GRAD_Y})
    return _created(net)


def torch_family_forward(scan, x, axis):
    tensor, function = torch.from_numpy(x), getattr(torch, scan)
    return lambda: function(tensor, axis)


def torch_family_forward_backward(scan, x, grad_y, axis):
    """torch.<scan> and its autograd gradient (of the values, for cummax / cummin)."""
    tensor = torch.from_numpy(x.copy()).requires_grad_()
    gradient, function = torch.from_numpy(grad_y), getattr(torch, scan)

    def run():
        result = function(tensor, axis)
        return torch.autograd.grad(result[0] if isinstance(result, tuple) else result, tensor, gradient)
    return run


def copy():
    """A net with one Copy op of the input: the memory-bandwidth bound (and the overhead baseline)."""
    net = core.Net("bench_copy")
    net.Copy(X, "bench_x_copy")
    return _created(net)


def _into_output(call, axis):
    wrap = torch._C._wrap_tensor_impl

    def forward(inputs, outputs):
        x = wrap(inputs[0]._tensor_impl_raw_handle())
        outputs[0].init(list(x.shape), FLOOR_TYPES[x.dtype])  # pybind reads a list faster than a tuple
        call(x, wrap(outputs[0]._tensor_impl_raw_handle()), axis)
    return forward


#: torch dtype -> Caffe2 type of the floor's output.
FLOOR_TYPES = {torch.float32: caffe2_pb2.TensorProto.FLOAT, torch.float64: caffe2_pb2.TensorProto.DOUBLE}


def python_floor(axis, call=engine.torch_scan):
    """A net with the least a Caffe2 Python op making a scan's one call can do: size the output, then ``call`` (one
    a route's ``call``: torch's ``torch.cumsum(out=)`` by default, or the accelerator's loop) between torch
    tensors wrapping the blobs (float32 / float64). No check, no route: with torch's call, the floor of any
    Python-op scan wherever torch's own kernel is the fastest exact one (1-D, last axis); with the call PyCumSum
    makes for a shape, what PyCumSum would cost if the op were nothing but that call."""
    net = core.Net("bench_floor")
    net.Python(_into_output(call, axis))([X], ["bench_y_floor"])
    return _created(net)


def _noop(inputs, outputs):
    """A Python op that does nothing: the cost of Caffe2's Python-op call itself."""


def python_noop():
    net = core.Net("bench_noop")
    net.Python(_noop)([X], [])
    return _created(net)


def seed_bytes(shape, axis):
    """Peak bytes the seed idiom (inclusive, EnsureDense) needs for forward+backward, or None if not 2-D axis 1."""
    if len(shape) != 2 or axis % 2 != 1:
        return None
    rows, columns = shape
    gathered = columns * (columns + 1) // 2  # INDICES: segment j gathers rows 0..j of the transposed input
    return gathered * 4 + gathered * rows * 4 + 6 * rows * columns * 4  # indices, sparse gradient, dense blobs


def seed(columns, backward=False):
    """The seed's Transpose -> EnsureDense -> SparseLengthsSum -> Transpose net (inclusive, so torch.cumsum)."""
    net = core.Net("bench_seed")
    y = add_sparse_lengths_cumsum(net, X, columns, blob_out="bench_seed_y", exclusive=False, ensure_dense=True,
                                  prefix="bench_seed_bwd" if backward else "bench_seed_fwd")
    if backward:
        net.AddExternalInput(GRAD_Y)
        net.AddGradientOperators({y: GRAD_Y})
    return _created(net)


def torch_forward(x, axis):
    tensor = torch.from_numpy(x)
    return lambda: torch.cumsum(tensor, axis)


def torch_forward_backward(x, grad_y, axis):
    """torch.cumsum and its autograd gradient (torch.autograd.grad: no accumulation into .grad)."""
    tensor = torch.from_numpy(x.copy()).requires_grad_()
    gradient = torch.from_numpy(grad_y)
    return lambda: torch.autograd.grad(torch.cumsum(tensor, axis), tensor, gradient)


def numpy_forward(x, axis):
    """numpy's own cumsum (float32 accumulation: faster, less accurate than float64)."""
    return lambda: np.cumsum(x, axis)


def scan_route(scan, x, axis, reverse=False, accelerator=None):
    """The route scan ``scan`` takes for x along axis (`pycumsum_op.kernels.route.route`, which its op asks)."""
    entry = registered_scan(scan)
    return route(entry.kernel, entry.dtypes, ScanSpec(entry.op_name, axis, reverse=reverse), x.shape, x.dtype,
                 accelerator=accelerator)


def paths(x, axis):
    """The engine paths PyCumSum takes for x along axis: forward, backward (a reverse scan)."""
    return tuple(scan_route("cumsum", x, axis, reverse).path for reverse in (False, True))


def lowered(axis, target, backward=False):
    """The PyCumSum net (with its gradient op when ``backward``) lowered to ``target`` ("aten"/"portable").

    X must be in the workspace (portable takes the scan length from it); returns the runner.
    """
    net = core.Net("bench_lowered_" + target)
    y = net.PyCumSum(X, "bench_low_y_fb" if backward else "bench_low_y", axis=axis)
    if backward:
        net.AddExternalInput(GRAD_Y)
        net.AddGradientOperators({y: GRAD_Y})
    return _created(core.Net(pycumsum_op.lower(net, target)))
