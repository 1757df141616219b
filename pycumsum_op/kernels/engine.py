"""The scan engine: the fastest way to run one scan over numpy arrays, chosen per call.

Every path adds each lane (one 1-D slice along the scan axis) element after element,
left to right, in the accumulation dtype, and rounds once per element to the output
dtype, exactly as torch.cumsum does on CPU. So the paths agree bit for bit with each
other, and with torch for float32, float64, int32 and int64. The array is seen as
(outer, length, inner) around the scan axis; the paths (`choose_path`), each one function:

- ``trivial``: a scan of length 1 is a copy (zeros when exclusive).
- ``numpy``: ``np.add.accumulate`` over flipped/shifted views. The reference path; taken
  for small inputs and for layouts that no (outer, length, inner) view describes.
- ``torch``: one ``torch.cumsum(out=)`` from the input's memory straight into the output's:
  forward scans that keep a dtype torch accumulates as we do, wherever torch's own
  strided loop stays in cache (`_torch_strided_slow`: the last axis, and lanes short
  enough for the cache sets their stride maps them to).
- ``compiled``: with the accelerator (`compiled`, the ``fast`` extra), forward scans where its loops
  win (`compiled_wins`: rows of 16 lanes or more; rows of 4-15 lanes with lanes of 16 elements or
  more; floating rows of 1-3 lanes, the last axis among them, with two lanes or more of 4 KiB), and
  every reverse or shifted scan off the last axis (the gradients), of a single lane, or where those rows
  win: whole rows are added into a row of float64 (int64) accumulators, reading the input once, or four
  lanes' add chains advance together. A 1-D forward scan keeps torch's call (one add chain either way);
  its gradient, a reverse scan, runs as one chain too, at that speed.
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

Every path runs on the calling thread (torch's call uses torch's own threads). The tuning
constants live in `tuning`. Memory: besides the output, one buffer of at most
`tuning.BUFFER_ELEMENTS` accumulation-dtype elements (512 KiB in float64) and a carry row.

>>> x = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> out = np.empty_like(x)
>>> scan(x, out, axis=1, exclusive=False, reverse=True, accumulate_dtype=np.dtype(np.float64))
>>> out
array([[ 3.,  3.,  2.],
       [12.,  9.,  5.]], dtype=float32)
>>> choose_path(np.zeros(1 << 20, np.float32), np.zeros(1 << 20, np.float32), 0, False, False)[0]
'torch'
"""
import functools
import math

import numpy as np
import torch

from . import compiled, tuning
from .torch_scans import along

#: dtypes whose torch.cumsum accumulates as we do (float64 for floats, int64 for integers).
TORCH_EXACT_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64))

_add = np.add
_copyto = np.copyto
_cumsum = torch.cumsum
_cumprod = torch.cumprod
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
    return inner >= tuning.ROWS_MIN_WIDTH or (
        inner >= tuning.ROWS_MIN_ALIASED_WIDTH and inner * itemsize % tuning.ALIASED_STRIDE == 0)


def _torch_strided_slow(length: int, inner: int, itemsize: int) -> bool:
    """Whether torch's strided loop misses the cache on lanes of ``length`` elements ``inner`` apart."""
    if inner == 1:
        return False
    stride = inner * itemsize
    if stride < tuning.CACHE_LINE:
        return length * stride > tuning.STREAM_CACHE_BYTES
    aliasing = math.gcd(stride // tuning.CACHE_LINE, tuning.CACHE_SETS) if stride % tuning.CACHE_LINE == 0 else 1
    lines = tuning.CACHE_SETS * tuning.CACHE_WAYS // aliasing
    # an aliased stride also maps the output's lines to the same few sets: half of them for the input
    return length > (lines // 2 if aliasing > 1 else lines)


def compiled_wins(outer: int, length: int, inner: int, dtype: np.dtype, loop: str = "sum") -> bool:
    """Whether the accelerator's ``loop`` ("sum", "product" or "extremum": `compiled.scan_rows`,
    `compiled.extremum_rows`; the caller checks that it is on) beats torch's loop on a forward scan of ``outer``
    slices of lanes of ``length`` ``dtype`` elements ``inner`` apart (`tuning`):

    - sums and products on rows of `tuning.COMPILED_NARROW` lanes or more, at any length;
    - narrower rows four lanes' chains at once: rows of `tuning.COMPILED_FEW_LANES` lanes or more where lanes are
      `tuning.COMPILED_CHAINS_MIN_LENGTH` long; rows of fewer (the last axis among them) for floating sums and every
      product (torch's integer add takes a cycle, no chain to break), where there are
      `tuning.COMPILED_CHAINS_MIN_LANES` lanes or more, each spanning `tuning.COMPILED_CHAINS_MIN_BYTES` (with its
      neighbours), not a multiple of `tuning.COMPILED_CHAINS_ALIASED_SPAN` apart;
    - cummax/cummin where rows are `tuning.COMPILED_EXTREMUM_MIN_WIDTH` lanes wide (four lanes at a time up to
      `tuning.COMPILED_EXTREMUM_CHAINS_WIDTH`)."""
    if loop == "extremum":
        return inner >= tuning.COMPILED_EXTREMUM_MIN_WIDTH
    if inner >= tuning.COMPILED_NARROW:
        return True
    if inner >= tuning.COMPILED_FEW_LANES:
        return length >= tuning.COMPILED_CHAINS_MIN_LENGTH
    span = length * inner * dtype.itemsize
    return ((dtype.kind == "f" or loop == "product") and outer * inner >= tuning.COMPILED_CHAINS_MIN_LANES
            and span >= tuning.COMPILED_CHAINS_MIN_BYTES and span % tuning.COMPILED_CHAINS_ALIASED_SPAN != 0)


def _blocked_path(length: int, inner: int, itemsize: int) -> str:
    """``rows`` where torch's strided loop misses the cache and numpy's row adds pay off, else ``lanes``."""
    return "rows" if _torch_strided_slow(length, inner, itemsize) and _rows_win(inner, itemsize) else "lanes"


def _forward_path(shape: tuple, dtype: np.dtype, torch_may_run: bool, accelerated: bool) -> str:
    """The path of a forward scan of ``dtype`` seen as ``shape`` (outer, length, inner) (see the module doc);
    ``torch_may_run``: torch reads and writes these arrays as they are, ``accelerated``: the compiled loops take
    them."""
    _, length, inner = shape
    if accelerated and compiled_wins(*shape, dtype):
        return "compiled"
    if torch_may_run and not _torch_strided_slow(length, inner, dtype.itemsize):
        return "torch"
    if accelerated and inner > 1:  # a dtype change or a shifted scan in place, off the last axis: one pass
        return "compiled"          # beats the buffer
    return _blocked_path(length, inner, dtype.itemsize)


def choose_path(src: np.ndarray, dst: np.ndarray, axis: int, exclusive: bool, reverse: bool):
    """(path name, src view, dst view, axis) for scanning src into dst; see the module doc.

    When ``reverse``, the views are flipped along the scan axis (numpy path) or along all
    three axes of the 3-D (outer, length, inner) views the other paths get, for which the axis is 1.
    """
    if src.ndim == 0:  # a 0-d tensor is a scan of length 1
        src, dst = src.reshape(1), dst.reshape(1)
    if src.shape[axis] == 1:
        return "trivial", src, dst, axis
    in_place = src is dst
    src3 = _as_3d(src, _shape_3d(src.shape, axis)) if src.size >= tuning.SMALL_SIZE else None
    dst3 = src3 if in_place or src3 is None else _as_3d(dst, src3.shape)
    if dst3 is None:
        if reverse:
            src, dst = np.flip(src, axis), np.flip(dst, axis)
        return "numpy", src, dst, axis
    shape = src3.shape
    accelerated = compiled.enabled() and compiled.accepts(src, dst)
    if reverse:  # lanes are independent: flipping all three axes reverses each lane and keeps
        # a contiguous input one contiguous (reversed) run for the copies
        src3, dst3 = src3[::-1, ::-1, ::-1], dst3[::-1, ::-1, ::-1]
        # a single lane (a 1-D scan's gradient) is one chain at torch's forward speed; the buffer's copies took 3-10x
        path = ("compiled" if accelerated and (shape[2] > 1 or shape[0] == 1 or compiled_wins(*shape, src.dtype))
                else _blocked_path(shape[1], shape[2], src.itemsize))
    else:
        torch_may_run = (src.dtype == dst.dtype and src.dtype in TORCH_EXACT_DTYPES
                         and _torch_may_write(src3, dst3, exclusive, in_place))
        path = _forward_path(shape, src.dtype, torch_may_run, accelerated)
    return path, src3, dst3, 1


def compiled_views(loop: str, axis: int, src: np.ndarray, dst: np.ndarray, *others: np.ndarray):
    """3-D (outer, length, inner) views of src, dst and ``others`` around ``axis`` for the accelerator's ``loop``
    (`compiled_wins`), or None where it does not win or does not apply: small inputs, the accelerator off, dtypes
    it does not take (src -> dst), layouts no such view describes. The scan family's kernels use it."""
    if src.ndim == 0 or src.size < tuning.SMALL_SIZE:
        return None
    shape = _shape_3d(src.shape, axis)
    if not (compiled_wins(*shape, src.dtype, loop) and compiled.accepts(src, dst)
            and compiled.enabled()):
        return None
    views = tuple(_as_3d(array, shape) for array in (src, dst) + others)
    return None if any(view is None for view in views) else views


def direct(shape: tuple, dtype: np.dtype, axis: int, loop: str = "sum"):
    """The one call an inclusive forward sum (``loop`` "sum") or product ("product") of a C-contiguous ``shape`` /
    ``dtype`` array into another one, of the same dtype and apart, amounts to: torch's (`torch_scan`,
    `torch_product`) or the accelerator's loop (`compiled_scan` bound to the 3-D shape and the operation), each
    taking torch tensors viewing the arrays and the axis; None where a sum takes another path. A caller that knows
    its arrays (the Caffe2 op) skips `choose_path` and the views it makes.

    >>> direct((69248,), np.dtype(np.float32), 0) is torch_scan, direct((100,), np.dtype(np.float32), 0)
    (True, None)
    """
    if not shape or dtype not in TORCH_EXACT_DTYPES:
        return None
    shape3 = _shape_3d(shape, axis)
    outer, length, inner = shape3
    if outer * length * inner < tuning.SMALL_SIZE or length < 2:
        return None
    if loop == "product":  # cumprod has no path of its own but torch's call and the accelerator's loop
        path = "compiled" if compiled.enabled() and compiled_wins(*shape3, dtype, loop) else "torch"
    else:
        path = _forward_path(shape3, dtype, True, compiled.enabled())
    if path == "torch":
        return torch_product if loop == "product" else torch_scan
    if path == "compiled":
        return functools.partial(compiled_scan, shape3, compiled.PRODUCT if loop == "product" else compiled.SUM)
    return None


def torch_scan(src: torch.Tensor, dst: torch.Tensor, axis: int) -> None:
    """dst = torch.cumsum(src, axis): the ``torch`` path's call, on tensors viewing the memory of arrays
    `direct` chose it for (a caller holding tensors, such as the Caffe2 op, skips numpy)."""
    _cumsum(src, axis, out=dst)


def torch_product(src: torch.Tensor, dst: torch.Tensor, axis: int) -> None:
    """dst = torch.cumprod(src, axis), as `torch_scan`."""
    _cumprod(src, axis, out=dst)


def compiled_scan(shape: tuple, operation: int, src: torch.Tensor, dst: torch.Tensor, axis: int) -> None:
    """dst = torch.cumsum (``operation`` `compiled.SUM`) or torch.cumprod (`compiled.PRODUCT`) of src along ``axis``
    by the accelerator's loop, on C-contiguous tensors seen as the 3-D (outer, length, inner) ``shape`` around
    ``axis`` (bound by `direct`); torch's call once the accelerator is turned off."""
    if not compiled.enabled():
        return (torch_product if operation == compiled.PRODUCT else torch_scan)(src, dst, axis)
    compiled.scan_rows(src.numpy().reshape(shape), dst.numpy().reshape(shape), operation, False, False)


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


def _torch_path(src, dst, axis, exclusive, accumulate_dtype):
    if exclusive:  # src and dst do not overlap here
        dst[:, 0] = 0
        src, dst = src[:, :-1], dst[:, 1:]
    _cumsum(_from_numpy(src), 1, out=_from_numpy(dst))


def _compiled_path(src, dst, axis, exclusive, accumulate_dtype):
    reverse = src.strides[1] < 0  # a reversed scan's views are flipped: the kernel walks the lanes back
    if reverse:
        src, dst = src[::-1, ::-1, ::-1], dst[::-1, ::-1, ::-1]
    compiled.scan_rows(src, dst, compiled.SUM, exclusive, reverse)


def _tiles(outer: int, length: int, inner: int):
    """Index pairs (outer slice, inner slice) cutting (outer, length, inner) into the blocked paths' tiles: a few
    whole outer slices when `tuning.ROWS_MIN_BLOCK` of their rows fit the buffer (whole lanes, and so no carry,
    when ``length`` rows fit), else a range of inner lanes of one outer slice."""
    buffer = tuning.BUFFER_ELEMENTS
    if buffer // (inner * min(length, tuning.ROWS_MIN_BLOCK)) >= 1:
        step = max(1, buffer // (inner * length))
        return [(np.s_[start:start + step], np.s_[:]) for start in range(0, outer, step)]
    width = min(inner, buffer // min(length, tuning.ROWS_MIN_BLOCK))
    return [(np.s_[o:o + 1], np.s_[start:start + width]) for o in range(outer) for start in range(0, inner, width)]


def _through_buffer(src, dst, tiles, exclusive, buffer_dtype, scan_block):
    """Scan (outer, length, inner) src into dst tile by tile (``tiles``: `_tiles`), one block of rows at a time.

    A block is copied into a buffer in the tile's own layout, scanned along its rows in place by
    ``scan_block(view)`` (a 3-D view of the buffer), and copied out, shifted by one when exclusive;
    the last row of a block is the carry added to the first row of the next.
    """
    length = src.shape[1]
    first_outer, first_inner = tiles[0]
    buffer = np.empty(min(tuning.BUFFER_ELEMENTS, src[first_outer, :, first_inner].size), buffer_dtype)
    for tile_outer, tile_inner in tiles:
        tile_src, tile_dst = src[tile_outer, :, tile_inner], dst[tile_outer, :, tile_inner]
        tile_count, _, width = tile_src.shape
        block = max(1, min(length, buffer.size // (tile_count * width)))
        view = buffer[:tile_count * block * width].reshape(tile_count, block, width)
        carry = None
        for start in range(0, length, block):
            stop = min(length, start + block)
            count = stop - start
            part = view[:, :count]
            _copyto(part, tile_src[:, start:stop], casting="unsafe")
            if carry is not None:
                _add(view[:, 0], carry, view[:, 0])
            scan_block(part)
            if exclusive:
                tile_dst[:, start] = 0 if carry is None else carry
                _copyto(tile_dst[:, start + 1:stop], view[:, :count - 1], casting="unsafe")
            else:
                _copyto(tile_dst[:, start:stop], part, casting="unsafe")
            if stop < length:
                carry = view[:, count - 1].copy()


def _torch_block(view):
    """A buffer block scanned along axis 1 by torch.cumsum, in place."""
    tensor = _from_numpy(view)
    _cumsum(tensor, 1, out=tensor)


def _numpy_rows_block(view):
    """A buffer block scanned along axis 1 by numpy adds of each row onto the next, in place."""
    rows = list(view.transpose(1, 0, 2)) if view.shape[0] > 1 else list(view[0])
    for previous, row in zip(rows[:-1], rows[1:]):
        _add(previous, row, row)


def _lanes_path(src, dst, axis, exclusive, accumulate_dtype):
    """torch.cumsum over cache-sized copies of the lanes; the buffer keeps the data's own dtype where whole
    lanes fit it (no carry) and torch accumulates that dtype as we do."""
    tiles = _tiles(*src.shape)
    whole_lanes = src[tiles[0][0], :, tiles[0][1]].size <= tuning.BUFFER_ELEMENTS
    exact = src.dtype == dst.dtype and src.dtype in TORCH_EXACT_DTYPES
    _through_buffer(src, dst, tiles, exclusive, src.dtype if whole_lanes and exact else accumulate_dtype,
                    _torch_block)


def _rows_path(src, dst, axis, exclusive, accumulate_dtype):
    """numpy's vectorised row adds over cache-sized copies of the rows, in the accumulation dtype."""
    _through_buffer(src, dst, _tiles(*src.shape), exclusive, accumulate_dtype, _numpy_rows_block)


_PATHS = {
    "trivial": _trivial_path,
    "numpy": _numpy_path,
    "torch": _torch_path,
    "lanes": _lanes_path,
    "rows": _rows_path,
    "compiled": _compiled_path,
}
