"""Target "aten": a scan as Caffe2's ``ATen`` operator, which runs torch's own C++ kernels.

``ATen(operator="cumsum", dim=d)`` is bit-identical to torch.cumsum (integers give int64, like
torch) and O(n); ``reverse`` adds ``flip`` around it; ``exclusive`` shifts the result by one with
``roll`` and zeroes the first entry with ``index_fill`` (any rank, no shape needed; an empty scan axis
then fails at run time with torch's message, never with a wrong result);
``dtype=`` is a Caffe2 ``Cast`` in front (and behind, for integer types other than int64, which
ATen's cumsum would widen). Only these forms are emitted; `aten_gradient` gives them gradients.
The ATen operator is in every CPU build of Caffe2 from PyPI's torch but not in mobile builds: use
target "portable" there.

A new scan maps to an ATen operator with one entry in `ATEN_SCAN_OPERATORS`.
"""
import numpy as np

from .emitter import TENSOR_TYPES
from .facts import LoweringError

#: scan name -> ATen operator computing it with the ``(self, dim)`` overload.
ATEN_SCAN_OPERATORS = {"cumsum": "cumsum"}


def emit_scan(emitter, scan, spec, blob_in: str, facts, where) -> str:
    """Append the ATen form of ``scan`` (``spec``) of ``blob_in``; returns the blob holding the result."""
    if spec.dtype is not None and spec.dtype == np.dtype(np.float16):
        raise LoweringError("{}: dtype=float16 cannot be lowered to target 'aten' (torch 1.10's CPU cumsum has "
                            "no Half kernel); use dtype='float' or target 'portable'".format(where))
    current = blob_in
    rank_zero = facts.rank == 0 and spec.exclusive
    if rank_zero:  # roll needs an axis: scan the 0-d tensor as a 1-element vector
        current = emitter.step("ExpandDims", [current], dims=[0])
    if spec.dtype is not None:
        cast = {"to": TENSOR_TYPES[spec.dtype]}
        if facts.dtype is not None:
            cast["from_type"] = TENSOR_TYPES[facts.dtype]  # Caffe2's Cast gradient needs it
        current = emitter.step("Cast", [current], **cast)
    if spec.reverse:
        current = emitter.step("ATen", [current], operator="flip", dims=[spec.axis])
    current = emitter.step("ATen", [current], operator=ATEN_SCAN_OPERATORS[scan], dim=spec.axis)
    if spec.exclusive:
        first = emitter.step("GivenTensorInt64Fill", [], values=[0], shape=[1])
        current = emitter.step("ATen", [current], operator="roll", shifts=[1], dims=[spec.axis])
        current = emitter.step("ATen", [current, first], operator="index_fill", dim=spec.axis, value=0.0)
    if spec.reverse:
        current = emitter.step("ATen", [current], operator="flip", dims=[spec.axis])
    if spec.dtype is not None and spec.dtype.kind in "iu" and spec.dtype != np.dtype(np.int64):
        current = emitter.step("Cast", [current], to=TENSOR_TYPES[spec.dtype])
    if rank_zero:
        current = emitter.step("Squeeze", [current], dims=[0])
    return current
