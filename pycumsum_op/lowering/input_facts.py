"""What lowering must know about a scan's input blob: its shape and dtype, when known, and where it is."""
from typing import NamedTuple, Optional, Tuple

import numpy as np

from ..kernels import ScanSpec
from .errors import LoweringError


class Site(NamedTuple):
    """Which op is being lowered, for error messages: ``label`` names it, ``blob_in`` is its scan input."""
    label: str
    blob_in: str

    def __str__(self):
        return self.label


class InputFacts(object):
    """The scan input's shape and dtype, None where neither the user nor Caffe2 knows it.

    ``find`` (a function returning (shape, dtype)) runs on first use only, so a target that needs
    neither never triggers Caffe2's shape inference.

    >>> InputFacts(lambda: ((2, 3), np.dtype(np.float32))).rank
    2
    """

    def __init__(self, find):
        self._find = find
        self._found = None

    def _get(self):
        if self._found is None:
            self._found = self._find()
        return self._found

    @property
    def shape(self) -> Optional[Tuple[int, ...]]:
        return self._get()[0]

    @property
    def dtype(self) -> Optional[np.dtype]:
        return self._get()[1]

    @property
    def rank(self) -> Optional[int]:
        return None if self.shape is None else len(self.shape)


def normalized_axis(spec: ScanSpec, where: str, rank: int) -> int:
    """``spec.axis`` as 0..rank-1 (0-d tensors scan as one element); LoweringError if out of range."""
    span = max(rank, 1)
    if not -span <= spec.axis < span:
        raise LoweringError("{}: axis={} is out of range for its input of rank {}; valid axes are {}..{}".format(
            where, spec.axis, rank, -span, span - 1))
    return spec.axis % span
