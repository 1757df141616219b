"""pycumsum_op: torch.cumsum for Caffe2 nets, as a Python operator with a gradient.

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
from .ops import cumsum, cumsum_bwd, cumsum_fwd, install as _install  # noqa: E402
from .serialization import UnsafeNetError, load_net, verify_net  # noqa: E402
from . import doctor  # noqa: E402
from .converters import LoweringError, lower  # noqa: E402

_install()

__version__ = "0.1.0"
__all__ = ["cumsum", "cumsum_fwd", "cumsum_bwd", "ScanArgumentError",
           "UnsafeNetError", "load_net", "verify_net", "lower", "LoweringError", "__version__"]
