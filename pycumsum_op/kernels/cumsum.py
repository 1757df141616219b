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
from .plan import APART, SAME, Route, sharing
from .plan import plan as kernel_plan
from .spec import SUM_LOOP, DtypeRule, ScanKernel, ScanPlan, ScanSpec, backward_plan_and_out

#: The dtype rule of cumsum (torch.cumsum's): any bool, integer or floating input; bool and integers give int64.
DTYPES = DtypeRule()
#: cumsum's kernel: the engine's paths or the accelerator's sum loops; exclusive sums start with 0.
KERNEL = ScanKernel("cumsum", identity=0.0, loop=SUM_LOOP, engine=True, run=engine.run)


def cumsum_forward(x: np.ndarray, spec: ScanSpec, out: Optional[np.ndarray] = None,
                   plan: Optional[ScanPlan] = None, route: Optional[Route] = None) -> np.ndarray:
    """y = cumsum(x) along ``spec.axis``, into ``out`` (allocated when None; may be ``x``).

    ``out`` must have the result dtype; ``plan`` is ``spec.plan(x)`` and ``route`` is ``cumsum_plan(x, spec, plan,
    out)`` when the caller has them.
    """
    if plan is None:
        plan = DTYPES.plan(spec, x)
    if out is None:
        out = np.empty(x.shape, plan.result_dtype)
    found = cumsum_plan(x, spec, plan, out) if route is None else route
    if x.dtype != plan.result_dtype:  # torch casts first, then sums (dtype= narrowing included)
        np.copyto(out, x, casting="unsafe")
        x = out
    found.run(x, out)
    return out


def cumsum_plan(x: np.ndarray, spec: ScanSpec, plan: ScanPlan, out: Optional[np.ndarray] = None, accelerator=None):
    """The `kernels.plan.Route` of ``cumsum_forward(x, spec, out, plan)`` (``out`` None: a new C-contiguous array):
    an input of another dtype is cast into the output and scanned there, in place.

    >>> x, spec = np.ones((64, 4096), np.int32), ScanSpec("PyCumSum", 0, exclusive=True)
    >>> p = cumsum_plan(x, spec, spec.plan(x), accelerator=False)
    >>> p.path, p.reason.split(";")[0]
    ('rows', 'shifted in place (torch would read what it wrote)')
    """
    out_strides = None if out is None else out.strides
    if x.dtype != plan.result_dtype:
        return kernel_plan(KERNEL, x.shape, plan.result_dtype, plan.axis, spec.exclusive, spec.reverse,
                           strides=out_strides, out_strides=out_strides, sharing=SAME, accelerator=accelerator)
    return kernel_plan(KERNEL, x.shape, x.dtype, plan.axis, spec.exclusive, spec.reverse, out_dtype=plan.result_dtype,
                       strides=x.strides, out_strides=out_strides,
                       sharing=APART if out is None else sharing(x, out), accelerator=accelerator)


def cumsum_direct(spec: ScanSpec, plan: ScanPlan, x: np.ndarray):
    """The one call ``cumsum_forward(x, spec, out, plan)`` into a separate C-contiguous ``out`` amounts to for a
    C-contiguous ``x`` (torch.cumsum, or the accelerator's loop), where its `kernels.plan.plan` is one call, else
    None. The function found takes torch tensors viewing x and out, and the axis.

    >>> spec, x = ScanSpec("PyCumSum", axis=0), np.ones(1 << 16, np.float32)
    >>> cumsum_direct(spec, spec.plan(x), x) is engine.torch_scan, cumsum_direct(spec, spec.plan(x[:8]), x[:8])
    (True, None)
    """
    if spec.reverse or x.dtype != plan.result_dtype:
        return None
    return engine.direct_call(cumsum_plan(x, spec, plan))


def cumsum_backward(grad_y: np.ndarray, x: np.ndarray, spec: ScanSpec, out: Optional[np.ndarray] = None,
                    plan: Optional[ScanPlan] = None) -> np.ndarray:
    """grad_x for y = cumsum(x): the same scan over grad_y, run in the other direction.

    ``x`` gives the gradient's dtype (floating inputs get their own dtype back, as
    in torch autograd) and nothing else, so an in-place forward is fine. The sum is
    taken in the accumulation dtype and cast once, into ``out`` (may be ``grad_y``);
    ``plan`` is ``spec.plan(grad_y)`` when the caller has it.
    """
    plan, out = backward_plan_and_out(spec, grad_y, x, out, plan)
    kernel_plan(KERNEL, grad_y.shape, grad_y.dtype, plan.axis, spec.exclusive, not spec.reverse, out_dtype=out.dtype,
                strides=grad_y.strides, out_strides=out.strides, sharing=sharing(grad_y, out)).run(grad_y, out)
    return out
