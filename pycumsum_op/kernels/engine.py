"""The scan engine: the fastest way to run one scan over numpy arrays, chosen per call.

Every path adds each lane (one 1-D slice along the scan axis) element after element,
left to right, in the accumulation dtype, and rounds once per element to the output
dtype, exactly as torch.cumsum does on CPU. So the paths agree bit for bit with each
other, and with torch for float32, float64, int32 and int64. The paths (`choose_path`):

- ``trivial``: a scan of length 1 is a copy (zeros when exclusive).
- ``numpy``: ``np.add.accumulate`` over flipped/shifted views. The reference path; taken
  for small inputs and for layouts that no (outer, length, inner) view describes.
- ``torch``: ``torch.cumsum(out=)`` from the input's memory straight into the output's:
  last-axis, forward scans that keep a dtype torch accumulates as we do.
- ``lanes``: lanes are copied (cast, reversed, transposed as needed) into a lane-major
  buffer, scanned there by torch.cumsum along contiguous memory, and copied out, one
  block at a time with a carry between blocks. The buffer holds the accumulation dtype,
  or the data's own when whole lanes fit (no carry) and torch accumulates it as we do.
- ``rows``: the same blocks in row-major order, scanned by vectorised numpy adds of one
  row onto the next: for scans along a non-last axis whose rows are wide.

Memory: besides the output, one buffer of at most `BUFFER_ELEMENTS` accumulation-dtype
elements (512 KiB in float64) per thread, plus a carry row. Large inputs are split over
``torch.get_num_threads()`` threads (the same intra-op setting torch uses).

>>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> out = np.empty_like(x)
>>> scan(x, out, axis=1, exclusive=False, reverse=True, accumulate_dtype=np.dtype(np.float64))
>>> out
array([[ 3.,  3.,  2.],
       [12.,  9.,  5.]], dtype=float32)
>>> choose_path(np.zeros((1024, 1024), np.float32), np.zeros((1024, 1024), np.float32), 0, False, False)[0]
'rows'
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

#: Inputs smaller than this take the numpy path (a torch call costs more than it saves).
SMALL_SIZE = 1 << 12
#: Elements in one thread's block buffer.
BUFFER_ELEMENTS = 1 << 16
#: The rows path needs rows of at least this many lanes (a numpy call per row must pay off).
ROWS_MIN_WIDTH = 256
#: Fewest rows per block on the rows path (wider rows are better, but the carry costs a row).
ROWS_MIN_BLOCK = 4
#: Fewest lanes per tile on the lanes path (so that copies use whole cache lines).
LANES_MIN_WIDTH = 16
#: Inputs of at least this size are split over torch.get_num_threads() threads.
PARALLEL_MIN_SIZE = 1 << 19
#: torch.cumsum parallelises by itself over at least this many lanes (ATen's GRAIN_SIZE).
TORCH_GRAIN = 1 << 15
#: dtypes whose torch.cumsum accumulates as we do (float64 for floats, int64 for integers).
TORCH_EXACT_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))

_add = np.add
_copyto = np.copyto
_cumsum = torch.cumsum
_from_numpy = torch.from_numpy


def _along(axis: int, index) -> tuple:
    """An index tuple selecting ``index`` on ``axis`` and everything elsewhere."""
    return (slice(None),) * axis + (index,)


def _as_3d(array: np.ndarray, axis: int):
    """``array`` (not empty) viewed as (outer, length, inner) around ``axis``, or None when only a copy could."""
    length = array.shape[axis]
    inner = 1
    for extent in array.shape[axis + 1:]:
        inner *= extent
    view = array.view()
    try:
        view.shape = (array.size // (length * inner), length, inner)
    except AttributeError:  # numpy refuses shapes that need a copy
        return None
    return view


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides


def choose_path(src: np.ndarray, dst: np.ndarray, axis: int, exclusive: bool, reverse: bool):
    """(path name, src view, dst view, axis) for scanning src into dst; see the module doc.

    When ``reverse``, the views are flipped along the scan axis (numpy path) or along all
    three axes of the 3-D (outer, length, inner) views the ``lanes`` and ``rows`` paths get
    (the ``torch`` path's too), for which the axis is 1.
    """
    if src.ndim == 0:  # a 0-d tensor is a scan of length 1
        src, dst = src.reshape(1), dst.reshape(1)
    if src.shape[axis] == 1:
        return "trivial", src, dst, axis
    src3 = _as_3d(src, axis) if src.size >= SMALL_SIZE else None
    dst3 = None if src3 is None else _as_3d(dst, axis)
    if dst3 is None:
        if reverse:
            src, dst = np.flip(src, axis), np.flip(dst, axis)
        return "numpy", src, dst, axis
    outer, length, inner = src3.shape
    if reverse:  # lanes are independent: flipping all three axes reverses each lane and keeps
        # a contiguous input one contiguous (reversed) run for the copies
        src3, dst3 = src3[::-1, ::-1, ::-1], dst3[::-1, ::-1, ::-1]
    elif (src.dtype == dst.dtype and src.dtype in TORCH_EXACT_DTYPES
          and (inner == 1 or (inner < ROWS_MIN_WIDTH and length * inner <= BUFFER_ELEMENTS))
          and min(src3.strides) >= 0 and min(dst3.strides) >= 0
          and not (np.may_share_memory(src3, dst3) and (exclusive or not _same_view(src3, dst3)))):
        return "torch", src3, dst3, 1
    return ("rows" if inner > 1 and outer * inner >= ROWS_MIN_WIDTH else "lanes"), src3, dst3, 1


def scan(src: np.ndarray, dst: np.ndarray, axis: int, exclusive: bool, reverse: bool,
         accumulate_dtype: np.dtype) -> None:
    """dst = running sum of src along ``axis`` (inclusive or exclusive, forward or reverse).

    src and dst have one shape; dst may be src itself. ``axis`` is normalised (0 <= axis);
    ``accumulate_dtype`` (a numpy dtype) is float64 or int64.
    """
    if src.size:
        path, src, dst, axis = choose_path(src, dst, axis, exclusive, reverse)
        _PATHS[path](src, dst, axis, exclusive, accumulate_dtype)


def _trivial_path(src, dst, axis, exclusive, accumulate_dtype):
    dst[...] = 0 if exclusive else src


def _numpy_path(src, dst, axis, exclusive, accumulate_dtype):
    if exclusive:  # numpy copies the input first when in place
        np.add.accumulate(src[_along(axis, slice(None, -1))], axis, accumulate_dtype,
                          dst[_along(axis, slice(1, None))])
        dst[_along(axis, 0)] = 0
    else:
        np.add.accumulate(src, axis, accumulate_dtype, dst)


def _torch_path(src, dst, axis, exclusive, accumulate_dtype):
    if exclusive:  # src and dst do not overlap here
        dst[:, 0] = 0
        src, dst = src[:, :-1], dst[:, 1:]
    outer, _, inner = src.shape
    if inner == 1:  # lanes are rows: split them, unless torch does
        src, dst = src[:, :, 0], dst[:, :, 0]
    parts = 1 if outer * inner >= TORCH_GRAIN else _thread_count(src.size, outer)
    _run_parallel(_torch_cumsum, [(src[start:stop], dst[start:stop]) for start, stop in _split(outer, parts)])


def _torch_cumsum(pair):
    src, dst = pair
    _cumsum(_from_numpy(src), 1, out=_from_numpy(dst))


def _blocked_path(lane_major):
    """The ``lanes`` (lane_major) or ``rows`` path: tiles of lanes, scanned through a block buffer."""
    def run(src, dst, axis, exclusive, accumulate_dtype):
        outer, length, inner = src.shape
        lanes = outer * inner
        buffer_dtype = accumulate_dtype
        if lane_major:  # whole lanes in the buffer when they fit; few enough that torch stays serial
            width = min(lanes, TORCH_GRAIN // 2, max(LANES_MIN_WIDTH, BUFFER_ELEMENTS // length))
            width = min(width, -(-lanes // _thread_count(src.size, lanes)))
            if width * length <= BUFFER_ELEMENTS and src.dtype == dst.dtype and src.dtype in TORCH_EXACT_DTYPES:
                buffer_dtype = src.dtype  # no carry between blocks: torch accumulates as we do
        else:  # rows as wide as the buffer allows; one thread (threads would fight for the GIL per row)
            width = min(lanes, BUFFER_ELEMENTS // min(length, ROWS_MIN_BLOCK))
        if width >= inner:
            step = width // inner
            tiles = [(np.s_[start:start + step], np.s_[:]) for start in range(0, outer, step)]
            width = step * inner
        else:
            tiles = [(np.s_[o:o + 1], np.s_[start:start + width]) for o in range(outer)
                     for start in range(0, inner, width)]
        threads = _thread_count(src.size, len(tiles)) if lane_major else 1
        groups = [[(src[o, :, i], dst[o, :, i]) for o, i in tiles[start:stop]]
                  for start, stop in _split(len(tiles), threads)]
        size = min(BUFFER_ELEMENTS, width * length)
        _run_parallel(lambda group: _scan_tiles(group, exclusive, np.empty(size, buffer_dtype), lane_major), groups)
    return run


def _scan_tiles(tiles, exclusive, buffer, lane_major):
    """Scan each (src, dst) tile (outer, length, inner) through ``buffer``, one block at a time.

    Blocks of the length axis are copied in, scanned (torch.cumsum along contiguous lanes, or
    numpy adds of each row onto the next), and copied out shifted by one when exclusive; the
    last row of a block is the carry added to the first row of the next.
    """
    for src, dst in tiles:
        outer, length, inner = src.shape
        block = max(1, min(length, buffer.size // (outer * inner)))
        used = buffer[:outer * block * inner]
        if lane_major:  # lanes contiguous: buffer[o, i, l], seen as (o, l, i)
            view = used.reshape(outer, inner, block).transpose(0, 2, 1)
            tensor = _from_numpy(view)
        else:  # rows contiguous: buffer[l, o, i], seen as (o, l, i)
            rows = used.reshape(block, outer * inner)
            view = rows.reshape(block, outer, inner).transpose(1, 0, 2)
            rows = list(rows)
        carry = None
        for start in range(0, length, block):
            stop = min(length, start + block)
            count = stop - start
            _copyto(view[:, :count], src[:, start:stop], casting="unsafe")
            if carry is not None:
                _add(view[:, 0], carry, view[:, 0])
            if lane_major:
                part = tensor[:, :count]
                _cumsum(part, 1, out=part)
            else:
                for previous, row in zip(rows[:count - 1], rows[1:count]):
                    _add(previous, row, row)
            if exclusive:
                dst[:, start] = 0 if carry is None else carry
                _copyto(dst[:, start + 1:stop], view[:, :count - 1], casting="unsafe")
            else:
                _copyto(dst[:, start:stop], view[:, :count], casting="unsafe")
            if stop < length:
                carry = view[:, count - 1].copy()


_PATHS = {
    "trivial": _trivial_path,
    "numpy": _numpy_path,
    "torch": _torch_path,
    "lanes": _blocked_path(lane_major=True),
    "rows": _blocked_path(lane_major=False),
}


def _split(count: int, parts: int):
    """``parts`` contiguous (start, stop) ranges covering range(count), sizes within one of each other."""
    bounds = [count * part // parts for part in range(parts + 1)]
    return [(bounds[part], bounds[part + 1]) for part in range(parts) if bounds[part] < bounds[part + 1]]


def _thread_count(size: int, pieces: int) -> int:
    """How many threads a scan of ``size`` elements in ``pieces`` independent pieces should use."""
    if size < PARALLEL_MIN_SIZE:
        return 1
    return max(1, min(pieces, torch.get_num_threads()))


_pool = None
_pool_pid = None
_pool_workers = 0
_pool_lock = threading.Lock()


def _executor(workers: int) -> ThreadPoolExecutor:
    """The shared pool of at least ``workers`` threads (rebuilt after a fork: the child has no threads)."""
    global _pool, _pool_pid, _pool_workers
    with _pool_lock:
        if _pool_pid != os.getpid() or _pool_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pycumsum")
            _pool_pid, _pool_workers = os.getpid(), workers
        return _pool


def _run_parallel(work, groups) -> None:
    """work(group) for every group: the first in this thread, the others on the pool, all finished on return."""
    if len(groups) == 1:
        work(groups[0])
        return
    futures = [_executor(len(groups) - 1).submit(work, group) for group in groups[1:]]
    try:
        work(groups[0])
    finally:
        for future in futures:
            future.result()
