"""The scan family: torch's cumsum, cumprod, cummax, cummin and logcumsumexp, one `Scan` entry each."""
from ..kernels import cummax as _cummax
from ..kernels import cumprod as _cumprod
from ..kernels import cumsum as _cumsum
from ..kernels import logcumsumexp as _logcumsumexp
from . import aten_backward
from .registry import AtenForm, PortableForm, Refused, Scan, register

_NO_ONNX = "ONNX has no operator for it (ONNX CumSum is a sum)"
_EXTREMUM = dict(outputs=("values", "indices"), saves=("indices",), arguments=frozenset(["reverse"]),
                 dtypes=_cummax.DTYPES, onnx=Refused(_NO_ONNX))


def _portable_extremum(operator: str) -> Refused:
    return Refused("Caffe2's portable {} does not give torch's indices (ties to the later element, NaN "
                   "rules)".format(operator))


CUMSUM = register(Scan(
    "cumsum", "PyCumSum", _cumsum.cumsum_forward, _cumsum.cumsum_backward,
    doc="""Append ``blob_out = torch.cumsum(blob_in, axis)`` to ``net``; returns the output BlobReference.

    axis (or its alias dim) is required; negative values count from the end. ONNX
    CumSum's form ``cumsum(net, [x, axis_blob], y)`` reads the axis from a 0-d
    int32/int64 blob at run time instead.
    exclusive / reverse follow ONNX CumSum. dtype (numpy dtype or "float",
    "double", "int32", "int64") sets the result type; by default bool and
    integer inputs give int64 and floats keep theirs, as in torch. In place
    (blob_out == blob_in) works, except together with dtype=.
    The op has a gradient, so ``net.AddGradientOperators`` works through it; `pycumsum_op.lower`
    turns it into C++ operators.
    """,
    dtypes=_cumsum.DTYPES, kernel=_cumsum.KERNEL, self_adjoint=True,
    aten=AtenForm("cumsum", needs=None, backward=aten_backward.cumsum_backward),
    portable=PortableForm("Add", blocked=True),
    onnx="CumSum"))

CUMPROD = register(Scan(
    "cumprod", "PyCumProd", _cumprod.cumprod_forward, _cumprod.cumprod_backward,
    doc="""Append ``blob_out = torch.cumprod(blob_in, axis)`` to ``net``; returns the output BlobReference.

    Arguments as `cumsum` (exclusive starts with 1). Not in place: the gradient needs the input.
    """,
    saves=("input", "y"), dtypes=_cumprod.DTYPES, kernel=_cumprod.KERNEL,
    aten=AtenForm("cumprod", needs=None, backward=aten_backward.cumprod_backward,
                  backward_needs="aten cumprod_backward(grad, input)"),
    portable=Refused("a log-depth product of Mul ops rounds floats differently from torch's sequential cumprod "
                     "(not exact), and Caffe2 has no portable cumulative product"),
    onnx=Refused(_NO_ONNX)))

CUMMAX = register(Scan(
    "cummax", "PyCumMax", _cummax.cummax_forward, _cummax.cummax_backward,
    doc="""Append ``values, indices = torch.cummax(blob_in, axis)`` to ``net``; returns both BlobReferences.

    blob_out is [values, indices] (or None). Values keep the input's dtype, indices are int64;
    a tie goes to the later element; reverse scans from the end. The values may overwrite the input.
    """,
    kernel=_cummax.CUMMAX,
    aten=AtenForm("cummax", needs="aten cummax", backward=aten_backward.cummaxmin_backward),
    portable=_portable_extremum("Max"), **_EXTREMUM))

CUMMIN = register(Scan(
    "cummin", "PyCumMin", _cummax.cummin_forward, _cummax.cummin_backward,
    doc="""Append ``values, indices = torch.cummin(blob_in, axis)`` to ``net``; returns both BlobReferences
    (see `cummax`).
    """,
    kernel=_cummax.CUMMIN,
    aten=AtenForm("cummin", needs="aten cummax", backward=aten_backward.cummaxmin_backward),
    portable=_portable_extremum("Min"), **_EXTREMUM))

LOGCUMSUMEXP = register(Scan(
    "logcumsumexp", "PyLogCumSumExp", _logcumsumexp.logcumsumexp_forward, _logcumsumexp.logcumsumexp_backward,
    doc="""Append ``blob_out = torch.logcumsumexp(blob_in, axis)`` to ``net``; returns the output BlobReference.

    Floating inputs only; exclusive starts with -inf (TensorFlow's cumulative_logsumexp). The
    gradient is finite, 0 where torch 1.10.2's is NaN. Not in place: the gradient needs the input.
    """,
    saves=("input", "y"), arguments=frozenset(["exclusive", "reverse"]), dtypes=_logcumsumexp.DTYPES,
    kernel=_logcumsumexp.KERNEL,
    aten=AtenForm("logcumsumexp", needs="aten logcumsumexp", backward=aten_backward.logcumsumexp_backward,
                  backward_needs="aten logcumsumexp"),
    portable=Refused("a log-depth scan of Caffe2's elementwise ops rounds differently from torch's sequential "
                     "logcumsumexp (not exact), and Caffe2 has no portable operator for it"),
    onnx=Refused(_NO_ONNX)))
