"""ONNX for PyCumSum: import models with CumSum into Caffe2, export nets with PyCumSum to ONNX.

- `prepare` (and `backend`, an ONNX backend for ``onnx.backend.test.BackendTest``): Caffe2's
  ONNX backend, which also translates CumSum (to PyCumSum; with ``lower="aten"`` / ``"portable"``
  to Caffe2's C++ operators, no Python op left).
- `install`: opt in once so that ``caffe2.python.onnx.backend.prepare`` translates CumSum too.
- `to_caffe2`: ``(init_net, predict_net)`` NetDefs of a model, to save (``lower=`` as in `prepare`).
- `export`: a Caffe2 net with PyCumSum ops -> ``onnx.ModelProto`` at a chosen opset (>= 11).
- `load_model`: an ONNX model file with its external data read from the model's folder only.
"""
from .backend import backend, install, prepare, to_caffe2
from .export import export
from .model_input import load_model

__all__ = ["prepare", "backend", "install", "to_caffe2", "export", "load_model"]
