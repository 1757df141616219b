"""Pure array kernels for scan ops: numpy (and torch where faster), no Caffe2.

One `ScanKernel` per scan op, registered in `SCAN_KERNELS` by name. The Caffe2
binding (`pycumsum_op.ops`) looks kernels up by that name, so a new scan
(cumprod, cummax, logcumsumexp, ...) is a new kernel module and one entry here.

>>> import numpy as np
>>> from pycumsum_op.kernels import SCAN_KERNELS, ScanSpec
>>> scan_kernel("cumsum").forward(np.arange(4), ScanSpec("PyCumSum", axis=0))
array([0, 1, 3, 6])
>>> scan_kernel("cumsun")
Traceback (most recent call last):
...
pycumsum_op.kernels.spec.ScanArgumentError: scan: unknown scan='cumsun'; known scans: 'cumsum'
"""
from typing import Callable, Dict, NamedTuple

from .cumsum import cumsum_backward, cumsum_forward
from .spec import ScanArgumentError, ScanPlan, ScanSpec, gradient_dtype, resolve_dtype


class ScanKernel(NamedTuple):
    """A scan op's forward and backward, and the Caffe2-facing op name."""
    name: str        # registry key, also the ONNX-ish name ("cumsum")
    op_name: str     # what users see in Caffe2 ("PyCumSum")
    forward: Callable   # forward(x, spec, out=None, plan=None) -> y
    backward: Callable  # backward(grad_y, x, spec, out=None, plan=None) -> grad_x


SCAN_KERNELS: Dict[str, ScanKernel] = {
    "cumsum": ScanKernel("cumsum", "PyCumSum", cumsum_forward, cumsum_backward),
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
           "resolve_dtype", "gradient_dtype", "cumsum_forward", "cumsum_backward"]
