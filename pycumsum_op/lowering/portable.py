"""Target "portable": a scan from operators every Caffe2 build has (Slice, Add, Concat, Cast, ...).

float32 (Caffe2's MatMul is float-only) takes triangular MatMuls, in as few passes over memory as
standard operators allow (Caffe2's Reshape copies unless in place, so only the input is ever copied,
and the output where the last op would reshape it in place: a predictor's output is never read in place;
MatMul flattens its inputs for free):
- an axis of at most `DIRECT` entries is one MatMul with the n×n triangular matrix (on the right for
  the last axis, on the left for the first);
- a longer axis is blocked: B entries a block (`block_size`: a divisor of n near `BLOCK`, else zero
  padding), one MatMul with the B×B matrix, the block totals (one column, or one row) scanned exclusively
  the same way (one small MatMul, or recursively), and one broadcast Add of those offsets — about 16
  multiply-adds per element and four passes over memory;
- a middle axis is moved first and back by Transposes that keep the last axis in place (about a Copy
  each; one moving the last axis costs ~5 Copies), as is the first axis inside its blocked form.
``exclusive`` and ``reverse`` live in the matrices.
Other dtypes take a Hillis–Steele scan: for s = 1, 2, 4, ... < n, ``y[s:] += y[:n-s]`` as
``Concat(Slice(y, 0:s), Add(Slice(y, s:n), Slice(y, 0:n-s)))`` along the axis — ⌈log2 n⌉ steps,
O(n log n) work, exact for integers (bool and integers are first cast to int64, as torch); on a last axis
longer than `DIRECT` it runs within the blocks and over the block totals of the blocked form. Every op
has a Caffe2 gradient. ``reverse`` mirrors the slices; ``exclusive`` shifts by one with a slice holding
the scan's identity (ConstantFill). The slices are fixed at the rank and scan length n known when lowering, so the
lowered net starts with ``Shape → EQ → Assert``: another rank or length at run time fails with a
message naming the blob, never gives a wrong answer. Other dimensions (the batch size) may change.

A scan's form here is its registry entry's `pycumsum_op.scans.PortableForm` (the combining operator, and
whether it is a sum that takes the MatMul forms), or the `Refused` reason why it has none.
"""
import numpy as np

from ..scans import scan as registered_scan
from .emitter import TENSOR_TYPES
from .errors import LoweringError
from .input_facts import normalized_axis

FLOAT32 = np.dtype(np.float32)
#: Preferred entries per block of the MatMul form: n·BLOCK multiply-adds per level (the fastest block size:
#: benchmarks/RESULTS.md; re-derive with benchmarks/run.py --only-lowering).
BLOCK = 16
#: Block sizes the MatMul form may take: a divisor of the scan length (no padding copies), nearest BLOCK.
BLOCK_SIZES = range(8, 33)
#: An axis at most this long is one MatMul with its triangular matrix (n·length multiply-adds).
DIRECT = 32
#: Block totals (1/BLOCK of the data) at most this many per lane are scanned by one MatMul.
DIRECT_TOTALS = 64


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


def block_size(length: int) -> int:
    """The block size for a scan ``length`` long: its divisor in 8..32 nearest `BLOCK` (no padding), else BLOCK.

    >>> block_size(1024), block_size(1100), block_size(37)
    (16, 20, 16)
    """
    divisors = [size for size in BLOCK_SIZES if length % size == 0]
    return min(divisors, key=lambda size: (abs(size - BLOCK), size)) if divisors else BLOCK


def _reshape(emitter, blob, shape, owned):
    """Reshape to ``shape`` (a list, or a blob holding one); returns (output, the input's old shape).

    In place when the lowering ``owned`` the blob (Caffe2's Reshape copies unless in place), else a copy.
    """
    out, old = blob if owned else emitter.fresh(), emitter.fresh()
    if isinstance(shape, str):
        emitter.op("Reshape", [blob, shape], [out, old])
    else:
        emitter.op("Reshape", [blob], [out, old], shape=list(shape))
    return out, old


def _matrix(emitter, matrix):
    return emitter.step("GivenTensorFill", [], values=matrix.ravel().tolist(), shape=list(matrix.shape))


def _whole_blocks(emitter, blob, axis, rank, length, owned, dtype=FLOAT32):
    """(blob, owned, block size, blocks): ``blob`` padded with zeros along ``axis`` to whole blocks when the
    length has no divisor in `BLOCK_SIZES` (zeros at the end change no (reverse) running sum of the rest)."""
    size = block_size(length)
    blocks = -(-length // size)
    if blocks * size != length:
        zeros = _fill_like(emitter, _slicer(emitter, axis, rank)(blob, 0, blocks * size - length), dtype, 0)
        blob, owned = _concat(emitter, [blob, zeros], axis), True
    return blob, owned, size, blocks


def _last_axis_scan(emitter, blob, rank, length, reverse, exclusive, owned, direct=DIRECT, dtype=FLOAT32):
    """Scan ``blob`` (rank ``rank``) along its last axis, ``length`` long; returns a blob of its shape.

    At most ``direct`` long: one MatMul with the triangular matrix (float32), else Hillis–Steele.
    Longer: the lanes as rows of B-entry blocks (one Reshape, a copy unless ``owned``), each row scanned
    (one MatMul with the B×B matrix, or log2(B) Hillis–Steele steps), the block totals (one column) scanned
    exclusively the same way, one broadcast Add.
    """
    if length <= direct and dtype != FLOAT32:
        return _lane_scan(emitter, blob, rank - 1, rank, length, reverse, exclusive, dtype)
    if length <= direct:  # MatMul's gradient ignores axis_a: other ranks go through a 2-D Reshape
        rows, old = (blob, None) if rank == 2 else _reshape(emitter, blob, [-1, length], owned)
        out = emitter.step("MatMul", [rows, _matrix(emitter, triangular(length, reverse, exclusive))])
        return out if old is None else _reshape(emitter, out, old, owned=True)[0]
    blob, owned, size, blocks = _whole_blocks(emitter, blob, rank - 1, rank, length, owned, dtype)
    rows, old = _reshape(emitter, blob, [-1, size], owned)
    if dtype == FLOAT32:
        within = emitter.step("MatMul", [rows, _matrix(emitter, triangular(size, reverse, exclusive))])
    else:
        within = _lane_scan(emitter, rows, 1, 2, size, reverse, exclusive, dtype)
    edge = 0 if reverse else size - 1
    column = _slicer(emitter, 1, 2)
    totals = column(within, edge, edge + 1)
    if exclusive:  # the block's total is its exclusive sum at the edge plus the edge entry
        totals = emitter.step("Add", [totals, column(rows, edge, edge + 1)])
    totals = _reshape(emitter, totals, [-1, blocks], owned=True)[0]
    offsets = _last_axis_scan(emitter, totals, 2, blocks, reverse, True, owned=True, direct=DIRECT_TOTALS,
                              dtype=dtype)
    # A new blob, not in place: the gradients of Slice and Add read ``within`` as it is at the end of the net.
    scanned = emitter.step("Add", [within, _reshape(emitter, offsets, [-1, 1], owned=True)[0]])
    scanned = _reshape(emitter, scanned, old, owned=True)[0]
    return scanned if blocks * size == length else _slicer(emitter, rank - 1, rank)(scanned, 0, length)


def _first_axis_scan(emitter, blob, rank, length, reverse, exclusive, owned, direct=DIRECT):
    """Scan float32 ``blob`` (rank ``rank``, no empty dimension) along axis 0, ``length`` long.

    At most ``direct`` long: one MatMul, the triangular matrix on the left (MatMul's axis_b flattens the
    rest). Longer: blocks of B entries, (blocks, B, rest) → (B, blocks, rest) by a Transpose that keeps the
    last axis in place (about a Copy), one MatMul with the B×B matrix on the left, the block totals (one
    contiguous row) scanned exclusively the same way, one broadcast Add, and the Transpose back.
    """
    if length <= direct:
        matrix = _matrix(emitter, np.ascontiguousarray(triangular(length, reverse, exclusive).T))
        out = emitter.step("MatMul", [matrix, blob], axis_b=1)
        return out if rank == 2 else _reshape(emitter, out, emitter.step("Shape", [blob]), owned=True)[0]
    blob, owned, size, blocks = _whole_blocks(emitter, blob, 0, rank, length, owned)
    grouped, old = _reshape(emitter, blob, [blocks, size, -1], owned)
    lanes = _reshape(emitter, emitter.step("Transpose", [grouped], axes=[1, 0, 2]), [size, -1], owned=True)[0]
    matrix = _matrix(emitter, np.ascontiguousarray(triangular(size, reverse, exclusive).T))
    within = emitter.step("MatMul", [matrix, lanes])
    edge = 0 if reverse else size - 1
    row = _slicer(emitter, 0, 2)
    totals = row(within, edge, edge + 1)
    if exclusive:  # the block's total is its exclusive sum at the edge plus the edge entry
        totals = emitter.step("Add", [totals, row(lanes, edge, edge + 1)])
    totals = _reshape(emitter, totals, [blocks, -1], owned=True)[0]
    offsets = _first_axis_scan(emitter, totals, 2, blocks, reverse, True, owned=True, direct=DIRECT_TOTALS)
    # A new blob, not in place: the gradients of Slice and Add read ``within`` as it is at the end of the net.
    scanned = emitter.step("Add", [within, _reshape(emitter, offsets, [1, -1], owned=True)[0]])
    scanned = _reshape(emitter, scanned, [size, blocks, -1], owned=True)[0]
    scanned = _reshape(emitter, emitter.step("Transpose", [scanned], axes=[1, 0, 2]), old, owned=True)[0]
    return scanned if blocks * size == length else _slicer(emitter, 0, rank)(scanned, 0, length)


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


def _slicer(emitter, axis, rank):
    """take(blob, start, end): the entries start:end along ``axis`` of a rank-``rank`` blob (starts and ends for
    every dimension: Caffe2's Slice before torch 1.8 misreads shorter ones)."""
    after = rank - axis - 1

    def take(blob, start, end):
        return emitter.step("Slice", [blob], starts=[0] * axis + [start] + [0] * after,
                            ends=[-1] * axis + [end] + [-1] * after)
    return take


def _fill_like(emitter, blob, dtype, value):
    value = float(value) if dtype.kind == "f" else int(value)
    return emitter.step("ConstantFill", [blob], value=value, dtype=TENSOR_TYPES[dtype])


def _concat(emitter, parts, axis):
    out = emitter.fresh()
    emitter.op("Concat", parts, [out, emitter.fresh()], axis=axis)
    return out


def _lane_scan(emitter, blob, axis, rank, length, reverse, exclusive, dtype, combine="Add", identity=0):
    """Hillis–Steele along ``axis`` of a rank-``rank`` blob (``length`` long), then ``exclusive``'s shift
    (the vacated entry holds ``identity``)."""
    take = _slicer(emitter, axis, rank)
    current = _hillis_steele(emitter, take, combine, blob, length, axis, reverse)
    if exclusive and length > 0:  # shift by one; the slices keep a gradient path even when n == 1
        first = _fill_like(emitter, take(current, 0, 1), dtype, identity)
        if reverse:
            current = _concat(emitter, [take(current, 1, length), first], axis)
        else:
            current = _concat(emitter, [first, take(current, 0, length - 1)], axis)
    return current


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


def _matmul_form(emitter, blob, owned, shape, axis, spec):
    """The float32 scan of ``blob`` (``shape`` when lowered, no empty dimension) by triangular MatMuls,
    ``exclusive`` included; ``owned``: the blob is the lowering's own (reshaped in place)."""
    rank, length = len(shape), shape[axis]
    if axis == rank - 1:
        return _last_axis_scan(emitter, blob, rank, length, spec.reverse, spec.exclusive, owned)
    if axis == 0:
        return _first_axis_scan(emitter, blob, rank, length, spec.reverse, spec.exclusive, owned)
    first = [axis] + [a for a in range(rank) if a != axis]
    moved = emitter.step("Transpose", [blob], axes=first)
    scanned = _first_axis_scan(emitter, moved, rank, length, spec.reverse, spec.exclusive, owned=True)
    return emitter.step("Transpose", [scanned], axes=[first.index(a) for a in range(rank)])


def emit_scan(emitter, scan, spec, blob_in: str, facts, where) -> list:
    """Append the portable form of ``scan`` (``spec``) of ``blob_in``; returns [the blob holding the result]."""
    if facts.shape is None or facts.dtype is None:
        missing = " and ".join(name for name, value in (("shape", facts.shape), ("dtype", facts.dtype))
                               if value is None)
        raise LoweringError(
            "{}: target 'portable' needs the {} of its input {!r} (the scan length is fixed when lowering); give "
            "shapes={{{!r}: (...)}} and dtypes={{{!r}: 'float32'}}, an init_net that makes it, or feed the blob "
            "into the workspace before lowering".format(where, missing, blob_in, blob_in, blob_in))
    entry = registered_scan(scan, where)
    form, dtype = entry.portable, entry.result_dtype(spec, facts.dtype)
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
    rank = max(facts.rank, 1)
    # (an empty input takes Hillis–Steele: MKL's sgemm complains about a MatMul with no columns)
    blocked = form.matmul and length > 1 and all(facts.shape)
    if blocked and dtype == FLOAT32:
        current = _matmul_form(emitter, current, current != blob_in, tuple(facts.shape), axis, spec)
    elif blocked and axis == rank - 1:  # log2(B) + log2(n/B) steps on rows of blocks: fewer passes
        current = _last_axis_scan(emitter, current, rank, length, spec.reverse, spec.exclusive, current != blob_in,
                                  dtype=dtype)
    else:
        current = _lane_scan(emitter, current, axis, rank, length, spec.reverse, spec.exclusive, dtype,
                             form.combine, entry.identity)
    if rank_zero:
        current = emitter.step("Squeeze", [current], dims=[0])
    return [current]
