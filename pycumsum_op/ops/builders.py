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
"""
import numpy as np
from caffe2.proto import caffe2_pb2

from ..kernels import SCAN_KERNELS, ScanArgumentError, ScanSpec, gradient_dtype

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


_INDEX_TYPE = caffe2_pb2.TensorProto.INT64


def in_place_error(op_name: str, blobs: str) -> ScanArgumentError:
    """The error for running in place a scan whose gradient needs the input's values."""
    return ScanArgumentError("{}: cannot run in place ({}): its gradient needs the input's values, which the "
                             "output would overwrite; write the output to a new blob".format(op_name, blobs))


def _check_blob_count(spec: ScanSpec, what: str, blobs, expected: int) -> None:
    if len(blobs) != expected:
        raise ScanArgumentError("{}: expected {} {} blob(s), got {}".format(
            spec.op_name, expected, what, len(blobs)))


def scan_forward(scan, axis, exclusive=False, reverse=False, dtype=None):
    """Builder: the forward Python-op function of scan ``scan`` (e.g. "cumsum").

    The function checks an input dtype and rank once (plans are cached per
    (dtype, rank)), so a run costs little more than sizing the output(s). A scan
    with several outputs (cummax: values, indices) writes int64 indices after the first.
    """
    kernel = SCAN_KERNELS[scan]
    kernel_forward, output_count = kernel.forward, len(kernel.outputs)
    spec = ScanSpec.checked(kernel.op_name, axis, exclusive, reverse, dtype)
    plans = {}  # (input dtype, rank) -> (ScanPlan, Caffe2 types of the outputs)

    def forward(inputs, outputs):
        if len(inputs) != 1 or len(outputs) != output_count:
            _check_blob_count(spec, "input", inputs, 1)
            _check_blob_count(spec, "output", outputs, output_count)
        source = inputs[0]
        x = source.data
        try:
            plan, tensor_types = plans[x.dtype, x.ndim]
        except KeyError:  # first run with this dtype and rank: check them
            plan = kernel.plan(spec, x)
            tensor_types = [_CAFFE2_TENSOR_TYPES[plan.result_dtype]] + [_INDEX_TYPE] * (output_count - 1)
            plans[x.dtype, x.ndim] = plan, tensor_types
        if any(source is target for target in outputs):
            if kernel.gradient_reads_input:
                raise in_place_error(spec.op_name, "an output blob is the input blob")
            if x.dtype != plan.result_dtype or output_count > 1:
                x = x.copy()  # sizing an output frees (or reuses) the memory being read
        for target, tensor_type in zip(outputs, tensor_types):
            target.init(x.shape, tensor_type)
        if output_count == 1:
            kernel_forward(x, spec, outputs[0].data, plan)
        else:
            kernel_forward(x, spec, tuple(target.data for target in outputs), plan)

    return forward


def scan_backward(scan, axis, exclusive=False, reverse=False, dtype=None):
    """Builder: the gradient Python-op function; inputs are [x, outputs..., grad of the first output],
    output grad_x."""
    kernel = SCAN_KERNELS[scan]
    kernel_backward, output_count, saved_outputs = kernel.backward, len(kernel.outputs), kernel.backward_outputs
    spec = ScanSpec.checked(kernel.op_name + "Gradient", axis, exclusive, reverse, dtype)
    plans = {}  # (x dtype, grad_y dtype, rank) -> (ScanPlan of grad_y, grad_x dtype, its Caffe2 type)

    def backward(inputs, outputs):
        if len(inputs) != 2 + output_count or len(outputs) != 1:
            _check_blob_count(spec, "input", inputs, 2 + output_count)
            _check_blob_count(spec, "output", outputs, 1)
        source, target = inputs[1 + output_count], outputs[0]
        x, grad_y = inputs[0].data, source.data
        if grad_y.shape != x.shape:
            raise ScanArgumentError("{}: the output's gradient has shape {}, the input has shape {}".format(
                spec.op_name, tuple(grad_y.shape), tuple(x.shape)))
        key = x.dtype, grad_y.dtype, grad_y.ndim
        try:
            plan, grad_dtype, tensor_type = plans[key]
        except KeyError:  # first run with these dtypes and rank: check them
            plan = spec.plan(grad_y)
            grad_dtype = gradient_dtype(x.dtype, grad_y.dtype)
            tensor_type = _CAFFE2_TENSOR_TYPES[grad_dtype]
            plans[key] = plan, grad_dtype, tensor_type
        saved = [inputs[1 + index].data for index in saved_outputs]
        if source is target and (grad_y.dtype != grad_dtype or saved):
            grad_y = grad_y.copy()  # sizing the output frees the memory being read
        target.init(grad_y.shape, tensor_type)
        kernel_backward(grad_y, x, spec, target.data, plan, *saved)

    return backward


_last_axis_cumsum = scan_forward("cumsum", axis=-1)
_last_axis_cumsum_grad = scan_backward("cumsum", axis=-1)


def cumsum_fwd(inputs, outputs):
    """Python-op forward: inclusive cumsum of inputs[0] along its last axis, into outputs[0]."""
    _last_axis_cumsum(inputs, outputs)


def cumsum_bwd(inputs, outputs):
    """Python-op gradient of `cumsum_fwd`: reverse cumsum of grad_y (inputs[2]) into outputs[0]."""
    _last_axis_cumsum_grad(inputs, outputs)
