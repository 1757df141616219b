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

from . import engine
from .route import forward, sharing
from .route import route as scan_route
from .spec import SUM_LOOP, CheckedScan, DtypeRule, ScanKernel, ScanSpec, backward_check_and_out

#: The dtype rule of cumsum (torch.cumsum's): any bool, integer or floating input; bool and integers give int64.
DTYPES = DtypeRule()
#: cumsum's kernel: the engine's paths or the accelerator's sum loops; exclusive sums start with 0; a direct route is
#: one torch.cumsum (or the accelerator's loop) between the tensors.
KERNEL = ScanKernel("cumsum", identity=0.0, loop=SUM_LOOP, engine=True, run=engine.run, one_call=engine.one_call)


def cumsum_forward(x: np.ndarray, spec: ScanSpec, out: Optional[np.ndarray] = None) -> np.ndarray:
    """y = cumsum(x) along ``spec.axis``, into ``out`` (allocated when None; may be ``x``), by its route: an input of
    another dtype is cast into the output first and summed there, in place.

    >>> x, spec = np.ones((64, 4096), np.int32), ScanSpec("PyCumSum", 0, exclusive=True)
    >>> r = scan_route(KERNEL, DTYPES, spec, x.shape, x.dtype, accelerator=False)
    >>> r.path, r.reason.split(";")[0]
    ('rows', 'shifted in place (torch would read what it wrote)')
    """
    return forward(KERNEL, DTYPES, x, spec, out)


def cumsum_backward(grad_y: np.ndarray, x: np.ndarray, spec: ScanSpec, out: Optional[np.ndarray] = None,
                    checked: Optional[CheckedScan] = None) -> np.ndarray:
    """grad_x for y = cumsum(x): the same scan over grad_y, run in the other direction.

    ``x`` gives the gradient's dtype (floating inputs get their own dtype back, as
    in torch autograd) and nothing else, so an in-place forward is fine. The sum is
    taken in the accumulation dtype and cast once, into ``out`` (may be ``grad_y``);
    ``checked`` is ``DTYPES.check(spec, grad_y)`` when the caller has it.
    """
    checked, out = backward_check_and_out(DTYPES, spec, grad_y, x, out, checked)
    # summed as grad_y's dtype (its result, no cast first) and rounded once into the gradient's (torch: the cast back)
    found = scan_route(KERNEL, DTYPES, spec._replace(axis=checked.axis, reverse=not spec.reverse, dtype=grad_y.dtype),
                       grad_y.shape, grad_y.dtype, out_dtype=out.dtype, strides=grad_y.strides,
                       out_strides=out.strides, sharing=sharing(grad_y, out))
    found.run(grad_y, out)
    return out
