"""Cumulative product: the forward and its backward side by side.

Semantics are torch.cumprod's (bool and integer inputs give int64, ``dtype=`` casts the input
first) plus TensorFlow cumprod's ``exclusive`` (a leading 1) and ``reverse``. The product is
taken by torch.cumprod (float64 accumulation for floats, int64 for integers; float16, which torch
does not scan on CPU, in float64 rounded once per element).

The gradient is torch's, without its division by zero: for a lane whose first zero is at z,

- j < z: grad[j] = sum_{i >= j} grad_y[i] * y[i] / x[j]  (x[j] is not 0 there);
- j = z: grad[z] = sum_{i >= z} grad_y[i] * y'[i], y' the cumprod with x[z] replaced by 1;
- j > z: grad[j] = 0 (every product through j also holds x[z] = 0).

>>> import numpy as np
>>> from pycumsum_op.kernels.spec import ScanSpec
>>> spec = ScanSpec("PyCumProd", axis=0)
>>> cumprod_forward(np.array([2, 3, 0, 4], np.int32), spec)
array([2, 6, 0, 0])
>>> cumprod_backward(np.ones(4), np.array([2., 3., 0., 4.]), spec)
array([ 4.,  2., 30.,  0.])
"""
from typing import Optional

import numpy as np
import torch

from . import engine
from .route import forward
from .torch_scans import reversed_cumsum, run_gradient, runner
from .spec import PRODUCT_LOOP, CheckedScan, DtypeRule, ScanKernel, ScanSpec, backward_check_and_out

#: The dtype rule of cumprod (torch.cumprod's): any bool, integer or floating input; bool and integers give int64.
DTYPES = DtypeRule()
#: cumprod's kernel: an exclusive product starts with 1 (the empty product); torch.cumprod runs float16 (which it
#: does not scan on CPU) in float64 and int32 in int64 (which it accumulates in).
#: The accelerator multiplies rows into a float64 (int64) row, as torch's lanes; a direct route is one torch.cumprod
#: (or the accelerator's loop) between the tensors.
KERNEL = ScanKernel("cumprod", identity=1.0, loop=PRODUCT_LOOP,
                    compute=((np.dtype(np.float16), np.dtype(np.float64)), (np.dtype(np.int32), np.dtype(np.int64))),
                    run=runner(torch.cumprod), one_call=engine.one_call)


def cumprod_forward(x: np.ndarray, spec: ScanSpec, out: Optional[np.ndarray] = None) -> np.ndarray:
    """y = cumprod(x) along ``spec.axis`` into ``out`` (allocated when None; may overlap ``x``), by its route
    (`route.forward`)."""
    return forward(KERNEL, DTYPES, x, spec, out)


def _inclusive_gradient(grad_y: torch.Tensor, x: torch.Tensor, axis: int,
                        products: Optional[torch.Tensor] = None) -> torch.Tensor:
    """grad_x of y = cumprod(x, axis) (see the module doc); exact with any number of zeros per lane.
    ``products`` (y) is recomputed when not given."""
    if products is None:
        products = torch.cumprod(x, axis)
    is_zero = x == 0
    if not bool(is_zero.any()):
        return reversed_cumsum(grad_y * products, axis) / x
    length = x.shape[axis]
    position = torch.arange(length).reshape((-1,) + (1,) * (x.dim() - axis - 1))
    first_zero = torch.where(is_zero, position, torch.full_like(position, length)).min(axis, keepdim=True).values
    before, at = position < first_zero, position == first_zero
    one = torch.ones((), dtype=x.dtype)
    grad_x = torch.where(before, reversed_cumsum(grad_y * products, axis) / torch.where(before, x, one),
                         torch.zeros((), dtype=x.dtype))
    skipped = torch.cumprod(torch.where(at, one, x), axis)  # the products without the first zero
    return torch.where(at, reversed_cumsum(grad_y * skipped, axis), grad_x)


def cumprod_backward(grad_y: np.ndarray, x: np.ndarray, spec: ScanSpec, out: Optional[np.ndarray] = None,
                     checked: Optional[CheckedScan] = None, y: Optional[np.ndarray] = None) -> np.ndarray:
    """grad_x for y = cumprod(x): needs x's values (so the forward must not run in place).

    Computed in float64 (float32 when the gradient is float32), written into ``out`` (may be
    ``grad_y``) in the input's dtype for floating inputs, else in grad_y's. ``y``, the forward's
    output, saves recomputing it (used unless exclusive, or of another dtype than the computation).
    """
    checked, out = backward_check_and_out(DTYPES, spec, grad_y, x, out, checked)
    return run_gradient(_inclusive_gradient, grad_y, x, out, checked.axis, spec.exclusive, spec.reverse, y)
