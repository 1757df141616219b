"""Cumulative sum on numpy arrays: the forward and its backward side by side.

Semantics are torch.cumsum's (inclusive by default) plus ONNX CumSum's
``exclusive`` and ``reverse`` flags. The running sum is kept in float64 for
floating inputs (as torch does on CPU) and in int64 for bool and integer inputs.
Outputs are written into a caller-provided array, which may be the input itself.

>>> import numpy as np
>>> from pycumsum_op.kernels.spec import ScanSpec
>>> x = np.array([1., 2., 3.], np.float32)
>>> cumsum_forward(x, ScanSpec("PyCumSum", axis=0))
array([1., 3., 6.], dtype=float32)
>>> cumsum_forward(x, ScanSpec("PyCumSum", axis=0, exclusive=True, reverse=True))
array([5., 3., 0.], dtype=float32)
>>> cumsum_backward(np.ones(3, np.float32), x, ScanSpec("PyCumSum", axis=0))
array([3., 2., 1.], dtype=float32)
"""
from typing import Optional

import numpy as np

from .spec import ScanSpec, gradient_dtype


def _along(axis: int, index) -> tuple:
    """An index tuple selecting ``index`` on ``axis`` and everything elsewhere."""
    return (slice(None),) * axis + (index,)


def _inclusive_scan(src: np.ndarray, dst: np.ndarray, axis: int, accumulate_dtype: np.dtype) -> None:
    """dst = inclusive running sum of src along axis, accumulated in accumulate_dtype.

    src and dst have the same shape and may be the same memory.
    """
    dst[...] = np.cumsum(src, axis=axis, dtype=accumulate_dtype)


def _scan(src: np.ndarray, dst: np.ndarray, axis: int, exclusive: bool, reverse: bool,
          accumulate_dtype: np.dtype) -> None:
    """Inclusive/exclusive, forward/reverse scan of src into dst, both of one shape."""
    if src.ndim == 0:  # a 0-d tensor is a scan of length 1
        src, dst = src.reshape(1), dst.reshape(1)
    if reverse:
        src, dst = np.flip(src, axis), np.flip(dst, axis)
    if src.shape[axis] == 0:
        return
    if exclusive:
        _inclusive_scan(src[_along(axis, slice(None, -1))], dst[_along(axis, slice(1, None))],
                        axis, accumulate_dtype)
        dst[_along(axis, 0)] = 0
    else:
        _inclusive_scan(src, dst, axis, accumulate_dtype)


def cumsum_forward(x: np.ndarray, spec: ScanSpec, out: Optional[np.ndarray] = None) -> np.ndarray:
    """y = cumsum(x) along ``spec.axis``, into ``out`` (allocated when None; may be ``x``)."""
    plan = spec.plan(x)
    if out is None:
        out = np.empty(x.shape, plan.result_dtype)
    if x.dtype != plan.result_dtype:  # torch casts first, then sums (dtype= narrowing included)
        x = x.astype(plan.result_dtype)
    _scan(x, out, plan.axis, spec.exclusive, spec.reverse, plan.accumulate_dtype)
    return out


def cumsum_backward(grad_y: np.ndarray, x: np.ndarray, spec: ScanSpec,
                    out: Optional[np.ndarray] = None) -> np.ndarray:
    """grad_x for y = cumsum(x): the same scan over grad_y, run in the other direction.

    ``x`` gives the gradient's dtype (floating inputs get their own dtype back, as
    in torch autograd) and nothing else, so an in-place forward is fine.
    """
    plan = spec.plan(grad_y)
    if out is None:
        out = np.empty(grad_y.shape, gradient_dtype(x.dtype, grad_y.dtype))
    _scan(grad_y, out, plan.axis, spec.exclusive, not spec.reverse, plan.accumulate_dtype)
    return out
