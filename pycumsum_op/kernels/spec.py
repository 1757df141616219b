"""What a scan call means, checked before any data is touched.

`ScanSpec` holds one op's parameters (axis, exclusive, reverse, dtype); the scan's
`DtypeRule` checks them against an input array and gives a `CheckedScan`: the
normalised axis and the result and accumulation dtypes. Every error names the op,
the argument and the user's own shape, einops-style:

>>> import numpy as np
>>> DtypeRule().check(ScanSpec("PyCumSum", axis=-1), np.zeros((2, 3), np.int32)).result_dtype
dtype('int64')
>>> DtypeRule().check(ScanSpec("PyCumSum", axis=2), np.zeros((2, 3)))
Traceback (most recent call last):
...
pycumsum_op.kernels.spec.ScanArgumentError: PyCumSum: axis=2 is out of range for an input of shape (2, 3) (rank 2); valid axes are -2..1
"""
import numbers
from typing import Callable, NamedTuple, Optional, Tuple

import numpy as np

#: Caffe2 type names accepted by ``dtype=``, next to anything numpy understands.
CAFFE2_DTYPE_NAMES = {
    "float": np.float32,
    "double": np.float64,
    "int32": np.int32,
    "int64": np.int64,
}
#: dtypes a scan may produce when asked with ``dtype=``.
RESULT_DTYPES = tuple(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int32, np.int64))
#: The dtypes torch 1.10's CPU scans accumulate in float64 (floats) or int64 (integers), rounding once per
#: element: a scan of these by any of our paths equals torch's bit for bit.
EXACT_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))


def takes_lead(x, best, maximum: bool) -> bool:
    """torch 1.10's cummax (``maximum``) / cummin rule, the one every kernel applies (the compiled loops compile
    it): x takes the lead ``if isnan(x) or (not isnan(best) and x >= best)`` (``<=`` for cummin): NaN wins and
    stays, ties take the later index. `takes_lead_elementwise` is the same rule over arrays.

    >>> takes_lead(2.0, 2.0, True), takes_lead(1.0, float("nan"), False), takes_lead(float("nan"), 1.0, True)
    (True, False, True)
    """
    return x != x or (best == best and (x >= best if maximum else x <= best))


def takes_lead_elementwise(x, best, maximum: bool):
    """`takes_lead` over numpy arrays, element by element (the same rule, with numpy's operators).

    >>> x, best = np.array([2.0, 1.0, np.nan, 0.5]), np.array([2.0, np.nan, 1.0, 1.0])
    >>> takes_lead_elementwise(x, best, True).tolist() == [takes_lead(a, b, True) for a, b in zip(x, best)]
    True
    """
    return (x != x) | ((best == best) & ((x >= best) if maximum else (x <= best)))


def accumulate_dtype(dtype) -> np.dtype:
    """The dtype a running sum or product of ``dtype`` is kept in: float64 for floats, int64 for bool and integers
    (torch's CPU ``acc_type``)."""
    return np.dtype(np.float64) if np.dtype(dtype).kind == "f" else np.dtype(np.int64)


#: The accelerator's loops a scan kernel may take (`ScanKernel.loop`): running sums, running products, and running
#: extrema with their indices (cummax / cummin).
SUM_LOOP, PRODUCT_LOOP, EXTREMUM_LOOP = "sum", "product", "extremum"


class ScanKernel(NamedTuple):
    """What the route (`route.route`) and the accelerator know of one scan's kernel, declared once in its kernel
    module; the scan's registry entry holds it (``Scan.kernel``), so the kernels never read the registry and nothing
    outside the registry branches on a scan's name.

    >>> ScanKernel("cumprod", 1.0, PRODUCT_LOOP, ((np.dtype(np.int32), np.dtype(np.int64)),)).compute_dtype(np.int32)
    dtype('int64')
    """
    name: str
    #: what an exclusive scan starts with (0, 1, -inf); None: the scan has no exclusive form
    identity: Optional[float]
    #: the accelerator's loop (`SUM_LOOP`, `PRODUCT_LOOP`, `EXTREMUM_LOOP`), or None: torch's scan only
    loop: Optional[str] = None
    #: (result dtype, the dtype the kernel scans it in) where they differ: torch has no CPU scan of float16 and
    #: uint16, and cumprod accumulates int32 in int64 (pairs, not a dict: the kernel is part of a route's cache key)
    compute: Tuple[Tuple[np.dtype, np.dtype], ...] = ()
    #: routed and run by cumsum's engine paths (`engine`: numpy, blocked lanes and rows), not by torch's scan
    engine: bool = False
    #: run(route, src, dst): runs a `route.Route` of this kernel (``Route.run`` calls it)
    run: Optional[Callable] = None
    #: one_call(route) -> call(src, dst, axis): a direct route's one call on torch tensors (``Route.call``); None: the
    #: kernel makes none, and its routes run by ``run``
    one_call: Optional[Callable] = None

    def compute_dtype(self, dtype) -> np.dtype:
        """The dtype this kernel scans a result of ``dtype`` in."""
        dtype = np.dtype(dtype)
        for result, scanned in self.compute:
            if result == dtype:
                return scanned
        return dtype


class ScanArgumentError(ValueError):
    """A scan op was given an argument or input it cannot work with."""


def short_repr(value) -> str:
    """repr() for messages, bounded: long strings and huge integers (e.g. read from a pickle) by size."""
    if isinstance(value, (str, bytes)) and len(value) > 80:
        return "<{} of length {}>".format(type(value).__name__, len(value))
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "<int of {} bits>".format(value.bit_length())
    if value is None or isinstance(value, (str, bytes, int, float)):
        return repr(value)
    return "<{}>".format(type(value).__name__)


def _dtype_name(dtype) -> str:
    return getattr(dtype, "__name__", None) or str(dtype)


def resolve_dtype(op_name: str, dtype) -> Optional[np.dtype]:
    """The numpy dtype for a user's ``dtype=`` (numpy dtype, numpy name or Caffe2 name), None stays None.

    >>> resolve_dtype("PyCumSum", "double")
    dtype('float64')
    """
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype in CAFFE2_DTYPE_NAMES:
        return np.dtype(CAFFE2_DTYPE_NAMES[dtype])
    try:
        resolved = np.dtype(dtype)
    except (TypeError, ValueError):  # not something numpy reads as a dtype
        resolved = None
    # `is None` first: numpy compares None equal to float64, so `None in RESULT_DTYPES` is True.
    if resolved is None or resolved not in RESULT_DTYPES:
        raise ScanArgumentError(
            "{}: unknown dtype={!r}; use a Caffe2 name ({}) or a numpy dtype ({})".format(
                op_name, _dtype_name(dtype), ", ".join(sorted(CAFFE2_DTYPE_NAMES)),
                ", ".join(t.name for t in RESULT_DTYPES)))
    return resolved


def check_axis_argument(op_name: str, axis) -> int:
    """``axis`` must be a plain integer (bools are refused); returns it as int."""
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise ScanArgumentError(
            "{}: axis must be an integer (like torch.cumsum's dim), got axis={!r}".format(op_name, axis))
    return int(axis)


def check_flag_argument(op_name: str, name: str, value) -> bool:
    """A flag such as ``exclusive`` must be a bool (or 0/1, as Caffe2 stores flags); returns it as bool."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise ScanArgumentError("{}: {} must be True or False, got {}={!r}".format(op_name, name, name, value))


def gradient_dtype(x_dtype: np.dtype, grad_y_dtype: np.dtype) -> np.dtype:
    """A scan's input gradient takes the input's dtype when that is floating (as in torch autograd)."""
    return np.dtype(x_dtype) if np.dtype(x_dtype).kind == "f" else np.dtype(grad_y_dtype)


def backward_check_and_out(dtypes: "DtypeRule", spec, grad_y: np.ndarray, x: np.ndarray, out=None, checked=None):
    """The prologue every scan's backward shares: ``(checked, out)``, with ``checked`` made by the scan's own rule
    ``dtypes`` (``dtypes.check(spec, grad_y)``) and ``out`` a new array in `gradient_dtype` where the caller gave
    none."""
    if checked is None:
        checked = dtypes.check(spec, grad_y)
    if out is None:
        out = np.empty(grad_y.shape, gradient_dtype(x.dtype, grad_y.dtype))
    return checked, out


class CheckedScan(NamedTuple):
    """A checked scan over one input: where, and in which dtypes."""
    axis: int                 # normalised, 0 <= axis < max(ndim, 1)
    result_dtype: np.dtype    # dtype of the output tensor
    accumulate_dtype: np.dtype  # dtype the running sum is kept in


class ScanSpec(NamedTuple):
    """The parameters of one scan op, as given by the user (``dtype`` resolved)."""
    op_name: str
    axis: int
    exclusive: bool = False
    reverse: bool = False
    dtype: Optional[np.dtype] = None

    @classmethod
    def checked(cls, op_name, axis, exclusive=False, reverse=False, dtype=None) -> "ScanSpec":
        """A spec whose arguments are validated now (at net construction)."""
        return cls(op_name, check_axis_argument(op_name, axis),
                   check_flag_argument(op_name, "exclusive", exclusive),
                   check_flag_argument(op_name, "reverse", reverse), resolve_dtype(op_name, dtype))


class DtypeRule(NamedTuple):
    """Which input dtypes a scan takes and the dtype of its result: the one rule its kernels and its
    lowering apply (`pycumsum_op.scans.Scan.dtypes`).

    >>> DtypeRule().result_dtype(ScanSpec("PyCumSum", 0), np.dtype(np.int32))
    dtype('int64')
    >>> DtypeRule(integers_to_int64=False).result_dtype(ScanSpec("PyCumMax", 0), np.dtype(np.int32))
    dtype('int32')
    """
    #: the input dtypes accepted (numpy dtypes); None: any bool, integer or floating dtype
    inputs: Optional[Tuple[np.dtype, ...]] = None
    #: bool and integer inputs give int64 (torch.cumsum, torch.cumprod); else the input's dtype (torch.cummax)
    integers_to_int64: bool = True

    def result_dtype(self, spec: ScanSpec, dtype: Optional[np.dtype]) -> Optional[np.dtype]:
        """The output's dtype: ``spec.dtype`` (``dtype=``), else by the rule; None when ``dtype`` is unknown."""
        if spec.dtype is not None:
            return spec.dtype
        if dtype is None:
            return None
        dtype = np.dtype(dtype)
        return np.dtype(np.int64) if dtype.kind in "biu" and self.integers_to_int64 else dtype

    def check(self, spec: ScanSpec, x: np.ndarray) -> CheckedScan:
        """Check ``x`` against ``spec`` and this rule; the result and accumulation dtypes follow torch."""
        return self.check_layout(spec, x.shape, x.dtype)

    def check_layout(self, spec: ScanSpec, shape: tuple, dtype: np.dtype) -> CheckedScan:
        """`check` of an input of ``shape`` and ``dtype`` (a numpy dtype)."""
        if dtype.kind not in "biuf" or (self.inputs is not None and dtype not in self.inputs):
            raise ScanArgumentError(
                "{}: input of shape {} has dtype {}; expected {}".format(
                    spec.op_name, tuple(shape), dtype, "a numeric or bool tensor" if self.inputs is None else
                    "one of " + ", ".join(np.dtype(t).name for t in self.inputs)))
        rank = len(shape)
        span = max(rank, 1)  # a 0-d tensor scans like torch: dim 0 or -1
        if not -span <= spec.axis < span:
            raise ScanArgumentError(
                "{}: axis={} is out of range for an input of shape {} (rank {}); valid axes are {}..{}".format(
                    spec.op_name, spec.axis, tuple(shape), rank, -span, span - 1))
        result = self.result_dtype(spec, dtype)
        return CheckedScan(spec.axis % span, result, accumulate_dtype(result))
