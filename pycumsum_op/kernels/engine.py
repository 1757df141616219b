"""cumsum's paths over numpy arrays: one function per path, each run where `route.route` says.

Every path adds each lane (one 1-D slice along the scan axis) element after element,
left to right, in the accumulation dtype, and rounds once per element to the output
dtype, exactly as torch.cumsum does on CPU. So the paths agree bit for bit with each
other, and with torch for float32, float64, int32 and int64. The array is seen as
(outer, length, inner) around the scan axis. What each path does (which one runs, and
why, is the route's to say):

- ``trivial``: a scan of length 1 is a copy (zeros when exclusive).
- ``numpy``: ``np.add.accumulate`` over flipped/shifted views, the reference path.
- ``torch``: one ``torch.cumsum(out=)`` from the input's memory straight into the output's.
- ``compiled``: the accelerator's loops (`compiled`): whole rows added into a row of float64
  (int64) accumulators, reading the input once, or four lanes' add chains advancing together.
- ``lanes``: cache-sized blocks of (a few outer slices) x (some rows of the scan axis)
  x (inner lanes) are copied (cast, reversed as needed) into a buffer of the same layout,
  scanned there in place by torch.cumsum, and copied out, with a carry row between
  blocks. The buffer holds the accumulation dtype, or the data's own when whole lanes
  fit (no carry) and torch accumulates it as we do.
- ``rows``: the same blocks in float64, scanned by vectorised numpy adds of one row onto the next.

Every path runs on the calling thread (torch's call uses torch's own threads). Memory: besides
the output, one buffer of at most `tuning.BUFFER_ELEMENTS` accumulation-dtype elements and a carry row.
"""
import functools

import numpy as np
import torch

from . import compiled, tuning
from .route import view_3d
from .spec import EXACT_DTYPES, PRODUCT_LOOP, accumulate_dtype
from .torch_scans import along

_add = np.add
_copyto = np.copyto
_cumsum = torch.cumsum
_cumprod = torch.cumprod
_from_numpy = torch.from_numpy


def torch_scan(src: torch.Tensor, dst: torch.Tensor, axis: int) -> None:
    """dst = torch.cumsum(src, axis): the ``torch`` path as one call, on tensors viewing the memory of arrays
    whose route is that one call (a caller holding tensors, such as the Caffe2 op, skips numpy)."""
    _cumsum(src, axis, out=dst)


def torch_product(src: torch.Tensor, dst: torch.Tensor, axis: int) -> None:
    """dst = torch.cumprod(src, axis), as `torch_scan`."""
    _cumprod(src, axis, out=dst)


def _torch_call(kernel):
    """torch's one call for a sum or product ``kernel`` (`spec.ScanKernel`)."""
    return torch_product if kernel.loop == PRODUCT_LOOP else torch_scan


def compiled_scan(shape: tuple, kernel, chains: bool, src: torch.Tensor, dst: torch.Tensor, axis: int) -> None:
    """dst = torch.cumsum or torch.cumprod (as ``kernel``'s loop says) of src along ``axis`` by the accelerator's
    loop (``chains`` or row loops, as routed), on C-contiguous tensors seen as the 3-D (outer, length, inner)
    ``shape`` around ``axis``."""
    compiled.scan_rows(src.numpy().reshape(shape), dst.numpy().reshape(shape), kernel, False, False, chains)


def one_call(found):
    """The `spec.ScanKernel.one_call` of a sum or product: the function making the one call ``found`` (a direct
    `route.Route`) amounts to, on torch tensors viewing the input and the output, and the axis."""
    if found.path == "compiled":
        return functools.partial(compiled_scan, found.view, found.kernel, found.chains)
    return _torch_call(found.kernel)


def run(route, src: np.ndarray, dst: np.ndarray) -> None:
    """Run cumsum's ``route`` (a `route.Route`; cumsum's `ScanKernel.run`) of src into dst, summed in src's
    accumulation dtype: the numpy path gets the arrays (flipped along the axis when reversed), the others their
    (outer, length, inner) views, flipped along all three axes when reversed (lanes are independent: a contiguous
    input stays one reversed run for the copies) except the compiled path, which walks the lanes back itself."""
    path, axis, exclusive, reverse = route.path, route.axis, route.exclusive, route.reverse
    if path in ("trivial", "numpy"):
        if reverse and path == "numpy":
            src, dst = np.flip(src, axis), np.flip(dst, axis)
        return _PATHS[path](src, dst, axis, exclusive)
    src3 = view_3d(src, axis)
    dst3 = src3 if src is dst else view_3d(dst, axis)  # the same view of the same memory when shared
    if path == "compiled":
        return compiled.scan_rows(src3, dst3, route.kernel, exclusive, reverse, route.chains)
    if reverse:
        src3, dst3 = src3[::-1, ::-1, ::-1], dst3[::-1, ::-1, ::-1]
    _PATHS[path](src3, dst3, 1, exclusive)


def _trivial_path(src, dst, axis, exclusive):
    dst[...] = 0 if exclusive else src


def _numpy_path(src, dst, axis, exclusive):
    if exclusive:  # numpy copies the input first when in place
        np.add.accumulate(src[along(axis, slice(None, -1))], axis, accumulate_dtype(src.dtype),
                          dst[along(axis, slice(1, None))])
        dst[along(axis, 0)] = 0
    else:
        np.add.accumulate(src, axis, accumulate_dtype(src.dtype), dst)


def _torch_path(src, dst, axis, exclusive):
    if exclusive:  # src and dst do not overlap here
        dst[:, 0] = 0
        src, dst = src[:, :-1], dst[:, 1:]
    _cumsum(_from_numpy(src), 1, out=_from_numpy(dst))


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


def _lanes_path(src, dst, axis, exclusive):
    """torch.cumsum over cache-sized copies of the lanes; the buffer keeps the data's own dtype where whole
    lanes fit it (no carry) and torch accumulates that dtype as we do."""
    tiles = _tiles(*src.shape)
    whole_lanes = src[tiles[0][0], :, tiles[0][1]].size <= tuning.BUFFER_ELEMENTS
    exact = src.dtype == dst.dtype and src.dtype in EXACT_DTYPES
    _through_buffer(src, dst, tiles, exclusive, src.dtype if whole_lanes and exact else accumulate_dtype(src.dtype),
                    _torch_block)


def _rows_path(src, dst, axis, exclusive):
    """numpy's vectorised row adds over cache-sized copies of the rows, in the accumulation dtype."""
    _through_buffer(src, dst, _tiles(*src.shape), exclusive, accumulate_dtype(src.dtype), _numpy_rows_block)


_PATHS = {
    "trivial": _trivial_path,
    "numpy": _numpy_path,
    "torch": _torch_path,
    "lanes": _lanes_path,
    "rows": _rows_path,
}
