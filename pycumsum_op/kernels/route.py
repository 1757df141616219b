"""How a scan runs: `route`, one pure function of the scan (its kernel and dtype rule), its arguments, the layout and
the accelerator's status, kept in one cache (`routes`).

The scan is given by its kernel's facts (`spec.ScanKernel`: the accelerator's loop, whether cumsum's engine runs it,
the dtypes torch scans in) and its `spec.DtypeRule`, never by its name. Every caller asks it and nothing else decides a
path: the Caffe2 op on every run, the scans' forwards and cumsum's backward, `pycumsum_op.explain`, the benchmarks and
the tests. A `Route` names:

- ``path``: ``trivial`` (a lane of one element: a copy), ``numpy`` (``np.add.accumulate``: small inputs, layouts
  no (outer, length, inner) view describes), ``torch`` (torch's own scan), ``compiled`` (the accelerator's loops,
  `compiled`), ``lanes`` (cache-sized copies of the lanes, scanned by torch), ``rows`` (the same copies scanned
  by numpy row adds), ``empty`` (nothing to scan);
- ``variant``: how that path runs here (``out=`` straight into the output or ``staged`` through a copy; the
  accelerator's ``row loops``, ``chains of four`` or ``one chain``);
- ``view``: the (outer, length, inner) shape the path sees around the axis; ``buffers``: what it allocates;
- ``reason``: one line naming the rule and the `tuning` constants that chose it;
- ``cast``: how an input of another dtype reaches the kernel, cast first as torch does (``dtype=`` included): into
  the output, scanned there in place (cumsum's engine), or into a copy in the dtype the kernel scans;
- ``direct``: the scan is one call from the input's memory into the output's, and ``call`` that call on torch tensors
  viewing them (the Caffe2 op makes it between its blobs).

A route runs itself: ``route.run(src, dst)`` casts as it says and hands it to its kernel's runner (`ScanKernel.run`),
which reads the route's facts (``chains``, ``staged``), so no caller looks at a variant again.

>>> from pycumsum_op.kernels.cumsum import DTYPES, KERNEL as CUMSUM
>>> from pycumsum_op.kernels.spec import ScanSpec
>>> r = route(CUMSUM, DTYPES, ScanSpec("PyCumSum", 0), (64, 4096), "float32", accelerator=True)
>>> r.path, r.variant, r.view, r.direct
('compiled', 'row loops', (1, 64, 4096), True)
>>> route(CUMSUM, DTYPES, ScanSpec("PyCumSum", 0), (64, 4096), "float32", accelerator=False).path
'rows'
>>> route(CUMSUM, DTYPES, ScanSpec("PyCumSum", 1), (4096, 64), "float32", accelerator=False).variant
'out='
>>> route(CUMSUM, DTYPES, ScanSpec("PyCumSum", 1), (4096, 64), "int32", accelerator=False).cast
'into the output'
"""
import functools
import math
import operator
from typing import Callable, NamedTuple, Optional, Tuple

import numpy as np

from . import compiled, tuning
from .spec import EXACT_DTYPES, EXTREMUM_LOOP, PRODUCT_LOOP, DtypeRule, ScanKernel, ScanSpec

#: Every path a route may name (see the module doc).
PATHS = ("empty", "trivial", "numpy", "torch", "compiled", "lanes", "rows")
#: How a route's layout relates its output to its input: separate memory, the very same view (in place), or
#: memory shared some other way.
APART, SAME, OVERLAP = "apart", "same", "overlap"
#: The variants a route may name (``Route.variant``): torch's scan straight into the output (shifted by one when
#: exclusive) or through a copy; the accelerator's row loops, chains of four lanes in registers, or one chain.
OUT, OUT_SHIFTED, STAGED = "out=", "out=, shifted", "staged"
ROW_LOOPS, CHAINS, ONE_CHAIN = "row loops", "chains of four", "one chain"
#: How an input of another dtype than the kernel scans reaches it (``Route.cast``; "": as it is): cast into the
#: output and scanned there in place, or cast into a copy (to the result dtype, then the kernel's compute dtype).
INTO_OUTPUT, COPY = "into the output", "a cast copy"


class Route(NamedTuple):
    """How one scan runs (see the module doc)."""
    kernel: ScanKernel
    path: str
    variant: str
    view: Optional[Tuple[int, int, int]]
    buffers: str
    reason: str
    accelerator: str
    direct: bool = False
    #: the scan's normalised axis and flags, which the kernel's runner reads
    axis: int = 0
    exclusive: bool = False
    reverse: bool = False
    #: the scan's result dtype, the output's (the result's, or one it is rounded into once), the dtype the kernel scans
    #: and how the input is cast to it (`INTO_OUTPUT`, `COPY`: to the result dtype, then the scanned one; "": none)
    result_dtype: Optional[np.dtype] = None
    out_dtype: Optional[np.dtype] = None
    scanned: Optional[np.dtype] = None
    cast: str = ""
    #: a direct route's one call ``call(src, dst, axis)`` on torch tensors viewing a C-contiguous input and new
    #: C-contiguous outputs (its kernel's `ScanKernel.one_call`), else None
    call: Optional[Callable] = None

    @property
    def chains(self) -> bool:
        """The accelerator's loop runs lanes in chains (C-contiguous views), not through an accumulator row."""
        return self.variant in (CHAINS, ONE_CHAIN)

    @property
    def staged(self) -> bool:
        """torch's scan runs on a copy of the input and is copied into the output (not ``out=`` into it)."""
        return self.variant == STAGED

    def run(self, src, dst) -> None:
        """Scan ``src`` into ``dst`` (arrays of this route's layout; a kernel with several outputs takes a tuple) the
        way this route says: cast as ``cast`` says, then by its kernel's runner."""
        if self.path == "empty":
            return
        if self.cast == INTO_OUTPUT:
            np.copyto(dst, src, casting="unsafe")
            src = dst
        elif self.cast == COPY:
            src = src.astype(self.result_dtype, copy=False).astype(self.scanned, copy=False)
        self.kernel.run(self, src, dst)

    def __str__(self) -> str:
        variant = " ({})".format(self.variant) if self.variant else ""
        buffers = "; buffers: " + self.buffers if self.buffers else ""
        return "{}{}: {}{}".format(self.path, variant, self.reason, buffers)


def c_strides(shape: tuple, itemsize: int) -> tuple:
    """The strides of a C-contiguous array of ``shape``."""
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _product(extents) -> int:
    """The product of ``extents`` in Python integers (np.prod on a tuple costs microseconds on every scan's path)."""
    return functools.reduce(operator.mul, extents, 1)


def shape_3d(shape: tuple, axis: int) -> tuple:
    """(outer, length, inner) around ``axis`` of ``shape``."""
    return _product(shape[:axis]), shape[axis], _product(shape[axis + 1:])


def _merged(shape: tuple, strides: tuple):
    """The stride of ``shape``'s dimensions taken as one (0 when all are single), or None where they do not merge
    into one strided dimension (numpy would have to copy)."""
    dims = [(extent, stride) for extent, stride in zip(shape, strides) if extent != 1]
    for (_, outer_stride), (extent, stride) in zip(dims, dims[1:]):
        if outer_stride != stride * extent:
            return None
    return dims[-1][1] if dims else 0


def strides_3d(shape: tuple, strides: tuple, axis: int):
    """The strides of the (outer, length, inner) view around ``axis`` of an array of ``shape`` / ``strides``, or
    None when no view describes it."""
    outer, inner = _merged(shape[:axis], strides[:axis]), _merged(shape[axis + 1:], strides[axis + 1:])
    if outer is None or inner is None:
        return None
    return outer, strides[axis], inner


def view_3d(array: np.ndarray, axis: int) -> np.ndarray:
    """``array`` as the (outer, length, inner) view around ``axis`` its route found (`strides_3d`)."""
    shape = shape_3d(array.shape, axis)
    if array.flags.c_contiguous:
        return array.reshape(shape)
    return np.lib.stride_tricks.as_strided(array, shape, strides_3d(array.shape, array.strides, axis))


def _contiguous(shape: tuple, strides: tuple, itemsize: int) -> bool:
    return all(extent == 1 or stride == expected
               for extent, stride, expected in zip(shape, strides, c_strides(shape, itemsize)))


def sharing(src: np.ndarray, dst: np.ndarray) -> str:
    """`SAME` (dst is src, or the same view of its memory), `OVERLAP` (memory that may be shared) or `APART`."""
    if src is dst:
        return SAME
    if not np.may_share_memory(src, dst):  # bounds only: cheap, and what most scans (into a new output) need
        return APART
    if (src.__array_interface__["data"][0] == dst.__array_interface__["data"][0] and src.strides == dst.strides
            and src.dtype == dst.dtype):
        return SAME
    return OVERLAP


def _status(accelerator) -> str:
    if accelerator is None:
        return compiled.status()
    if isinstance(accelerator, bool):
        return "on" if accelerator else "off: not asked for"
    return accelerator


def _takes(dtype: np.dtype, out_dtype: np.dtype) -> bool:
    """Whether the accelerator's loops take dtype -> out_dtype: exact dtypes, both floating or both integer."""
    return dtype in EXACT_DTYPES and out_dtype in EXACT_DTYPES and dtype.kind == out_dtype.kind


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


def _rows_win(inner: int, itemsize: int) -> bool:
    """Whether numpy's row adds pay off: wide rows, or rows with an aliased stride (the buffer has it too)."""
    return inner >= tuning.ROWS_MIN_WIDTH or (
        inner >= tuning.ROWS_MIN_ALIASED_WIDTH and inner * itemsize % tuning.ALIASED_STRIDE == 0)


def compiled_wins(view: tuple, dtype: np.dtype, loop: str):
    """(whether the accelerator's ``loop`` beats torch's on a forward scan of the (outer, length, inner) ``view``
    of ``dtype``, the rule that says so)."""
    outer, length, inner = view
    if loop == EXTREMUM_LOOP:
        if inner >= tuning.COMPILED_EXTREMUM_MIN_WIDTH:
            return True, "rows of {} lanes >= COMPILED_EXTREMUM_MIN_WIDTH".format(inner)
        return False, "rows of {} lanes < COMPILED_EXTREMUM_MIN_WIDTH".format(inner)
    if inner >= tuning.COMPILED_NARROW:
        return True, "rows of {} lanes >= COMPILED_NARROW".format(inner)
    if inner >= tuning.COMPILED_FEW_LANES:
        if length >= tuning.COMPILED_CHAINS_MIN_LENGTH:
            return True, "rows of {} lanes, lanes of {} >= COMPILED_CHAINS_MIN_LENGTH".format(inner, length)
        return False, "rows of {} lanes, lanes of {} < COMPILED_CHAINS_MIN_LENGTH".format(inner, length)
    if dtype.kind != "f" and loop != PRODUCT_LOOP:
        return False, "an integer sum of rows of {} < COMPILED_FEW_LANES lanes (a one-cycle add)".format(inner)
    if outer * inner < tuning.COMPILED_CHAINS_MIN_LANES:
        return False, "{} lane(s) < COMPILED_CHAINS_MIN_LANES: one chain either way".format(outer * inner)
    span = length * inner * dtype.itemsize
    if span < tuning.COMPILED_CHAINS_MIN_BYTES:
        return False, "lanes span {} bytes < COMPILED_CHAINS_MIN_BYTES".format(span)
    if span % tuning.COMPILED_CHAINS_ALIASED_SPAN == 0:
        return False, "lanes {} bytes apart, a multiple of COMPILED_CHAINS_ALIASED_SPAN".format(span)
    return True, "{} lanes of rows of {} spanning {} bytes >= COMPILED_CHAINS_MIN_BYTES".format(
        outer * inner, inner, span)


def _compiled_variant(loop: str, view: tuple, itemsize: int, contiguous: bool) -> Tuple[str, str]:
    """(variant, buffers) of the accelerator's loop: narrow C-contiguous rows lane by lane in chains of four held
    in registers (`compiled.sum_chains`...), the rest by row loops through an accumulator row."""
    outer, _, inner = view
    if loop == EXTREMUM_LOOP:
        if contiguous and inner < tuning.COMPILED_EXTREMUM_CHAINS_WIDTH:
            return CHAINS, ""
        return ROW_LOOPS, "a best-value row and an index row of {} lanes".format(min(inner, tuning.COMPILED_BLOCK))
    if contiguous and inner < min(tuning.COMPILED_NARROW, tuning.COMPILED_NARROW_BYTES // itemsize):
        return (ONE_CHAIN if outer * inner == 1 else CHAINS), ""
    return ROW_LOOPS, "an accumulator row of {} lanes".format(min(inner, tuning.COMPILED_BLOCK))


def _blocked(view: tuple, itemsize: int, why: str) -> Tuple[str, str, str]:
    """(path, buffers, reason) of the buffered paths: ``rows`` where torch's strided loop misses the cache and
    numpy's row adds pay off, else ``lanes``."""
    _, length, inner = view
    buffers = "one block buffer of at most BUFFER_ELEMENTS elements and a carry row"
    if _torch_strided_slow(length, inner, itemsize) and _rows_win(inner, itemsize):
        return "rows", buffers, why + "; rows of {} lanes: numpy's row adds (ROWS_MIN_WIDTH, ALIASED_STRIDE)".format(
            inner)
    return "lanes", buffers, why + "; torch scans cache-sized copies of the lanes"


def route(kernel: ScanKernel, dtypes: DtypeRule, spec: ScanSpec, shape, dtype, *, out_dtype=None, strides=None,
          out_strides=None, index_strides=None, sharing: str = APART, accelerator=None) -> Route:
    """The `Route` of the scan whose kernel is ``kernel`` (its `ScanKernel`: the route reads its facts, never its name)
    and dtype rule ``dtypes``, called with ``spec`` (axis, flags, ``dtype=``), over an input of ``shape`` / ``dtype`` /
    ``strides`` (None: C-contiguous) into an output of the result dtype (or of ``out_dtype``, which the result is
    rounded into once: a gradient's cast back, for cumsum's engine) / ``out_strides`` related to the input as
    ``sharing`` says (an extremum loop: also int64 indices of ``index_strides``). ``accelerator``:
    `compiled.status()` when None (the switch as it is now), or True / False, or a status string. An input the rule
    refuses raises `spec.ScanArgumentError` naming the op.

    Routes are kept per arguments (`routes`, an LRU cache), so that a scan run again on the same layout pays a lookup:
    the `tuning` constants are read when a route is first made (``routes.cache_clear()`` after changing one)."""
    dtype = np.dtype(dtype)
    return routes(kernel, dtypes, spec, tuple(shape), dtype, None if out_dtype is None else np.dtype(out_dtype),
                  None if strides is None else tuple(strides),
                  None if out_strides is None else tuple(out_strides),
                  None if index_strides is None else tuple(index_strides), sharing, _status(accelerator))


@functools.lru_cache(maxsize=4096)
def routes(kernel: ScanKernel, dtypes: DtypeRule, spec: ScanSpec, shape: tuple, dtype: np.dtype,
           out_dtype: Optional[np.dtype], strides: Optional[tuple], out_strides: Optional[tuple],
           index_strides: Optional[tuple], sharing: str, status: str) -> Route:
    """`route` with its arguments normalised (``status``: the accelerator's, `compiled.status()`): the one cache of
    routes, which the Caffe2 op asks directly on every run."""
    checked = dtypes.check_layout(spec, shape, dtype)
    axis, result = checked.axis, checked.result_dtype
    out_dtype = result if out_dtype is None else out_dtype
    if kernel.engine:  # cast into the output and summed there in place, as torch.cumsum(dtype=) casts first
        scanned, cast = result, (INTO_OUTPUT if dtype != result else "")
        if cast:
            strides, sharing = out_strides, SAME
    else:  # torch scans the result dtype in the kernel's compute dtype, here on a cast copy
        scanned = kernel.compute_dtype(result)
        cast = COPY if dtype != result or scanned != result else ""
        if cast:
            strides, sharing = None, APART
    found = _route(kernel, shape, scanned, axis, spec.exclusive, spec.reverse, out_dtype, strides, out_strides,
                   index_strides, sharing, status)
    direct = found.direct and not cast
    call = kernel.one_call(found) if direct and kernel.one_call is not None else None
    return found._replace(direct=direct, result_dtype=result, out_dtype=out_dtype, scanned=scanned, cast=cast,
                          call=call)


def forward(kernel: ScanKernel, dtypes: DtypeRule, x: np.ndarray, spec: ScanSpec, out=None, accelerator=None):
    """out = the scan of ``x`` with ``spec`` by its `route`, into ``out``: an array, or (values, indices) for a kernel
    with the extremum loop; allocated (C-contiguous) when None, else it may share memory with ``x``."""
    outputs = (out if isinstance(out, tuple) else (out,)) if out is not None else ()
    shared = max((sharing(x, output) for output in outputs), key=(APART, OVERLAP, SAME).index, default=APART)
    found = route(kernel, dtypes, spec, x.shape, x.dtype, strides=x.strides,
                  out_strides=outputs[0].strides if outputs else None,
                  index_strides=outputs[1].strides if len(outputs) > 1 else None, sharing=shared,
                  accelerator=accelerator)
    if out is None:
        out = np.empty(x.shape, found.out_dtype)
        if kernel.loop == EXTREMUM_LOOP:
            out = out, np.empty(x.shape, np.int64)
    found.run(x, out)
    return out


def _route(kernel: ScanKernel, shape: tuple, dtype: np.dtype, axis: int, exclusive: bool, reverse: bool,
           out_dtype: np.dtype, strides: Optional[tuple], out_strides: Optional[tuple], index_strides: Optional[tuple],
           sharing: str, status: str) -> Route:
    """The route of ``kernel`` scanning ``dtype`` into ``out_dtype`` along the normalised ``axis``."""
    strides = c_strides(shape, dtype.itemsize) if strides is None else strides
    out_strides = c_strides(shape, out_dtype.itemsize) if out_strides is None else out_strides
    index_strides = c_strides(shape, 8) if index_strides is None else index_strides
    flags = dict(axis=axis, exclusive=exclusive, reverse=reverse)
    if 0 in shape:
        return Route(kernel, "empty", "", None, "", "no element to scan", status, **flags)
    scalar = not shape
    if scalar:  # a 0-d tensor is a scan of length 1
        shape, strides, out_strides, index_strides, axis = (1,), (dtype.itemsize,), (out_dtype.itemsize,), (8,), 0
    view = shape_3d(shape, axis)
    if kernel.engine:
        return _route_sum(kernel, shape, dtype, axis, exclusive, reverse, out_dtype, strides, out_strides, sharing,
                          status, view)._replace(**flags)
    found = _route_torch_scan(kernel, shape, dtype, axis, exclusive, reverse, out_dtype, strides, out_strides,
                              index_strides, sharing, status, view)
    return found._replace(direct=found.direct and not scalar, **flags)


def _route_sum(kernel, shape, dtype, axis, exclusive, reverse, out_dtype, strides, out_strides, sharing, status,
              view):
    """The route of a scan the engine runs (cumsum: `engine`'s paths)."""
    loop = kernel.loop

    def made(path, variant, reason, buffers="", direct=False):
        return Route(kernel, path, variant, view, buffers, reason, status, direct)

    outer, length, inner = view
    if length == 1:
        return made("trivial", "", "a scan of length 1 is a copy (zeros when exclusive)")
    size = outer * length * inner
    if size < tuning.SMALL_SIZE:
        return made("numpy", "", "{} elements < SMALL_SIZE: a torch call costs more than it saves".format(size))
    src3 = strides_3d(shape, strides, axis)
    dst3 = src3 if sharing == SAME else strides_3d(shape, out_strides, axis)
    if src3 is None or dst3 is None:
        return made("numpy", "", "no (outer, length, inner) view describes this layout")
    contiguous = _contiguous(view, src3, dtype.itemsize) and _contiguous(view, dst3, out_dtype.itemsize)
    accelerated = status == "on" and _takes(dtype, out_dtype)
    if reverse:
        if accelerated and (inner > 1 or outer == 1):
            variant, buffers = _compiled_variant(loop, view, dtype.itemsize, contiguous)
            why = "a single lane reversed: one chain" if outer * inner == 1 else "reversed off the last axis"
            return made("compiled", variant, why + ": the accelerator walks the lanes back (torch has no reverse "
                                                   "scan)", buffers)
        if accelerated:
            wins, rule = compiled_wins(view, dtype, loop)
            if wins:
                variant, buffers = _compiled_variant(loop, view, dtype.itemsize, contiguous)
                return made("compiled", variant, "reversed, " + rule, buffers)
        path, buffers, reason = _blocked(view, dtype.itemsize, "reversed (torch has no reverse scan)")
        return made(path, "", reason, buffers)
    negative = not contiguous and min(src3 + dst3) < 0
    if dtype != out_dtype or dtype not in EXACT_DTYPES:
        torch_may_run, why_not = False, "{} -> {}: torch would not accumulate as torch.cumsum of the result".format(
            dtype, out_dtype)
    elif negative:
        torch_may_run, why_not = False, "negative strides (torch has none)"
    elif sharing != APART and (exclusive or sharing == OVERLAP):
        torch_may_run, why_not = False, "shifted in place (torch would read what it wrote)"
    else:
        torch_may_run, why_not = True, ""
    direct = not exclusive and sharing == APART and contiguous and torch_may_run
    if accelerated:
        wins, rule = compiled_wins(view, dtype, loop)
        if wins:
            variant, buffers = _compiled_variant(loop, view, dtype.itemsize, contiguous)
            return made("compiled", variant, rule, buffers, direct)
    else:
        rule = "the accelerator is " + status if status != "on" else "{} -> {}: not the accelerator's dtypes".format(
            dtype, out_dtype)
    slow = _torch_strided_slow(length, inner, dtype.itemsize)
    if torch_may_run and not slow:
        return made("torch", OUT_SHIFTED if exclusive else OUT,
                    "{}; torch's strided loop keeps the lanes in cache (CACHE_*, STREAM_CACHE_BYTES)".format(rule),
                    direct=direct)
    why = why_not or "torch's strided loop would miss the cache on lanes of {} rows (CACHE_*)".format(length)
    if accelerated and inner > 1:  # a dtype change or a shifted scan in place, off the last axis: one pass
        variant, buffers = _compiled_variant(loop, view, dtype.itemsize, contiguous)
        return made("compiled", variant, why + ": the accelerator's one pass beats the buffer", buffers)
    path, buffers, reason = _blocked(view, dtype.itemsize, why)
    return made(path, "", reason, buffers)


def _route_torch_scan(kernel, shape, dtype, axis, exclusive, reverse, out_dtype, strides, out_strides, index_strides,
                     sharing, status, view):
    """The route of a scan torch computes (cumprod, cummax / cummin, logcumsumexp): the accelerator's loop where it
    wins, else torch's scan straight into the output, or ``staged`` through a copy (flags, casts, shared memory)."""
    loop = kernel.loop
    size = view[0] * view[1] * view[2]
    src3, dst3 = strides_3d(shape, strides, axis), strides_3d(shape, out_strides, axis)
    outputs = (out_strides, index_strides) if loop == EXTREMUM_LOOP else (out_strides,)
    if loop is None:
        rule = "torch's is the only kernel"
    elif status != "on":
        rule = "the accelerator is " + status
    elif not _takes(dtype, out_dtype):
        rule = "{} -> {}: not the accelerator's dtypes".format(dtype, out_dtype)
    elif size < tuning.SMALL_SIZE:
        rule = "{} elements < SMALL_SIZE".format(size)
    elif src3 is None or dst3 is None or (loop == EXTREMUM_LOOP and strides_3d(shape, index_strides, axis) is None):
        rule = "no (outer, length, inner) view describes this layout"
    else:
        wins, rule = compiled_wins(view, dtype, loop)
        if wins:
            contiguous = _contiguous(view, src3, dtype.itemsize) and _contiguous(view, dst3, out_dtype.itemsize)
            if loop == EXTREMUM_LOOP:  # reversed lanes are scanned through flipped views
                contiguous = contiguous and (not reverse or view[1] == 1) and _contiguous(
                    view, strides_3d(shape, index_strides, axis), 8)
            variant, buffers = _compiled_variant(loop, view, dtype.itemsize, contiguous)
            direct = not exclusive and not reverse and sharing == APART and contiguous and dtype == out_dtype
            return Route(kernel, "compiled", variant, view, buffers, rule, status, direct)
    into = not (exclusive or reverse or dtype != out_dtype or sharing != APART
                or min(sum(outputs, ()), default=0) < 0)
    if into:
        return Route(kernel, "torch", OUT, view, "", rule + ": torch's scan straight into the output", status, True)
    return Route(kernel, "torch", STAGED, view, "a copy of the input and of the result",
                rule + ": torch's scan of a (cast, flipped) copy, copied into the output (shifted when exclusive)",
                status)
