"""Log of the cumulative sum of exponentials: the forward and its backward side by side.

Semantics are torch.logcumsumexp's (floating inputs only; stable: log1p(exp(min - max)) + max per
step, in float64, so magnitudes of 1e4 and +-inf are fine) plus TensorFlow cumulative_logsumexp's
``exclusive`` (a leading -inf, the log of an empty sum) and ``reverse``. float16, which torch does
not scan on CPU, runs in float64 and is rounded once per element.

The gradient is grad[j] = sum_{i >= j} grad_y[i] * exp(x[j] - y[i]), computed in log space as torch
does (separately for positive and negative grad_y, so nothing overflows), with two repairs where
torch 1.10.2 returns NaN:

- x[j] = -inf: every weight exp(-inf - y[i]) is 0, also inside a lane's all -inf prefix, where y[i]
  is -inf too and torch computes -inf - -inf; the gradient is 0.
- x[j] = +inf: y[i] is +inf from the first +inf on; the weight of each +inf element in y[i] is the
  limit 1/m[i], m[i] the number of +inf elements up to i (finite elements get 0).

torch before 1.9 returns NaN after a leading -inf (and torch before 1.6 has no logcumsumexp): there
`inclusive_logcumsumexp` is numpy's sequential ``logaddexp.accumulate`` in float64.

>>> import numpy as np
>>> from pycumsum_op.kernels.spec import ScanSpec
>>> spec = ScanSpec("PyLogCumSumExp", axis=0)
>>> logcumsumexp_forward(np.array([0., 0., 1e4]), spec).round(3).tolist()
[0.0, 0.693, 10000.0]
>>> logcumsumexp_backward(np.ones(3), np.array([-np.inf, -np.inf, 0.]), spec)
array([0., 0., 1.])
"""
from typing import Optional

import numpy as np
import torch

from ..torch_versions import has
from .route import forward
from .torch_scans import flip, reversed_cumsum, run_gradient, runner
from .spec import CheckedScan, DtypeRule, ScanKernel, ScanSpec, backward_check_and_out

#: The input dtypes accepted (torch.logcumsumexp's floating types, and float16).
INPUT_DTYPES = tuple(np.dtype(t) for t in (np.float16, np.float32, np.float64))
#: The dtype rule of logcumsumexp: floating inputs only; the result keeps their dtype.
DTYPES = DtypeRule(INPUT_DTYPES, integers_to_int64=False)


def inclusive_logcumsumexp(tensor: torch.Tensor, axis: int, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.logcumsumexp(tensor, axis[, out=]) where torch's is exact at -inf (torch >= 1.9), else numpy's
    sequential logaddexp in float64, rounded once to the tensor's dtype."""
    if has("torch.logcumsumexp -inf"):
        return torch.logcumsumexp(tensor, axis) if out is None else torch.logcumsumexp(tensor, axis, out=out)
    result = torch.from_numpy(np.logaddexp.accumulate(tensor.numpy().astype(np.float64), axis=axis))
    return result.to(tensor.dtype) if out is None else out.copy_(result)


#: logcumsumexp's kernel: torch's scan only; an exclusive scan starts with -inf (the log of an empty sum); float16,
#: which torch does not scan on CPU, runs in float64.
KERNEL = ScanKernel("logcumsumexp", identity=-np.inf, compute=((np.dtype(np.float16), np.dtype(np.float64)),),
                    run=runner(inclusive_logcumsumexp))


def logcumsumexp_forward(x: np.ndarray, spec: ScanSpec, out: Optional[np.ndarray] = None) -> np.ndarray:
    """y = logcumsumexp(x) along ``spec.axis`` into ``out`` (allocated when None; may overlap ``x``), by its route
    (`route.forward`)."""
    return forward(KERNEL, DTYPES, x, spec, out)


def _reversed_logcumsumexp(tensor: torch.Tensor, axis: int) -> torch.Tensor:
    return flip(inclusive_logcumsumexp(flip(tensor, axis), axis), axis)


def _inclusive_gradient(grad_y: torch.Tensor, x: torch.Tensor, axis: int,
                        y: Optional[torch.Tensor] = None) -> torch.Tensor:
    """grad_x of y = logcumsumexp(x, axis): finite wherever grad_y and x are not NaN (y is recomputed
    when not given)."""
    if y is None:
        y = inclusive_logcumsumexp(x, axis)
    nothing = torch.full((), -np.inf, dtype=x.dtype)
    log_positive = torch.where(grad_y > 0, grad_y.abs().log(), nothing) - y
    log_negative = torch.where(grad_y < 0, grad_y.abs().log(), nothing) - y
    grad_x = ((_reversed_logcumsumexp(log_positive, axis) + x).exp()
              - (_reversed_logcumsumexp(log_negative, axis) + x).exp())
    grad_x = torch.where(x == -np.inf, torch.zeros((), dtype=x.dtype), grad_x)
    infinite = x == np.inf
    if bool(infinite.any()):
        shares = grad_y / torch.cumsum(infinite.long(), axis).clamp(min=1).to(x.dtype)
        grad_x = torch.where(infinite, reversed_cumsum(shares, axis), grad_x)
    return grad_x


def logcumsumexp_backward(grad_y: np.ndarray, x: np.ndarray, spec: ScanSpec, out: Optional[np.ndarray] = None,
                          checked: Optional[CheckedScan] = None, y: Optional[np.ndarray] = None) -> np.ndarray:
    """grad_x for y = logcumsumexp(x): needs x's values (so the forward must not run in place).

    Computed in float64 (float32 when the gradient is float32), written into ``out`` (may be ``grad_y``).
    ``y``, the forward's output, saves recomputing it (used unless exclusive, or of another dtype).
    """
    checked, out = backward_check_and_out(DTYPES, spec, grad_y, x, out, checked)
    return run_gradient(_inclusive_gradient, grad_y, x, out, checked.axis, spec.exclusive, spec.reverse, y)
