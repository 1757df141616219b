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
    np.dtype(np.float16): caffe2_pb2.TensorProto.FLOAT16,
    np.dtype(np.float32): caffe2_pb2.TensorProto.FLOAT,
    np.dtype(np.float64): caffe2_pb2.TensorProto.DOUBLE,
    np.dtype(np.int32): caffe2_pb2.TensorProto.INT32,
    np.dtype(np.int64): caffe2_pb2.TensorProto.INT64,
}


def _check_blob_count(spec: ScanSpec, what: str, blobs, expected: int) -> None:
    if len(blobs) != expected:
        raise ScanArgumentError("{}: expected {} {} blob(s), got {}".format(
            spec.op_name, expected, what, len(blobs)))


def _allocate(tensor, shape, dtype: np.dtype) -> np.ndarray:
    """Size a Caffe2 output tensor and return a numpy view of its memory."""
    tensor.init(list(shape), _CAFFE2_TENSOR_TYPES[np.dtype(dtype)])
    return tensor.data


def _input_array(inputs, index: int, outputs, out_dtype) -> np.ndarray:
    """inputs[index] as numpy; a private copy when the op runs in place and changes dtype
    (sizing the output would otherwise free the memory being read)."""
    array = inputs[index].data
    if inputs[index] is outputs[0] and array.dtype != out_dtype:
        array = array.copy()
    return array


def scan_forward(scan, axis, exclusive=False, reverse=False, dtype=None):
    """Builder: the forward Python-op function of scan ``scan`` (e.g. "cumsum")."""
    kernel = SCAN_KERNELS[scan]
    spec = ScanSpec.checked(kernel.op_name, axis, exclusive, reverse, dtype)

    def forward(inputs, outputs):
        _check_blob_count(spec, "input", inputs, 1)
        _check_blob_count(spec, "output", outputs, 1)
        plan = spec.plan(inputs[0].data)
        x = _input_array(inputs, 0, outputs, plan.result_dtype)
        kernel.forward(x, spec, out=_allocate(outputs[0], x.shape, plan.result_dtype))

    return forward


def scan_backward(scan, axis, exclusive=False, reverse=False, dtype=None):
    """Builder: the gradient Python-op function; inputs are [x, y, grad_y], output grad_x."""
    kernel = SCAN_KERNELS[scan]
    spec = ScanSpec.checked(kernel.op_name + "Gradient", axis, exclusive, reverse, dtype)

    def backward(inputs, outputs):
        _check_blob_count(spec, "input", inputs, 3)
        _check_blob_count(spec, "output", outputs, 1)
        x, grad_y = inputs[0].data, inputs[2].data
        if grad_y.shape != x.shape:
            raise ScanArgumentError("{}: the output's gradient has shape {}, the input has shape {}".format(
                spec.op_name, tuple(grad_y.shape), tuple(x.shape)))
        spec.plan(grad_y)
        grad_dtype = gradient_dtype(x.dtype, grad_y.dtype)
        grad_y = _input_array(inputs, 2, outputs, grad_dtype)
        kernel.backward(grad_y, x, spec, out=_allocate(outputs[0], grad_y.shape, grad_dtype))

    return backward


_last_axis_cumsum = scan_forward("cumsum", axis=-1)
_last_axis_cumsum_grad = scan_backward("cumsum", axis=-1)


def cumsum_fwd(inputs, outputs):
    """Python-op forward: inclusive cumsum of inputs[0] along its last axis, into outputs[0]."""
    _last_axis_cumsum(inputs, outputs)


def cumsum_bwd(inputs, outputs):
    """Python-op gradient of `cumsum_fwd`: reverse cumsum of grad_y (inputs[2]) into outputs[0]."""
    _last_axis_cumsum_grad(inputs, outputs)
