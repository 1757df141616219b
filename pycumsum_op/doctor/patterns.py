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
import bisect
from typing import NamedTuple, Optional, Sequence, Tuple

import numpy as np
from caffe2.python import workspace

from ..idioms import sparse_lengths_cumsum_constants

CONSTANT_INT_FILLS = ("GivenTensorIntFill", "GivenTensorInt64Fill")
CONSTANT_FLOAT_FILLS = ("GivenTensorFill", "GivenTensorDoubleFill")
#: The forms of a recognised cumulative sum (`CumsumIdiom.form`).
SPARSE_LENGTHS = "sparse_lengths_sum"     # Transpose → SparseLengthsSum(triangular) → Transpose
TRIANGULAR_PRODUCT = "triangular_product"  # MatMul / FC / BatchMatMul with a triangular 0/1 constant
CUMSUM_OP = "cumsum_op"                   # an op of type CumSum (ONNX's name; Caffe2 has no such operator)
#: Ops that only convert a gradient to dense form; after SparseLengthsSum they cannot help (ToDense is no
#: Caffe2 operator at all).
DENSE_CONVERSIONS = ("ToDense", "EnsureDense")


class CumsumIdiom(NamedTuple):
    """A cumulative sum written with other ops: where it sits and the PyCumSum that computes the same.

    ops: the op indices it takes, in net order (its replacement goes where the last one is); op_types their
    types; axis: the scanned axis of ``blob_in`` (None: read from ``axis_blob`` on every run); columns: C, the
    length of the scanned axis, where the constants fix it; misplaced: dense conversions after
    SparseLengthsSum, where they cannot cure the gradient; constant: the triangular constant's blob.
    """
    form: str
    ops: Tuple[int, ...]
    op_types: Tuple[str, ...]
    blob_in: str
    blob_out: str
    axis: Optional[int]
    exclusive: bool
    columns: Optional[int]
    reverse: bool = False
    misplaced: Tuple[int, ...] = ()
    constant: str = ""
    axis_blob: str = ""

    def call(self) -> str:
        """The PyCumSum call that computes the same."""
        source = repr(self.blob_in) if not self.axis_blob else "[{!r}, {!r}]".format(self.blob_in, self.axis_blob)
        flags = "".join(", {}=True".format(name) for name in ("exclusive", "reverse") if getattr(self, name))
        axis = "" if self.axis is None else ", axis={}".format(self.axis)
        return "PyCumSum({}, {!r}{}{})".format(source, self.blob_out, axis, flags)

    def where(self) -> str:
        """"ops #0, #1, #2 (Transpose -> SparseLengthsSum -> Transpose)"."""
        return "op{} {} ({})".format("s" if len(self.ops) > 1 else "", ", ".join("#{}".format(i) for i in self.ops),
                                    " -> ".join(self.op_types))


def _arg(op, name: str):
    for arg in op.arg:
        if arg.name == name:
            return arg
    return None


def int_arg(op, name: str, default: int) -> int:
    arg = _arg(op, name)
    return arg.i if arg is not None and arg.HasField("i") else default


def last_writer(ops: Sequence, blob: str, before: int) -> Optional[int]:
    """Index of the last op before ``before`` that writes ``blob``."""
    for index in range(before - 1, -1, -1):
        if blob in ops[index].output:
            return index
    return None


#: The most elements of a ConstantFill the doctor expands to look at (a 2048×2048 triangle): its shape is
#: only a few bytes of the net, its values would be whatever the shape says.
MAX_FILL_ELEMENTS = 1 << 22


def _elements(dims) -> Optional[int]:
    """The number of elements of ``dims`` (Python integers: no overflow), None for a negative size."""
    count = 1
    for size in dims:
        if size < 0:
            return None
        count *= size
    return count


def _constant_fill(op) -> Optional[np.ndarray]:
    """What a ConstantFill op without inputs writes: ``value`` (a float) in its ``shape``, when that has at most
    `MAX_FILL_ELEMENTS`."""
    shape, value = _arg(op, "shape"), _arg(op, "value")
    if op.input or shape is None or int_arg(op, "dtype", 1) != 1 or value is not None and not value.HasField("f"):
        return None
    count = _elements(shape.ints)
    if count is None or count > MAX_FILL_ELEMENTS:
        return None
    return np.full(list(shape.ints), value.f if value is not None else 0.0)


def _fill_values(op, kinds) -> Optional[np.ndarray]:
    """The values a GivenTensor*Fill op of one of ``kinds`` writes, in its ``shape`` (float kinds: a
    ConstantFill too)."""
    if op.type == "ConstantFill" and kinds == CONSTANT_FLOAT_FILLS:
        return _constant_fill(op)
    values = _arg(op, "values")
    if op.type not in kinds or values is None:
        return None
    array = np.array(list(values.ints) if op.type in CONSTANT_INT_FILLS else list(values.floats),
                     dtype=np.int64 if op.type in CONSTANT_INT_FILLS else np.float64)
    shape = _arg(op, "shape")
    if shape is not None and list(shape.ints):
        if _elements(shape.ints) != array.size:
            return None
        array = array.reshape(list(shape.ints))
    return array


class Writers:
    """The ops of a net that write each blob, for "the last writer before op i" in O(log n)."""

    def __init__(self, netdef):
        self._writers = {}
        for index, op in enumerate(netdef.op):
            for blob in op.output:
                self._writers.setdefault(blob, []).append(index)

    def last(self, blob: str, before: int) -> Optional[int]:
        """Index of the last op before ``before`` that writes ``blob``."""
        writers = self._writers.get(blob, ())
        position = bisect.bisect_left(writers, before)
        return writers[position - 1] if position else None


class Constants:
    """The constants a net's ops read: fill ops in ``netdef`` itself, then in ``init_net``, then blobs in the
    current workspace. Built once per net, so that each look-up takes O(log n)."""

    def __init__(self, netdef, init_net=None):
        self.netdef, self.init_net = netdef, init_net
        self._writers = Writers(netdef)
        self._init_writers = None if init_net is None else Writers(init_net)

    def fill_op(self, blob: str, before: int):
        """The op that writes ``blob`` for op ``before`` of the net (in the net, else the init net), or None:
        then the blob comes from the workspace, if anywhere."""
        writer = self._writers.last(blob, before)
        if writer is not None:
            return self.netdef.op[writer]
        if self._init_writers is not None:
            init_writer = self._init_writers.last(blob, len(self.init_net.op))
            if init_writer is not None:
                return self.init_net.op[init_writer]
        return None

    def value(self, blob: str, before: int, kinds=CONSTANT_INT_FILLS) -> Optional[np.ndarray]:
        """The constant ``blob`` holds when op ``before`` runs, else None: an integer array for ``kinds`` =
        `CONSTANT_INT_FILLS`, a float64 one for `CONSTANT_FLOAT_FILLS`."""
        op = self.fill_op(blob, before)
        if op is not None:
            return _fill_values(op, kinds)
        if workspace.HasBlob(blob):
            try:
                value = workspace.FetchBlob(blob)
            except (RuntimeError, TypeError):
                return None
            wanted = "iu" if kinds == CONSTANT_INT_FILLS else "f"
            if isinstance(value, np.ndarray) and value.dtype.kind in wanted:
                return value.astype(np.int64 if wanted == "iu" else np.float64)
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
    conversions: Tuple[int, ...]


def _only_reader(netdef, blob: str, writer: int) -> Optional[int]:
    """The one op that reads ``blob``, written by op ``writer`` alone and no external output; else None."""
    readers = _readers(netdef, blob)
    if len(readers) != 1 or blob in netdef.external_output or last_writer(netdef.op, blob, readers[0]) != writer:
        return None
    return readers[0]


def _idiom_shape(netdef, sls_index: int) -> Optional[_Shape]:
    """The Transpose → SparseLengthsSum → (dense conversions →) Transpose around op ``sls_index``, whatever
    its constants."""
    ops = netdef.op
    sls = ops[sls_index]
    if sls.type != "SparseLengthsSum" or len(sls.input) != 3 or len(sls.output) != 1:
        return None
    data, indices_blob, lengths_blob = sls.input
    first = last_writer(ops, data, sls_index)
    if first is None or ops[first].type != "Transpose" or len(ops[first].output) != 1:
        return None
    if _readers(netdef, data) != [sls_index] or data in netdef.external_output:
        return None
    conversions, writer, last = [], sls_index, _only_reader(netdef, sls.output[0], sls_index)
    while last is not None and ops[last].type in DENSE_CONVERSIONS and len(ops[last].input) == 1 \
            and len(ops[last].output) == 1:
        conversions.append(last)
        writer, last = last, _only_reader(netdef, ops[last].output[0], last)
    if last is None or ops[last].type != "Transpose" or len(ops[last].output) != 1:
        return None
    blob_in = ops[first].input[0]
    if any(blob_in in ops[index].output for index in range(first + 1, last)):
        return None
    axis = _scanned_axis(ops[first], ops[last])
    return None if axis is None else _Shape(first, last, blob_in, axis, indices_blob, lengths_blob,
                                            tuple(conversions))


def match_cumsum_idiom(netdef, sls_index: int, init_net=None, constants=None) -> Optional[CumsumIdiom]:
    """The idiom around SparseLengthsSum op ``sls_index`` of ``netdef``, or None.

    Matches only when the intermediate blobs are read by nothing else and are not
    external outputs, and the idiom's input is not overwritten in between, so that
    replacing the ops by one PyCumSum changes nothing else. Dense conversions (ToDense,
    EnsureDense) between SparseLengthsSum and the last Transpose belong to it, and are named
    as misplaced. Like every use of the idiom, it assumes the scanned axis has len(LENGTHS) entries
    (SparseLengthsSum would silently drop any further ones).
    """
    shape = _idiom_shape(netdef, sls_index)
    if shape is None:
        return None
    constants = constants or Constants(netdef, init_net)
    indices = constants.value(shape.indices_blob, sls_index)
    lengths = constants.value(shape.lengths_blob, sls_index)
    if indices is None or lengths is None:
        return None
    exclusive = _exclusivity(indices, lengths)
    if exclusive is None:
        return None
    ops = (shape.first, sls_index) + shape.conversions + (shape.last,)
    return CumsumIdiom(SPARSE_LENGTHS, ops, tuple(netdef.op[index].type for index in ops), shape.blob_in,
                       netdef.op[shape.last].output[0], shape.axis, exclusive, len(lengths),
                       misplaced=shape.conversions, constant=shape.indices_blob)


def unknown_idiom_constants(netdef, sls_index: int, init_net=None, constants=None) -> Tuple[str, ...]:
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
    constants = constants or Constants(netdef, init_net)
    return tuple(blob for blob in (shape.indices_blob, shape.lengths_blob)
                 if constants.value(blob, sls_index) is None)
