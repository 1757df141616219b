"""The ONNX ops the import accepts, one declaration each (`contract.declare`), by family: `arithmetic`, `unary`,
`softmax`, `reduce`, `shape`, `slicing`, `indexing`, `matmul`, `cnn`, `normalization` (InstanceNormalization),
`resize`, `recurrent`, `scan`, `loss`; `helpers` holds what their translations share.

A translation takes the node (a NodeProto), the model's `GraphFacts`, the opset and a maker of fresh blob names,
and returns the Caffe2 OperatorDefs; a value it cannot express faithfully (a Slice step over a dimension the model
leaves symbolic, an axis that needs the unknown rank, ...) is a `FormRefused` naming the node. Where Caffe2 has a
portable operator with ONNX's meaning it is used (Slice, Gather with ``wrap_indices``, ExpandDims, Squeeze,
Reduce*, Reshape, Softmax, Pow with a constant exponent); otherwise Caffe2's ``ATen`` operator runs torch's kernel
(``flip`` for a reversed axis of symbolic length, ``where``, ``pow`` with a tensor exponent, ``maximum`` /
``minimum``, ``index_put`` for ScatterND), whose broadcasting is ONNX's. A bound handed to a Caffe2 kernel is
first clamped to the range that kernel computes in (``Range`` counts its length in 32 bits).
"""
from typing import Iterator, Mapping, Tuple

from . import (arithmetic, cnn, indexing, loss, matmul, normalization, recurrent, reduce, resize, scan,  # noqa: F401
               shape, slicing, softmax, unary)
from .contract import DECLARATIONS, Declaration, Form


class _Forms(Mapping):
    """ONNX op -> its accepted forms, read from `DECLARATIONS` as they stand."""

    def __getitem__(self, op: str) -> Tuple[Form, ...]:
        return DECLARATIONS[op].forms

    def __iter__(self) -> Iterator[str]:
        return iter(list(DECLARATIONS))

    def __len__(self) -> int:
        return len(DECLARATIONS)


#: ONNX op -> its accepted forms (the first one that fits is used)
FORMS: Mapping[str, Tuple[Form, ...]] = _Forms()

__all__ = ["DECLARATIONS", "Declaration", "FORMS"]
