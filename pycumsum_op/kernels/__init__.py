"""Pure array kernels for scan ops: numpy (and torch where faster), no Caffe2.

One `ScanKernel` per scan op, registered in `SCAN_KERNELS` by name. The Caffe2
binding (`pycumsum_op.ops`) looks kernels up by that name, so a new scan
(cumprod, cummax, logcumsumexp, ...) is a new kernel module and one entry here.

>>> import numpy as np
>>> from pycumsum_op.kernels import SCAN_KERNELS, ScanSpec
>>> SCAN_KERNELS["cumsum"].forward(np.arange(4), ScanSpec("PyCumSum", axis=0))
array([0, 1, 3, 6])
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

__all__ = ["SCAN_KERNELS", "ScanKernel", "ScanSpec", "ScanPlan", "ScanArgumentError",
           "resolve_dtype", "gradient_dtype", "cumsum_forward", "cumsum_backward"]
