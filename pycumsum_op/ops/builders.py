"""The Python-op functions Caffe2 runs, and the builders that make them.

A `net.PyCumSum` op is a Caffe2 ``Python`` op whose OperatorDef carries
``pickled_builder = pickle((scan_forward, (), params))`` and
``pickled_grad_builder = pickle((scan_backward, (), params))``. Caffe2 calls the
builder once when it creates the net (in whatever process loads it) and then
calls the returned function on every run. The import paths
``pycumsum_op.ops.builders.scan_forward`` / ``scan_backward`` are stored in
saved nets: they are public API and must never move.

`cumsum_fwd` / `cumsum_bwd` are ready-made Python-op functions (last axis,
inclusive) for the token form::

    net.Python(cumsum_fwd, grad_f=cumsum_bwd)(["x"], ["y"])

With ``axis_input=True`` a builder makes ONNX CumSum's form: the op's inputs are
``[x, axis]``, the axis a 0-d int32/int64 tensor read on every run (``axis`` is then
None), and the gradient op's inputs are ``[x, axis, y, grad_y]``.

`check_builder_call` makes, on arguments read from a saved net, the builder call Caffe2 will make
when it creates the net, so `pycumsum_op.verify_net` applies the builders' own rules:

>>> check_builder_call("pycumsum_op.ops.builders.scan_forward", (), {"scan": "cumsum", "axis": 1})
>>> check_builder_call("pycumsum_op.ops.builders.scan_forward", (), {"scan": "cumsum", "axis": 1, "evil": 1})
Traceback (most recent call last):
...
pycumsum_op.kernels.spec.ScanArgumentError: scan_forward(scan, axis=None, exclusive=False, reverse=False, dtype=None, axis_input=False): got an unexpected keyword argument 'evil'
"""
import inspect

import numpy as np
import torch
from caffe2.proto import caffe2_pb2

from ..kernels import ScanArgumentError, ScanSpec, compiled, gradient_dtype, short_repr
from ..kernels.route import APART, SAME, routes
from ..kernels.spec import check_flag_argument
from ..scans import scan as registered_scan

_CAFFE2_TENSOR_TYPES = {
    np.dtype(np.bool_): caffe2_pb2.TensorProto.BOOL,
    np.dtype(np.uint8): caffe2_pb2.TensorProto.UINT8,
    np.dtype(np.int8): caffe2_pb2.TensorProto.INT8,
    np.dtype(np.int16): caffe2_pb2.TensorProto.INT16,
    np.dtype(np.uint16): caffe2_pb2.TensorProto.UINT16,
    np.dtype(np.float16): caffe2_pb2.TensorProto.FLOAT16,
    np.dtype(np.float32): caffe2_pb2.TensorProto.FLOAT,
    np.dtype(np.float64): caffe2_pb2.TensorProto.DOUBLE,
    np.dtype(np.int32): caffe2_pb2.TensorProto.INT32,
    np.dtype(np.int64): caffe2_pb2.TensorProto.INT64,
}


_wrap_tensor_impl = torch._C._wrap_tensor_impl
_from_numpy = torch.from_numpy
_INDEX_TYPE = caffe2_pb2.TensorProto.INT64


def in_place_error(op_name: str, blobs: str) -> ScanArgumentError:
    """The error for running in place a scan whose gradient needs the input's values."""
    return ScanArgumentError("{}: cannot run in place ({}): its gradient needs the input's values, which the "
                             "output would overwrite; write the output to a new blob".format(op_name, blobs))


def _check_blob_count(spec: ScanSpec, what: str, blobs, expected: int) -> None:
    if len(blobs) != expected:
        raise ScanArgumentError("{}: expected {} {} blob(s), got {}".format(
            spec.op_name, expected, what, len(blobs)))


def checked_spec(op_name, axis, exclusive=False, reverse=False, dtype=None, axis_input=False) -> ScanSpec:
    """The op's `ScanSpec`; with ``axis_input`` the axis comes from an input blob on every run."""
    if check_flag_argument(op_name, "axis_input", axis_input):
        if axis is not None:
            raise ScanArgumentError("{}: axis={!r} was given, but the axis is read from the second input "
                                    "blob (ONNX CumSum's form); pass one of them".format(op_name, axis))
        axis = 0  # a placeholder: each run is routed with the axis it reads
    return ScanSpec.checked(op_name, axis, exclusive, reverse, dtype)


def _read_axis(spec: ScanSpec, blob, x: np.ndarray) -> int:
    """The run-time axis of the ONNX form: a 0-d (or one-element) int32/int64 tensor."""
    axis = blob.data
    if axis.dtype not in (np.int32, np.int64) or axis.size != 1 or axis.ndim > 1:
        raise ScanArgumentError(
            "{}: the axis input must be a 0-d int32 or int64 tensor (as in ONNX CumSum), got shape {} "
            "dtype {} (the input has shape {})".format(spec.op_name, tuple(axis.shape), axis.dtype,
                                                       tuple(x.shape)))
    return int(axis.reshape(()))


def _route(kernel, dtypes, spec: ScanSpec, x: np.ndarray, shared: str):
    """The route of the op's run on ``x`` (a blob's C-contiguous array) into new C-contiguous outputs, or into ``x``
    itself (``shared``: `SAME`): one lookup in the routes' cache (`kernels.route.routes`) asked with the accelerator as
    installed (`compiled.available`, which reads no environment variable); the switch is read only when the route
    takes the accelerator, so that turning it off takes effect at once."""
    found = routes(kernel, dtypes, spec, x.shape, x.dtype, None, None, None, None, shared, compiled.available())
    if found.path == "compiled" and not compiled.enabled():
        found = routes(kernel, dtypes, spec, x.shape, x.dtype, None, None, None, None, shared, compiled.status())
    return found


def scan_forward(scan, axis=None, exclusive=False, reverse=False, dtype=None, axis_input=False):
    """Builder: the forward Python-op function of scan ``scan`` (e.g. "cumsum").

    Each run asks the scan's route (`kernels.route.routes`: one cache lookup on a shape and dtype met before, which
    also checks the input against the scan's dtype rule) and runs it; a direct route is one call (PyCumSum: one
    torch.cumsum) on torch tensors viewing the blobs. A scan without a kernel is checked by its dtype rule and run by
    its ``forward``. A scan with several outputs (cummax: values, indices) writes int64 indices after the first.
    """
    entry = registered_scan(scan, "scan_forward")
    kernel, dtypes, output_count = entry.kernel, entry.dtypes, len(entry.outputs)
    several = output_count > 1
    spec = checked_spec(entry.op_name, axis, exclusive, reverse, dtype, axis_input)
    input_count = 2 if axis_input else 1

    def forward(inputs, outputs):
        if len(inputs) != input_count or len(outputs) != output_count:
            _check_blob_count(spec, "input", inputs, input_count)
            _check_blob_count(spec, "output", outputs, output_count)
        source = inputs[0]
        x = source.data
        run_spec = spec._replace(axis=_read_axis(spec, inputs[1], x)) if axis_input else spec
        in_place = source in outputs  # an output blob is the input blob (Caffe2's blobs compare by identity)
        if kernel is None:
            checked = entry.check(run_spec, x)
            result = checked.result_dtype
        else:
            found = _route(kernel, dtypes, run_spec, x, SAME if in_place else APART)
            result, call = found.out_dtype, found.call
            if call is not None:  # (never in place) one call from the input's memory into the outputs'
                dims = list(x.shape)  # a list: pybind converts it faster than a tuple
                first = outputs[0]
                first.init(dims, _CAFFE2_TENSOR_TYPES[result])
                target = _wrap_tensor_impl(first._tensor_impl_raw_handle())
                if several:
                    outputs[1].init(dims, _INDEX_TYPE)
                    target = target, _wrap_tensor_impl(outputs[1]._tensor_impl_raw_handle())
                call(_from_numpy(x), target, found.axis)
                return
        if in_place:
            if entry.reads_input:
                raise in_place_error(spec.op_name, "an output blob is the input blob")
            if x.dtype != result or several:
                x = x.copy()  # sizing an output frees (or reuses) the memory being read
                if kernel is not None:
                    found = _route(kernel, dtypes, run_spec, x, APART)
        outputs[0].init(x.shape, _CAFFE2_TENSOR_TYPES[result])
        for indices in outputs[1:]:
            indices.init(x.shape, _INDEX_TYPE)
        out = tuple(output.data for output in outputs) if several else outputs[0].data
        if kernel is None:
            entry.forward(x, run_spec, out, checked)
        else:
            found.run(x, out)

    return forward


def scan_backward(scan, axis=None, exclusive=False, reverse=False, dtype=None, axis_input=False):
    """Builder: the gradient Python-op function; inputs are [x, outputs..., grad of the first output]
    ([x, axis, outputs..., grad] with ``axis_input``), output grad_x."""
    entry = registered_scan(scan, "scan_backward")
    kernel_backward, output_count = entry.backward, len(entry.outputs)
    saved_outputs = {name: entry.outputs.index(name) for name in entry.saved_outputs}  # keyword -> position
    spec = checked_spec(entry.op_name + "Gradient", axis, exclusive, reverse, dtype, axis_input)
    forward_inputs = 2 if axis_input else 1
    input_count = forward_inputs + output_count + 1
    checks = {}  # (x dtype, grad_y dtype, rank, axis) -> (CheckedScan of grad_y, grad_x dtype, its Caffe2 type)

    def backward(inputs, outputs):
        if len(inputs) != input_count or len(outputs) != 1:
            _check_blob_count(spec, "input", inputs, input_count)
            _check_blob_count(spec, "output", outputs, 1)
        source, target = inputs[-1], outputs[0]
        x, grad_y = inputs[0].data, source.data
        if grad_y.shape != x.shape:
            raise ScanArgumentError("{}: the output's gradient has shape {}, the input has shape {}".format(
                spec.op_name, tuple(grad_y.shape), tuple(x.shape)))
        axis = _read_axis(spec, inputs[1], x) if axis_input else spec.axis
        key = x.dtype, grad_y.dtype, grad_y.ndim, axis
        try:
            checked, grad_dtype, tensor_type = checks[key]
        except KeyError:  # first run with these dtypes, rank and axis: check them by the scan's own dtype rule
            checked = entry.check(spec._replace(axis=axis), grad_y)
            grad_dtype = gradient_dtype(x.dtype, grad_y.dtype)
            tensor_type = _CAFFE2_TENSOR_TYPES[grad_dtype]
            checks[key] = checked, grad_dtype, tensor_type
        saved = {name: inputs[forward_inputs + index].data for name, index in saved_outputs.items()}
        if source is target and (grad_y.dtype != grad_dtype or saved):
            grad_y = grad_y.copy()  # sizing the output frees the memory being read
        target.init(grad_y.shape, tensor_type)
        kernel_backward(grad_y, x, spec, target.data, checked, **saved)

    return backward


#: The builders pycumsum_op writes into nets, by the dotted name their pickles hold.
BUILDERS = {"{}.{}".format(builder.__module__, builder.__qualname__): builder
            for builder in (scan_forward, scan_backward)}
#: The only argument types a builder pickle may hold (an int must also fit in int64).
PLAIN_ARGUMENT_TYPES = (type(None), bool, int, float, str)


def builder_params(args: tuple, kwargs: dict) -> dict:
    """The arguments of a `scan_forward` / `scan_backward` call read from a saved net, by name, with the
    defaults filled in (both builders take the same parameters). Raises TypeError if they do not bind.

    >>> builder_params(("cumsum", 1), {"reverse": True})["axis_input"]
    False
    """
    bound = inspect.signature(scan_forward).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def check_builder_call(name: str, args: tuple, kwargs: dict) -> None:
    """Make the call Caffe2 makes at CreateNet, ``BUILDERS[name](*args, **kwargs)``, and drop the op
    function it builds. The arguments (read from a pickle) must bind to the builder's signature and be
    plain values (`PLAIN_ARGUMENT_TYPES`); then every check of the builder itself applies (a known
    scan, `ScanSpec.checked`). Raises `ScanArgumentError` naming the builder and the argument."""
    builder = BUILDERS[name]
    signature = inspect.signature(builder)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        raise ScanArgumentError("{}{}: {}".format(builder.__name__, signature, error))
    for key, value in bound.arguments.items():
        if type(value) not in PLAIN_ARGUMENT_TYPES:
            raise ScanArgumentError("{}: {}={} is a {}; a saved builder's arguments are None, bool, int, "
                                    "float or str".format(builder.__name__, key, short_repr(value),
                                                          type(value).__name__))
        if type(value) is int and value.bit_length() > 63:
            raise ScanArgumentError("{}: {}={} does not fit in int64".format(builder.__name__, key,
                                                                           short_repr(value)))
    builder(*args, **kwargs)


_last_axis_cumsum = scan_forward("cumsum", axis=-1)
_last_axis_cumsum_grad = scan_backward("cumsum", axis=-1)


def cumsum_fwd(inputs, outputs):
    """Python-op forward: inclusive cumsum of inputs[0] along its last axis, into outputs[0]."""
    _last_axis_cumsum(inputs, outputs)


def cumsum_bwd(inputs, outputs):
    """Python-op gradient of `cumsum_fwd`: reverse cumsum of grad_y (inputs[2]) into outputs[0]."""
    _last_axis_cumsum_grad(inputs, outputs)
