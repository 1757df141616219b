"""The Caffe2 binding: Python-op builders, ``net.PyCumSum`` and its siblings, and their brew helpers."""
from . import brew_helpers, net_ops
from .builders import cumsum_bwd, cumsum_fwd, scan_backward, scan_forward
from .net_ops import add_scan_op, scan_function


def install():
    """Install ``core.Net.PyCumSum`` (and siblings) and ``brew.cumsum`` (and siblings) for every registered
    scan, now and as scans are registered; idempotent."""
    net_ops.install()
    brew_helpers.install()


__all__ = ["cumsum_fwd", "cumsum_bwd", "scan_forward",
           "scan_backward", "add_scan_op", "scan_function", "install"]
