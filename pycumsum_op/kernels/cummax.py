"""Running maximum and minimum with the winners' indices: the forwards and their backward side by side.

Semantics are torch.cummax's / torch.cummin's: two outputs, the values in the input's dtype and
int64 indices; a tie goes to the later element (its index is reported), and once a NaN is seen the
values stay NaN with the index of the latest NaN. ``reverse`` scans from the end (flip, scan, flip
back, indices counted in the input). Any bool, integer or floating input (float16 and uint16, which
torch does not scan on CPU, go through float32 and int32 exactly).

The gradient sends each output gradient to the index that won: ``grad_x = 0; grad_x[indices[i]] +=
grad_values[i]`` along the axis (torch's scatter_add), so it needs the indices and nothing else of x.

torch before 1.5 has no cummax / cummin: there `sequential_extremum` takes one numpy step per position.

>>> import numpy as np
>>> from pycumsum_op.kernels.spec import ScanSpec
>>> values, indices = cummax_forward(np.array([1., 3., 3., 2.]), ScanSpec("PyCumMax", axis=0))
>>> values, indices
(array([1., 3., 3., 3.]), array([0, 1, 2, 2]))
>>> cummax_backward(np.array([1., 2., 4., 8.]), values, ScanSpec("PyCumMax", axis=0), indices=indices)
array([ 1.,  2., 12.,  0.])
>>> cummin_forward(np.array([2, 1, 1], np.int16), ScanSpec("PyCumMin", axis=0, reverse=True))
(array([1, 1, 1], dtype=int16), array([1, 1, 2]))
"""
from functools import partial
from typing import Callable, Optional, Tuple

import numpy as np
import torch

from ..torch_versions import has
from . import compiled
from .route import Route, forward, view_3d
from .torch_scans import along, as_lanes, as_tensor, gradient_compute_dtype
from .spec import (EXTREMUM_LOOP, CheckedScan, DtypeRule, ScanKernel, ScanSpec, backward_check_and_out,
                   takes_lead_elementwise)

#: The input dtypes accepted (those Caffe2 blobs hold; torch scans every one of them, or in its compute dtype).
INPUT_DTYPES = tuple(np.dtype(t) for t in (np.bool_, np.uint8, np.int8, np.int16, np.uint16, np.int32, np.int64,
                                           np.float16, np.float32, np.float64))
#: The dtype rule of cummax / cummin: any of `INPUT_DTYPES`; values keep the input's dtype.
DTYPES = DtypeRule(INPUT_DTYPES, integers_to_int64=False)


def sequential_extremum(maximum: bool, tensor: torch.Tensor, axis: int, out=None):
    """torch.cummax (``maximum``) / torch.cummin of a non-empty tensor, (values, indices) [into ``out``], one numpy
    step per position by torch's rule (`takes_lead_elementwise`)."""
    x = tensor.numpy()
    values, indices = np.empty_like(x), np.empty(x.shape, np.int64)
    best = np.array(x[along(axis, 0)])  # an array also where the lanes are one element (1-d x)
    winner = np.zeros(best.shape, np.int64)
    for position in range(x.shape[axis]):
        current = x[along(axis, position)]
        wins = np.asarray(takes_lead_elementwise(current, best, maximum))
        np.copyto(best, current, where=wins)
        winner[wins] = position
        values[along(axis, position)], indices[along(axis, position)] = best, winner
    found = torch.from_numpy(values), torch.from_numpy(indices)
    if out is None:
        return found
    return out[0].copy_(found[0]), out[1].copy_(found[1])


#: torch.cummax / torch.cummin, or their numpy forms on torch < 1.5.
TORCH_CUMMAX = torch.cummax if has("torch.cummax") else partial(sequential_extremum, True)
TORCH_CUMMIN = torch.cummin if has("torch.cummax") else partial(sequential_extremum, False)


def _run_extremum(torch_scan: Callable, maximum: bool, route: Route, source: np.ndarray,
                  out: Tuple[np.ndarray, np.ndarray]) -> None:
    """cummax's / cummin's `ScanKernel.run`: ``route`` of ``source`` (the compute dtype) into ``out`` (values,
    indices), 0-d arrays as lanes of one element."""
    axis, source, (values, indices) = route.axis, as_lanes(source), (as_lanes(output) for output in out)
    if route.reverse:  # scan the reversed lanes; write back through reversed views, indices counted from the end
        source, values, indices = (np.flip(a, axis) for a in (source, values, indices))
    if route.path == "compiled":  # the accelerator: whole rows compared at once, torch's rule in each lane
        compiled.extremum_rows(view_3d(source, axis), view_3d(values, axis), view_3d(indices, axis), maximum,
                               route.chains)
    elif route.staged:
        found_values, found_indices = torch_scan(as_tensor(source), axis)
        np.copyto(values, found_values.numpy(), casting="unsafe")
        np.copyto(indices, found_indices.numpy())
    else:
        torch_scan(as_tensor(source), axis, out=(torch.from_numpy(values), torch.from_numpy(indices)))
    if route.reverse:
        np.subtract(source.shape[axis] - 1, indices, out=indices)


def _one_call(torch_scan: Callable, maximum: bool, route: Route) -> Callable:
    """cummax's / cummin's `ScanKernel.one_call`: the accelerator's loop or torch's scan, on a torch tensor viewing
    x, the (values, indices) tensors and the axis."""
    if route.path == "compiled":
        return partial(_compiled_extremum, route.view, maximum, route.chains)
    return partial(_torch_extremum, torch_scan)


def _torch_extremum(torch_scan: Callable, source: torch.Tensor, out: Tuple[torch.Tensor, torch.Tensor],
                    axis: int) -> None:
    torch_scan(source, axis, out=out)


def _compiled_extremum(shape: tuple, maximum: bool, chains: bool, source: torch.Tensor,
                       out: Tuple[torch.Tensor, torch.Tensor], axis: int) -> None:
    """The accelerator's cummax / cummin on tensors seen as the 3-D (outer, length, inner) ``shape``."""
    compiled.extremum_rows(source.numpy().reshape(shape), out[0].numpy().reshape(shape),
                           out[1].numpy().reshape(shape), maximum, chains)


#: (input dtype, the dtype torch scans it in): exactly, every value is representable.
_COMPUTE = ((np.dtype(np.float16), np.dtype(np.float32)), (np.dtype(np.uint16), np.dtype(np.int32)))
#: cummax's and cummin's kernels: no exclusive form; the accelerator's extremum loops.
CUMMAX = ScanKernel("cummax", identity=None, loop=EXTREMUM_LOOP, compute=_COMPUTE,
                    run=partial(_run_extremum, TORCH_CUMMAX, True), one_call=partial(_one_call, TORCH_CUMMAX, True))
CUMMIN = CUMMAX._replace(name="cummin", run=partial(_run_extremum, TORCH_CUMMIN, False),
                         one_call=partial(_one_call, TORCH_CUMMIN, False))


def _extremum_backward(scan_forward: Callable, grad_y: np.ndarray, x: np.ndarray, spec: ScanSpec,
                       out: Optional[np.ndarray] = None, checked: Optional[CheckedScan] = None,
                       indices: Optional[np.ndarray] = None) -> np.ndarray:
    """grad_x: grad_y scattered (added) onto the winning indices along the axis.

    ``x`` gives the shape and the gradient's dtype (its values are used only when ``indices``, the
    forward's second output, is not given); ``out`` may be ``grad_y``.
    """
    checked, out = backward_check_and_out(DTYPES, spec, grad_y, x, out, checked)
    if indices is None:
        indices = scan_forward(x, spec)[1]
    if grad_y.size == 0:
        return out
    target = as_lanes(out)
    source = as_tensor(as_lanes(grad_y)).to(gradient_compute_dtype(out.dtype))
    direct = (source.dtype == as_tensor(target[:0]).dtype and min(target.strides, default=0) >= 0
              and not np.may_share_memory(grad_y, target))  # scatter straight into out
    grad_x = torch.from_numpy(target) if direct else torch.empty(source.shape, dtype=source.dtype)
    grad_x.zero_().scatter_add_(checked.axis, as_tensor(as_lanes(indices)), source)
    if not direct:
        np.copyto(target, grad_x.numpy(), casting="unsafe")
    return out


def cummax_forward(x: np.ndarray, spec: ScanSpec,
                   out: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(values, indices) = torch.cummax(x) along ``spec.axis``, into ``out`` (allocated when None), by its route."""
    return forward(CUMMAX, DTYPES, x, spec, out)


def cummin_forward(x: np.ndarray, spec: ScanSpec,
                   out: Optional[Tuple[np.ndarray, np.ndarray]] = None) -> Tuple[np.ndarray, np.ndarray]:
    """(values, indices) = torch.cummin(x) along ``spec.axis``, into ``out`` (allocated when None), by its route."""
    return forward(CUMMIN, DTYPES, x, spec, out)


cummax_backward = partial(_extremum_backward, cummax_forward)
cummin_backward = partial(_extremum_backward, cummin_forward)
