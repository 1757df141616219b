"""Gathers, scatters and selections: Gather (Caffe2's, indices wrapped), GatherElements (torch's gather), ScatterND
(torch's index_put), OneHot, Trilu, EyeLike and Where."""
import numpy as np
from caffe2.proto import caffe2_pb2
from onnx import TensorProto

from ...input_limits import MAX_RANK, check_tensor, shape_text
from ..run_checks import (COUNTER_LIMIT, as_double, capped_dims, capped_scalar, element_cap, itemsize,
                          make_op, refusal, size_message, whole_double)
from .contract import (ANY, AT_MOST_FIRST, BROADCAST, MOVED, NEWEST, NUMBERS, ZERO_ONE, Form, broadcast_dims,
                       broadcast_rank, declare, fixed_rank, given, label, same_rank)
from .helpers import (CAFFE2_NUMBERS, CAFFE2_TYPES, attribute, axis_length, broadcast_operands, checked_type,
                      counted_by_range, counted_from_end, int64_scalar, normalized, rank_checked, refuse,
                      row_major_position, type_text, within_length, within_rank)


def _gather_rank(node, known, facts):
    """Gather's: the data's rank, its axis replaced by the indices' dims."""
    data, indices = known(node.input[0]), known(node.input[1])
    return None if data is None or indices is None else data + indices - 1


@declare("Gather", Form((1, NEWEST), {"axis": ANY}), types=MOVED, rank=_gather_rank)
def _gather(node, facts, opset, fresh):
    data = node.input[0]
    (axis,) = normalized(node, opset, [int(attribute(node, "axis", 0))], facts.rank(data))
    return [make_op("Gather", list(node.input), [node.output[0]], node.name, axis=axis, wrap_indices=1)]


@declare("GatherElements", Form((11, NEWEST), {"axis": ANY}), types=MOVED - {TensorProto.UINT16},  # ATen: no uint16
         inputs=("data", "indices"), rank=same_rank)
def _gather_elements(node, facts, opset, fresh):
    """torch's gather (the ATen op; int64 indices in range only): int32 indices are widened and a negative index
    counts from the end of the axis, its length read at run time (an index still out of range fails the net, as
    onnxruntime fails it). The portable target: `_flat_gathered`."""
    data, index = node.input
    rank = facts.rank(data)
    axis = int(attribute(node, "axis", 0))
    if rank is not None or axis >= 0:
        (axis,) = normalized(node, opset, [axis], rank)
    if facts.elem_type(index) not in (TensorProto.INT32, TensorProto.INT64):
        raise refuse(node, opset, "input 1 (indices) {!r} is not int32 or int64".format(index))
    ops, length = axis_length(node, data, axis, fresh)
    wide, zero = fresh(), fresh()
    ops += [make_op("Cast", [index], [wide], node.name, to=caffe2_pb2.TensorProto.INT64), int64_scalar(node, zero, 0)]
    more, wrapped = counted_from_end(node, wide, length, zero, fresh)
    ops += more
    if facts.torch_kernels:
        return ops + [make_op("ATen", [data, wrapped], [node.output[0]], node.name, operator="gather", dim=axis)]
    if rank is None:
        raise refuse(node, opset, "the rank of input 0 {!r} is unknown; the portable target gathers by indices into "
                                   "it flattened, which need it".format(data))
    return ops + rank_checked(node, opset, 0, data, facts, fresh, rank) + rank_checked(
        node, opset, 1, index, facts, fresh, rank, why="input 0's, as ONNX requires") + _flat_gathered(
        node, opset, wrapped, length, zero, axis, rank, fresh)


def _flat_gathered(node, opset, wrapped: str, length: str, zero: str, axis: int, rank: int, fresh) -> list:
    """GatherElements for the portable target: Caffe2's Gather from the data flattened, by the position of each
    entry (its coordinates, the index ``wrapped`` on ``axis``, made one number by Horner's rule over the data's dims
    read at run time). An index out of [0, ``length``) and an indices dim past the data's (torch's gather refuses
    both; here they would address other entries) stop the net first."""
    data, index = node.input
    where = label(node, opset)
    data_dims, index_dims, fits = fresh(), fresh(), fresh()
    kept = [position for position in range(rank) if position != axis]
    ops = within_length(node, wrapped, length, zero, "{}: an index of input 1 {!r} is out of range for axis {} of "
                                                     "input 0 {!r}".format(where, index, axis, data), fresh)
    if kept:
        ops += [make_op("Shape", [data], [data_dims], node.name, axes=kept),
                make_op("Shape", [index], [index_dims], node.name, axes=kept),
                make_op("LE", [index_dims, data_dims], [fits], node.name),
                refusal(node.name, fits, "{}: input 1 {!r} has a dim past input 0 {!r}'s off axis {}".format(
                    where, index, data, axis), index_dims)]
    coordinates = []
    for dim in range(rank):
        if dim == axis:
            coordinates.append(wrapped)
            continue
        # 0 .. n - 1 along this dim of the indices, laid so that it broadcasts against them
        count, length_here, counted, coordinate = fresh(), fresh(), fresh(), fresh()
        ops += [make_op("Shape", [index], [count], node.name, axes=[dim]),
                make_op("Squeeze", [count], [length_here], node.name, dims=[0])] + counted_by_range(
            node, opset, length_here, fresh) + [
                make_op("Range", [length_here], [counted], node.name),
                make_op("ExpandDims", [counted], [coordinate], node.name,
                        dims=[other for other in range(rank) if other != dim])]
        coordinates.append(coordinate)
    more, position = row_major_position(node, data, coordinates, fresh)
    flat = fresh()
    return ops + more + [make_op("FlattenToVec", [data], [flat], node.name),
                  make_op("Gather", [flat, position], [node.output[0]], node.name)]


def _last_dim(facts, opset, name: str):
    """The last dim of blob ``name``: inferred, or read off the nodes that make it (torch builds ScatterND's
    indices by concatenating, on the last axis, pieces unsqueezed at the last axis); None when unknown."""
    dims = facts.dims(name)
    if dims and dims[-1] is not None:
        return dims[-1]
    node = facts.producer(name)
    if node is None:
        return None
    if node.op_type == "Unsqueeze":
        axes = attribute(node, "axes") if opset < 13 else (
            facts.constant(node.input[1]) if len(node.input) > 1 else None)
        return 1 if axes is not None and [int(a) for a in np.reshape(axes, -1)] == [-1] else None
    if node.op_type == "Concat" and attribute(node, "axis") == -1:
        pieces = [_last_dim(facts, opset, piece) for piece in node.input]
        return None if None in pieces else sum(pieces)
    return None


@declare("ScatterND", Form((11, 15)), types=MOVED - {TensorProto.UINT16}, rank=same_rank,  # opset 16 adds reduction
         counted=((1, -1, "indices", "index columns"),))
def _scatter_nd(node, facts, opset, fresh):
    data, indices, updates = node.input
    depth = _last_dim(facts, opset, indices)
    if depth is None:
        raise refuse(node, opset, "the last dim of indices {!r} is unknown".format(indices))
    # two ops per indexed dimension: counted before they are made
    within_rank(node, opset, depth, "the last dim of indices {!r} (one index per dimension of data)".format(indices))
    if facts.rank(data) is not None and depth > facts.rank(data):
        raise refuse(node, opset, "the last dim of indices {!r} is {}, more than the rank {} of data {!r}".format(
            indices, depth, facts.rank(data), data))
    index_rank = facts.rank(indices)
    if index_rank is None:  # updates' shape is indices.shape[:-1] + data.shape[depth:]
        if facts.rank(updates) is None or facts.rank(data) is None:
            raise refuse(node, opset, "the rank of indices {!r} is unknown".format(indices))
        index_rank = facts.rank(updates) - (facts.rank(data) - depth) + 1
    if not facts.torch_kernels and facts.elem_type(data) in CAFFE2_NUMBERS | {TensorProto.BOOL}:
        return _assigned_rows(node, opset, facts, depth, index_rank, fresh)
    ops, columns = [], []
    for column in range(depth):  # index_put takes one index tensor per indexed dimension
        picked = fresh()
        ops.append(make_op("Slice", [indices], [picked], node.name, starts=[0] * (index_rank - 1) + [column],
                       ends=[-1] * (index_rank - 1) + [column + 1]))
        squeezed = fresh()
        ops.append(make_op("Squeeze", [picked], [squeezed], node.name, dims=[index_rank - 1]))
        columns.append(squeezed)
    ops.append(make_op("ATen", [data] + columns + [updates], [node.output[0]], node.name, operator="index_put",
                   accumulate=0))
    return ops


def _assigned_rows(node, opset, facts, depth: int, index_rank: int, fresh) -> list:
    """ScatterND by Caffe2's ScatterAssign (the portable target): data flattened to one row per index into its first
    ``depth`` dims, each index made a row number by Horner's rule over those dims read at run time, after a negative
    index counts from the end and one out of range stops the net (torch's index_put refuses it; Caffe2's kernel
    checks no bound). A row of zeros is appended first and cut after: ScatterAssign divides by the row count
    (SIGFPE on data with no row)."""
    data, indices, updates = node.input
    elem_type, ops, out = facts.elem_type(data), [], node.output[0]
    if elem_type == TensorProto.BOOL:  # ScatterAssign has no bool kernel
        elem_type, data, updates, out = TensorProto.INT32, fresh(), fresh(), fresh()
        ops += [make_op("Cast", [node.input[0]], [data], node.name, to=caffe2_pb2.TensorProto.INT32),
                make_op("Cast", [node.input[2]], [updates], node.name, to=caffe2_pb2.TensorProto.INT32)]
    rows, slices, pairs, wide, zero = fresh(), fresh(), fresh(), fresh(), fresh()
    ops += [make_op("Flatten", [data], [rows], node.name, axis=depth),
           make_op("Flatten", [updates], [slices], node.name, axis=index_rank - 1),
           make_op("Flatten", [indices], [pairs], node.name, axis=index_rank - 1),
           make_op("Cast", [pairs], [wide], node.name, to=caffe2_pb2.TensorProto.INT64), int64_scalar(node, zero, 0)]
    coordinates = []
    for column in range(depth):
        picked, index, dim = fresh(), fresh(), fresh()
        ops += [make_op("Slice", [wide], [picked], node.name, starts=[0, column], ends=[-1, column + 1]),
                make_op("Squeeze", [picked], [index], node.name, dims=[1]),
                make_op("Shape", [data], [dim], node.name, axes=[column])]
        more, wrapped = counted_from_end(node, index, dim, zero, fresh)
        ops += more + within_length(node, wrapped, dim, zero, "{}: an index in column {} of indices {!r} is out of "
                                                              "range for dim {} of data {!r}".format(
            label(node, opset), column, indices, column, node.input[0]), fresh)
        coordinates.append(wrapped)
    more, number = row_major_position(node, data, coordinates, fresh)
    ops += more
    shape, width, one, pad_shape, pad, grown, cut, dims = (fresh() for _ in range(8))
    return ops + [make_op("Shape", [rows], [shape], node.name), make_op("Slice", [shape], [width], node.name,
                                                                       starts=[1], ends=[2]),
                  make_op("GivenTensorInt64Fill", [], [one], node.name, values=[1], shape=[1]),
                  make_op("Concat", [one, width], [pad_shape, fresh()], node.name, axis=0),
                  make_op("ConstantFill", [pad_shape], [pad], node.name, input_as_shape=1,
                          dtype=CAFFE2_TYPES[elem_type],
                          value=0.0 if elem_type in (TensorProto.FLOAT, TensorProto.DOUBLE) else 0),
                  make_op("Concat", [rows, pad], [grown, fresh()], node.name, axis=0),
                  make_op("ScatterAssign", [grown, number, slices], [grown], node.name),
                  make_op("Slice", [grown], [cut], node.name, starts=[0, 0], ends=[-2, -1]),
                  make_op("Shape", [data], [dims], node.name),
                  make_op("Reshape", [cut, dims], [out, fresh()], node.name)] + (
        [] if out == node.output[0] else [make_op("Cast", [out], [node.output[0]], node.name,
                                                  to=caffe2_pb2.TensorProto.BOOL)])


#: the index types OneHot translates (onnxruntime's other one, float, it truncates to an integer first)
_ONE_HOT_INDICES = (TensorProto.INT32, TensorProto.INT64)


# where(indices == positions, on, off); opset 11 wraps negative indices by depth
@declare("OneHot", Form((9, 10), {"axis": ANY}), Form((11, NEWEST), {"axis": ANY}), typed=("input", 2),
         types=frozenset([TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT32, TensorProto.INT64]))
def _one_hot(node, facts, opset, fresh):
    """ONNX's OneHot as where(indices == positions, on, off): the positions 0..depth-1 (Caffe2's Range) laid along
    ``axis`` and compared with the indices unsqueezed there, so an index outside the range matches none (all off).
    From opset 11 on an index in [-depth, -1] counts from the end (it also matches position - depth); opset 9's
    definition gives it all off (onnxruntime departs from it and wraps). A depth below 1 fails onnxruntime's run: a
    constant one is refused, a fed one stops the net's Assert."""
    indices, depth, values = node.input
    checked_type(node, opset, facts, indices, "input 0 (indices)", _ONE_HOT_INDICES,
           "only int32 and int64 indices are translated")
    rank = facts.rank(indices)
    if rank == 0:
        raise refuse(node, opset, "input 0 (indices) {!r} has rank 0; ONNX's OneHot needs rank 1 or more".format(
            indices))
    value_dims = facts.dims(values)
    if value_dims != [2]:
        raise refuse(node, opset, "input 2 (values) {!r} has dims {}; [off, on] must be stated as 2 values".format(
            values, value_dims))
    axis = int(attribute(node, "axis", -1))
    if axis >= 0:  # counted from the end, so that the positions' trailing 1-dims need no rank
        if rank is None:
            raise refuse(node, opset, "axis {} needs the rank of input 0 (indices), which the model does not "
                                       "state".format(axis))
        axis -= rank + 1
    if axis < -(rank if rank is not None else MAX_RANK) - 1 or axis > -1:
        raise refuse(node, opset, "axis {} is out of range for indices of rank {}".format(
            int(attribute(node, "axis", -1)), rank))
    ops, count = [], fresh()
    where = label(node, opset)
    size = itemsize(facts.elem_type(values))
    constant = facts.constant(depth)
    if constant is not None:
        if constant.size != 1 or constant.dtype.kind not in "iuf" or not np.isfinite(constant).all():
            raise refuse(node, opset, "input 1 (depth) must be one finite number, got {!r}".format(constant))
        length = int(constant.reshape(-1)[0])  # onnxruntime truncates a float depth
        if length < 1:
            raise refuse(node, opset, "input 1 (depth) is {}; onnxruntime fails a depth below 1".format(length))
        # charged before anything is built: the positions (int64, counted by Caffe2's Range in 32 bits) and, where
        # the model states every dim of the indices, the output; else the output is checked when the net runs
        check_tensor([length], 8, "{}: its positions".format(where))
        if length > COUNTER_LIMIT:
            raise refuse(node, opset, "input 1 (depth) is {}, past the {} positions Caffe2's Range counts in 32 "
                                       "bits".format(length, COUNTER_LIMIT))
        known = facts.dims(indices)
        if known is not None and None not in known:
            check_tensor(known + [length], size, "{}: its output".format(where))
        ops.append(int64_scalar(node, count, length))
        more, depth_value = whole_double(node.name, length, fresh)
        ops += more
    else:
        depth_type = facts.elem_type(depth)
        if depth_type not in (TensorProto.INT32, TensorProto.INT64, TensorProto.FLOAT, TensorProto.DOUBLE):
            raise refuse(node, opset, "input 1 (depth) {!r}, fed at run time, is {}; only int32, int64, float and "
                                       "double are translated".format(depth, type_text(depth_type)))
        depth_dims = facts.dims(depth)
        if depth_dims is None or len(depth_dims) > 1 or any(dim != 1 for dim in depth_dims):
            raise refuse(node, opset, "input 1 (depth) {!r} has dims {}; a fed depth must be stated as one "
                                       "value".format(depth, depth_dims))
        # held to [1, cap] as a float64 before it is truncated to int64 as onnxruntime truncates it (a float past
        # int64 would convert to anything), and below 2**31: Caffe2's Range counts the positions in 32 bits
        more, depth_value = as_double(node.name, depth, fresh)
        ops += more + capped_scalar(node.name, depth_value, element_cap(8, counter=True), "{}: input 1 (depth) {!r} "
                                    "is below 1 or more than {} (PYCUMSUM_OP_MAX_TENSOR_BYTES; Caffe2's Range counts "
                                    "it in 32 bits)".format(where, depth, element_cap(8, counter=True)),
                                    fresh, lowest=1, checked=depth)
        ops.append(make_op("Cast", [depth_value], [count], node.name, to=caffe2_pb2.TensorProto.INT64))
    if constant is None or known is None or None in known:  # the output: every index times the depth
        index_dims = fresh()
        ops.append(make_op("Shape", [indices], [index_dims], node.name))
        more, dims = as_double(node.name, index_dims, fresh)
        ops += more + capped_dims(node.name, dims, element_cap(size), size_message(
            where, "its output (the dims of input 0 (indices) {!r} and the depth)".format(indices), size), fresh,
            checked=index_dims, factor=depth_value)
    wide, laid, positions, hit = fresh(), fresh(), fresh(), fresh()
    ops += [make_op("Cast", [indices], [wide], node.name, to=caffe2_pb2.TensorProto.INT64),
            make_op("ATen", [wide], [laid], node.name, operator="unsqueeze", dim=axis),
            make_op("Range", [count], [positions], node.name)]
    if axis < -1:
        along = fresh()
        ops.append(make_op("ExpandDims", [positions], [along], node.name, dims=list(range(1, -axis))))
        positions = along
    # torch's eq and logical_or: Caffe2's EQ and Or die of SIGFPE broadcasting against an empty dim
    ops.append(make_op("ATen", [laid, positions], [hit], node.name, operator="eq"))
    if opset >= 11:
        from_end, hit_end, either = fresh(), fresh(), fresh()
        ops += [make_op("Sub", [positions, count], [from_end], node.name),
                make_op("ATen", [laid, from_end], [hit_end], node.name, operator="eq"),
                make_op("ATen", [hit, hit_end], [either], node.name, operator="logical_or")]
        hit = either
    off, on, first, second = fresh(), fresh(), fresh(), fresh()
    ops += [int64_scalar(node, first, 0), int64_scalar(node, second, 1),
            make_op("Gather", [values, first], [off], node.name), make_op("Gather", [values, second], [on], node.name),
            make_op("ATen", [hit, on, off], [node.output[0]], node.name, operator="where")]
    return ops


#: Trilu's k past this reaches no entry of any tensor; torch's triu and tril add k to a row index in int64, so a k
#: near 2**63 would wrap around
_FAR_DIAGONAL = 2 ** 62


# torch's triu / tril for a constant k, a mask by Caffe2's Range and torch's masked_fill for a k fed at run time; the
# types onnxruntime has kernels for (no oracle for the others)
@declare("Trilu", Form((14, NEWEST), {"upper": ZERO_ONE}), inputs=("input", "k"), rank=same_rank,
         types=frozenset([TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT64,
                          TensorProto.BOOL]))
def _trilu(node, facts, opset, fresh):
    """Trilu over the last two axes: a constant k (default 0) is torch's triu or tril by the ATen op (k as its
    ``diagonal``, held to +-2**62); a k known only at run time zeroes, by torch's masked_fill, the entries whose
    column - row is below k (upper) or above it (lower), the rows' and columns' indices made by Caffe2's Range from
    the input's dims read at run time. The portable target zeroes them so for any k, by Caffe2's Where of the mask
    and the input broadcast (`broadcast_operands`) and zeros (float, double and int64)."""
    data, out = node.input[0], node.output[0]
    elem_type = facts.elem_type(data)
    upper = bool(attribute(node, "upper", 1))
    rank = facts.rank(data)
    if rank is None or rank < 2:
        raise refuse(node, opset, "input 0 {!r} has rank {}; Trilu takes rank 2 or more".format(
            data, rank if rank is not None else "unknown"))
    stock = not facts.torch_kernels and elem_type in CAFFE2_NUMBERS
    ops = []
    if not given(node, 1) or facts.is_constant(node.input[1]):
        k = 0
        if given(node, 1):
            value = facts.constant(node.input[1])
            if value is None or value.size != 1 or value.ndim > 1 or value.dtype.kind not in "iu":
                raise refuse(node, opset, "input 1 (k) must be an integer scalar")
            k = int(value.reshape(()))
        k = max(-_FAR_DIAGONAL, min(_FAR_DIAGONAL, k))
        if not stock:
            return [make_op("ATen", [data], [out], node.name, operator="triu" if upper else "tril", diagonal=k)]
        k_blob = fresh()
        ops.append(int64_scalar(node, k_blob, k))
    else:
        k_blob = node.input[1]
        if facts.elem_type(k_blob) != TensorProto.INT64:  # compared with int64 column - row
            raise refuse(node, opset, "input 1 (k) {!r} is not int64".format(k_blob))
        dims = facts.dims(k_blob)
        if dims is None or len(dims) > 1 or (dims and dims[0] != 1):
            raise refuse(node, opset, "input 1 (k) {!r} is declared with dims {}; a k fed at run time must be "
                                       "declared a scalar".format(k_blob, "unknown" if dims is None else
                                                                  shape_text(dims)))
    more, offsets = _diagonal_offsets(node, opset, data, rank, fresh)
    dropped = fresh()
    ops += more + [make_op("LT" if upper else "GT", [offsets, k_blob], [dropped], node.name)]
    if not stock:
        return ops + [make_op("ATen", [data, dropped], [out], node.name, operator="masked_fill", value=0)]
    more, (mask, values) = broadcast_operands(node, facts, [dropped, data], [TensorProto.BOOL, elem_type], fresh)
    zeros = fresh()
    return ops + more + [make_op("ConstantFill", [values], [zeros], node.name, dtype=CAFFE2_TYPES[elem_type],
                                 value=0 if elem_type == TensorProto.INT64 else 0.0),
                         make_op("Where", [mask, zeros, values], [out], node.name)]


def _diagonal_offsets(node, opset, data: str, rank: int, fresh) -> tuple:
    """(ops, blob): column - row (int64, (rows, columns)) of the last two axes of ``data`` (of rank ``rank``), the
    rows' and columns' indices made by Caffe2's Range from the dims read at run time."""
    ops, indices = [], []
    for axis in (rank - 2, rank - 1):
        shape, length, index = fresh(), fresh(), fresh()
        ops += [make_op("Shape", [data], [shape], node.name, axes=[axis]),
                make_op("Squeeze", [shape], [length], node.name, dims=[0])] + counted_by_range(node, opset, length,
                                                                                               fresh)
        ops.append(make_op("Range", [length], [index], node.name))
        indices.append(index)
    rows, offsets = fresh(), fresh()
    return ops + [make_op("ExpandDims", [indices[0]], [rows], node.name, dims=[1]),
                  make_op("Sub", [indices[1], rows], [offsets], node.name)], offsets


#: ONNX element type -> Caffe2's, of the types EyeLike makes that onnxruntime has a kernel for (and Caffe2 a type)
_EYE_TYPES = {TensorProto.FLOAT: caffe2_pb2.TensorProto.FLOAT, TensorProto.DOUBLE: caffe2_pb2.TensorProto.DOUBLE,
              TensorProto.INT32: caffe2_pb2.TensorProto.INT32, TensorProto.INT64: caffe2_pb2.TensorProto.INT64}


@declare("EyeLike", Form((9, NEWEST), {"dtype": frozenset(_EYE_TYPES), "k": ANY}), types=frozenset(_EYE_TYPES),
         rank=fixed_rank(2), elements=AT_MOST_FIRST)
def _eye_like(node, facts, opset, fresh):
    """Ones where column - row is k, zeros elsewhere, in the input's (2-D) dims read at run time, of type ``dtype``
    (the input's without it): the offsets of `_diagonal_offsets` compared with k and cast. The input's rank is
    checked when the net runs unless the model proves it, and its dims are held within the cap first (Range
    allocates one index per row and per column, the offsets one int64 per element, whatever the input holds)."""
    data, out = node.input[0], node.output[0]
    rank = facts.rank(data)
    if rank is not None and rank != 2:
        raise refuse(node, opset, "input 0 {!r} has rank {}; EyeLike takes rank 2".format(data, rank))
    elem_type = int(attribute(node, "dtype", facts.elem_type(data)))
    ops = rank_checked(node, opset, 0, data, facts, fresh, 2, why="as EyeLike takes")
    shape = fresh()
    more, dims = as_double(node.name, shape, fresh)
    ops += [make_op("Shape", [data], [shape], node.name)] + more + capped_dims(
        node.name, dims, element_cap(8, counter=True), size_message(
            label(node, opset), "the dims of input 0 {!r} (one int64 per element)".format(data), 8, counter=True),
        fresh, checked=shape, length=2)
    more, offsets = _diagonal_offsets(node, opset, data, 2, fresh)
    k, diagonal = fresh(), fresh()
    return ops + more + [int64_scalar(node, k, int(attribute(node, "k", 0))),
                         make_op("EQ", [offsets, k], [diagonal], node.name),
                         make_op("Cast", [diagonal], [out], node.name, to=_EYE_TYPES[elem_type])]


@declare("Where", Form((9, NEWEST)), types=NUMBERS | {TensorProto.FLOAT16, TensorProto.UINT8}, typed=("input", 1),
         rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
def _where(node, facts, opset, fresh):
    """torch's where (ONNX's broadcasting); for the portable target, Caffe2's Where of the operands broadcast first
    (`broadcast_operands`: its kernel takes one shape) where its kernel has the type."""
    if facts.torch_kernels:
        return [make_op("ATen", list(node.input), [node.output[0]], node.name, operator="where")]
    checked_type(node, opset, facts, node.input[1], "input 1 (X)", CAFFE2_NUMBERS,
                 "Caffe2's Where (the portable target's) takes float, double, int32 and int64")
    types = [TensorProto.BOOL] + [facts.elem_type(node.input[1])] * 2
    ops, operands = broadcast_operands(node, facts, list(node.input), types, fresh)
    return ops + [make_op("Where", operands, [node.output[0]], node.name)]
