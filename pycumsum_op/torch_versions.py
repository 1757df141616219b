"""What each torch release with Caffe2 (PyPI's wheels 1.4.0 to 1.10.2) can do: the one table that the
kernels, the lowering targets, the ONNX converters and the tests read (docs/versions.md shows it).

`SINCE` maps a capability to the first torch release that has it, as measured on PyPI's wheels
(torch 1.4.0, 1.6.0, 1.8.1, 1.9.1, 1.10.2). Code asks `has(capability)`; where a feature cannot work
without one, `require(capability, what)` raises `TorchVersionError` (a `LoweringError` when
lowering) with one message: ``<what> needs torch >= 1.X (this is torch 1.Y)``.

>>> version_tuple("1.10.2+cu102"), version_tuple("1.9.0a0+git1234")
((1, 10, 2), (1, 9, 0))
"""
import re
from typing import Tuple

import torch


def version_tuple(version: str) -> Tuple[int, int, int]:
    """(major, minor, patch) of a torch version string (local and pre-release parts dropped)."""
    numbers = [int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))


#: This process's torch.
TORCH = version_tuple(torch.__version__)

#: capability -> the first torch release that has it.
SINCE = {
    # torch functions the kernels call (the kernels carry their own exact forms for older releases)
    "torch.cummax": (1, 5, 0),          # torch.cummax / torch.cummin
    "torch.logcumsumexp": (1, 6, 0),
    "torch.logcumsumexp -inf": (1, 9, 0),  # before: NaN from a leading -inf (and in its gradient)
    # before: autograd's reversed cumsum (cumsum's gradient; cumprod's on 1.9) is total - cumsum + w, which
    # cancels (float32: off by epsilon times the lane's total); from 1.10 flip -> cumsum -> flip
    "torch autograd reversed cumsum by flips": (1, 10, 0),
    # ATen operators (Caffe2's ATen op runs only what its torch was built with)
    "aten cummax": (1, 5, 0),           # cummax / cummin, two outputs
    "aten logcumsumexp": (1, 9, 0),     # an ATen operator from 1.6, but NaN after a leading -inf before 1.9
    "aten flip bool": (1, 6, 0),        # 1.4: "flip_cpu" not implemented for 'Bool' (1.5 not measured)
    "aten cumprod_backward(grad, input, output)": (1, 9, 0),  # before: (grad, input), see below
    "aten cumprod_backward(grad, input)": (1, 8, 0),
    # Caffe2 operators
    "caffe2 Slice short starts": (1, 8, 0),  # before: starts/ends shorter than the rank are misread
    "caffe2 Scale double": (1, 8, 0),        # (1.6: none; 1.7 not measured)
    "caffe2 Sum double": (1, 8, 0),          # float64 and int64 (1.6: none; 1.7 not measured)
    "caffe2 python op exception type": (1, 6, 0),  # before: a RuntimeError with the message (1.5 not measured)
    # Caffe2's ONNX backend without onnx.optimizer (removed in onnx 1.9)
    "caffe2 onnx backend without onnx.optimizer": (1, 10, 0),
}
#: capability -> torch releases (major, minor) where it is broken although present.
BROKEN = {
    "torch.flip 0-d": ((1, 9),),  # torch 1.9.x's flip of a 0-d tensor crashes the process (segfault)
}


class TorchVersionError(RuntimeError):
    """A feature this torch release does not have."""


def _label(version) -> str:
    return "{}.{}".format(*version) + (".{}".format(version[2]) if version[2] else "")


def has(capability: str) -> bool:
    """Whether this process's torch has ``capability`` (a `SINCE` or `BROKEN` key)."""
    if capability in BROKEN:
        return TORCH[:2] not in BROKEN[capability]
    return TORCH >= SINCE[capability]


def torch_version() -> str:
    """This process's torch version string."""
    return torch.__version__


def needs(capability: str, what: str) -> str:
    """The one message for a missing ``capability``: ``<what> needs torch >= 1.X (this is torch 1.Y)``."""
    return "{} needs torch >= {} (this is torch {})".format(what, _label(SINCE[capability]), torch_version())


def require(capability: str, what: str, error=TorchVersionError) -> None:
    """Raise ``error`` (`needs`' message) unless this torch has ``capability``."""
    if not has(capability):
        raise error(needs(capability, what))
