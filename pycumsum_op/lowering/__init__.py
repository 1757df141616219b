"""Lowering: nets with scan ops turned into Caffe2's C++ operators (targets "aten" and "portable").

`lower` replaces every PyCumSum (and its gradient op) by C++ operators; importing this package
registers the gradient of the ATen forms it emits (`aten_gradient`).
"""
from . import aten_gradient
from .errors import LoweringError
from .lower import TARGETS, lower, scan_forward

aten_gradient.install()

__all__ = ["lower", "LoweringError", "TARGETS", "scan_forward"]
