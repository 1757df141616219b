"""The optional accelerator: scan loops compiled by numba (``pip install 'pycumsum_op[fast]'``).

A scan over a non-last axis is, for torch, a strided walk down each lane in turn. Here the
array is seen as (outer, length, inner) around the scan axis and whole rows are combined at
once: an accumulator row of ``inner`` lanes (float64 for floating inputs, int64 for integers,
the dtype torch 1.10's CPU scans accumulate float32/float64/int32/int64 in) takes row after
row, and each row of the result is the accumulator rounded to the output dtype. Every lane
is still combined element by element from its first element to its last, in the order torch
uses, so the results are torch's bit for bit; only the order in which lanes advance differs.

- `scan_rows(src, dst, operation, exclusive, reverse)`: a running sum (``SUM``) or product
  (``PRODUCT``) of 3-D views; ``exclusive`` shifts by one (the identity first), ``reverse``
  walks each lane from its end. ``dst`` may be ``src`` itself (in place). Rows of
  `tuning.COMPILED_NARROW` lanes or `tuning.COMPILED_NARROW_BYTES` bytes go in blocks of whole-row
  loops (`_rows`, as are views with gaps); narrower C-contiguous rows (the last axis among them: rows of
  one lane) four lanes at a time, each lane's running sum in a register (`_chains`: where torch waits on
  one add after another, four chains advance together).
- `extremum_rows(src, values, indices, maximum)`: torch.cummax / torch.cummin (NaN wins and
  stays; ties take the later index), values and int64 indices; rows of 4-7 lanes four lanes at a time.

Nothing here imports numba until a kernel is first needed, so ``import pycumsum_op`` never
pays for it. `enabled()` says whether the accelerator is there: numba importable (the ``fast``
extra) and not turned off by the environment variable ``PYCUMSUM_OP_ACCELERATOR=0``. Compiled
machine code is cached on disk in `cache_directory()` (``$PYCUMSUM_OP_CACHE_DIR``, else
``$XDG_CACHE_HOME/pycumsum_op``, else ``~/.cache/pycumsum_op``), never beside the installed
package, which may be read-only; where no directory can be written, kernels are compiled in
memory for the process.
"""
import os
import threading

import numpy as np

from . import tuning
from .spec import accumulate_dtype

#: The environment variable that turns the accelerator off ("0", "off", "false", "no").
SWITCH = "PYCUMSUM_OP_ACCELERATOR"
#: The environment variable naming the on-disk cache of compiled kernels.
CACHE_VARIABLE = "PYCUMSUM_OP_CACHE_DIR"
SUM, PRODUCT = 0, 1

_OFF = ("0", "off", "false", "no")
_lock = threading.Lock()
_kernels = None
_import_error = None  # None: not tried yet; "": numba imported; else why it did not
_MISSING = "numba is not installed (pip install 'pycumsum_op[fast]')"


def _numba_error() -> str:
    """Why numba does not import ("" when it does): tried once, when a scan first asks. A broken install (e.g.
    one built for another numpy) counts as none, and the scans run without it."""
    global _import_error
    if _import_error is None:
        try:
            import numba  # noqa: F401
        except ModuleNotFoundError as error:
            _import_error = _MISSING if error.name == "numba" else "{}: {}".format(type(error).__name__, error)
        except Exception as error:  # numba raises ImportError, or others when its numpy does not fit
            _import_error = "{}: {}".format(type(error).__name__, error)
        else:
            _import_error = ""
    return _import_error


def installed() -> bool:
    """Whether numba imports."""
    return not _numba_error()


def status() -> str:
    """"on", or why the accelerator is off: the switch, numba missing, or numba's import error."""
    setting = os.environ.get(SWITCH, "1")
    if setting.strip().lower() in _OFF:
        return "off: turned off by {}={}".format(SWITCH, setting)
    error = _numba_error()
    if not error:
        return "on"
    return "off: " + (error if error == _MISSING else "numba failed to import: " + error)


def enabled() -> bool:
    """Whether the compiled paths may run: numba imports and `SWITCH` does not say no."""
    return installed() and os.environ.get(SWITCH, "1").strip().lower() not in _OFF


#: dtype kind -> the accumulator of a sum or product (`spec.accumulate_dtype`).
ACCUMULATORS = {kind: accumulate_dtype(kind + "8") for kind in "fi"}


def cache_directory() -> str:
    """Where compiled kernels are cached (see the module doc)."""
    chosen = os.environ.get(CACHE_VARIABLE)
    if chosen:
        return chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pycumsum_op")


def scan_rows(src: np.ndarray, dst: np.ndarray, operation: int, exclusive: bool, reverse: bool,
              chains: bool) -> None:
    """dst = the running sum or product of src along axis 1 of the 3-D (outer, length, inner) views: by the
    chains (C-contiguous views, lane by lane) or the row loops, as the scan's plan says."""
    outer, length, inner = src.shape
    accumulator = ACCUMULATORS[src.dtype.kind]
    identity = accumulator.type(1 if operation == PRODUCT else 0)
    if chains:
        _compiled().chains[operation, exclusive](src.reshape(-1), dst.reshape(-1), outer, length, inner, identity,
                                                 reverse)
        return
    _compiled().rows[operation, exclusive](src, dst, np.empty(min(inner, tuning.COMPILED_BLOCK), accumulator),
                                           identity, reverse)


def extremum_rows(src: np.ndarray, values: np.ndarray, indices: np.ndarray, maximum: bool, chains: bool) -> None:
    """values, indices = torch.cummax (``maximum``) or torch.cummin of src along axis 1 of the 3-D views: by the
    chains (C-contiguous views) or the row loops, as the scan's plan says."""
    outer, length, inner = src.shape
    if chains:
        _compiled().extremum_chains[maximum](src.reshape(-1), values.reshape(-1), indices.reshape(-1), outer, length,
                                             inner)
        return
    width = min(src.shape[2], tuning.COMPILED_BLOCK)
    _compiled().extremum(src, values, indices, np.empty(width, src.dtype), np.empty(width, np.int64), maximum,
                         tuning.COMPILED_BLOCK)


def _rows(operation, exclusive):
    """The row loops of one ``operation`` and ``exclusive``: lanes in blocks of ``accumulator``'s width
    (`tuning.COMPILED_BLOCK`), each block taken down the rows, every row's lanes added into (multiplied by) the
    accumulator row at once, in the accumulation dtype, and the row of the result written from it (rounded to the
    output's dtype); ``reverse`` walks the rows from the last. Any 3-D views, gaps and all; dst may be src itself.
    Indices are unsigned (numba then checks no negative index), so that LLVM vectorises the inner loop on
    contiguous rows: 0.63-0.94x the time of a call per row on rows of 17-183 lanes, where per-row calls cost
    as much as the adds."""
    def rows(src, dst, accumulator, identity, reverse):
        outer, length, inner = src.shape
        width = accumulator.shape[0]
        for o in range(outer):
            for start in range(0, inner, width):
                first, count = np.uint64(start), np.uint64(min(inner, start + width) - start)
                j = _ZERO
                while j < count:
                    accumulator[j] = identity
                    j += _ONE
                for step in range(length):
                    i = np.uint64(length - 1 - step if reverse else step)
                    j = _ZERO
                    while j < count:
                        before = accumulator[j]
                        total = before * src[o, i, first + j] if operation == PRODUCT else before + src[o, i, first + j]
                        accumulator[j] = total
                        dst[o, i, first + j] = before if exclusive else total
                        j += _ONE
    return rows


#: The row loops and helpers the kernels call: compiled (by `_compiled`) before any kernel is, in place of these
#: Python functions, since numba resolves the functions a compiled function calls among its module's globals.
_HELPERS = ("_row_maximum", "_row_minimum", "_lane_start", "_group_starts", "_takes")
_ZERO, _ONE, _TWO, _THREE = (np.uint64(value) for value in range(4))


def _lane_start(lane, lanes, inner, span, first):
    """Where lane ``lane`` of ``lanes`` (its last one, past the end) starts in the flat (outer, length, inner) array,
    lanes ``span`` elements a slice, ``first`` elements in (where a reversed lane starts)."""
    lane = min(lane, lanes - 1)
    return np.uint64(lane // inner * span + lane % inner + first)


def _group_starts(lane, lanes, inner, span, first):
    """Where lanes ``lane`` to ``lane + 3`` start (`_lane_start`): the four chains of a group."""
    return (_lane_start(lane, lanes, inner, span, first), _lane_start(lane + 1, lanes, inner, span, first),
            _lane_start(lane + 2, lanes, inner, span, first), _lane_start(lane + 3, lanes, inner, span, first))


def _chains(operation, exclusive):
    """The loop of narrow C-contiguous rows (`_narrow`; the last axis among them: rows of one lane), for one
    ``operation`` and ``exclusive``: lanes in fours, each of the four a chain of adds (products) in registers, so
    that four chains advance at once where torch's loop waits on one (an add waits for the one before it: 3-4
    cycles). It takes the C-contiguous arrays flat, with the (outer, length, inner) shape, the ``identity`` in the
    accumulation dtype and ``reverse``; dst may be src itself. Two lanes left over run as a pair (two lanes as a
    group of four, repeating one, measured 0.75-1.06x torch; as a pair 0.51-0.83x), and so do the last two of
    4k + 1 lanes, after a group of three (one lane alone, in a group of four repeating it, took 1.3x torch's time
    for a lane: 5 rows of 22,287 float64 0.69x torch in all, 0.45x for 4, 6 or 7 rows); a group of 3 lanes
    repeats its last lane (the same values, written twice). A single lane (a 1-D scan) is one chain alone: torch's
    forward speed, either way along the lane (a group of four repeating it took 1.4-2.7x that). Four neighbouring
    lanes of one row go from one index, the others at the constant offsets 1, 2, 3, which LLVM takes as one vector
    of four (rows of 4-15 lanes, two random draws: medians 0.81x and 0.88x the time of four separate indices, 0.62x
    at best). No lane is taken twice: in place, a second pass would read what the first wrote."""
    def chains(src, dst, outer, length, inner, identity, reverse):
        lanes, span = outer * inner, length * inner
        first = (length - 1) * inner if reverse else 0
        step = np.uint64(-inner) if reverse else np.uint64(inner)  # indices wrap around modulo 2**64

        def run(count, neighbours, i0, i1, i2, i3):
            """``count`` (1, 2 or 4) lanes' chains from i0, i1, i2, i3, each lane written once; ``neighbours``: four
            lanes side by side, taken from i0 alone at the constant offsets 1, 2, 3, which LLVM makes one vector of
            four. Both are constants where called: numba inlines ``run`` and LLVM drops what they rule out (the
            stores are written out here: through a helper, the last axis measured 3-5 % slower)."""
            a0 = a1 = a2 = a3 = identity
            for _ in range(length):
                if neighbours:
                    i1, i2, i3 = i0 + _ONE, i0 + _TWO, i0 + _THREE
                x0, x1, x2, x3 = src[i0], src[i1], src[i2], src[i3]
                if exclusive:
                    dst[i0] = a0
                    if count > 1:
                        dst[i1] = a1
                    if count > 2:
                        dst[i2], dst[i3] = a2, a3
                if operation == PRODUCT:
                    a0, a1, a2, a3 = a0 * x0, a1 * x1, a2 * x2, a3 * x3
                else:
                    a0, a1, a2, a3 = a0 + x0, a1 + x1, a2 + x2, a3 + x3
                if not exclusive:
                    dst[i0] = a0
                    if count > 1:
                        dst[i1] = a1
                    if count > 2:
                        dst[i2], dst[i3] = a2, a3
                i0 += step
                if not neighbours:
                    i1, i2, i3 = i1 + step, i2 + step, i3 + step

        if lanes == 1:
            i0 = _lane_start(0, 1, inner, span, first)
            run(1, False, i0, i0, i0, i0)
            return
        pair = lanes % 4 == 2 or (lanes % 4 == 1 and lanes > 4)
        grouped = lanes - 2 if pair else lanes
        for lane in range(0, grouped, 4):
            if lane % inner + 3 < inner and lane + 3 < grouped:  # four neighbours in one row
                i0 = _lane_start(lane, grouped, inner, span, first)
                run(4, True, i0, i0, i0, i0)
            else:
                i0, i1, i2, i3 = _group_starts(lane, grouped, inner, span, first)
                run(4, False, i0, i1, i2, i3)
        if pair:
            i0 = _lane_start(lanes - 2, lanes, inner, span, first)
            i1 = _lane_start(lanes - 1, lanes, inner, span, first)
            run(2, False, i0, i1, i1, i1)
    return chains


def _extremum_chains(maximum):
    """cummax (``maximum``) / cummin of rows narrower than `tuning.COMPILED_EXTREMUM_CHAINS_WIDTH` lanes as
    `_chains` takes sums: four lanes at a time, each lane's best value and index in registers, torch's rule
    (`_takes`) in each; C-contiguous arrays flat, with the (outer, length, inner) shape."""
    def chains(src, values, indices, outer, length, inner):
        lanes, span = outer * inner, length * inner
        step = np.uint64(inner)
        for lane in range(0, lanes, 4):
            i0, i1, i2, i3 = _group_starts(lane, lanes, inner, span, 0)
            b0, b1, b2, b3 = src[i0], src[i1], src[i2], src[i3]
            w0 = w1 = w2 = w3 = 0
            for position in range(length):
                x0, x1, x2, x3 = src[i0], src[i1], src[i2], src[i3]
                if _takes(x0, b0, maximum):
                    b0, w0 = x0, position
                if _takes(x1, b1, maximum):
                    b1, w1 = x1, position
                if _takes(x2, b2, maximum):
                    b2, w2 = x2, position
                if _takes(x3, b3, maximum):
                    b3, w3 = x3, position
                values[i0], values[i1], values[i2], values[i3] = b0, b1, b2, b3
                indices[i0], indices[i1], indices[i2], indices[i3] = w0, w1, w2, w3
                i0, i1, i2, i3 = i0 + step, i1 + step, i2 + step, i3 + step
    return chains


def _takes(x, best, maximum):
    """torch 1.10's cummax (``maximum``) / cummin rule: x takes the lead ``if isnan(x) or (not isnan(best) and
    x >= best)`` (``<=`` for cummin): NaN wins and stays, ties take the later index."""
    return x != x or (best == best and (x >= best if maximum else x <= best))


def _extremum(src, values, indices, best, where, maximum, block_width):
    """cummax / cummin in blocks of ``block_width`` lanes, each block taken down the rows by a row loop
    (`_row_maximum`, `_row_minimum`: 0.14-0.63x torch's from 8 lanes on, the element loop they replace
    0.21-1.15x)."""
    outer, length, inner = src.shape
    for o in range(outer):
        for start in range(0, inner, block_width):
            stop = min(inner, start + block_width)
            block_best, block_where = best[:stop - start], where[:stop - start]
            block_best[:] = src[o, 0, start:stop]
            block_where[:] = 0
            for i in range(length):
                row = src[o, i, start:stop]
                if maximum:
                    _row_maximum(block_best, block_where, row, values[o, i, start:stop], indices[o, i, start:stop], i)
                else:
                    _row_minimum(block_best, block_where, row, values[o, i, start:stop], indices[o, i, start:stop], i)


def _row_maximum(best, where, row, values, indices, position):
    """One row of torch 1.10's cummax, lane by lane: ``if isnan(x) or (not isnan(best) and x >= best)`` the
    element at ``position`` wins (NaN wins and stays, ties take the later index)."""
    for j in range(best.shape[0]):
        x = row[j]
        current = best[j]
        if x != x or (current == current and x >= current):
            current = x
            best[j] = x
            where[j] = position
        values[j] = current
        indices[j] = where[j]


def _row_minimum(best, where, row, values, indices, position):
    """One row of torch 1.10's cummin (as `_row_maximum`, with ``x <= best``)."""
    for j in range(best.shape[0]):
        x = row[j]
        current = best[j]
        if x != x or (current == current and x <= current):
            current = x
            best[j] = x
            where[j] = position
        values[j] = current
        indices[j] = where[j]


class _Kernels:
    def __init__(self, rows, chains, extremum, extremum_chains):
        self.rows, self.chains, self.extremum = rows, chains, extremum
        self.extremum_chains = extremum_chains


def _compiled() -> _Kernels:
    """The numba-compiled kernels, made on first use (numba is imported here, once)."""
    global _kernels
    if _kernels is None:
        with _lock:
            if _kernels is None:
                helpers = {name: _jit(globals()[name]) for name in _HELPERS}
                keys = [(operation, exclusive) for operation in (SUM, PRODUCT) for exclusive in (False, True)]
                extremum_chains = {maximum: _jit(_extremum_chains(maximum)) for maximum in (False, True)}
                kernels = _Kernels({key: _jit(_rows(*key)) for key in keys}, {key: _jit(_chains(*key)) for key in keys},
                                   _jit(_extremum), extremum_chains)
                globals().update(helpers)  # before any kernel compiles: they call the helpers
                _kernels = kernels
    return _kernels


def _jit(function):
    """``function`` compiled lazily (per argument types, on first call) without the GIL, its machine code
    cached in `cache_directory()`; in memory only where that cannot be written."""
    import numba
    from numba.core import config

    directory = cache_directory()
    try:
        os.makedirs(directory, exist_ok=True)
        writable = os.access(directory, os.W_OK | os.X_OK)
    except OSError:
        writable = False
    if not writable:
        return numba.njit(nogil=True)(function)
    # numba picks a function's cache directory when caching is enabled (at decoration): config.CACHE_DIR
    # (NUMBA_CACHE_DIR) is set for that moment only, so other numba users in the process keep theirs.
    saved = config.CACHE_DIR
    config.CACHE_DIR = directory
    try:
        return numba.njit(nogil=True, cache=True)(function)
    except RuntimeError:  # numba found no cache locator it can use
        return numba.njit(nogil=True)(function)
    finally:
        config.CACHE_DIR = saved
