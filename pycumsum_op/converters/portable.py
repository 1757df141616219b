"""Target "portable": a scan from operators every Caffe2 build has (Slice, Add, Concat, Cast, ...).

float32 (Caffe2's MatMul is float-only) takes the blocked form (not on non-last axes of at most
`SHORT_AXIS` entries): the axis moved last (Transpose),
blocks of `BLOCK` entries scanned by one MatMul with a triangular matrix, the block totals scanned
the same way (recursively) and added back — O(n·BLOCK) multiply-adds in a few passes over memory.
Other dtypes take a Hillis–Steele scan: for s = 1, 2, 4, ... < n, ``y[s:] += y[:n-s]`` as
``Concat(Slice(y, 0:s), Add(Slice(y, s:n), Slice(y, 0:n-s)))`` along the axis — ⌈log2 n⌉ steps,
O(n log n) work, exact for integers (bool and integers are first cast to int64, as torch). Every op
has a Caffe2 gradient. ``reverse`` mirrors the slices (or the matrices); ``exclusive`` shifts by one
with a zero slice (ConstantFill). The slices are fixed at the rank and scan length n known when lowering, so the
lowered net starts with ``Shape → EQ → Assert``: another rank or length at run time fails with a
message naming the blob, never gives a wrong answer. Other dimensions (the batch size) may change.

A new associative scan maps to its combining operator with one entry in `PORTABLE_SCAN_OPERATORS`.
"""
import numpy as np

from .emitter import TENSOR_TYPES
from .facts import LoweringError, normalized_axis, result_dtype

#: scan name -> the elementwise Caffe2 operator that combines two partial results.
PORTABLE_SCAN_OPERATORS = {"cumsum": "Add"}
#: scan -> why target "portable" does not lower it (no exact form from Caffe2's portable operators).
REFUSALS = {
    "cumprod": "a log-depth product of Mul ops rounds floats differently from torch's sequential cumprod (not "
               "exact), and Caffe2 has no portable cumulative product",
    "logcumsumexp": "a log-depth scan of Caffe2's elementwise ops rounds differently from torch's sequential "
                    "logcumsumexp (not exact), and Caffe2 has no portable operator for it",
    "cummax": "Caffe2's portable Max does not give torch's indices (ties to the later element, NaN rules)",
    "cummin": "Caffe2's portable Min does not give torch's indices (ties to the later element, NaN rules)",
}
#: Scans with the blocked MatMul form (float32): a sum is a product with a triangular matrix of ones.
MATMUL_SCANS = frozenset(["cumsum"])
#: Entries per block of the MatMul form: n·BLOCK multiply-adds, log_BLOCK(n) levels (16 measured fastest).
BLOCK = 16
#: A non-last axis at most this long takes Hillis–Steele: cheaper than the two Transposes of the MatMul form.
SHORT_AXIS = 64


def triangular(size: int, reverse: bool, exclusive: bool) -> np.ndarray:
    """The matrix M with ``(x @ M)[j]`` = the (reverse, exclusive) running sum of row x at j.

    >>> triangular(3, reverse=False, exclusive=False).astype(int).tolist()
    [[1, 1, 1], [0, 1, 1], [0, 0, 1]]
    """
    rows, columns = np.indices((size, size))
    keep = rows >= columns if reverse else rows <= columns
    if exclusive:
        keep &= rows != columns
    return keep.astype(np.float32)


def _reshape(emitter, blob, shape):
    """Reshape to ``shape`` (a list, or a blob holding one); returns (output, the input's old shape)."""
    out, old = emitter.fresh(), emitter.fresh()
    if isinstance(shape, str):
        emitter.op("Reshape", [blob, shape], [out, old])
    else:
        emitter.op("Reshape", [blob], [out, old], shape=shape)
    return out, old


def _matmul_scan(emitter, blob, length, reverse, exclusive):
    """Scan float32 ``blob`` (any rank) along its last axis, ``length`` long, with triangular MatMuls."""
    rows, old = _reshape(emitter, blob, [-1, length])
    if length <= BLOCK:
        matrix = emitter.step("GivenTensorFill", [], values=triangular(length, reverse, exclusive).ravel().tolist(),
                              shape=[length, length])
        return _reshape(emitter, emitter.step("MatMul", [rows, matrix]), old)[0]
    blocks = -(-length // BLOCK)
    padded = blocks * BLOCK
    if padded != length:  # zeros at the end change no (reverse) running sum of the real entries
        zeros = _zeros_like(emitter, _slicer(emitter, 1)(rows, 0, padded - length), np.dtype(np.float32))
        rows = _concat(emitter, [rows, zeros], 1)
    block_rows = _reshape(emitter, rows, [-1, BLOCK])[0]
    matrix = emitter.step("GivenTensorFill", [], values=triangular(BLOCK, reverse, False).ravel().tolist(),
                          shape=[BLOCK, BLOCK])
    within = emitter.step("MatMul", [block_rows, matrix])
    edge = 0 if reverse else BLOCK - 1
    totals = _reshape(emitter, _slicer(emitter, 1)(within, edge, edge + 1), [-1, blocks])[0]
    offsets = _reshape(emitter, _matmul_scan(emitter, totals, blocks, reverse, True), [-1, 1])[0]
    scanned = emitter.step("Add", [within, offsets])
    if exclusive:
        scanned = emitter.step("Sub", [scanned, block_rows])
    scanned = _reshape(emitter, scanned, [-1, padded])[0]
    if padded != length:
        scanned = _slicer(emitter, 1)(scanned, 0, length)
    return _reshape(emitter, scanned, old)[0]


def _assert(emitter, blob, values, message):
    """Fail the net with ``message`` unless the int64 vector ``blob`` equals ``values``."""
    expected = emitter.step("GivenTensorInt64Fill", [], values=values, shape=[len(values)])
    emitter.op("Assert", [emitter.step("EQ", [blob, expected])], [], error_msg=message)


def _check_rank_and_length(emitter, blob, rank, axis, length, where):
    """The input has ``rank`` dimensions and ``length`` entries along ``axis``, or the net fails saying so."""
    again = "; lower the net again with this input's shape"
    shape = emitter.step("Shape", [blob])
    _assert(emitter, emitter.step("Shape", [shape]), [rank], "{} was lowered to target 'portable' for a rank-{} "
            "input {!r}; this input has another rank{}".format(where, rank, where.blob_in, again))
    _assert(emitter, emitter.step("Shape", [blob], axes=[axis]), [length], (
        "{} was lowered to target 'portable' for scan length {} along axis {} of {!r}; this input has another "
        "length{}".format(where, length, axis, where.blob_in, again)))


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


def _hillis_steele(emitter, take, combine, current, length, axis, reverse):
    step = 1
    while step < length:
        if reverse:  # y[:n-s] += y[s:]
            summed = emitter.step(combine, [take(current, 0, length - step), take(current, step, length)])
            current = _concat(emitter, [summed, take(current, length - step, length)], axis)
        else:        # y[s:] += y[:n-s]
            summed = emitter.step(combine, [take(current, step, length), take(current, 0, length - step)])
            current = _concat(emitter, [take(current, 0, step), summed], axis)
        step *= 2
    return current


def emit_scan(emitter, scan, spec, blob_in: str, facts, where) -> list:
    """Append the portable form of ``scan`` (``spec``) of ``blob_in``; returns [the blob holding the result]."""
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
        _check_rank_and_length(emitter, blob_in, facts.rank, axis, length, where)
    take = _slicer(emitter, axis)
    rank = max(facts.rank, 1)
    short_non_last = axis != rank - 1 and length <= SHORT_AXIS
    if dtype == np.dtype(np.float32) and scan in MATMUL_SCANS and length > 1 and not short_non_last:
        last = [a for a in range(rank) if a != axis] + [axis]  # the scanned axis moved last
        moved = axis != rank - 1
        if moved:
            current = emitter.step("Transpose", [current], axes=last)
        current = _matmul_scan(emitter, current, length, spec.reverse, False)
        if moved:
            current = emitter.step("Transpose", [current], axes=[last.index(a) for a in range(rank)])
    else:
        current = _hillis_steele(emitter, take, PORTABLE_SCAN_OPERATORS[scan], current, length, axis, spec.reverse)
    if spec.exclusive and length > 0:  # shift by one; the slices keep a gradient path even when n == 1
        zero = _zeros_like(emitter, take(current, 0, 1), dtype)
        if spec.reverse:
            current = _concat(emitter, [take(current, 1, length), zero], axis)
        else:
            current = _concat(emitter, [zero, take(current, 0, length - 1)], axis)
    if rank_zero:
        current = emitter.step("Squeeze", [current], dims=[0])
    return [current]
