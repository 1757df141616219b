"""Any inclusive forward scan made exclusive and/or reversed, and its gradient, with torch's own kernels.

The kernels of cumprod, cummax/cummin and logcumsumexp hand torch (``torch.cumprod``,
``torch.cummax``, ``torch.logcumsumexp``, which accumulate floats in float64 on CPU) the plain
inclusive scan along ``axis``; this module adds the flags around it, as TensorFlow's ``cumprod``
and ``cumulative_logsumexp`` define them:

- ``reverse``: the scan runs from the end: flip, scan, flip back.
- ``exclusive``: element i holds the scan of the elements before it; the first holds the
  scan's identity (1 for a product, -inf for log-sum-exp).

Two variants of torch's path (the scan's `route.route` says which one a call takes):

- ``out=``: an inclusive forward scan whose input already has the compute dtype and does not
  overlap the output: torch writes straight into the output's memory.
- ``staged``: a contiguous (cast, flipped) copy of the input, torch's scan of it, and one copy
  into the output (shifted by one when exclusive, flipped back when reversed).

The gradient of the scan with its flags is the inclusive scan's gradient taken on flipped data
(reverse) with the incoming gradient shifted one step back (exclusive: y[i] = inclusive[i-1],
so inclusive[i] gets grad_y[i+1] and the last element gets none).

>>> import numpy as np, torch
>>> x = np.array([1., 2., 3., 4.])
>>> scan_forward(torch.cumprod, x, np.empty(4), 0, exclusive=True, reverse=True, identity=1, staged=True)
array([24., 12.,  4.,  1.])
"""
import functools
from typing import Callable, Optional

import numpy as np
import torch

from . import compiled
from .route import view_3d


def along(axis: int, index) -> tuple:
    """An index tuple selecting ``index`` on ``axis`` and everything elsewhere."""
    return (slice(None),) * axis + (index,)


def as_tensor(array: np.ndarray) -> torch.Tensor:
    """A torch view of ``array`` (a copy only when numpy strides are negative, which torch cannot view)."""
    if min(array.strides, default=0) < 0:
        array = array.copy()
    return torch.from_numpy(array)


def flip(tensor: torch.Tensor, axis: int) -> torch.Tensor:
    """``tensor`` reversed along ``axis``, as a new contiguous tensor (numpy's copy is the faster one)."""
    return torch.from_numpy(np.flip(tensor.numpy(), axis).copy())


def as_lanes(array: np.ndarray) -> np.ndarray:
    """``array`` with at least one dimension (a 0-d tensor scans as a 1-element lane, as in torch)."""
    return array.reshape(1) if array.ndim == 0 else array


def scan_forward(inclusive: Callable, x: np.ndarray, out: np.ndarray, axis: int, exclusive: bool,
                 reverse: bool, identity, staged: bool) -> np.ndarray:
    """out = the scan with its flags of ``x`` along ``axis``; ``inclusive(tensor, axis[, out=])`` is torch's scan,
    run into ``out`` or, ``staged`` (as routed), through a copy.

    ``x`` has the compute dtype torch scans in; ``out`` any dtype (cast once, as torch does with
    ``dtype=``); ``axis`` is normalised; 0-d and empty inputs are fine.
    """
    x, lanes_out = as_lanes(x), as_lanes(out)
    length = x.shape[axis] if x.size else 0
    if length == 0:
        return out
    if not staged:
        inclusive(as_tensor(x), axis, out=torch.from_numpy(lanes_out))
        return out
    if reverse:
        x, lanes_out = np.flip(x, axis), np.flip(lanes_out, axis)
    source = as_tensor(x)
    if exclusive:
        lanes_out[along(axis, 0)] = identity
        source, lanes_out = source.narrow(axis, 0, length - 1), lanes_out[along(axis, slice(1, None))]
    np.copyto(lanes_out, inclusive(source, axis).numpy(), casting="unsafe")
    return out


def runner(inclusive: Callable) -> Callable:
    """The `spec.ScanKernel.run` of a scan torch computes by ``inclusive(tensor, axis[, out=])``: the accelerator's
    sum or product loop (the kernel's ``loop``) where its route takes it, else torch's scan with the flags
    (`scan_forward`, into the output or staged)."""
    return functools.partial(_run, inclusive)


def _run(inclusive: Callable, route, src: np.ndarray, dst: np.ndarray) -> None:
    if route.path == "compiled":
        compiled.scan_rows(view_3d(src, route.axis), view_3d(dst, route.axis), route.kernel, route.exclusive,
                           route.reverse, route.chains)
    else:
        scan_forward(inclusive, src, dst, route.axis, route.exclusive, route.reverse, route.kernel.identity,
                     route.staged)


def scan_gradient(inclusive_gradient: Callable, grad_y: torch.Tensor, x: torch.Tensor, axis: int,
                  exclusive: bool, reverse: bool, y: Optional[torch.Tensor] = None) -> torch.Tensor:
    """grad_x of the scan with its flags; ``inclusive_gradient(grad_y, x, axis, y)`` is the plain scan's.

    Tensors have at least one dimension and one floating dtype; ``axis`` is normalised. ``y``, the
    forward's output of a scan that is not exclusive, reaches ``inclusive_gradient`` (flipped with
    the rest), which otherwise gets None and recomputes what it needs.
    """
    length = x.shape[axis]
    if length == 0:
        return torch.zeros_like(x)
    if exclusive:
        y = None
    if reverse:
        grad_y, x = flip(grad_y, axis), flip(x, axis)
        y = None if y is None else flip(y, axis)
    if exclusive:
        grad_y = torch.cat([grad_y.narrow(axis, 1, length - 1), torch.zeros_like(grad_y.narrow(axis, 0, 1))], axis)
    grad_x = inclusive_gradient(grad_y, x, axis, y)
    return flip(grad_x, axis) if reverse else grad_x


def reversed_cumsum(tensor: torch.Tensor, axis: int) -> torch.Tensor:
    """Sums from each element to the end of its lane (float64 accumulation on CPU, as torch.cumsum)."""
    return flip(flip(tensor, axis).cumsum(axis), axis)


def gradient_compute_dtype(out_dtype: np.dtype) -> torch.dtype:
    """The torch dtype a gradient is computed in: the gradient's own when float32/float64, else float64."""
    return torch.float32 if np.dtype(out_dtype) == np.float32 else torch.float64


def run_gradient(inclusive_gradient: Callable, grad_y: np.ndarray, x: np.ndarray, out: np.ndarray, axis: int,
                 exclusive: bool, reverse: bool, y: Optional[np.ndarray] = None) -> np.ndarray:
    """out = grad_x of the scan with its flags for numpy inputs: computed by `scan_gradient` in
    `gradient_compute_dtype`, written into ``out`` (whose dtype is the gradient's) with one cast.
    ``y`` (the forward's output) is used when it already has the compute dtype."""
    compute = gradient_compute_dtype(out.dtype)
    y = None if y is None or as_tensor(as_lanes(y)[:0]).dtype != compute else as_tensor(as_lanes(y))
    grad_x = scan_gradient(inclusive_gradient, as_tensor(as_lanes(grad_y)).to(compute),
                           as_tensor(as_lanes(x)).to(compute), axis, exclusive, reverse, y)
    np.copyto(as_lanes(out), grad_x.numpy(), casting="unsafe")
    return out
