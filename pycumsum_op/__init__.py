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
"""
from ._runtime import require_caffe2

require_caffe2()

from .kernels import ScanArgumentError  # noqa: E402
from .ops import (cummax, cummin, cumprod, cumsum, cumsum_bwd, cumsum_fwd,  # noqa: E402
                  install as _install, logcumsumexp)
from .serialization import UnsafeNetError, load_net, verify_net  # noqa: E402
from . import doctor  # noqa: E402

_install()

__version__ = "0.2.0"
__all__ = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "cumsum_fwd", "cumsum_bwd",
           "ScanArgumentError", "UnsafeNetError", "load_net", "verify_net", "__version__"]
