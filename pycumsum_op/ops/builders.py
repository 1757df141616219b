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

from ..kernels import ScanArgumentError, ScanSpec, gradient_dtype, short_repr
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


#: numpy dtype -> torch dtype, for the direct calls' keys (a blob wrapped as a tensor has torch's).
_TORCH_DTYPES = {dtype: torch.from_numpy(np.empty(0, dtype)).dtype for dtype in _CAFFE2_TENSOR_TYPES
                 if dtype != np.dtype(np.uint16)}
_wrap_tensor_impl = torch._C._wrap_tensor_impl
_from_numpy = torch.from_numpy
_INDEX_TYPE = caffe2_pb2.TensorProto.INT64
#: Shapes whose direct-call decision a forward op keeps per (dtype, rank, axis); a "not yet decided" marker.
_DIRECT_SHAPES = 64


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
        axis = 0  # a placeholder: each run plans with the axis it reads
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


def _direct_call(run, dims: list, tensor_types: list, axis: int):
    """``call(tensor, outputs)``: size the output blobs as ``dims`` of ``tensor_types`` and make a scan's direct
    call ``run`` from ``tensor`` into torch tensors sharing their memory (`torch._C._wrap_tensor_impl` of each
    blob's TensorImpl: no numpy view in between; one tensor, or a tuple of them for several outputs) along
    ``axis``. Built once per shape."""
    several = len(tensor_types) > 1

    def call(tensor, outputs):
        for output, tensor_type in zip(outputs, tensor_types):
            output.init(dims, tensor_type)  # a list: pybind converts it faster than a tuple
        targets = [_wrap_tensor_impl(output._tensor_impl_raw_handle()) for output in outputs]
        run(tensor, tuple(targets) if several else targets[0], axis)
    return call


def scan_forward(scan, axis=None, exclusive=False, reverse=False, dtype=None, axis_input=False):
    """Builder: the forward Python-op function of scan ``scan`` (e.g. "cumsum").

    The function checks an input dtype and rank once (plans are cached per
    (dtype, rank, axis)), so a run costs little more than sizing the output(s); where the
    entry's ``direct`` applies, it calls that alone (PyCumSum: one torch.cumsum) on torch tensors
    wrapping the blobs, and remembers the shape and dtype, so that later runs with them skip
    numpy and the plan. A scan with several outputs (cummax: values, indices) writes int64
    indices after the first.
    """
    entry = registered_scan(scan, "scan_forward")
    kernel_forward, kernel_direct, output_count = entry.forward, entry.direct, len(entry.outputs)
    spec = checked_spec(entry.op_name, axis, exclusive, reverse, dtype, axis_input)
    input_count = 2 if axis_input else 1
    plans = {}  # (input dtype, rank, axis) -> (ScanPlan, Caffe2 types of the outputs, {shape: (call, route)})
    directs = {}  # (torch dtype, shape) -> (`_direct_call`, its run, first output's type, axis, dims): checked
    remember = kernel_direct is not None and not axis_input
    per_shape = kernel_direct is not None or entry.plans is not None

    def forward(inputs, outputs):
        if len(inputs) != input_count or len(outputs) != output_count:
            _check_blob_count(spec, "input", inputs, input_count)
            _check_blob_count(spec, "output", outputs, output_count)
        source = inputs[0]
        in_place = source in outputs  # an output blob is the input blob (Caffe2's blobs compare by identity)
        if directs and not in_place:
            tensor = _wrap_tensor_impl(source._tensor_impl_raw_handle())
            known = directs.get((tensor.dtype, tensor.shape))
            if known is not None:  # this shape and dtype were checked: one call between the blobs
                call, run, tensor_type, run_axis, dims = known
                if output_count > 1:
                    return call(tensor, outputs)
                target = outputs[0]  # the hottest call, `call` inlined: one Python call fewer per run
                target.init(dims, tensor_type)  # (a list: see `_direct_call`)
                run(tensor, _wrap_tensor_impl(target._tensor_impl_raw_handle()), run_axis)
                return
        x = source.data
        axis = _read_axis(spec, inputs[1], x) if axis_input else spec.axis
        try:
            plan, tensor_types, shapes = plans[x.dtype, x.ndim, axis]
        except KeyError:  # first run with this dtype, rank and axis: check them
            plan = entry.plan(spec._replace(axis=axis), x)
            tensor_types = [_CAFFE2_TENSOR_TYPES[plan.result_dtype]] + [_INDEX_TYPE] * (output_count - 1)
            shapes = {}
            plans[x.dtype, x.ndim, axis] = plan, tensor_types, shapes
        route = None
        if per_shape and not in_place:
            known = shapes.get(x.shape)
            if known is None:  # first run with this shape (a few shapes per op are kept)
                if len(shapes) >= _DIRECT_SHAPES:
                    shapes.clear()
                run, route = _shape_route(entry, spec, plan, x)
                call = None if run is None else _direct_call(run, list(x.shape), tensor_types, plan.axis)
                shapes[x.shape] = call, route
                if call is not None and remember:
                    if len(directs) >= _DIRECT_SHAPES:
                        directs.clear()
                    directs[_TORCH_DTYPES[x.dtype], torch.Size(x.shape)] = (call, run, tensor_types[0], plan.axis,
                                                                            list(x.shape))
            else:
                call, route = known
            if call is not None:  # one call from the input's memory into the outputs'
                return call(_from_numpy(x), outputs)
        if in_place:
            if entry.reads_input:
                raise in_place_error(spec.op_name, "an output blob is the input blob")
            if x.dtype != plan.result_dtype or output_count > 1:
                x = x.copy()  # sizing an output frees (or reuses) the memory being read
        for output, tensor_type in zip(outputs, tensor_types):
            output.init(x.shape, tensor_type)
        out = outputs[0].data if output_count == 1 else tuple(output.data for output in outputs)
        if route is None:
            kernel_forward(x, spec, out, plan)
        else:
            kernel_forward(x, spec, out, plan, route)

    return forward


def _shape_route(entry, spec, plan, x: np.ndarray) -> tuple:
    """(direct, route) of the op's first run on ``x``'s shape (the Caffe2 op's outputs are new C-contiguous
    arrays): the scan's one call into them (``Scan.direct``), else None and the route its forward follows
    (``Scan.plans``), kept so that a repeated call skips planning. A compiled route is not kept: the
    accelerator's switch is read on every run, so that turning it off takes effect at once."""
    run = None if entry.direct is None else entry.direct(spec, plan, x)
    if run is not None or entry.plans is None:
        return run, None
    route = entry.plans(x, spec, plan)
    return None, (None if route.path == "compiled" else route)


def scan_backward(scan, axis=None, exclusive=False, reverse=False, dtype=None, axis_input=False):
    """Builder: the gradient Python-op function; inputs are [x, outputs..., grad of the first output]
    ([x, axis, outputs..., grad] with ``axis_input``), output grad_x."""
    entry = registered_scan(scan, "scan_backward")
    kernel_backward, output_count = entry.backward, len(entry.outputs)
    saved_outputs = {name: entry.outputs.index(name) for name in entry.saved_outputs}  # keyword -> position
    spec = checked_spec(entry.op_name + "Gradient", axis, exclusive, reverse, dtype, axis_input)
    forward_inputs = 2 if axis_input else 1
    input_count = forward_inputs + output_count + 1
    plans = {}  # (x dtype, grad_y dtype, rank, axis) -> (ScanPlan of grad_y, grad_x dtype, its Caffe2 type)

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
            plan, grad_dtype, tensor_type = plans[key]
        except KeyError:  # first run with these dtypes, rank and axis: check them
            plan = spec._replace(axis=axis).plan(grad_y)
            grad_dtype = gradient_dtype(x.dtype, grad_y.dtype)
            tensor_type = _CAFFE2_TENSOR_TYPES[grad_dtype]
            plans[key] = plan, grad_dtype, tensor_type
        saved = {name: inputs[forward_inputs + index].data for name, index in saved_outputs.items()}
        if source is target and (grad_y.dtype != grad_dtype or saved):
            grad_y = grad_y.copy()  # sizing the output frees the memory being read
        target.init(grad_y.shape, tensor_type)
        kernel_backward(grad_y, x, spec, target.data, plan, **saved)

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
