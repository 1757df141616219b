"""The optional accelerator: scan loops compiled by numba (``pip install 'pycumsum_op[fast]'``).

A scan over a non-last axis is, for torch, a strided walk down each lane in turn. Here the
array is seen as (outer, length, inner) around the scan axis and whole rows are combined at
once: an accumulator row of ``inner`` lanes (float64 for floating inputs, int64 for integers,
the dtype torch 1.10's CPU scans accumulate float32/float64/int32/int64 in) takes row after
row, and each row of the result is the accumulator rounded to the output dtype. Every lane
is still combined element by element from its first element to its last, in the order torch
uses, so the results are torch's bit for bit; only the order in which lanes advance differs.

- `scan_rows(src, dst, kernel, exclusive, reverse, chains)`: the running sum or product (``kernel.loop``, a
  `spec.ScanKernel`) of 3-D views; ``exclusive`` shifts by one (``kernel.identity`` first), ``reverse``
  walks each lane from its end. ``dst`` may be ``src`` itself (in place). By whole-row loops
  (`loops.sum_rows`, any view) or, ``chains``, four lanes at a time, each lane's running sum in a
  register (`loops.sum_chains`, C-contiguous views): the scan's route (`route.route`) says which.
- `extremum_rows(src, values, indices, maximum, chains)`: torch.cummax / torch.cummin (`spec.takes_lead`),
  values and int64 indices, by rows or four lanes at a time.

The loops themselves are `loops`. Nothing here imports numba (nor `loops`) until a kernel is first needed, so ``import pycumsum_op`` never
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
from .spec import PRODUCT_LOOP, accumulate_dtype

#: The environment variable that turns the accelerator off ("0", "off", "false", "no").
SWITCH = "PYCUMSUM_OP_ACCELERATOR"
#: The environment variable naming the on-disk cache of compiled kernels.
CACHE_VARIABLE = "PYCUMSUM_OP_CACHE_DIR"

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
    return available()


def available() -> str:
    """`status` without the switch: "on" where numba imports, else why not. It does not read the environment (which
    costs about a microsecond), so the Caffe2 op asks for its routes with it and reads the switch only when a route
    takes the accelerator."""
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


def scan_rows(src: np.ndarray, dst: np.ndarray, kernel, exclusive: bool, reverse: bool, chains: bool) -> None:
    """dst = the running sum or product (``kernel``: a `spec.ScanKernel` with a sum or product loop) of src along
    axis 1 of the 3-D (outer, length, inner) views: by the chains (C-contiguous views, lane by lane) or the row
    loops, as the scan's route says."""
    outer, length, inner = src.shape
    accumulator = ACCUMULATORS[src.dtype.kind]
    product = kernel.loop == PRODUCT_LOOP
    identity = accumulator.type(kernel.identity)
    if chains:
        _loops().sum_chains(src.reshape(-1), dst.reshape(-1), outer, length, inner, identity, product, exclusive,
                            reverse)
    else:
        _loops().sum_rows(src, dst, np.empty(min(inner, tuning.COMPILED_BLOCK), accumulator), identity, product,
                          exclusive, reverse)


def extremum_rows(src: np.ndarray, values: np.ndarray, indices: np.ndarray, maximum: bool, chains: bool) -> None:
    """values, indices = torch.cummax (``maximum``) or torch.cummin of src along axis 1 of the 3-D views: by the
    chains (C-contiguous views) or the row loops, as the scan's route says."""
    outer, length, inner = src.shape
    if chains:
        _loops().extremum_chains(src.reshape(-1), values.reshape(-1), indices.reshape(-1), outer, length, inner,
                                 maximum)
    else:
        width = min(inner, tuning.COMPILED_BLOCK)
        _loops().extremum_rows(src, values, indices, np.empty(width, src.dtype), np.empty(width, np.int64), maximum)


def _loops():
    """The `loops` module, imported on first use (it imports numba), with numba's cache directory set to
    `cache_directory()` while its functions are decorated (empty where that cannot be written: compiled in
    memory), so that other numba users in the process keep theirs."""
    global _kernels
    if _kernels is None:
        with _lock:
            if _kernels is None:
                from numba.core import config

                directory = cache_directory()
                try:
                    os.makedirs(directory, exist_ok=True)
                    writable = os.access(directory, os.W_OK | os.X_OK)
                except OSError:
                    writable = False
                saved = config.CACHE_DIR
                config.CACHE_DIR = directory if writable else ""
                try:
                    from . import loops
                finally:
                    config.CACHE_DIR = saved
                _kernels = loops
    return _kernels
