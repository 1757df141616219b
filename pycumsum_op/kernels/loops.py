"""The accelerator's loops, compiled by numba: `compiled` imports this module on first use (it imports numba).

Each loop combines every lane (one 1-D slice along the scan axis of the (outer, length, inner) view) element by
element from its first element to its last, in the accumulation dtype, and rounds each result once to the
output's dtype: torch 1.10's CPU order, so torch's bits. Only the order in which lanes advance differs:

- `sum_rows`: whole rows at once, lanes in blocks of the accumulator row's width, each row of the input added
  into (multiplied into, ``product``) the accumulator row and the row of the result written from it: LLVM
  vectorises the inner loop on contiguous rows. Any 3-D views, gaps and all.
- `sum_chains`: C-contiguous narrow rows (the last axis among them: rows of one lane) four lanes at a time, each
  lane's running sum a chain of adds in a register, so that four chains advance where torch waits on one; four
  neighbouring lanes of one row go from one index at the offsets 1, 2, 3 (one vector load); two lanes left over
  (also the last two of 4k + 1) run as a pair, one lane alone as one chain; a group of three repeats its last
  lane (the same values written twice). No lane is taken twice: in place, a second pass would read what the
  first wrote.
- `extremum_rows` / `extremum_chains`: torch.cummax (``maximum``) / torch.cummin with their int64 indices, by rows
  or four lanes at a time, torch's rule (`spec.takes_lead`) in each lane.

Flags are arguments (``product``, ``exclusive``, ``reverse``, ``maximum``): each is loop-invariant, and LLVM
takes the branch out of the loops. Indices are computed in signed arithmetic and every index used is proven in
range by the loop bounds; those the inner loops read are cast to unsigned (numba then checks no negative index,
and LLVM vectorises the loop). `tests/test_kernel_bounds.py` runs every loop under ``NUMBA_BOUNDSCHECK=1``.
"""
import numba
import numpy as np
from numba.core import config

from .spec import takes_lead


_ZERO, _ONE = np.uint64(0), np.uint64(1)


def _jit(function=None, **options):
    """``function`` compiled lazily (per argument types, on first call) without the GIL, with numba's ``options``,
    cached in numba's ``config.CACHE_DIR`` as `compiled` sets it while it imports this module (in memory when that
    is empty or numba finds no cache locator)."""
    if function is None:
        return lambda function: _jit(function, **options)
    if config.CACHE_DIR:
        try:
            return numba.njit(nogil=True, cache=True, **options)(function)
        except RuntimeError:  # numba found no cache locator it can use
            pass
    return numba.njit(nogil=True, **options)(function)


@_jit
def sum_rows(src, dst, accumulator, identity, product, exclusive, reverse):
    """dst = the running sum (``product``: product) of src along axis 1 of the 3-D views, shifted by one with
    ``identity`` first when ``exclusive``, each lane from its end when ``reverse``; dst may be src itself. The row
    body is written here, not called per row: a call per row costs as much as the adds of a narrow row. Lanes
    start..start + count of a row are indexed unsigned (0 <= start + j < inner), and the flags are loop-invariant,
    so LLVM takes their tests out of the inner loop and vectorises it."""
    outer, length, inner = src.shape
    width = accumulator.shape[0]
    for o in range(outer):
        for first in range(0, inner, width):
            start, count = np.uint64(first), np.uint64(min(inner, first + width) - first)
            accumulator[:count] = identity
            for step in range(length):
                i = length - 1 - step if reverse else step
                j = _ZERO
                while j < count:
                    before = accumulator[j]
                    total = before * src[o, i, start + j] if product else before + src[o, i, start + j]
                    accumulator[j] = total
                    dst[o, i, start + j] = before if exclusive else total
                    j += _ONE


@_jit
def _lane_start(lane, lanes, inner, span, first):
    """Where lane ``lane`` of ``lanes`` (its last one, past the end) starts in the flat (outer, length, inner)
    array, lanes ``span`` elements a slice, ``first`` elements in (where a reversed lane starts)."""
    lane = min(lane, lanes - 1)
    return lane // inner * span + lane % inner + first


@_jit
def _chain(src, dst, length, step, identity, product, exclusive, count, neighbours, i0, i1, i2, i3):
    """``count`` (1, 2 or 4) lanes' chains from the flat indices i0..i3, ``step`` apart along a lane (negative when
    reversed); ``neighbours``: four lanes side by side, read from i0 at the offsets 1, 2, 3. Every index read
    or written is a lane's element: >= 0 and < the array's size."""
    a0 = a1 = a2 = a3 = identity
    for _ in range(length):
        if neighbours:
            i1, i2, i3 = i0 + 1, i0 + 2, i0 + 3
        k0, k1, k2, k3 = np.uint64(i0), np.uint64(i1), np.uint64(i2), np.uint64(i3)
        x0, x1, x2, x3 = src[k0], src[k1], src[k2], src[k3]
        if exclusive:
            dst[k0] = a0
            if count > 1:
                dst[k1] = a1
            if count > 2:
                dst[k2], dst[k3] = a2, a3
        if product:
            a0, a1, a2, a3 = a0 * x0, a1 * x1, a2 * x2, a3 * x3
        else:
            a0, a1, a2, a3 = a0 + x0, a1 + x1, a2 + x2, a3 + x3
        if not exclusive:
            dst[k0] = a0
            if count > 1:
                dst[k1] = a1
            if count > 2:
                dst[k2], dst[k3] = a2, a3
        i0 += step
        if not neighbours:
            i1, i2, i3 = i1 + step, i2 + step, i3 + step


@_jit
def sum_chains(src, dst, outer, length, inner, identity, product, exclusive, reverse):
    """The running sum (product) of C-contiguous arrays taken flat, with their (outer, length, inner) shape, four
    lanes at a time (see the module doc); dst may be src itself. Each flag reaches `_lanes` as a constant, so
    that the chains' loops hold no test of it."""
    if product and exclusive:
        _lanes(src, dst, outer, length, inner, identity, True, True, reverse)
    elif product:
        _lanes(src, dst, outer, length, inner, identity, True, False, reverse)
    elif exclusive:
        _lanes(src, dst, outer, length, inner, identity, False, True, reverse)
    else:
        _lanes(src, dst, outer, length, inner, identity, False, False, reverse)


@_jit
def _lanes(src, dst, outer, length, inner, identity, product, exclusive, reverse):
    """`sum_chains` with ``product`` and ``exclusive`` constants: groups of four, a pair, one lane alone."""
    lanes, span = outer * inner, length * inner
    first = (length - 1) * inner if reverse else 0
    step = -inner if reverse else inner
    if lanes == 1:
        i0 = _lane_start(0, 1, inner, span, first)
        _chain(src, dst, length, step, identity, product, exclusive, 1, False, i0, i0, i0, i0)
        return
    pair = lanes % 4 == 2 or (lanes % 4 == 1 and lanes > 4)
    grouped = lanes - 2 if pair else lanes
    for lane in range(0, grouped, 4):
        i0 = _lane_start(lane, grouped, inner, span, first)
        if lane % inner + 3 < inner and lane + 3 < grouped:  # four neighbours in one row
            _chain(src, dst, length, step, identity, product, exclusive, 4, True, i0, i0, i0, i0)
        else:
            _chain(src, dst, length, step, identity, product, exclusive, 4, False, i0,
                   _lane_start(lane + 1, grouped, inner, span, first), _lane_start(lane + 2, grouped, inner, span, first),
                   _lane_start(lane + 3, grouped, inner, span, first))
    if pair:
        i0 = _lane_start(lanes - 2, lanes, inner, span, first)
        i1 = _lane_start(lanes - 1, lanes, inner, span, first)
        _chain(src, dst, length, step, identity, product, exclusive, 2, False, i0, i1, i1, i1)


#: torch's cummax / cummin rule (`spec.takes_lead`), compiled.
takes = _jit(takes_lead)


@_jit
def extremum_chains(src, values, indices, outer, length, inner, maximum):
    """cummax (``maximum``) / cummin of C-contiguous arrays taken flat, with their (outer, length, inner) shape, four
    lanes at a time, each lane's best value and index in registers (a last group of fewer repeats its last lane);
    ``maximum`` reaches `_extremum_lanes` as a constant."""
    if maximum:
        _extremum_lanes(src, values, indices, outer, length, inner, True)
    else:
        _extremum_lanes(src, values, indices, outer, length, inner, False)


@_jit
def _extremum_lanes(src, values, indices, outer, length, inner, maximum):
    """`extremum_chains` with ``maximum`` a constant."""
    lanes, span = outer * inner, length * inner
    for lane in range(0, lanes, 4):
        i0, i1 = _lane_start(lane, lanes, inner, span, 0), _lane_start(lane + 1, lanes, inner, span, 0)
        i2, i3 = _lane_start(lane + 2, lanes, inner, span, 0), _lane_start(lane + 3, lanes, inner, span, 0)
        b0, b1, b2, b3 = src[i0], src[i1], src[i2], src[i3]
        w0 = w1 = w2 = w3 = 0
        for position in range(length):  # every index is a lane's element: >= 0 and < the array's size
            k0, k1, k2, k3 = np.uint64(i0), np.uint64(i1), np.uint64(i2), np.uint64(i3)
            x0, x1, x2, x3 = src[k0], src[k1], src[k2], src[k3]
            if takes(x0, b0, maximum):
                b0, w0 = x0, position
            if takes(x1, b1, maximum):
                b1, w1 = x1, position
            if takes(x2, b2, maximum):
                b2, w2 = x2, position
            if takes(x3, b3, maximum):
                b3, w3 = x3, position
            values[k0], values[k1], values[k2], values[k3] = b0, b1, b2, b3
            indices[k0], indices[k1], indices[k2], indices[k3] = w0, w1, w2, w3
            i0, i1, i2, i3 = i0 + inner, i1 + inner, i2 + inner, i3 + inner


@_jit
def extremum_rows(src, values, indices, best, where, maximum):
    """cummax (``maximum``) / cummin of 3-D views, lanes in blocks of ``best``'s width, each block taken down the
    rows, every row compared with the best-value row at once (``where``: the winners' positions); the flag is
    tested outside the row loops."""
    outer, length, inner = src.shape
    width = best.shape[0]
    for o in range(outer):
        for first in range(0, inner, width):
            count = min(inner, first + width) - first
            for j in range(count):
                best[j] = src[o, 0, first + j]
                where[j] = 0
            for i in range(length):
                if maximum:
                    _extremum_row(src[o, i, first:first + count], values[o, i, first:first + count],
                                  indices[o, i, first:first + count], best, where, i, True)
                else:
                    _extremum_row(src[o, i, first:first + count], values[o, i, first:first + count],
                                  indices[o, i, first:first + count], best, where, i, False)


@_jit
def _extremum_row(row, values, indices, best, where, position, maximum):
    """One row of cummax / cummin by torch's rule (`takes`), ``maximum`` as the caller passes it."""
    for j in range(row.shape[0]):
        x, current = row[j], best[j]
        if takes(x, current, maximum):
            current = x
            best[j] = x
            where[j] = position
        values[j] = current
        indices[j] = where[j]
