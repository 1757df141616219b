"""`cumsum(net, ...)`, installed as ``core.Net.PyCumSum`` by ``import pycumsum_op``.

>>> import numpy as np
>>> from caffe2.python import core, workspace
>>> import pycumsum_op
>>> net = core.Net("doc_cumsum")
>>> y = net.PyCumSum("doc_x", "doc_y", axis=1)
>>> workspace.FeedBlob("doc_x", np.arange(6, dtype=np.float32).reshape(2, 3))
True
>>> workspace.RunNetOnce(net)
True
>>> workspace.FetchBlob("doc_y")
array([[ 0.,  1.,  3.],
       [ 3.,  7., 12.]], dtype=float32)
"""
from caffe2.python import core

from ..kernels import ScanArgumentError, scan_kernel
from .builders import checked_spec, scan_backward, scan_forward


def _single_blob(op_name: str, what: str, blobs) -> core.BlobReference:
    """The one blob in ``blobs`` (a name, a BlobReference or a list of one); names get the NameScope."""
    listed = blobs if isinstance(blobs, (list, tuple)) else [blobs]
    if len(listed) != 1:
        raise ScanArgumentError("{}: takes exactly 1 {} blob, got {}: {}".format(
            op_name, what, len(listed), [str(b) for b in listed]))
    return core.ScopedBlobReference(listed[0]) if isinstance(listed[0], str) else listed[0]


def _output_blob(net, op_name: str, blob_out):
    """The output blob; None or 1 (Caffe2's "one output, name it for me") gets a fresh name."""
    if isinstance(blob_out, int) and not isinstance(blob_out, bool):
        if blob_out != 1:
            raise ScanArgumentError("{}: takes exactly 1 output blob, got blob_out={}".format(op_name, blob_out))
        blob_out = None
    if blob_out is None:
        return net.NextName(prefix=op_name)
    return _single_blob(op_name, "output", blob_out)


def _resolve_axis(op_name: str, axis, dim):
    if axis is None and dim is None:
        raise ScanArgumentError(
            "{}: axis is required (like torch.cumsum's dim); pass axis=... or dim=...".format(op_name))
    if axis is not None and dim is not None and axis != dim:
        raise ScanArgumentError("{}: got both axis={!r} and dim={!r}; pass one".format(op_name, axis, dim))
    return dim if axis is None else axis


def add_scan_op(net, scan, blob_in, blob_out=None, axis=None, exclusive=False, reverse=False,
                dtype=None, dim=None, implementation="python", input_shape=None, input_dtype=None):
    """Append scan ``scan``'s Python op (forward + gradient builders) to ``net``; returns the output blob.

    ``blob_in`` is the input blob, or ``[input, axis_blob]`` for ONNX CumSum's form, whose axis
    (a 0-d int32/int64 tensor) is read on every run; its gradient flows to the input only.
    ``implementation="aten"`` / ``"portable"`` appends C++ operators instead (see `pycumsum_op.lower`;
    "portable" needs ``input_shape`` and ``input_dtype`` unless the workspace holds the input).
    """
    kernel = scan_kernel(scan, "add_scan_op")
    op_name = kernel.op_name
    axis_input = isinstance(blob_in, (list, tuple)) and len(blob_in) == 2
    if axis_input:
        if axis is not None or dim is not None:
            raise ScanArgumentError("{}: the axis is the second input blob {!r}; axis=/dim= cannot be given "
                                    "too".format(op_name, str(blob_in[1])))
        blob_in, axis_blob = blob_in
    else:
        axis = _resolve_axis(op_name, axis, dim)
    spec = checked_spec(op_name, axis, exclusive, reverse, dtype, axis_input)
    blob_in = _single_blob(op_name, "input", blob_in)
    blob_out = _output_blob(net, op_name, blob_out)
    if spec.dtype is not None and str(blob_out) == str(blob_in):
        raise ScanArgumentError(
            "{}: dtype={} cannot be used in place (blob_out == blob_in == {!r}): the overwritten input's "
            "dtype is needed for its gradient; write to a new blob".format(op_name, spec.dtype.name, str(blob_in)))
    if implementation != "python":
        if axis_input:
            raise ScanArgumentError("{}: implementation={!r} needs the axis when the net is built; the axis "
                                    "input blob {!r} is read at run time".format(op_name, implementation,
                                                                                str(axis_blob)))
        from ..converters.lower import append_scan  # converters import this module
        return append_scan(net, scan, spec, blob_in, blob_out, implementation, input_shape, input_dtype)
    params = {"scan": scan, "axis": None if axis_input else spec.axis, "exclusive": spec.exclusive,
              "reverse": spec.reverse, "dtype": None if spec.dtype is None else spec.dtype.name}
    inputs = [blob_in]
    if axis_input:  # saved nets of the one-input form keep their exact builder arguments
        params["axis_input"] = True
        inputs.append(_single_blob(op_name, "axis", axis_blob))
    make_op = net.Python((scan_forward, (), params), grad_f=(scan_backward, (), params),
                         grad_input_indices=[0] if axis_input else None)
    return make_op(inputs, [blob_out], name=op_name)


def cumsum(net, blob_in, blob_out=None, axis=None, exclusive=False, reverse=False, dtype=None, dim=None,
           implementation="python", input_shape=None, input_dtype=None):
    """Append ``blob_out = torch.cumsum(blob_in, axis)`` to ``net``; returns the output BlobReference.

    axis (or its alias dim) is required; negative values count from the end. ONNX
    CumSum's form ``cumsum(net, [x, axis_blob], y)`` reads the axis from a 0-d
    int32/int64 blob at run time instead.
    exclusive / reverse follow ONNX CumSum. dtype (numpy dtype or "float",
    "double", "int32", "int64") sets the result type; by default bool and
    integer inputs give int64 and floats keep theirs, as in torch. In place
    (blob_out == blob_in) works, except together with dtype=.
    The op has a gradient, so ``net.AddGradientOperators`` works through it.
    implementation="aten" or "portable" builds C++ operators instead of the Python op
    (no Python in the net; "portable" also needs input_shape= and input_dtype=).
    """
    return add_scan_op(net, "cumsum", blob_in, blob_out, axis=axis, exclusive=exclusive, reverse=reverse,
                       dtype=dtype, dim=dim, implementation=implementation, input_shape=input_shape,
                       input_dtype=input_dtype)


def install():
    """Make ``net.PyCumSum(...)`` available on every ``core.Net``."""
    core.Net.PyCumSum = cumsum
