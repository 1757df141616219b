"""Recognises the cumsum idiom: Transpose → SparseLengthsSum(DATA, triangular INDICES, LENGTHS) → Transpose.

With LENGTHS 0..C-1 (the usual form of the idiom) it is an exclusive cumsum, with
1..C an inclusive one, along the axis the first Transpose brings to the front.
INDICES and LENGTHS must be constants: GivenTensorIntFill / GivenTensorInt64Fill
ops (in ``init_net`` or in the net itself) or blobs in the current workspace.

>>> from caffe2.python import core
>>> from pycumsum_op.idioms import add_sparse_lengths_cumsum
>>> net, init = core.Net("doc_idiom"), core.Net("doc_idiom_init")
>>> _ = add_sparse_lengths_cumsum(net, "doc_p", 4, init_net=init)
>>> idiom = match_cumsum_idiom(net.Proto(), 1, init.Proto())
>>> idiom.blob_in, idiom.blob_out, idiom.axis, idiom.exclusive, idiom.columns
('doc_p', 'doc_p_cumsum', -1, True, 4)
"""
from typing import NamedTuple, Optional, Sequence, Tuple

import numpy as np
from caffe2.python import workspace

from ..idioms import sparse_lengths_cumsum_constants

CONSTANT_INT_FILLS = ("GivenTensorIntFill", "GivenTensorInt64Fill")


class CumsumIdiom(NamedTuple):
    """Where the idiom sits (op indices) and the PyCumSum that computes the same."""
    first_transpose: int
    sparse_lengths_sum: int
    last_transpose: int
    blob_in: str
    blob_out: str
    axis: int
    exclusive: bool
    columns: int

    def describe(self) -> str:
        """One sentence on what the ops compute and what replaces them."""
        kind = ("an EXCLUSIVE cumsum (column 0 is 0: off by one against torch.cumsum)" if self.exclusive
                else "an inclusive cumsum (torch.cumsum)")
        return ("Ops #{}, #{}, #{} (Transpose → SparseLengthsSum → Transpose) compute {} of {!r} along axis {} "
                "in O(N·C²); strategy=\"pycumsum\" replaces them by one "
                "net.PyCumSum({!r}, {!r}, axis={}{}) with a dense gradient in O(N·C).".format(
                    self.first_transpose, self.sparse_lengths_sum, self.last_transpose, kind, self.blob_in,
                    self.axis, self.blob_in, self.blob_out, self.axis, ", exclusive=True" if self.exclusive else ""))


def _arg(op, name: str):
    for arg in op.arg:
        if arg.name == name:
            return arg
    return None


def _last_writer(ops: Sequence, blob: str, before: int) -> Optional[int]:
    """Index of the last op before ``before`` that writes ``blob``."""
    for index in range(before - 1, -1, -1):
        if blob in ops[index].output:
            return index
    return None


def _fill_values(op) -> Optional[np.ndarray]:
    if op.type not in CONSTANT_INT_FILLS or _arg(op, "values") is None:
        return None
    return np.array(list(_arg(op, "values").ints), dtype=np.int64)


def constant_int_blob(blob: str, netdef, before: int, init_net=None) -> Optional[np.ndarray]:
    """The constant integer vector ``blob`` holds when op ``before`` of ``netdef`` runs, else None.

    Looked up in the net's own ops, then ``init_net``'s fill ops, then the current workspace.
    """
    writer = _last_writer(netdef.op, blob, before)
    if writer is not None:
        return _fill_values(netdef.op[writer])
    if init_net is not None:
        init_writer = _last_writer(init_net.op, blob, len(init_net.op))
        if init_writer is not None:
            return _fill_values(init_net.op[init_writer])
    if workspace.HasBlob(blob):
        try:
            value = workspace.FetchBlob(blob)
        except (RuntimeError, TypeError):
            return None
        if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
            return value.astype(np.int64)
    return None


def _permutation(op) -> Optional[list]:
    """A Transpose's axes (None = reverse all axes)."""
    axes = _arg(op, "axes")
    return None if axes is None or not axes.ints else list(axes.ints)


def _scanned_axis(first, last) -> Optional[int]:
    """The input axis the idiom scans, if the second Transpose undoes the first."""
    first_axes, last_axes = _permutation(first), _permutation(last)
    if first_axes is None and last_axes is None:
        return -1
    explicit = first_axes if first_axes is not None else last_axes
    if sorted(explicit) != list(range(len(explicit))):
        return None
    if first_axes is None or last_axes is None:  # the explicit one must also be the full reversal
        return len(explicit) - 1 if explicit == list(reversed(range(len(explicit)))) else None
    inverse = [first_axes.index(axis) for axis in range(len(first_axes))]
    return first_axes[0] if last_axes == inverse else None


def _readers(netdef, blob: str) -> list:
    return [index for index, op in enumerate(netdef.op) if blob in op.input]


def _exclusivity(indices: np.ndarray, lengths: np.ndarray) -> Optional[bool]:
    """True/False when (indices, lengths) are the exclusive/inclusive triangular constants."""
    for exclusive in (True, False):
        want_indices, want_lengths = sparse_lengths_cumsum_constants(len(lengths), exclusive)
        if np.array_equal(indices, want_indices) and np.array_equal(lengths, want_lengths):
            return exclusive
    return None


class _Shape(NamedTuple):
    """The idiom's ops and blobs, before its constants are looked at."""
    first: int
    last: int
    blob_in: str
    axis: int
    indices_blob: str
    lengths_blob: str


def _idiom_shape(netdef, sls_index: int) -> Optional[_Shape]:
    """The Transpose → SparseLengthsSum → Transpose around op ``sls_index``, whatever its constants."""
    ops = netdef.op
    sls = ops[sls_index]
    if sls.type != "SparseLengthsSum" or len(sls.input) != 3 or len(sls.output) != 1:
        return None
    data, indices_blob, lengths_blob = sls.input
    first = _last_writer(ops, data, sls_index)
    readers = _readers(netdef, sls.output[0])
    if first is None or ops[first].type != "Transpose" or len(readers) != 1 or ops[readers[0]].type != "Transpose":
        return None
    last = readers[0]
    if _readers(netdef, data) != [sls_index] or len(ops[first].output) != 1 or len(ops[last].output) != 1:
        return None
    if {data, sls.output[0]} & set(netdef.external_output) or _last_writer(ops, sls.output[0], last) != sls_index:
        return None
    blob_in = ops[first].input[0]
    if any(blob_in in ops[index].output for index in range(first + 1, last)):
        return None
    axis = _scanned_axis(ops[first], ops[last])
    return None if axis is None else _Shape(first, last, blob_in, axis, indices_blob, lengths_blob)


def match_cumsum_idiom(netdef, sls_index: int, init_net=None) -> Optional[CumsumIdiom]:
    """The idiom around SparseLengthsSum op ``sls_index`` of ``netdef``, or None.

    Matches only when the intermediate blobs are read by nothing else and are not
    external outputs, and the idiom's input is not overwritten in between, so that
    replacing the three ops by one PyCumSum changes nothing else. Like every
    use of the idiom, it assumes the scanned axis has len(LENGTHS) entries
    (SparseLengthsSum would silently drop any further ones).
    """
    shape = _idiom_shape(netdef, sls_index)
    if shape is None:
        return None
    indices = constant_int_blob(shape.indices_blob, netdef, sls_index, init_net)
    lengths = constant_int_blob(shape.lengths_blob, netdef, sls_index, init_net)
    if indices is None or lengths is None:
        return None
    exclusive = _exclusivity(indices, lengths)
    if exclusive is None:
        return None
    return CumsumIdiom(shape.first, sls_index, shape.last, shape.blob_in, netdef.op[shape.last].output[0],
                       shape.axis, exclusive, len(lengths))


def unknown_idiom_constants(netdef, sls_index: int, init_net=None) -> Tuple[str, ...]:
    """The INDICES / LENGTHS blobs whose values are unknown when the ops around SparseLengthsSum
    op ``sls_index`` have the idiom's shape (e.g. its init net was not given); () otherwise.

    >>> from caffe2.python import core
    >>> from pycumsum_op.idioms import add_sparse_lengths_cumsum
    >>> net, init = core.Net("doc_unknown"), core.Net("doc_unknown_init")
    >>> _ = add_sparse_lengths_cumsum(net, "doc_u", 4, init_net=init)
    >>> unknown_idiom_constants(net.Proto(), 1), unknown_idiom_constants(net.Proto(), 1, init.Proto())
    (('doc_u_cumsum_indices', 'doc_u_cumsum_lengths'), ())
    """
    shape = _idiom_shape(netdef, sls_index)
    if shape is None:
        return ()
    return tuple(blob for blob in (shape.indices_blob, shape.lengths_blob)
                 if constant_int_blob(blob, netdef, sls_index, init_net) is None)
