"""ONNX for PyCumSum: import models with CumSum into Caffe2, export nets with PyCumSum to ONNX.

- `prepare` (and `backend`, an ONNX backend for ``onnx.backend.test.BackendTest``): Caffe2's
  ONNX backend, which also translates CumSum (to PyCumSum; with ``lower="aten"`` / ``"portable"``
  to Caffe2's C++ operators, no Python op left).
- `install`: opt in once so that ``caffe2.python.onnx.backend.prepare`` translates CumSum too.
- `to_caffe2`: ``(init_net, predict_net)`` NetDefs of a model, to save (``lower=`` as in `prepare`).
- `export`: a Caffe2 net with PyCumSum ops -> ``onnx.ModelProto`` at a chosen opset (>= 11).
- `load_model`: an ONNX model file with its external data read from the model's folder only.

Importing it checks, in this order and each in one line (an ``ImportError``): that onnx imports (else the
extra to install), that this torch's Caffe2 ONNX backend can translate with it (torch >= 1.10: before, the
backend imports ``onnx.optimizer``, gone from onnx 1.9, and with an older onnx its translations lose the
initializers: "Input fc.weight is undefined!" on torch 1.6 with onnx 1.8.1), and that onnx is a release
these converters are tested with (`SUPPORTED_ONNX`).

>>> onnx_refusal("1.10.2") is None, onnx_refusal("1.17.0") is None
(True, True)
>>> onnx_refusal("1.8.1")
"pycumsum_op.onnx needs onnx 1.9-1.17 (this is onnx 1.8.1): pip install 'pycumsum_op[onnx]'"
"""
from typing import Optional

from .._runtime import install_command, require_optional
from ..torch_versions import require, version_tuple

#: The onnx releases (major, minor) pycumsum_op.onnx is tested with on torch 1.10.2, first and last: the
#: converters' tests pass with onnx 1.9.0, 1.10.2, 1.14.1 and 1.17.0 (docs/versions.md).
SUPPORTED_ONNX = ((1, 9), (1, 17))


def onnx_refusal(version: str) -> Optional[str]:
    """None when onnx ``version`` is in `SUPPORTED_ONNX`, else the one-line reason."""
    first, last = SUPPORTED_ONNX
    if first <= version_tuple(version)[:2] <= last:
        return None
    return "pycumsum_op.onnx needs onnx {}.{}-{}.{} (this is onnx {}): {}".format(
        *first, *last, version, install_command("onnx"))


def _check_onnx() -> None:
    onnx = require_optional("onnx", "pycumsum_op.onnx")
    require("caffe2 onnx backend without onnx.optimizer", "pycumsum_op.onnx with onnx {}".format(onnx.__version__),
            ImportError)
    refusal = onnx_refusal(onnx.__version__)
    if refusal:
        raise ImportError(refusal)


_check_onnx()

from .importer import backend, install, prepare, to_caffe2  # noqa: E402 (after the checks above)
from .export import export  # noqa: E402
from .model_input import load_model  # noqa: E402

__all__ = ["prepare", "backend", "install", "to_caffe2", "export", "load_model"]
