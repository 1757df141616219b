"""Target "portable": a scan from operators every Caffe2 build has (Split, Add, Concat, Reshape, Transpose, Cast,
Tile, ...).

A sum (cumsum) adds the entries one after another, as torch does: one Split of the axis into its entries,
one Add per entry onto the running sum, one Concat. An axis longer than `direct_limit` is split into blocks of
about `BLOCK` entries by a Reshape (another axis than the last: (blocks, B), each slice a contiguous run of
the dimensions after it; the last axis, and a 1-D input as one row: rows of one block, transposed to columns and
back, since a Split of the last axis copies entry by entry): the blocks' totals are summed first, their running
sums (exclusive; blocked again when many) are the blocks' offsets, and each block's running sum starts from its
offset, so every Add is of one slice's shape (Caffe2's broadcast Add onto blocks takes its slow general path).
Only Add combines entries, so ±inf and NaN reach exactly the positions at and after them, as in torch's sequential
sum (a triangular MatMul would multiply them by the zeros of its matrix: 0 × inf = NaN over the whole lane; and
Caffe2's MatMul and FC have no float64). float32 is summed in float64 and cast back, as torch's CPU kernel
accumulates it (``acc_type<float>`` is double): a running sum past float32's range is inf exactly where torch's
is, also when later entries bring it back into range. Float sums start from +0.0, as torch's: no running sum is
-0.0. float64 sums in float64 (Caffe2 has nothing wider), blocks first, so where a running sum passes 1.8e308 and
comes back, torch (left to right) and this order may differ. Integers are exact (bool and integers are first cast
to int64, as torch).

Cost: the Split, the Casts to float64 and back, the Adds (two per entry when blocked: the totals, then the running
sums), the Concat, and on a last axis two Transposes (Caffe2's take about a nanosecond an entry, as long as torch's
whole scan of a last axis): about a dozen passes over memory where torch makes one, so a last axis takes several
times torch's time, while a first or middle axis, where torch's loop strides through memory, takes about as long
as torch's or less (benchmarks/RESULTS.md). Where a slice holds `WIDENED_ALONE_FROM` entries or more, each slice
is cast to float64 on its own after the Split and back before the Concat, which then move 4-byte entries; smaller
inputs are cast once each way (fewer ops).

Gradients: Caffe2 adds the gradient parts of a blob that several ops read with its `Sum` operator, which has no
float64 or int64 before torch 1.8. Lowered there, every float64/int64 blob the form reads twice (a running sum that
is both a result and the next Add's input, a slice both block sums read, an exclusive scan's offsets) is copied by
one Tile and one Split first (TileGradient adds the parts itself), so `AddGradientOperators` over the lowered net
runs on that torch and on every later one; lowered on torch 1.8 or later, the blobs are read twice (no copies).

A scan whose form is not a sum takes a Hillis–Steele scan of its combining operator: for s = 1, 2, 4, ... < n,
``y[s:] = combine(y[s:], y[:n-s])`` as ``Concat(Slice(y, 0:s), combine(Slice(y, s:n), Slice(y, 0:n-s)))`` —
⌈log2 n⌉ steps; empty inputs take it too (nothing to add; Reshape cannot infer the -1 of an empty tensor).
Every op has a Caffe2 gradient. ``reverse`` mirrors the order; ``exclusive`` shifts by one behind the scan's
identity (ConstantFill). The slices are fixed at the rank and scan length n known when lowering, so the
lowered net starts with ``Shape → EQ → Assert``: another rank or length at run time fails with a message
naming the blob, never gives a wrong answer. Other dimensions (the batch size) may change.

A scan's form here is its registry entry's `pycumsum_op.scans.PortableForm` (the combining operator, and
whether it is a sum that takes the blocked form), or the `Refused` reason why it has none.
"""
import numpy as np

from ..scans import scan as registered_scan
from ..torch_versions import has
from .emitter import TENSOR_TYPES
from .errors import LoweringError
from .input_facts import normalized_axis

FLOAT32, FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)
#: The dtypes whose gradient parts Caffe2's `Sum` adds on every torch (before 1.8 it has no float64 or int64).
SUMMED_EVERYWHERE = (FLOAT32, np.dtype(np.int32))
#: Preferred entries per block (re-derive with benchmarks/run.py --only-lowering).
BLOCK = 16
#: Block sizes the blocked form may take off the last axis: a divisor of the scan length (no padding copies),
#: nearest BLOCK. A last axis (rank 1 too) always takes blocks of BLOCK, padded: its blocks are rows transposed to
#: columns and back, and Caffe2's Transpose (MKL's omatcopy) moves rows of 16 entries faster than rows of 18-32
#: (benchmarks/RESULTS.md; re-derive with benchmarks/run.py --only-lowering).
BLOCK_SIZES = range(8, 33)
#: An axis at most this long is summed as it is (one Add per entry); longer ones in blocks ...
DIRECT = 64
#: ... in inputs of `DIRECT_FROM` entries or more; in smaller ones, where each op's own cost outweighs a pass over
#: the entries, at most `DIRECT_SMALL` long (a blocked lane of n entries takes about 2B + n/B Adds, not n; re-derive
#: both with benchmarks/run.py --only-lowering).
DIRECT_FROM = 1 << 16
DIRECT_SMALL = 32
#: Slices of at least this many entries are widened to the accumulating dtype one by one, so that Split and Concat
#: move the result dtype (float32: half the bytes of float64); smaller ones take one Cast of the whole input and one
#: back, two ops where one per slice costs more than it saves (re-derive with benchmarks/run.py --only-lowering).
WIDENED_ALONE_FROM = 8192


def direct_limit(entries: int) -> int:
    """The longest axis summed without blocks in an input of ``entries`` entries.

    >>> direct_limit(1 << 20), direct_limit(640)
    (64, 32)
    """
    return DIRECT if entries >= DIRECT_FROM else DIRECT_SMALL


def block_size(length: int, last_axis: bool) -> int:
    """The block size for a scan ``length`` long: BLOCK on a last axis; elsewhere its divisor in `BLOCK_SIZES`
    nearest `BLOCK` (no padding), else BLOCK.

    >>> block_size(1024, False), block_size(1100, False), block_size(37, False), block_size(1100, True)
    (16, 20, 16, 16)
    """
    if last_axis:
        return BLOCK
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


def _cast(emitter, blob, source, target):
    """``blob`` (of dtype ``source``) as ``target``: itself when they are one dtype, else one Cast."""
    if source == target:
        return blob
    return emitter.step("Cast", [blob], to=TENSOR_TYPES[target], from_type=TENSOR_TYPES[source])


def _shares(emitter, blob, count, axis, dtype):
    """``count`` names of ``blob``'s value (of ``dtype``), for ``count`` ops to read one each.

    Caffe2 adds the gradient parts of a blob that several ops read with its `Sum` operator, which has no float64
    or int64 before torch 1.8: there the copies come from one Tile along ``axis`` and one Split (TileGradient adds
    their gradients itself), and a net lowered there takes gradients on every torch; elsewhere the blob is read
    ``count`` times.
    """
    if dtype in SUMMED_EVERYWHERE or has("caffe2 Sum double"):
        return [blob] * count
    copies = [emitter.fresh() for _ in range(count)]
    emitter.op("Split", [emitter.step("Tile", [blob], tiles=count, axis=axis)], copies, axis=axis)
    return copies


def _fill_beside(emitter, blob, axis, rank, size, dtype, value):
    """``value`` in ``blob``'s shape (read when the net runs) but ``size`` long along ``axis``; ``blob`` is read by
    Shape alone, which takes no gradient."""
    parts = [emitter.step("GivenTensorInt64Fill", [], values=[size], shape=[1])]
    if axis:
        parts.insert(0, emitter.step("Shape", [blob], axes=list(range(axis))))
    if axis < rank - 1:
        parts.append(emitter.step("Shape", [blob], axes=list(range(axis + 1, rank))))
    shape = parts[0] if len(parts) == 1 else _concat(emitter, parts, 0)
    return emitter.step("ConstantFill", [shape], input_as_shape=1, value=_fill_value(dtype, value),
                        dtype=TENSOR_TYPES[dtype])


def _whole_blocks(emitter, blob, axis, rank, length, owned, dtype):
    """(blob, owned, block size, blocks): ``blob`` padded with zeros along ``axis`` to whole blocks of
    `block_size` (zeros at the end change no (reverse) running sum of the rest; the Concat is the one op that reads
    ``blob`` with a gradient)."""
    size = block_size(length, last_axis=axis == rank - 1)
    blocks = -(-length // size)
    if blocks * size != length:
        zeros = _fill_beside(emitter, blob, axis, rank, blocks * size - length, dtype, 0)
        blob, owned = _concat(emitter, [blob, zeros], axis), True
    return blob, owned, size, blocks


def _split_scan(emitter, blob, axis, rank, length, reverse, exclusive, dtype, given):
    """The running sums of ``blob`` (of dtype ``given``) along ``axis``, one Add after another in the order torch
    adds: the ``length`` slices from one Split, each widened to ``dtype``, summed from +0.0, each narrowed back,
    and one Concat (Split and Concat move ``given``: float32, half the bytes of the float64 sums).

    Every slice is summed into the result: Split's gradient drops the slices that get none, so an exclusive
    scan leaves out its last entry before the Split (one Slice).
    """
    if exclusive:
        if length == 1:  # nothing to sum: the shift alone (its slices keep a gradient path)
            return _lane_scan(emitter, blob, axis, rank, length, reverse, exclusive, given)
        take = _slicer(emitter, axis, rank)
        blob = take(blob, 1, length) if reverse else take(blob, 0, length - 1)
    order = [_cast(emitter, part, given, dtype)
             for part in _split(emitter, blob, axis, length - 1 if exclusive else length, reverse)]
    sums = _running_sums(emitter, _fill_like(emitter, order[0], dtype, 0), order, axis, dtype)
    if exclusive:  # the first entry: a zero of its own (a blob read twice would be joined by Sum)
        sums.insert(0, _fill_like(emitter, order[0], dtype, 0))
    return _concat(emitter, _in_place([_cast(emitter, part, dtype, given) for part in sums], reverse), axis)


def _split(emitter, blob, axis, count, reverse):
    """The ``count`` slices of ``blob`` along ``axis`` from one Split, in the order they are added."""
    parts = [emitter.fresh() for _ in range(count)]
    emitter.op("Split", [blob], parts, axis=axis, split=[1] * count)
    return parts[::-1] if reverse else parts


def _in_place(sums, reverse):
    return sums[::-1] if reverse else sums


def _running_sums(emitter, start, order, axis, dtype, kept=True):
    """``start`` + order[0], then each next slice added: the running sums, each for one op to read (`_shares`),
    or, unless ``kept``, the total alone. ``start`` is 0 or an offset: torch's sum starts from +0.0, and
    -0.0 + +0.0 is +0.0, so no running sum is -0.0."""
    sums, carry = [], start
    for index, part in enumerate(order):
        carry = emitter.step("Add", [carry, part])
        if kept and index < len(order) - 1:
            carry, result = _shares(emitter, carry, 2, axis, dtype)
            sums.append(result)
    return sums + [carry]


def _blocked_sums(emitter, grouped, axis, rank, size, reverse, exclusive, dtype, given, offsets_of):
    """The running sums of ``grouped`` (rank ``rank``, of dtype ``given``), whose blocks of ``size`` entries lie
    along ``axis``: one Split into the blocks' slices, each widened to ``dtype``, each block's total summed from
    +0.0, ``offsets_of(totals)`` (their exclusive running sums, shaped like one slice), each block's running sums
    started from its offset and narrowed back, one Concat. Starting from the offset puts it on each entry with
    Adds of one slice's shape (a broadcast Add onto the blocks takes Caffe2's slow general broadcast), in the
    order torch adds."""
    order = [_cast(emitter, part, given, dtype) for part in _split(emitter, grouped, axis, size, reverse)]
    summed = order[:size - 1] if exclusive else order  # the slices the offsets are added to
    shared = [_shares(emitter, part, 2, axis, dtype) for part in summed]
    totals = _running_sums(emitter, _fill_like(emitter, order[0], dtype, 0), [first for first, _ in shared]
                           + order[len(summed):], axis, dtype, kept=False)[-1]
    offsets = offsets_of(totals)
    if exclusive:
        offsets, first = _shares(emitter, offsets, 2, axis, dtype)
    sums = _running_sums(emitter, offsets, [second for _, second in shared], axis, dtype)
    sums = [_cast(emitter, part, dtype, given) for part in ([first] + sums if exclusive else sums)]
    return _concat(emitter, _in_place(sums, reverse), axis)


def _sum_scan(emitter, blob, axis, rank, length, reverse, exclusive, owned, dtype, given, direct):
    """The running sums of ``blob`` (of dtype ``given``, rank ``rank``, no empty dimension) along ``axis``,
    ``length`` long, summed in ``dtype``; returns them as ``given``.

    A last axis: `_last_axis_sums` (rank 1 as one row). Another axis at most ``direct`` long: `_split_scan`.
    Longer: the axis split into (blocks, B) by one Reshape (a copy unless ``owned``; the shape built from the
    blob's own for a middle axis, whose neighbours may change at run time) and summed by `_blocked_sums` (each
    slice a contiguous run of the dimensions after the axis; the block totals summed the same way,
    exclusively, blocked again when many).
    """
    if rank == 1:  # one lane: a row (its blocks' slices along axis 0 would be copied entry by entry)
        row, old = _reshape(emitter, blob, [1, length], owned)
        scanned = _last_axis_sums(emitter, row, 2, length, reverse, exclusive, True, dtype, given, direct)
        return _reshape(emitter, scanned, old, owned=True)[0]
    if axis == rank - 1:
        return _last_axis_sums(emitter, blob, rank, length, reverse, exclusive, owned, dtype, given, direct)
    if length <= direct:
        return _split_scan(emitter, blob, axis, rank, length, reverse, exclusive, dtype, given)
    blob, owned, size, blocks = _whole_blocks(emitter, blob, axis, rank, length, owned, given)
    if axis == 0:
        grouped, old = _reshape(emitter, blob, [blocks, size, -1], owned)
        grouped_rank = 3
    else:
        shape = [emitter.step("Shape", [blob], axes=list(range(axis))),
                 emitter.step("GivenTensorInt64Fill", [], values=[blocks, size], shape=[2]),
                 emitter.step("Shape", [blob], axes=list(range(axis + 1, rank)))]
        grouped, old = _reshape(emitter, blob, _concat(emitter, shape, 0), owned)
        grouped_rank = rank + 1

    def offsets_of(totals):
        return _sum_scan(emitter, totals, axis, grouped_rank, blocks, reverse, True, True, dtype, dtype, direct)
    scanned = _blocked_sums(emitter, grouped, axis + 1, grouped_rank, size, reverse, exclusive, dtype, given,
                            offsets_of)
    scanned = _reshape(emitter, scanned, old, owned=True)[0]
    return scanned if blocks * size == length else _slicer(emitter, axis, rank)(scanned, 0, length)


def _last_axis_sums(emitter, blob, rank, length, reverse, exclusive, owned, dtype, given, direct):
    """The running sums along the last axis: the lanes as rows of one block (B entries; the whole lane when at
    most ``direct`` long), transposed to columns so that the Split takes contiguous rows (a Split of the last
    axis copies entry by entry), summed by `_split_scan` or `_blocked_sums` (the block totals, one row,
    summed exclusively by `_sum_scan`), and the Transpose back. The Transposes move ``given``; the rows are
    summed in ``dtype``."""
    if length <= direct:
        size, blocks = length, 1
        rows, old = (blob, None) if rank == 2 else _reshape(emitter, blob, [-1, length], owned)
    else:
        blob, owned, size, blocks = _whole_blocks(emitter, blob, rank - 1, rank, length, owned, given)
        rows, old = _reshape(emitter, blob, [-1, size], owned)
    columns = emitter.step("Transpose", [rows], axes=[1, 0])
    if blocks == 1:
        scanned = _split_scan(emitter, columns, 0, 2, size, reverse, exclusive, dtype, given)
    else:
        def offsets_of(totals):
            totals = _reshape(emitter, totals, [-1, blocks], owned=True)[0]
            offsets = _sum_scan(emitter, totals, 1, 2, blocks, reverse, True, True, dtype, dtype, direct)
            return _reshape(emitter, offsets, [1, -1], owned=True)[0]
        scanned = _blocked_sums(emitter, columns, 0, 2, size, reverse, exclusive, dtype, given, offsets_of)
    scanned = emitter.step("Transpose", [scanned], axes=[1, 0])
    if old is not None:
        scanned = _reshape(emitter, scanned, old, owned=True)[0]
    return scanned if blocks * size == length else _slicer(emitter, rank - 1, rank)(scanned, 0, length)


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


def _fill_value(dtype, value):
    return float(value) if dtype.kind == "f" else int(value)


def _fill_like(emitter, blob, dtype, value):
    """``value`` in ``blob``'s shape (ConstantFill takes no gradient to its input)."""
    return emitter.step("ConstantFill", [blob], value=_fill_value(dtype, value), dtype=TENSOR_TYPES[dtype])


def _concat(emitter, parts, axis):
    out = emitter.fresh()
    emitter.op("Concat", parts, [out, emitter.fresh()], axis=axis)
    return out


def _lane_scan(emitter, blob, axis, rank, length, reverse, exclusive, dtype, combine="Add", identity=0):
    """Hillis–Steele along ``axis`` of a rank-``rank`` blob (``length`` long), then ``exclusive``'s shift
    (the vacated entry holds ``identity``, in a shape read off the blob's)."""
    take = _slicer(emitter, axis, rank)
    current = _hillis_steele(emitter, take, combine, blob, length, axis, reverse, dtype)
    if exclusive and length > 0:  # shift by one; the slices keep a gradient path even when n == 1
        first = _fill_beside(emitter, current, axis, rank, 1, dtype, identity)
        if reverse:
            current = _concat(emitter, [take(current, 1, length), first], axis)
        else:
            current = _concat(emitter, [first, take(current, 0, length - 1)], axis)
    return current


def _hillis_steele(emitter, take, combine, current, length, axis, reverse, dtype):
    step = 1
    while step < length:
        kept, left, right = _shares(emitter, current, 3, axis, dtype)
        if reverse:  # y[:n-s] += y[s:]
            summed = emitter.step(combine, [take(left, 0, length - step), take(right, step, length)])
            current = _concat(emitter, [summed, take(kept, length - step, length)], axis)
        else:        # y[s:] += y[:n-s]
            summed = emitter.step(combine, [take(left, step, length), take(right, 0, length - step)])
            current = _concat(emitter, [take(kept, 0, step), summed], axis)
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
    accumulate = FLOAT64 if form.blocked and dtype == FLOAT32 else dtype  # as torch's CPU kernel (module doc)
    if form.blocked and length > 0 and all(facts.shape):  # (Reshape cannot infer a -1 of an empty tensor)
        entries = int(np.prod(facts.shape))
        direct = direct_limit(entries)
        per_slice = entries // (length if length <= direct else block_size(length, last_axis=axis == rank - 1))
        given = dtype if per_slice >= WIDENED_ALONE_FROM else accumulate
        current = _cast(emitter, current, dtype, given)
        current = _sum_scan(emitter, current, axis, rank, length, spec.reverse, spec.exclusive, current != blob_in,
                            accumulate, given, direct)
        current = _cast(emitter, current, given, dtype)
    else:
        current = _cast(emitter, _lane_scan(emitter, _cast(emitter, current, dtype, accumulate), axis, rank, length,
                                            spec.reverse, spec.exclusive, accumulate, form.combine, entry.identity),
                        accumulate, dtype)
    if rank_zero:
        current = emitter.step("Squeeze", [current], dims=[0])
    return [current]
