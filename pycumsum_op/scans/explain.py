"""`explain`: how a registered scan runs on an input of a given shape and dtype, and why, with the accelerator
and without it (`pycumsum_op.explain`, ``pycumsum-op explain``).

It asks the very route the scan's op and forward follow (`pycumsum_op.kernels.route.route`, with the entry's kernel
and dtype rule), for an input of that shape (C-contiguous) into a new output.

>>> print(explain((64, 4096), axis=0, dtype="float32", accelerator="on"))
cumsum (PyCumSum) of float32 (64, 4096) along axis 0, inclusive, forward -> float32; seen as (outer, length, inner) = (1, 64, 4096)
  with the accelerator:    compiled (row loops): rows of 4096 lanes >= COMPILED_NARROW; buffers: an accumulator row of 1024 lanes
  without the accelerator: rows: torch's strided loop would miss the cache on lanes of 64 rows (CACHE_*); rows of 4096 lanes: numpy's row adds (ROWS_MIN_WIDTH, ALIASED_STRIDE); buffers: one block buffer of at most BUFFER_ELEMENTS elements and a carry row
  accelerator: on (this process runs the first)
"""
from typing import NamedTuple, Optional

import numpy as np

from ..kernels import compiled
from ..kernels.route import route
from ..kernels.spec import ScanArgumentError, ScanSpec
from .registry import SCANS, scan

#: numpy's limit on an array's rank (``NPY_MAXDIMS``)
MAX_RANK = 32
#: the most bytes a numpy array may span: numpy counts sizes in ``intp``
MAX_BYTES = int(np.iinfo(np.intp).max)


class Explanation(NamedTuple):
    """A scan's routes with and without the accelerator, and the accelerator's status here; ``str()`` tells it."""
    title: str
    accelerated: object  # `pycumsum_op.kernels.route.Route`, or None for a scan without a kernel
    plain: object
    accelerator: str

    @property
    def route(self):
        """The route this process follows."""
        return self.accelerated if self.accelerator == "on" else self.plain

    def __str__(self) -> str:
        if self.accelerated is None:
            return "{}\n  its own forward function (the entry declares no kernel to route)".format(self.title)
        view = "; seen as (outer, length, inner) = {}".format(self.plain.view) if self.plain.view else ""
        runs = "the first" if self.accelerator == "on" else "the second"
        return "{}{}\n  with the accelerator:    {}\n  without the accelerator: {}\n  accelerator: {} (this " \
               "process runs {})".format(self.title, view, self.accelerated, self.plain, self.accelerator, runs)


def _entry(op: str):
    """The registered scan called ``op`` (its name, "cumprod", or its op name, "PyCumProd")."""
    for entry in SCANS.values():
        if op == entry.op_name:
            return entry
    return scan(op, "explain")


def _check_layout(shape: tuple, dtype: np.dtype) -> None:
    """`ScanArgumentError` unless numpy can describe an array of ``shape`` and ``dtype``: checked on the numbers
    alone, since the stand-in input is made from the dtype (a subarray or structured dtype is as large as its
    fields: ``(200000000,)O`` is 1.6 GB of references in one element)."""
    if dtype.kind not in "biuf" or dtype.subdtype is not None or dtype.names is not None:
        raise ScanArgumentError("explain: dtype={!r} is not a bool, integer or floating dtype; a scan's input "
                                "holds one number per element".format(str(dtype)[:200]))
    if len(shape) > MAX_RANK:
        raise ScanArgumentError("explain: shape has rank {}; numpy arrays have at most {} dimensions".format(
            len(shape), MAX_RANK))
    if any(extent < 0 for extent in shape):
        raise ScanArgumentError("explain: shape={} has a negative extent".format(_short(shape)))
    span = dtype.itemsize  # as numpy counts it: an empty extent counts as 1, so an empty array has strides too
    for extent in shape:
        span *= max(extent, 1)
        if span > MAX_BYTES:
            raise ScanArgumentError("explain: shape={} of {} spans more than {} bytes, the most a numpy array can "
                                    "address".format(_short(shape), dtype, MAX_BYTES))


def _short(shape: tuple) -> str:
    """``shape`` as text, cut to 200 characters; an extent past 64 bits by its size (Python refuses to write an
    integer of more than 4,300 digits, and one of fewer could still fill the message).

    >>> print(_short((3, 10 ** 5000, -2 ** 70)))
    (3, a 16610-bit number, a 71-bit negative number)
    """
    def extent(value: int) -> str:
        if value.bit_length() <= 64:
            return str(value)
        return "a {}-bit {}number".format(value.bit_length(), "negative " if value < 0 else "")
    text = "({}{})".format(", ".join(extent(value) for value in shape[:40]), "," if len(shape) == 1 else "")
    return text if len(text) <= 200 else text[:200] + "...)"


def explain(shape, axis: int, dtype="float32", op: str = "cumsum", exclusive: bool = False, reverse: bool = False,
            accelerator: Optional[str] = None) -> Explanation:
    """The `Explanation` of scan ``op`` (a registered name or op name) over a C-contiguous input of ``shape`` /
    ``dtype`` along ``axis`` with its flags, into a new output. ``accelerator``: the status to report (default:
    this process's, `compiled.status`). Bad arguments raise `ScanArgumentError` naming explain and the argument."""
    entry = _entry(op)
    try:
        shape = tuple(int(extent) for extent in shape)
        dtype = np.dtype(dtype)
    except (TypeError, ValueError) as error:
        raise ScanArgumentError("explain: shape must be whole numbers and dtype a numpy dtype ({})".format(error))
    _check_layout(shape, dtype)
    for name, value in (("exclusive", exclusive), ("reverse", reverse)):
        if value and name not in entry.arguments:
            raise ScanArgumentError("explain: {} ({}) takes no {}".format(entry.name, entry.op_name, name))
    spec = ScanSpec.checked(entry.op_name, axis, exclusive, reverse)
    checked = entry.dtypes.check_layout(spec, shape, dtype)  # the result dtype, and errors for what the rule refuses
    status = compiled.status() if accelerator is None else accelerator
    title = "{} ({}) of {} {} along axis {}, {}, {} -> {}".format(
        entry.name, entry.op_name, dtype, shape, checked.axis, "exclusive" if exclusive else "inclusive",
        "reverse" if reverse else "forward", checked.result_dtype)
    if entry.kernel is None:
        return Explanation(title, None, None, status)
    accelerated, plain = (route(entry.kernel, entry.dtypes, spec, shape, dtype, accelerator=on)
                          for on in ("on", "off" if status == "on" else status))
    return Explanation(title, accelerated, plain, status)

