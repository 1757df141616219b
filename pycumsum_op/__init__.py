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
import sys

from ._runtime import choose_mkl_code_path, require_caffe2, started_as_command

__version__ = "0.2.0"
#: The public names besides the registered scans' functions (``pycumsum_op.<scan name>``, one per `scans` entry,
#: bound and unbound as scans are registered: `_bind_scan`).
_NAMES = ["cumsum_fwd", "cumsum_bwd", "ScanArgumentError", "UnsafeNetError", "load_net", "save_net", "verify_net",
          "lower", "LoweringError", "explain", "__version__"]
__all__ = list(_NAMES)
_package = sys.modules[__name__]


def _bind_scan(entry, registered: bool) -> None:
    """``pycumsum_op.<name>``: the function of a registered scan (`ops.scan_function`), made again when a scan is
    registered again, removed with it. Plain module attributes, not a module ``__getattr__``: CPython 3.6 has none
    (PEP 562)."""
    from .ops import scan_function

    if registered:
        if entry.name in vars(_package):
            from .kernels import ScanArgumentError

            raise ScanArgumentError("register: scan {!r}: pycumsum_op already has an attribute {!r}; choose another "
                                    "name".format(entry.name, entry.name))
        setattr(_package, entry.name, scan_function(entry.name))
        __all__.append(entry.name)
    elif entry.name in __all__:
        delattr(_package, entry.name)
        __all__.remove(entry.name)


def _load() -> None:
    """What ``import pycumsum_op`` does (in the ``pycumsum-op`` command: before a command that needs it): import
    Caffe2 and the public API, install net.PyCumSum / brew.cumsum and siblings; idempotent."""
    global cumsum_fwd, cumsum_bwd, ScanArgumentError, UnsafeNetError, load_net, save_net, verify_net, lower
    global LoweringError, explain, doctor
    if "lower" in vars(_package):
        return
    choose_mkl_code_path()
    require_caffe2()
    from . import doctor, ops
    from .kernels import ScanArgumentError
    from .serialization import UnsafeNetError, load_net, save_net, verify_net
    from .lowering import LoweringError, lower  # also registers the ATen gradient
    from .scans import listen
    from .scans.explain import explain

    cumsum_fwd, cumsum_bwd = ops.cumsum_fwd, ops.cumsum_bwd
    ops.install()
    listen(_bind_scan)


if not started_as_command():
    _load()
