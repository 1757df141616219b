"""Target "portable": a scan from operators every Caffe2 build has (Slice, Add, Concat, Cast, ...).

A Hillis–Steele scan: for s = 1, 2, 4, ... < n, ``y[s:] += y[:n-s]`` as
``Concat(Slice(y, 0:s), Add(Slice(y, s:n), Slice(y, 0:n-s)))`` along the axis — ⌈log2 n⌉ steps,
O(n log n) work, exact for integers (bool and integers are first cast to int64, as torch), every op
with a Caffe2 gradient. ``reverse`` mirrors the slices; ``exclusive`` shifts by one with a zero slice
(ConstantFill). The slices are fixed at the scan length n known when lowering, so the lowered net
starts with ``Shape → EQ → Assert``: another length at run time fails with a message naming the blob
and n, never gives a wrong answer. Other dimensions (batch size) and extra trailing dimensions may
change freely when the axis is given as non-negative.

A new associative scan maps to its combining operator with one entry in `PORTABLE_SCAN_OPERATORS`.
"""
import numpy as np

from .emitter import TENSOR_TYPES
from .facts import LoweringError, normalized_axis, result_dtype

#: scan name -> the elementwise Caffe2 operator that combines two partial results.
PORTABLE_SCAN_OPERATORS = {"cumsum": "Add"}


def _check_length(emitter, current, axis, length, where):
    """Shape(current)[axis] == length, or the net fails with a message naming blob and length."""
    actual = emitter.step("Shape", [current], axes=[axis])
    expected = emitter.step("GivenTensorInt64Fill", [], values=[length], shape=[1])
    same = emitter.step("EQ", [actual, expected])
    emitter.op("Assert", [same], [], error_msg=(
        "{} was lowered to target 'portable' for scan length {} along axis {} of {!r}; this input has "
        "another length: lower the net again with that shape".format(where, length, axis, where.blob_in)))


def _slicer(emitter, axis):
    def take(blob, start, end):
        return emitter.step("Slice", [blob], starts=[0] * axis + [start], ends=[-1] * axis + [end])
    return take


def _zeros_like(emitter, blob, dtype):
    value = 0.0 if dtype.kind == "f" else 0
    return emitter.step("ConstantFill", [blob], value=value, dtype=TENSOR_TYPES[dtype])


def _concat(emitter, parts, axis):
    out = emitter.fresh()
    emitter.op("Concat", parts, [out, emitter.fresh()], axis=axis)
    return out


def emit_scan(emitter, scan, spec, blob_in: str, facts, where) -> str:
    """Append the portable form of ``scan`` (``spec``) of ``blob_in``; returns the blob holding the result."""
    if facts.shape is None or facts.dtype is None:
        missing = " and ".join(name for name, value in (("shape", facts.shape), ("dtype", facts.dtype))
                               if value is None)
        raise LoweringError(
            "{}: target 'portable' needs the {} of its input {!r} (the scan length is fixed when lowering); give "
            "shapes={{{!r}: (...)}} and dtypes={{{!r}: 'float32'}}, an init_net that makes it, or feed the blob "
            "into the workspace before lowering".format(where, missing, blob_in, blob_in, blob_in))
    dtype = result_dtype(spec, facts.dtype)
    current = blob_in
    if facts.dtype != dtype:
        current = emitter.step("Cast", [current], to=TENSOR_TYPES[dtype], from_type=TENSOR_TYPES[facts.dtype])
    rank_zero = facts.rank == 0
    if rank_zero:  # one element: scan it as a 1-element vector
        current = emitter.step("ExpandDims", [current], dims=[0])
    axis = 0 if rank_zero else normalized_axis(spec, where, facts.rank)
    length = 1 if rank_zero else facts.shape[axis]
    if not rank_zero:
        _check_length(emitter, blob_in, axis, length, where)
    take = _slicer(emitter, axis)
    combine = PORTABLE_SCAN_OPERATORS[scan]
    step = 1
    while step < length:
        if spec.reverse:  # y[:n-s] += y[s:]
            summed = emitter.step(combine, [take(current, 0, length - step), take(current, step, length)])
            current = _concat(emitter, [summed, take(current, length - step, length)], axis)
        else:             # y[s:] += y[:n-s]
            summed = emitter.step(combine, [take(current, step, length), take(current, 0, length - step)])
            current = _concat(emitter, [take(current, 0, step), summed], axis)
        step *= 2
    if spec.exclusive and length > 0:  # shift by one; the slices keep a gradient path even when n == 1
        zero = _zeros_like(emitter, take(current, 0, 1), dtype)
        if spec.reverse:
            current = _concat(emitter, [take(current, 1, length), zero], axis)
        else:
            current = _concat(emitter, [zero, take(current, 0, length - 1)], axis)
    if rank_zero:
        current = emitter.step("Squeeze", [current], dims=[0])
    return current
