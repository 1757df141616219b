"""Pure array kernels for scan ops: numpy (and torch where faster), no Caffe2.

One module per scan op, forward and backward side by side: cumsum, cumprod, cummax / cummin (two
outputs: values and int64 indices) and logcumsumexp; `spec` checks the arguments. What else the
package knows about each scan (its Caffe2 op, what its backward reads, its lowering) is declared
with these kernels in the scan registry, `pycumsum_op.scans`.

>>> import numpy as np
>>> cumsum_forward(np.arange(4), ScanSpec("PyCumSum", axis=0))
array([0, 1, 3, 6])
"""
from .cummax import cummax_backward, cummax_forward, cummin_backward, cummin_forward
from .cumprod import cumprod_backward, cumprod_forward
from .cumsum import cumsum_backward, cumsum_forward
from .logcumsumexp import logcumsumexp_backward, logcumsumexp_forward
from .spec import CheckedScan, DtypeRule, ScanArgumentError, ScanSpec, gradient_dtype, resolve_dtype, short_repr

__all__ = ["ScanSpec", "CheckedScan", "DtypeRule", "ScanArgumentError", "resolve_dtype", "gradient_dtype", "short_repr",
           "cumsum_forward", "cumsum_backward", "cumprod_forward", "cumprod_backward", "cummax_forward",
           "cummax_backward", "cummin_forward", "cummin_backward", "logcumsumexp_forward", "logcumsumexp_backward"]
