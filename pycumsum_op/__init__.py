"""pycumsum_op: torch.cumsum (and cumprod, cummax, cummin, logcumsumexp) for Caffe2 nets, as Python
operators with gradients.

>>> import numpy as np
>>> from caffe2.python import core, workspace
>>> import pycumsum_op
>>> net = core.Net("readme")
>>> _ = net.PyCumSum("pkg_x", "pkg_y", axis=0)
>>> workspace.FeedBlob("pkg_x", np.array([1, 2, 3], np.int32))
True
>>> workspace.RunNetOnce(net)
True
>>> workspace.FetchBlob("pkg_y")
array([1, 3, 6], dtype=int64)

``import pycumsum_op`` imports Caffe2 (one ImportError naming the torch builds that ship it
when it is missing) and installs ``net.PyCumSum`` and ``brew.cumsum``. In the ``pycumsum-op``
command the same happens on first use, so that ``--help`` and ``--version`` need no Caffe2.
"""
import importlib

from ._runtime import require_caffe2, started_as_command

__version__ = "0.2.0"
#: The public names besides the registered scans' functions (``pycumsum_op.<scan name>``, one per `scans` entry).
_NAMES = ["cumsum_fwd", "cumsum_bwd", "ScanArgumentError", "UnsafeNetError", "load_net", "save_net", "verify_net",
          "lower", "LoweringError", "explain", "__version__"]
__all__ = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"] + _NAMES
_api = {}  # name -> value, filled by `_load`
_scan_functions = {}  # scan name -> (its entry, the function made from it)


def _load_api() -> dict:
    """Import Caffe2 and the public API, install net.PyCumSum / brew.cumsum; the package's names."""
    require_caffe2()
    doctor = importlib.import_module(__name__ + ".doctor")  # not `from . import`: that would call __getattr__
    ops = importlib.import_module(__name__ + ".ops")
    from .kernels import ScanArgumentError
    from .serialization import UnsafeNetError, load_net, save_net, verify_net
    from .lowering import LoweringError, lower  # also registers the ATen gradient
    from .scans.explain import explain
    ops.install()
    return {"cumsum_fwd": ops.cumsum_fwd, "cumsum_bwd": ops.cumsum_bwd, "ScanArgumentError": ScanArgumentError,
            "UnsafeNetError": UnsafeNetError, "load_net": load_net, "save_net": save_net, "verify_net": verify_net,
            "lower": lower, "LoweringError": LoweringError, "explain": explain, "doctor": doctor,
            "scan_function": ops.scan_function}


def _load() -> None:
    """What ``import pycumsum_op`` does (outside the command line: at import); idempotent."""
    if not _api:
        _api.update(_load_api())


def _scan_function(name: str):
    """``pycumsum_op.<name>`` of registered scan ``name``: its function (`ops.scan_function`), made once per entry
    (a scan registered again gets a new one)."""
    from .scans import SCANS

    entry = SCANS[name]
    known = _scan_functions.get(name)
    if known is None or known[0] is not entry:
        known = _scan_functions[name] = entry, _api["scan_function"](name)
    return known[1]


def __getattr__(name):  # PEP 562: the API (loaded on first use in the command line) and every registered scan
    if name.startswith("__"):
        raise AttributeError("module 'pycumsum_op' has no attribute {!r}".format(name))
    _load()
    if name in _api and name != "scan_function":
        return _api[name]
    from .scans import SCANS

    if name in SCANS:
        return _scan_function(name)
    raise AttributeError("module 'pycumsum_op' has no attribute {!r}".format(name))


def __dir__():
    from .scans import SCANS

    return sorted(set(globals()) | set(_NAMES) | {"doctor"} | set(SCANS))


if not started_as_command():
    _load()
