"""The scan engine: the fastest way to run one scan over numpy arrays, chosen per call.

Every path adds each lane (one 1-D slice along the scan axis) element after element,
left to right, in the accumulation dtype, and rounds once per element to the output
dtype, exactly as torch.cumsum does on CPU. So the paths agree bit for bit with each
other, and with torch for float32, float64, int32 and int64. The array is seen as
(outer, length, inner) around the scan axis; the paths (`choose_path`):

- ``trivial``: a scan of length 1 is a copy (zeros when exclusive).
- ``numpy``: ``np.add.accumulate`` over flipped/shifted views. The reference path; taken
  for small inputs and for layouts that no (outer, length, inner) view describes.
- ``torch``: ``torch.cumsum(out=)`` from the input's memory straight into the output's:
  forward scans that keep a dtype torch accumulates as we do, wherever torch's own
  strided loop stays in cache (`_torch_strided_slow`: the last axis, and lanes short
  enough for the cache sets their stride maps them to). Split over our threads where torch would run it on one
  (torch parallelises over lanes only from ``TORCH_GRAIN`` lanes per thread on).
- ``lanes``: cache-sized blocks of (a few outer slices) x (some rows of the scan axis)
  x (inner lanes) are copied (cast, reversed as needed) into a buffer of the same layout,
  scanned there in place by torch.cumsum, and copied out, with a carry row between
  blocks. The buffer holds the accumulation dtype, or the data's own when whole lanes
  fit (no carry) and torch accumulates it as we do. Reverse and exclusive-in-place scans
  (the backward of every forward), dtype changes, and lanes torch's loop would miss the
  cache on (it reads a lane's lines again for each neighbouring lane).
- ``rows``: the same blocks in float64, scanned by vectorised numpy adds of one row onto
  the next: where torch's loop misses the cache and rows are wide (or their stride is
  aliased, which the buffer would keep).
- ``compiled``: with the accelerator (`compiled`, the ``fast`` extra) every scan off the last
  axis that would take ``lanes`` or ``rows``, and rows of `ROWS_MIN_WIDTH` lanes or more: its
  compiled loop adds whole rows into a row of float64 (int64) accumulators, reading the input once.
  The last axis keeps torch's call and ``lanes`` (a lane is one add chain either way; the compiled
  loop measured 4.7-12.6x torch there), and so do narrower rows whose lanes torch's strided loop keeps
  in cache (thread CPU time, compiled / torch: 0.60-0.80x from 788 lanes on, 0.87-1.79x at 2-341).

Memory: besides the output, one buffer of at most `BUFFER_ELEMENTS` accumulation-dtype
elements (512 KiB in float64) per thread, plus a carry row. The ``torch`` and ``lanes`` paths
split inputs of `PARALLEL_MIN_SIZE` elements or more over ``torch.get_num_threads()`` threads
(the same intra-op setting torch uses), by whole outer slices or by runs of lanes at least
`SPLIT_MIN_BYTES` wide, while the other processes leave `MIN_FREE_CORES` cores free
(`free_cores`: /proc/stat's counters less this process's own CPU time, so its own scans never
count against it); on a shared pool that a fork or a larger thread count replaces (the replaced
pool is shut down). The ``rows`` path runs on the calling thread: it holds the GIL between
numpy's row adds, and measured no faster on two.

>>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> out = np.empty_like(x)
>>> scan(x, out, axis=1, exclusive=False, reverse=True, accumulate_dtype=np.dtype(np.float64))
>>> out
array([[ 3.,  3.,  2.],
       [12.,  9.,  5.]], dtype=float32)
>>> choose_path(np.zeros((1024, 1024), np.float32), np.zeros((1024, 1024), np.float32), 1, False, False)[0]
'torch'
"""
import functools
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from . import compiled
from .flagged import along

#: Inputs smaller than this take the numpy path (a torch call costs more than it saves).
SMALL_SIZE = 1 << 12
#: Elements in one thread's block buffer.
BUFFER_ELEMENTS = 1 << 16
#: Where torch's loop is slow, rows of at least this many lanes take the rows path (a numpy call
#: per row pays off); with the accelerator, they take its loop wherever torch's would run ...
ROWS_MIN_WIDTH = 512
#: ... and so do rows of at least this many whose byte stride is a multiple of `ALIASED_STRIDE`
#: (torch's strided loop then maps a lane to few cache sets and misses: 4-7 ns an element, not 1.5).
ROWS_MIN_ALIASED_WIDTH = 128
ALIASED_STRIDE = 1024
#: A model of the cache torch's strided loop runs in (L1: 64-byte lines, 64 sets of 8 ways). The
#: loop sweeps one lane, then its neighbour, which reads the same lines again: fast only while one
#: lane's lines stay cached. A stride that is a multiple of a line maps them to fewer sets.
CACHE_LINE = 64
L1_SETS = 64
L1_WAYS = 8
#: Rows narrower than a line share lines between lanes; the sweeps stream from memory once the
#: lines of a lane sweep no longer fit in this much cache (an L3 share).
STREAM_CACHE_BYTES = 1 << 23
#: Fewest rows per block on the blocked paths (wider rows are better, but the carry costs a row).
ROWS_MIN_BLOCK = 4
#: Narrowest run of lanes (bytes of a row) split off for a thread: narrower runs make strided copies of short
#: pieces of rows, and threads writing neighbouring lanes share cache lines (measured 1.2-1.4x slower than one
#: thread with 16- and 64-byte runs).
SPLIT_MIN_BYTES = 1024
#: A thread split cuts the work into this many chunks a thread; threads take the next chunk free,
#: so a worker the OS schedules late costs little (the caller takes its chunks).
CHUNKS_PER_THREAD = 2
#: Inputs of at least this size are split over torch.get_num_threads() threads: handing a chunk to a pool
#: worker and back costs ~100 us on the 2-core VM this was measured on (a sleeping vCPU is woken). In a tight
#: loop a split measured 0.95x one thread at 256K elements, 0.84-0.96x at 512K, 0.64-0.91x at 1-2M; between
#: other work (the benchmark's rotation, torch's OpenMP threads still spinning) 0.84-1.46x at 0.6-1.7M and
#: 0.70-1.13x at 2-4M: a split is left to inputs of about 2 ms of work or more ...
PARALLEL_MIN_SIZE = 1 << 21
#: ... while the other processes leave at least this many cores free (the caller's and most of another): on
#: busy cores the OS preempts a helper thread mid-chunk for a whole time slice (milliseconds) and the caller
#: waits for it (measured 9.8x slower at load 5-8).
MIN_FREE_CORES = 1.5
#: `free_cores` reads the CPU counters again after this many seconds (their unit, a clock tick, is 10 ms).
GATE_INTERVAL = 0.25
#: torch.cumsum parallelises by itself over more than this many lanes (ATen's GRAIN_SIZE).
TORCH_GRAIN = 1 << 15
#: dtypes whose torch.cumsum accumulates as we do (float64 for floats, int64 for integers).
TORCH_EXACT_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))

_CORES = os.cpu_count() or 1  # os.cpu_count() reads /sys on every call
_add = np.add
_copyto = np.copyto
_cumsum = torch.cumsum
_from_numpy = torch.from_numpy


@functools.lru_cache(maxsize=512)
def _shape_3d(shape: tuple, axis: int) -> tuple:
    """(outer, length, inner) around ``axis`` of ``shape``."""
    inner = 1
    for extent in shape[axis + 1:]:
        inner *= extent
    outer = 1
    for extent in shape[:axis]:
        outer *= extent
    return outer, shape[axis], inner


def _as_3d(array: np.ndarray, shape: tuple):
    """``array`` viewed with the 3-D ``shape``, or None when only a copy could."""
    if array.flags.c_contiguous:  # a view for sure, and reshape is the cheaper call
        return array.reshape(shape)
    view = array.view()
    try:
        view.shape = shape
    except AttributeError:  # numpy refuses shapes that need a copy
        return None
    return view


def _same_view(a: np.ndarray, b: np.ndarray) -> bool:
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides


def _rows_win(inner: int, itemsize: int) -> bool:
    """Whether numpy's row adds pay off: wide rows, or rows with an aliased stride (the buffer has it too)."""
    return inner >= ROWS_MIN_WIDTH or (inner >= ROWS_MIN_ALIASED_WIDTH and inner * itemsize % ALIASED_STRIDE == 0)


def _torch_strided_slow(length: int, inner: int, itemsize: int) -> bool:
    """Whether torch's strided loop misses the cache on lanes of ``length`` elements ``inner`` apart."""
    if inner == 1:
        return False
    stride = inner * itemsize
    if stride < CACHE_LINE:
        return length * stride > STREAM_CACHE_BYTES
    aliasing = math.gcd(stride // CACHE_LINE, L1_SETS) if stride % CACHE_LINE == 0 else 1
    lines = L1_SETS * L1_WAYS // aliasing
    # an aliased stride also maps the output's lines to the same few sets: half of them for the input
    return length > (lines // 2 if aliasing > 1 else lines)


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
    in_place = src is dst
    src3 = _as_3d(src, _shape_3d(src.shape, axis)) if src.size >= SMALL_SIZE else None
    dst3 = src3 if in_place or src3 is None else _as_3d(dst, src3.shape)
    if dst3 is None:
        if reverse:
            src, dst = np.flip(src, axis), np.flip(dst, axis)
        return "numpy", src, dst, axis
    _, length, inner = src3.shape
    slow = _torch_strided_slow(length, inner, src.itemsize)
    accelerated = inner > 1 and compiled.enabled() and compiled.accepts(src, dst)
    if reverse:  # lanes are independent: flipping all three axes reverses each lane and keeps
        # a contiguous input one contiguous (reversed) run for the copies
        src3, dst3 = src3[::-1, ::-1, ::-1], dst3[::-1, ::-1, ::-1]
    elif (not slow and not (accelerated and inner >= ROWS_MIN_WIDTH) and src.dtype == dst.dtype
          and src.dtype in TORCH_EXACT_DTYPES and _torch_may_write(src3, dst3, exclusive, in_place)):
        return "torch", src3, dst3, 1
    if accelerated:
        path = "compiled"
    else:
        path = "rows" if slow and _rows_win(inner, src.itemsize) else "lanes"
    return path, src3, dst3, 1


def compiled_views(axis: int, src: np.ndarray, dst: np.ndarray, *others: np.ndarray):
    """3-D (outer, length, inner) views of src, dst and ``others`` around ``axis`` for the accelerator's row loops
    (`compiled`), or None where they do not win or do not apply: small inputs, the last axis, lanes torch's
    strided loop keeps in cache, the accelerator off, dtypes it does not take (src -> dst), layouts no such
    view describes. The scan family's kernels use it."""
    if src.ndim == 0 or src.size < SMALL_SIZE:
        return None
    shape = _shape_3d(src.shape, axis)
    wins = shape[2] >= ROWS_MIN_WIDTH or (shape[2] > 1 and _torch_strided_slow(shape[1], shape[2], src.itemsize))
    if not (wins and compiled.enabled() and compiled.accepts(src, dst)):
        return None
    views = tuple(_as_3d(array, shape) for array in (src, dst) + others)
    return None if any(view is None for view in views) else views


def direct_torch(shape: tuple, dtype: np.dtype, axis: int) -> bool:
    """Whether an inclusive forward scan of a C-contiguous ``shape`` / ``dtype`` array into another one, of
    the same dtype and apart, is always the ``torch`` path's single call, `torch_scan` (whatever the load: no
    thread split): a caller that knows its arrays skips `choose_path` and the views it makes.

    >>> direct_torch((69248,), np.dtype(np.float32), 0), direct_torch((1024, 1024), np.dtype(np.float32), 0)
    (True, False)
    """
    if not shape:  # 0-d: the trivial path
        return False
    outer, length, inner = _shape_3d(shape, axis)
    size = outer * length * inner
    return (size >= SMALL_SIZE and length > 1 and dtype in TORCH_EXACT_DTYPES
            and not _torch_strided_slow(length, inner, dtype.itemsize)
            and not (inner >= ROWS_MIN_WIDTH and dtype in compiled.DTYPES and compiled.enabled())
            and (size < PARALLEL_MIN_SIZE or outer * inner < 2))


def torch_scan(src: torch.Tensor, dst: torch.Tensor, axis: int) -> None:
    """dst = torch.cumsum(src, axis): the ``torch`` path's call, on tensors viewing the memory of arrays
    `direct_torch` accepts (a caller holding tensors, such as the Caffe2 op, skips numpy)."""
    _cumsum(src, axis, out=dst)


def _torch_may_write(src3, dst3, exclusive, in_place):
    """Whether torch.cumsum may read src3 and write dst3: positive strides (torch has no others), and
    apart, or one view scanned in place (not shifted)."""
    if not (src3.flags.c_contiguous and dst3.flags.c_contiguous) and min(src3.strides + dst3.strides) < 0:
        return False
    if in_place or np.may_share_memory(src3, dst3):
        return not exclusive and (in_place or _same_view(src3, dst3))
    return True


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
        np.add.accumulate(src[along(axis, slice(None, -1))], axis, accumulate_dtype,
                          dst[along(axis, slice(1, None))])
        dst[along(axis, 0)] = 0
    else:
        np.add.accumulate(src, axis, accumulate_dtype, dst)


def _compiled_path(src, dst, axis, exclusive, accumulate_dtype):
    reverse = src.strides[1] < 0  # a reversed scan's views are flipped: the kernel walks the lanes back
    if reverse:
        src, dst = src[::-1, ::-1, ::-1], dst[::-1, ::-1, ::-1]
    outer, _, inner = src.shape
    threads = _thread_count(src.size, outer * inner)
    pieces = _lane_slices(outer, inner, src.itemsize, threads) if threads > 1 else ()
    if len(pieces) < 2:
        compiled.scan_rows(src, dst, compiled.SUM, exclusive, reverse)
    else:
        def worker():
            return lambda pair: compiled.scan_rows(pair[0], pair[1], compiled.SUM, exclusive, reverse)
        _run_parallel(worker, [(src[o, :, i], dst[o, :, i]) for o, i in pieces], threads)


def _torch_threads(lanes: int) -> int:
    """How many threads torch.cumsum itself runs over ``lanes`` lanes (ATen's parallel_for rule)."""
    return 1 if lanes <= TORCH_GRAIN else min(torch.get_num_threads(), -(-lanes // TORCH_GRAIN))


def _torch_path(src, dst, axis, exclusive, accumulate_dtype):
    if exclusive:  # src and dst do not overlap here
        dst[:, 0] = 0
        src, dst = src[:, :-1], dst[:, 1:]
    outer, _, inner = src.shape
    threads = _thread_count(src.size, outer * inner)
    pieces = _lane_slices(outer, inner, src.itemsize, threads) if threads > _torch_threads(outer * inner) else ()
    if len(pieces) < 2:
        _cumsum(_from_numpy(src), 1, out=_from_numpy(dst))
    else:
        _run_parallel(lambda: _torch_cumsum, [(src[o, :, i], dst[o, :, i]) for o, i in pieces], threads)


def _torch_cumsum(pair):
    src, dst = pair
    _cumsum(_from_numpy(src), 1, out=_from_numpy(dst))


def _lane_slices(outer: int, inner: int, itemsize: int, threads: int):
    """(outer slice, inner slice) pairs cutting outer x inner lanes into ``CHUNKS_PER_THREAD * threads`` pieces:
    whole outer slices if there are ``threads`` of them, else runs of inner lanes `SPLIT_MIN_BYTES` wide or
    more; one piece when neither fits."""
    pieces = CHUNKS_PER_THREAD * threads
    if outer >= threads:
        return [(np.s_[start:stop], np.s_[:]) for start, stop in _split(outer, pieces)]
    pieces = min(pieces, inner * itemsize // SPLIT_MIN_BYTES)
    return [(np.s_[:], np.s_[start:stop]) for start, stop in _split(inner, max(1, pieces))]


def _tiles(outer: int, length: int, inner: int, itemsize: int, parts: int):
    """Index pairs (outer slice, inner slice) cutting (outer, length, inner) into tiles for ``parts`` threads.

    A tile is a few whole outer slices when ``ROWS_MIN_BLOCK`` of their rows fit the buffer
    (whole lanes, and so no carry, when ``length`` rows fit), else a range of inner lanes of one
    (narrowed to share few outer slices between threads while it stays `SPLIT_MIN_BYTES` wide).
    """
    per_outer = BUFFER_ELEMENTS // (inner * min(length, ROWS_MIN_BLOCK))
    if per_outer >= 1 and outer >= parts:
        step = max(1, min(BUFFER_ELEMENTS // (inner * length), -(-outer // parts)))
        return [(np.s_[start:start + step], np.s_[:]) for start in range(0, outer, step)]
    width = min(inner, BUFFER_ELEMENTS // min(length, ROWS_MIN_BLOCK))
    if outer < parts and -(-inner * outer // parts) * itemsize >= SPLIT_MIN_BYTES:  # few outer slices: split
        width = min(width, -(-inner * outer // parts))  # their lanes between the threads
    return [(np.s_[o:o + 1], np.s_[start:start + width]) for o in range(outer) for start in range(0, inner, width)]


def _blocked_path(numpy_rows):
    """The ``lanes`` (torch scans the buffer) or ``rows`` (numpy adds rows in it) path."""
    def run(src, dst, axis, exclusive, accumulate_dtype):
        outer, length, inner = src.shape
        threads = 1 if numpy_rows else _thread_count(src.size, outer * inner)
        tiles = _tiles(outer, length, inner, src.itemsize, threads if threads == 1 else CHUNKS_PER_THREAD * threads)
        first_outer, first_inner = tiles[0]
        tile_elements = src[first_outer, :, first_inner].size
        buffer_dtype = accumulate_dtype
        if (not numpy_rows and tile_elements <= BUFFER_ELEMENTS and src.dtype == dst.dtype
                and src.dtype in TORCH_EXACT_DTYPES):
            buffer_dtype = src.dtype  # whole lanes, no carry: torch accumulates as we do
        size = min(BUFFER_ELEMENTS, tile_elements)

        def worker():  # one buffer for each thread that takes part
            return functools.partial(_scan_tile, buffer=np.empty(size, buffer_dtype), exclusive=exclusive,
                                     numpy_rows=numpy_rows)
        _run_parallel(worker, [(src[o, :, i], dst[o, :, i]) for o, i in tiles], threads)
    return run


def _scan_tile(tile, buffer, exclusive, numpy_rows):
    """Scan one (src, dst) tile (outer, length, inner) through ``buffer``, one block of rows at a time.

    A block is copied into the buffer in the tile's own layout, scanned along its rows (torch.cumsum,
    or numpy adds of each row onto the next), and copied out, shifted by one when exclusive; the last
    row of a block is the carry added to the first row of the next.
    """
    src, dst = tile
    outer, length, inner = src.shape
    block = max(1, min(length, buffer.size // (outer * inner)))
    view = buffer[:outer * block * inner].reshape(outer, block, inner)
    if numpy_rows:
        rows = list(view.transpose(1, 0, 2)) if outer > 1 else list(view[0])
    else:
        tensor = _from_numpy(view)
    carry = None
    for start in range(0, length, block):
        stop = min(length, start + block)
        count = stop - start
        part = view[:, :count]
        _copyto(part, src[:, start:stop], casting="unsafe")
        if carry is not None:
            _add(view[:, 0], carry, view[:, 0])
        if numpy_rows:
            for previous, row in zip(rows[:count - 1], rows[1:count]):
                _add(previous, row, row)
        else:
            scanned = tensor[:, :count]
            _cumsum(scanned, 1, out=scanned)
        if exclusive:
            dst[:, start] = 0 if carry is None else carry
            _copyto(dst[:, start + 1:stop], view[:, :count - 1], casting="unsafe")
        else:
            _copyto(dst[:, start:stop], part, casting="unsafe")
        if stop < length:
            carry = view[:, count - 1].copy()


_PATHS = {
    "trivial": _trivial_path,
    "numpy": _numpy_path,
    "torch": _torch_path,
    "lanes": _blocked_path(numpy_rows=False),
    "rows": _blocked_path(numpy_rows=True),
    "compiled": _compiled_path,
}


def _split(count: int, parts: int):
    """``parts`` contiguous (start, stop) ranges covering range(count), sizes within one of each other."""
    bounds = [count * part // parts for part in range(parts + 1)]
    return [(bounds[part], bounds[part + 1]) for part in range(parts) if bounds[part] < bounds[part + 1]]


def _thread_count(size: int, pieces: int) -> int:
    """How many threads a scan of ``size`` elements in ``pieces`` independent pieces should use."""
    if size < PARALLEL_MIN_SIZE or pieces < 2:
        return 1
    threads = torch.get_num_threads()
    if threads < 2 or free_cores() < MIN_FREE_CORES:
        return 1
    return min(pieces, threads)


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_gate = None  # (the last `_cpu_counters` reading, cores free over the window before it)


def _cpu_counters():
    """(seconds all CPUs were busy, this process's CPU seconds, monotonic time) now; None without /proc/stat."""
    try:
        with open("/proc/stat", "rb") as stat:
            ticks = [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(ticks) < 5:
        return None
    # user nice system idle iowait irq softirq steal: busy is all but idle and iowait (steal: the host took it)
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / _CLOCK_TICKS, time.process_time(), time.monotonic()


def free_cores() -> float:
    """The cores other processes left free over the last `GATE_INTERVAL` seconds or more: the CPUs, less the CPU
    time all of them were busy per second, plus this process's own (all its threads, torch's included), so
    that a busy loop of scans does not turn its own threads off. 0.0 until two readings are
    `GATE_INTERVAL` apart; where /proc/stat is missing (not Linux), the CPUs less the 1-minute load
    average, which counts this process too.
    """
    global _gate
    now = time.monotonic()
    if _gate is not None and now - _gate[0][2] < GATE_INTERVAL:
        return _gate[1]
    reading = _cpu_counters()
    if reading is None:
        try:
            return max(0.0, _CORES - os.getloadavg()[0])
        except (AttributeError, OSError):  # no load average either (Windows)
            return 0.0
    free = 0.0
    if _gate is not None:
        last = _gate[0]
        elsewhere = (reading[0] - last[0]) - (reading[1] - last[1])
        free = max(0.0, _CORES - max(0.0, elsewhere) / (reading[2] - last[2]))
    _gate = reading, free
    return free


_pool = None
_pool_pid = None
_pool_workers = 0
_pool_lock = threading.Lock()


def _executor(workers: int) -> ThreadPoolExecutor:
    """The shared pool of at least ``workers`` threads.

    A larger pool replaces a smaller one, which is shut down (its threads exit once the work
    already given to them is done). After a fork the child has none of the parent's threads:
    it builds its own pool and leaves the inherited object alone (its locks may be held).
    """
    global _pool, _pool_pid, _pool_workers
    with _pool_lock:
        if _pool_pid != os.getpid() or _pool_workers < workers:
            replaced = _pool if _pool_pid == os.getpid() else None
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pycumsum")
            _pool_pid, _pool_workers = os.getpid(), workers
            if replaced is not None:
                replaced.shutdown(wait=False)
        return _pool


class _Chunks:
    """Chunks of work shared by the calling thread and pool workers, each taking the next one free.

    The caller never waits for a worker that has not started: a late worker finds nothing left.
    It waits only for the chunks workers have taken, so no worker still writes when it returns.
    """

    def __init__(self, chunks):
        self._next = iter(chunks)
        self._lock = threading.Condition()
        self._running = 0
        self._stopped = False
        self.errors = []

    def take(self):
        """The next chunk, or None when none is left (or after a failure)."""
        with self._lock:
            chunk = None if self._stopped else next(self._next, None)
            if chunk is not None:
                self._running += 1
            return chunk

    def finish(self, error=None):
        with self._lock:
            self._running -= 1
            if error is not None:
                self.errors.append(error)
                self._stopped = True
            self._lock.notify_all()

    def stop_and_wait(self):
        """Hand out no more chunks; return once every chunk taken is done."""
        with self._lock:
            self._stopped = True
            self._lock.wait_for(lambda: self._running == 0)

    def run(self, make_worker, record_errors):
        work = None
        chunk = self.take()
        while chunk is not None:
            try:
                work = work or make_worker()
                work(chunk)
            except BaseException as error:
                self.finish(error if record_errors else None)
                if record_errors:
                    return
                raise
            self.finish()
            chunk = self.take()


def _run_parallel(make_worker, chunks, threads) -> None:
    """make_worker()(chunk) for every chunk, on this thread and up to ``threads - 1`` pool workers.

    Each thread that takes part calls make_worker once (its own buffers) and then takes chunks until
    none is left. All taken chunks are done on return. The caller's own exception is the one
    raised (else the first worker's): a worker's error never masks the caller's.
    """
    if threads <= 1 or len(chunks) <= 1:
        work = make_worker()
        for chunk in chunks:
            work(chunk)
        return
    shared = _Chunks(chunks)
    pool = _executor(threads - 1)
    for _ in range(min(threads, len(chunks)) - 1):
        pool.submit(shared.run, make_worker, True)
    try:
        shared.run(make_worker, False)
    finally:
        shared.stop_and_wait()
    if shared.errors:
        raise shared.errors[0]
