"""Recognises a cumulative sum written as a product with a triangular 0/1 constant (MatMul, FC, BatchMatMul).

``x @ T`` with T[i, j] = 1 for i <= j (``triu(ones(C, C))``) is ``torch.cumsum(x, -1)``; with i < j it is the
exclusive sum, and the lower triangles sum from the end (reversed). On the left, ``T @ x`` scans axis -2,
lower triangles forward. FC computes ``x @ W.T + b`` (b must be zeros). The constant is a
GivenTensorFill / GivenTensorDoubleFill op (in the net or ``init_net``) or a float blob in the workspace.
The product costs C multiply-adds per output, O(N·C²), and a C×C constant (and its gradient); PyCumSum
takes O(N·C) and no constant. A 1×1 constant is never taken for one: it is a cumsum of one column.

>>> import numpy as np
>>> from caffe2.python import core
>>> net, init = core.Net("doc_tri"), core.Net("doc_tri_init")
>>> _ = init.GivenTensorFill([], "doc_triu", values=np.triu(np.ones((3, 3))).ravel().tolist(), shape=[3, 3])
>>> _ = net.MatMul(["doc_tx", "doc_triu"], "doc_ty")
>>> idiom = match_triangular_product(net.Proto(), 0, init.Proto())
>>> idiom.call(), idiom.columns
("PyCumSum('doc_tx', 'doc_ty', axis=-1)", 3)
"""
from typing import Optional

import numpy as np

from .patterns import CONSTANT_FLOAT_FILLS, TRIANGULAR_PRODUCT, Constants, CumsumIdiom, int_arg

PRODUCTS = ("MatMul", "FC", "BatchMatMul")


def _triangle(matrix: np.ndarray):
    """(lower, strict) when ``matrix`` is a C×C (C >= 2) 0/1 triangle of ones, else None."""
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        return None
    size = matrix.shape[0]
    for lower in (False, True):
        for strict in (False, True):
            offset = (-1 if lower else 1) if strict else 0
            want = np.tril(np.ones((size, size)), offset) if lower else np.triu(np.ones((size, size)), offset)
            if np.array_equal(matrix, want):
                return lower, strict
    return None


def _operands(netdef, index: int, constants: Constants):
    """(x blob, effective constant matrix M, constant blob, constant on the right) or None.

    On the right the op computes x @ M, on the left M @ x (after the op's own transposes)."""
    op = netdef.op[index]
    if op.type == "FC":
        if len(op.input) != 3 or int_arg(op, "axis", 1) != 1 or int_arg(op, "axis_w", 1) != 1:
            return None
        weights = constants.value(op.input[1], index, CONSTANT_FLOAT_FILLS)
        bias = constants.value(op.input[2], index, CONSTANT_FLOAT_FILLS)
        if weights is None or bias is None or bias.shape != weights.shape[:1] or bias.any():
            return None
        return op.input[0], weights.T, op.input[1], True
    if len(op.input) != 2 or op.type == "MatMul" and (int_arg(op, "axis_a", 1) != 1 or int_arg(op, "axis_b", 1) != 1):
        return None
    trans_a, trans_b = int_arg(op, "trans_a", 0), int_arg(op, "trans_b", 0)
    right = constants.value(op.input[1], index, CONSTANT_FLOAT_FILLS)
    if right is not None and not trans_a:
        return op.input[0], right.T if trans_b else right, op.input[1], True
    left = constants.value(op.input[0], index, CONSTANT_FLOAT_FILLS)
    if left is not None and not trans_b:
        return op.input[1], left.T if trans_a else left, op.input[0], False
    return None


def match_triangular_product(netdef, index: int, init_net=None, constants=None) -> Optional[CumsumIdiom]:
    """The cumsum op ``index`` of ``netdef`` computes as a product with a triangular constant, or None.
    ``constants``: a `Constants` of the net and ``init_net``, when one is at hand."""
    op = netdef.op[index]
    if op.type not in PRODUCTS or len(op.output) != 1:
        return None
    operands = _operands(netdef, index, constants or Constants(netdef, init_net))
    if operands is None:
        return None
    blob_in, matrix, constant, on_right = operands
    triangle = _triangle(matrix)
    if triangle is None or blob_in == op.output[0]:
        return None
    lower, strict = triangle
    # x @ triu sums entries i <= j (forward); triu @ x sums rows j >= i (from the end): the side flips the sense.
    return CumsumIdiom(TRIANGULAR_PRODUCT, (index,), (op.type,), blob_in, op.output[0], -1 if on_right else -2,
                       strict, matrix.shape[0], reverse=lower == on_right, constant=constant)
