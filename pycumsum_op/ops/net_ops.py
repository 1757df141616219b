"""`cumsum(net, ...)` and its siblings, installed as ``core.Net.PyCumSum`` (``PyCumProd``, ``PyCumMax``,
``PyCumMin``, ``PyLogCumSumExp``) by ``import pycumsum_op``.

Where Caffe2 has no such operator, ``import pycumsum_op`` also makes the calls that circulating answers
for torch.cumsum in Caffe2 type work or explain themselves (`install_answers`): ``net.CumSum(x, axes=[k])``
is PyCumSum; ``net.ToDense(...)`` and ``net.Expand(x, dims=...)`` (no shape input) raise one error that
names the cause and the cure instead of failing later, or in the backward pass.

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
>>> values, indices = net.PyCumMax("doc_x", ["doc_max", "doc_argmax"], axis=0, reverse=True)
>>> workspace.RunNetOnce(net)
True
>>> workspace.FetchBlob(indices)
array([[1, 1, 1],
       [1, 1, 1]], dtype=int64)
"""
import inspect

from caffe2.python import core

from ..kernels import ScanArgumentError
from ..scans import ALL_ARGUMENTS, listen
from ..scans import scan as registered_scan
from .builders import checked_spec, in_place_error, scan_backward, scan_forward


def _single_blob(op_name: str, what: str, blobs) -> core.BlobReference:
    """The one blob in ``blobs`` (a name, a BlobReference or a list of one); names get the NameScope."""
    listed = blobs if isinstance(blobs, (list, tuple)) else [blobs]
    if len(listed) != 1:
        raise ScanArgumentError("{}: takes exactly 1 {} blob, got {}: {}".format(
            op_name, what, len(listed), [str(b) for b in listed]))
    return core.ScopedBlobReference(listed[0]) if isinstance(listed[0], str) else listed[0]


def _output_blobs(net, entry, blob_out) -> list:
    """The output blobs; None or the output count (Caffe2's "n outputs, name them for me") get fresh names."""
    op_name, count = entry.op_name, len(entry.outputs)
    described = "{} output blob{}{}".format(count, "s" if count > 1 else "",
                                            " ({})".format(", ".join(entry.outputs)) if count > 1 else "")
    if isinstance(blob_out, int) and not isinstance(blob_out, bool):
        if blob_out != count:
            raise ScanArgumentError("{}: takes exactly {}, got blob_out={}".format(op_name, described, blob_out))
        blob_out = None
    if blob_out is None:
        return [net.NextName(prefix=op_name + ("_" + name if count > 1 else "")) for name in entry.outputs]
    listed = blob_out if isinstance(blob_out, (list, tuple)) else [blob_out]
    if len(listed) != count:
        raise ScanArgumentError("{}: takes exactly {}, got {}: {}".format(
            op_name, described, len(listed), [str(b) for b in listed]))
    return [_single_blob(op_name, "output", blob) for blob in listed]


def _resolve_axis(op_name: str, axis, dim):
    if axis is None and dim is None:
        raise ScanArgumentError(
            "{}: axis is required (like torch.cumsum's dim); pass axis=... or dim=...".format(op_name))
    if axis is not None and dim is not None and axis != dim:
        raise ScanArgumentError("{}: got both axis={!r} and dim={!r}; pass one".format(op_name, axis, dim))
    return dim if axis is None else axis


def _check_arguments(entry, **given) -> None:
    """Refuse optional arguments the scan does not take (defaults pass: False, or None for dtype)."""
    for name, value in given.items():
        if name not in entry.arguments and value not in (None, False):
            raise ScanArgumentError("{}: takes no {}= argument (it takes {}), got {}={!r}".format(
                entry.op_name, name, ", ".join(["axis"] + sorted(entry.arguments)), name, value))


def add_scan_op(net, scan, blob_in, blob_out=None, axis=None, exclusive=False, reverse=False,
                dtype=None, dim=None):
    """Append scan ``scan``'s Python op (forward + gradient builders) to ``net``; returns the output
    blob, or a tuple of them for a scan with several outputs (cummax: values, indices).

    ``blob_in`` is the input blob, or ``[input, axis_blob]`` for ONNX CumSum's form, whose axis
    (a 0-d int32/int64 tensor) is read on every run; its gradient flows to the input only.
    For a net without Python ops, build it with these ops and then lower it (`pycumsum_op.lower`).
    """
    entry = registered_scan(scan, "add_scan_op")
    op_name = entry.op_name
    _check_arguments(entry, exclusive=exclusive, reverse=reverse, dtype=dtype)
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
    blobs_out = _output_blobs(net, entry, blob_out)
    in_place = [str(blob) for blob in blobs_out if str(blob) == str(blob_in)]
    if spec.dtype is not None and in_place:
        raise ScanArgumentError(
            "{}: dtype={} cannot be used in place (blob_out == blob_in == {!r}): the overwritten input's "
            "dtype is needed for its gradient; write to a new blob".format(op_name, spec.dtype.name, str(blob_in)))
    if entry.reads_input and in_place:
        raise in_place_error(op_name, "blob_out == blob_in == {!r}".format(str(blob_in)))
    params = {"scan": scan, "axis": None if axis_input else spec.axis, "exclusive": spec.exclusive,
              "reverse": spec.reverse, "dtype": None if spec.dtype is None else spec.dtype.name}
    inputs = [blob_in]
    if axis_input:  # saved nets of the one-input form keep their exact builder arguments
        params["axis_input"] = True
        inputs.append(_single_blob(op_name, "axis", axis_blob))
    gradient_flow = {}  # the gradient goes to the input only, and comes from the first output only
    if axis_input or len(blobs_out) > 1:
        gradient_flow["grad_input_indices"] = [0]
    if len(blobs_out) > 1:
        gradient_flow["grad_output_indices"] = [0]
    make_op = net.Python((scan_forward, (), params), grad_f=(scan_backward, (), params), **gradient_flow)
    return make_op(inputs, blobs_out, name=op_name)


#: The parameters of a scan's function and their defaults, in order (of ``exclusive``, ``reverse`` and ``dtype``
#: only those in the scan's ``arguments``).
_PARAMETERS = (("net", inspect.Parameter.empty), ("blob_in", inspect.Parameter.empty), ("blob_out", None),
               ("axis", None), ("exclusive", False), ("reverse", False), ("dtype", None), ("dim", None))


def scan_function(scan: str):
    """The function form of registered scan ``scan``: ``f(net, blob_in, blob_out=None, axis=None, <the scan's
    arguments>, dim=None)`` appending its op (`add_scan_op`), with the registry's docstring.

    >>> import inspect
    >>> inspect.signature(scan_function("cummax"))
    <Signature (net, blob_in, blob_out=None, axis=None, reverse=False, dim=None)>
    """
    entry = registered_scan(scan, "scan_function")
    signature = inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
                                   for name, default in _PARAMETERS
                                   if name not in ALL_ARGUMENTS or name in entry.arguments])

    def function(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError("{}{}: {}".format(scan, signature, error)) from None
        bound.apply_defaults()
        given = dict(bound.arguments)
        return add_scan_op(given.pop("net"), scan, given.pop("blob_in"), **given)

    function.__name__ = function.__qualname__ = scan
    function.__doc__, function.__signature__ = entry.doc, signature
    return function


#: op name -> the function installed as ``core.Net.<op name>`` (Caffe2's own attributes are never touched).
_NET_METHODS = {}


def _install_net_method(entry, registered: bool) -> None:
    """``core.Net.<op_name>``, the scan's function, for a scan added to the registry; removed with it."""
    if registered:
        if entry.op_name not in _NET_METHODS and hasattr(core.Net, entry.op_name):
            raise ScanArgumentError("register: scan {!r}: core.Net already has an attribute {!r}; choose another "
                                    "op_name".format(entry.name, entry.op_name))
        _NET_METHODS[entry.op_name] = scan_function(entry.name)
        setattr(core.Net, entry.op_name, _NET_METHODS[entry.op_name])
    elif entry.op_name in _NET_METHODS:
        delattr(core.Net, entry.op_name)
        del _NET_METHODS[entry.op_name]


#: Ops whose gradient with respect to their first input (DATA) is sparse.
SPARSE_GRADIENT_OPS = ("SparseLengthsSum", "SparseLengthsMean", "SparseLengthsWeightedSum", "Gather")


class ToDenseError(AttributeError):
    """``net.ToDense(...)``: Caffe2 has no ToDense operator; the message says where the sparse gradient is
    born and the two cures. An AttributeError, as Caffe2's own "not a registered operator" is."""


def to_dense_error(net, blob_in) -> ToDenseError:
    """The error ``net.ToDense(blob_in)`` raises; it names the op that makes the gradient sparse and its DATA
    input when ``net`` makes ``blob_in`` with one."""
    listed = blob_in if isinstance(blob_in, (list, tuple)) else [blob_in]
    blob = str(listed[0]) if listed else "?"
    producer = next((op for op in reversed(net.Proto().op) if blob in op.output), None)
    if producer is not None and producer.type in SPARSE_GRADIENT_OPS and producer.input:
        source, data = "{}'s DATA input {!r}".format(producer.type, producer.input[0]), repr(producer.input[0])
    else:
        source, data = "the DATA input of the op that makes it sparse (SparseLengthsSum, Gather)", "data"
    return ToDenseError(
        "Method ToDense is not a registered operator: Caffe2 has no ToDense (EnsureDense is its dense conversion). "
        "Nor would one help here: the sparse gradient is born at {source} (a GradientSlice: indices + values), "
        "not at its output {blob!r}, so the op before it (a Transpose, in the cumsum idiom) still fails with "
        "\"Gradient of output ... is sparse (expected dense)\". Two cures: net.PyCumSum(x, y, axis=k) (or "
        "net.CumSum(x, axes=[k])) in place of the Transpose -> SparseLengthsSum -> Transpose cumsum: "
        "torch.cumsum with a dense gradient, in O(N*C); or EnsureDense on the DATA input: "
        "net.SparseLengthsSum([net.EnsureDense({data}), indices, lengths]). `pycumsum-op doctor` finds and "
        "fixes both in a saved net.".format(source=source, blob=blob, data=data))


def _to_dense(self, blob_in, *args, **kwargs):
    raise to_dense_error(self, blob_in)


def _one_axis(axes, axis):
    """The one axis of ``net.CumSum``'s ``axes=[k]`` (ONNX-style) or ``axis=k``."""
    if axes is not None and axis is not None:
        raise ScanArgumentError("CumSum: got both axes={!r} and axis={!r}; pass one".format(axes, axis))
    if axes is None:
        return axis
    listed = list(axes) if isinstance(axes, (list, tuple)) else [axes]
    if len(listed) != 1:
        raise ScanArgumentError("CumSum: axes={!r}: takes exactly one axis (a cumulative sum runs along one "
                                "axis; for several, chain one CumSum per axis)".format(axes))
    return listed[0]


def _net_cumsum(self, blob_in, blob_out=None, axes=None, axis=None, exclusive=False, reverse=False, dim=None):
    """``net.CumSum(x, axes=[k])``: torch.cumsum(x, k) as one PyCumSum (ONNX CumSum's ``exclusive`` and
    ``reverse``, as 0/1 or bools); ``[x, axis_blob]`` takes the axis from a blob, as ONNX CumSum does."""
    flags = {}
    for name, value in (("exclusive", exclusive), ("reverse", reverse)):
        if value not in (0, 1, True, False):
            raise ScanArgumentError("CumSum: {}={!r}: expected 0 or 1 (or a bool)".format(name, value))
        flags[name] = bool(value)
    return add_scan_op(self, "cumsum", blob_in, blob_out, axis=_one_axis(axes, axis), dim=dim, **flags)


_net_cumsum.__name__ = _net_cumsum.__qualname__ = "CumSum"


def _net_expand(self, inputs, *args, **kwargs):
    """Caffe2's Expand, refusing at once the one-input form that fails Caffe2's schema check at run time."""
    if isinstance(inputs, (list, tuple)) and len(inputs) != 1:
        return self._CreateAndAddToSelf("Expand", inputs, *args, **kwargs)
    given = ", ".join("{}={!r}".format(name, value) for name, value in sorted(kwargs.items()) if name != "name")
    raise ScanArgumentError(
        "Expand: takes the target shape as a second input blob, net.Expand([x, shape]), not as arguments{}; with "
        "one input it fails Caffe2's schema check when the net runs. If this is the Slice + Expand + Add + Concat "
        "loop offered for torch.cumsum: it is not a cumulative sum either (it concatenates growing prefixes); use "
        "net.PyCumSum(x, y, axis=k) or net.CumSum(x, axes=[k])".format(" (got {})".format(given) if given else ""))


_net_expand.__name__ = _net_expand.__qualname__ = "Expand"


def install_answers():
    """``core.Net.CumSum`` (PyCumSum) and ``core.Net.ToDense`` (`ToDenseError`) where Caffe2 has no such
    operator, and ``core.Net.Expand`` refusing its one-input form at once; idempotent. Only ``net.<name>``
    calls: every other attribute of a net, and every error Caffe2 raises for one, stays Caffe2's."""
    for name, hook, wanted in (("CumSum", _net_cumsum, not core.IsOperator("CumSum")),
                               ("ToDense", _to_dense, not core.IsOperator("ToDense")),
                               ("Expand", _net_expand, core.IsOperator("Expand"))):
        if wanted and name not in vars(core.Net):
            setattr(core.Net, name, hook)


def install():
    """Make ``net.<op_name>`` of every registered scan (``net.PyCumSum``, ``net.PyCumProd``, ...) available on
    every ``core.Net``, now and for scans registered later; and `install_answers`."""
    listen(_install_net_method)
    install_answers()
