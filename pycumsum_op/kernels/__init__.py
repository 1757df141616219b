"""Pure array kernels for scan ops: numpy (and torch where faster), no Caffe2.

One `ScanKernel` per scan op, registered in `SCAN_KERNELS` by name. The Caffe2
binding (`pycumsum_op.ops`) looks kernels up by that name, so a new scan is a
new kernel module and one entry here: cumsum, cumprod, cummax / cummin (two
outputs: values and int64 indices) and logcumsumexp.

>>> import numpy as np
>>> from pycumsum_op.kernels import SCAN_KERNELS, ScanSpec
>>> scan_kernel("cumsum").forward(np.arange(4), ScanSpec("PyCumSum", axis=0))
array([0, 1, 3, 6])
>>> scan_kernel("cumsun")
Traceback (most recent call last):
...
pycumsum_op.kernels.spec.ScanArgumentError: scan: unknown scan='cumsun'; known scans: 'cummax', 'cummin', 'cumprod', 'cumsum', 'logcumsumexp'
"""
from typing import Callable, Dict, FrozenSet, NamedTuple, Optional, Tuple

from .cummax import cummax_backward, cummax_forward, cummin_backward, cummin_forward, plan_extremum
from .cumprod import cumprod_backward, cumprod_forward
from .cumsum import cumsum_backward, cumsum_direct, cumsum_forward
from .logcumsumexp import logcumsumexp_backward, logcumsumexp_forward, plan_logcumsumexp
from .spec import ScanArgumentError, ScanPlan, ScanSpec, gradient_dtype, resolve_dtype

#: The optional arguments a scan may take besides axis (``ScanKernel.arguments``).
ALL_ARGUMENTS = frozenset(["exclusive", "reverse", "dtype"])


class ScanKernel(NamedTuple):
    """A scan op's forward and backward, and the Caffe2-facing op name."""
    name: str        # registry key, also the ONNX-ish name ("cumsum")
    op_name: str     # what users see in Caffe2 ("PyCumSum")
    forward: Callable   # forward(x, spec, out=None, plan=None) -> y (a tuple of arrays when several outputs)
    backward: Callable  # backward(grad_y, x, spec, out=None, plan=None, *saved) -> grad_x
    #: output names; outputs after the first are int64 indices; only the first output has a gradient
    outputs: Tuple[str, ...] = ("y",)
    #: positions of the forward outputs that backward takes after plan (``saved``)
    backward_outputs: Tuple[int, ...] = ()
    #: the optional arguments (of ALL_ARGUMENTS) the op takes
    arguments: FrozenSet[str] = ALL_ARGUMENTS
    #: backward reads x's values, so the forward must not overwrite x (no in-place runs)
    gradient_reads_input: bool = False
    #: plan(spec, x) -> ScanPlan: which inputs the op takes and the result dtype
    plan: Callable = ScanSpec.plan
    #: direct(spec, plan, x) -> f(x, out, plan.axis) doing forward's work in one call into a separate
    #: C-contiguous ``out`` of the result dtype (both given as torch tensors viewing their memory), or None
    #: (then forward): the Caffe2 op's fast path
    direct: Optional[Callable] = None


_EXTREMUM = dict(outputs=("values", "indices"), backward_outputs=(1,), arguments=frozenset(["reverse"]),
                 plan=plan_extremum)
SCAN_KERNELS: Dict[str, ScanKernel] = {
    "cumsum": ScanKernel("cumsum", "PyCumSum", cumsum_forward, cumsum_backward, direct=cumsum_direct),
    "cumprod": ScanKernel("cumprod", "PyCumProd", cumprod_forward, cumprod_backward, backward_outputs=(0,),
                          gradient_reads_input=True),
    "cummax": ScanKernel("cummax", "PyCumMax", cummax_forward, cummax_backward, **_EXTREMUM),
    "cummin": ScanKernel("cummin", "PyCumMin", cummin_forward, cummin_backward, **_EXTREMUM),
    "logcumsumexp": ScanKernel("logcumsumexp", "PyLogCumSumExp", logcumsumexp_forward, logcumsumexp_backward,
                               backward_outputs=(0,), arguments=frozenset(["exclusive", "reverse"]),
                               gradient_reads_input=True, plan=plan_logcumsumexp),
}



def short_repr(value) -> str:
    """repr() for messages, bounded: long strings and huge integers (e.g. read from a pickle) by size."""
    if isinstance(value, (str, bytes)) and len(value) > 80:
        return "<{} of length {}>".format(type(value).__name__, len(value))
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "<int of {} bits>".format(value.bit_length())
    if value is None or isinstance(value, (str, bytes, int, float)):
        return repr(value)
    return "<{}>".format(type(value).__name__)


def scan_kernel(name, caller: str = "scan") -> ScanKernel:
    """The registered kernel called ``name``; `ScanArgumentError` (naming ``caller``) for any other value."""
    if isinstance(name, str) and name in SCAN_KERNELS:
        return SCAN_KERNELS[name]
    raise ScanArgumentError("{}: unknown scan={}; known scans: {}".format(
        caller, short_repr(name), ", ".join(repr(known) for known in sorted(SCAN_KERNELS))))


__all__ = ["SCAN_KERNELS", "ScanKernel", "scan_kernel", "ScanSpec", "ScanPlan", "ScanArgumentError",
           "resolve_dtype", "gradient_dtype", "cumsum_forward", "cumsum_backward", "cumprod_forward",
           "cumprod_backward", "cummax_forward", "cummax_backward", "cummin_forward", "cummin_backward",
           "logcumsumexp_forward", "logcumsumexp_backward"]
