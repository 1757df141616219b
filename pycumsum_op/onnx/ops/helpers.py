"""What the translations of several families share: reading a node's attributes and constant inputs, the constant
blobs and checks they emit, and refusals naming the node.

What a translation builds is counted before it is built: a list or a number of ops that follows a count read from
the model (a Slice's axes, a Reshape's shape, ScatterND's index columns) is refused past ``MAX_RANK`` entries
(`within_rank`), and no list follows a dim (a strided Slice's indices come from Caffe2's ``Range`` at run time).
"""
import numpy as np
from caffe2.proto import caffe2_pb2
from onnx import TensorProto, helper

from ...input_limits import MAX_RANK, InputTooLarge
from ..run_checks import COUNTER_LIMIT, as_double, capped_dims, declared, element_cap, make_op, refusal, size_message
from .contract import DECLARATIONS, FormRefused, given, label


FLOATS = (TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE)


NUMPY_FLOATS = {TensorProto.FLOAT16: np.float16, TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64}


def refuse(node, opset, why: str) -> FormRefused:
    return FormRefused("{}: {}".format(label(node, opset), why))


def attribute(node, name: str, default=None):
    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return default


def within_rank(node, opset, entries: int, what: str) -> None:
    """`InputTooLarge` unless ``entries`` (what a translation makes one op argument, list or op per) fit in a shape's
    `MAX_RANK` dimensions: checked on the count, before anything is built from it."""
    if entries > MAX_RANK:
        raise InputTooLarge("{}: {} has {} entries, more than the {} dimensions a shape may have (MAX_RANK)".format(
            label(node, opset), what, entries, MAX_RANK))


def int64_scalar(node, name: str, value: int) -> caffe2_pb2.OperatorDef:
    """The op filling blob ``name`` with the int64 scalar ``value``."""
    return make_op("ConstantFill", [], [name], node.name, shape=[], dtype=caffe2_pb2.TensorProto.INT64, value=value)


def int_list(node, opset, facts, position: int, what: str):
    """The constant int vector at input ``position`` (None when the input is absent or empty)."""
    if not given(node, position):
        return None
    value = facts.constant(node.input[position])
    if value is None:
        raise refuse(node, opset, "input {} ({}) is not a constant".format(position, what))
    if value.dtype.kind not in "iu" or value.ndim > 1:
        raise refuse(node, opset, "input {} ({}) must be a 1-D integer tensor, got shape {} dtype {}".format(
            position, what, value.shape, value.dtype))
    within_rank(node, opset, value.size, "input {} ({}) {!r}".format(position, what, node.input[position]))
    return [int(v) for v in value.reshape(-1)]


def node_axes(node, opset, facts, position: int = 1):
    """The node's axes: the attribute where the op's form at ``opset`` has one, else input ``position`` (as its
    declaration's forms say: Unsqueeze, Squeeze and ReduceSum take them as an input from opset 13)."""
    form = next(form for form in DECLARATIONS[node.op_type].forms if form.opsets[0] <= opset <= form.opsets[1])
    if "axes" not in form.attributes:
        return int_list(node, opset, facts, position, "axes")
    axes = attribute(node, "axes")
    return None if axes is None else [int(a) for a in axes]


def normalized(node, opset, axes, rank, what: str = "axis"):
    """``axes`` made non-negative for ``rank`` (None: unknown, so only non-negative axes pass)."""
    out = []
    for axis in axes:
        if axis < 0:
            if rank is None:
                raise refuse(node, opset, "{} {} counts from the end, but the input's rank is unknown".format(
                    what, axis))
            axis += rank
        if rank is not None and not 0 <= axis < rank:
            raise refuse(node, opset, "{} {} is out of range for rank {}".format(what, axis, rank))
        out.append(axis)
    if len(set(out)) != len(out):
        raise refuse(node, opset, "repeated {} in {}".format(what, axes))
    return out


def constant_blob(values, fresh) -> tuple:
    """(name, op) of a predict-net constant: an int64 vector."""
    name = fresh()
    return name, make_op("GivenTensorInt64Fill", [], [name], values=[int(v) for v in values], shape=[len(values)])


def type_text(elem_type) -> str:
    """An ONNX element type as a refusal names it."""
    return TensorProto.DataType.Name(elem_type) if elem_type else "of a type the model does not state"


def checked_type(node, opset, facts, name: str, what: str, accepted, why: str) -> int:
    """The element type of blob ``name`` (``what`` in the node), refused unless it is one of ``accepted``."""
    elem_type = facts.elem_type(name)
    if elem_type not in accepted:
        raise refuse(node, opset, "{} {!r} is {}; {}".format(what, name, type_text(elem_type), why))
    return elem_type


def filled_blob(node, shape: str, out: str, dtype: int, value, fresh) -> list:
    """Ops filling ``out`` with ``value`` (Caffe2 ``dtype``) in the shape held by 1-D int64 blob ``shape``, whatever
    its length: Caffe2's ConstantFill refuses an empty shape (a scalar), so it fills (1, *shape) and drops the 1."""
    padded, filled = fresh(), fresh()
    one, fill = constant_blob([1], fresh)
    return [fill, make_op("Concat", [one, shape], [padded, fresh()], node.name, axis=0),
            make_op("ConstantFill", [padded], [filled], node.name, input_as_shape=1, dtype=dtype, value=value),
            make_op("Squeeze", [filled], [out], node.name, dims=[0])]


#: ONNX element type -> Caffe2's, of the types Caffe2's ConstantFill makes (its Expand and Range: all but bool)
CAFFE2_TYPES = {TensorProto.INT32: caffe2_pb2.TensorProto.INT32, TensorProto.INT64: caffe2_pb2.TensorProto.INT64,
                TensorProto.FLOAT: caffe2_pb2.TensorProto.FLOAT, TensorProto.DOUBLE: caffe2_pb2.TensorProto.DOUBLE,
                TensorProto.BOOL: caffe2_pb2.TensorProto.BOOL}
#: the types Caffe2's numeric kernels take (Add, Mul, Div, GE, LE, Where, ScatterAssign, ConstantFill, Concat): those of
#: the stock forms the portable target takes where the other targets run torch's kernels
CAFFE2_NUMBERS = frozenset([TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64])


def counted_by_range(node, opset, length: str, fresh) -> list:
    """Ops stopping the net unless the int64 ``length`` (of an axis whose indices Caffe2's Range makes) is below 2**31:
    Range keeps its count in a 32-bit int, and an axis may be longer (an empty tensor of any declared length is fed
    in no memory), so a count past it would wrap (2**32 + 2**30 indices asked for 2**30)."""
    most, within = fresh(), fresh()
    return [int64_scalar(node, most, COUNTER_LIMIT), make_op("LE", [length, most], [within], node.name),
            refusal(node.name, within, "{}: an axis of input 0 {!r} is longer than the {} indices Caffe2's Range "
                                       "counts (in 32 bits)".format(label(node, opset), node.input[0], COUNTER_LIMIT),
                    length)]


def rank_checked(node, opset, position: int, name: str, facts, fresh, rank: int, exact: bool = True,
                 why: str = "which the model states") -> list:
    """Ops stopping the net unless input ``position`` (blob ``name``) has rank ``rank`` (at least ``rank`` unless
    ``exact``) when the net runs: a translation chose its kernel by the rank the model states, and a value info is no
    proof of what a node computes (a constant or a checked input is: `declared`). Caffe2's BatchMatMul and FC die of
    SIGFPE on operands of other shapes."""
    if declared(facts, name):
        return []
    dims, count, wanted, same = fresh(), fresh(), fresh(), fresh()
    return [make_op("Shape", [name], [dims], node.name), make_op("Size", [dims], [count], node.name),
            int64_scalar(node, wanted, rank), make_op("EQ" if exact else "GE", [count, wanted], [same], node.name),
            refusal(node.name, same, "{}: input {} {!r} does not have rank {}{}, {}".format(
                label(node, opset), position, name, "" if exact else "at least ", rank, why), dims)]


def axis_length(node, data: str, axis: int, fresh) -> tuple:
    """(ops, blob): the length of ``data`` along ``axis`` as a (1,) int64 vector, read at run time; an axis counting
    from the end needs no rank: Caffe2's Slice reads -1 as the end, so [axis - 1, axis) of the shape is that dim (an
    axis past the rank fails the net, as onnxruntime fails it)."""
    length = fresh()
    if axis >= 0:
        return [make_op("Shape", [data], [length], node.name, axes=[axis])], length
    shape = fresh()
    return [make_op("Shape", [data], [shape], node.name),
            make_op("Slice", [shape], [length], node.name, starts=[axis - 1], ends=[axis])], length


def taken(node, data: str, indices: str, out: str, axis: int) -> caffe2_pb2.OperatorDef:
    """The op taking ``indices`` (int64, in range) of ``data`` along ``axis``: Caffe2's Gather (any type) for an axis
    counted from the start, torch's index_select for one counted from the end (no rank needed)."""
    if axis >= 0:
        return make_op("Gather", [data, indices], [out], node.name, axis=axis)
    return make_op("ATen", [data, indices], [out], node.name, operator="index_select", dim=axis)


def checked_shape(node, opset, shape: str, size: int, fresh, lowest: int = 0, named: str = "", length=None) -> list:
    """Ops stopping the net unless the shape in 1-D blob ``shape`` (fed or computed; ``named``: the ONNX input it comes
    from; ``length`` entries, when known) asks for a tensor of elements of ``size`` bytes within
    ``PYCUMSUM_OP_MAX_TENSOR_BYTES``, each dim in
    [``lowest``, cap] (Reshape's -1: ``lowest`` -1): Caffe2 multiplies the dims in 64 bits unchecked ([2**62 + 1, 4]
    would count 4 elements)."""
    what = "the shape {!r}".format(named or shape)
    more, dims = as_double(node.name, shape, fresh)
    return more + capped_dims(node.name, dims, element_cap(size), size_message(label(node, opset), what, size,
                                                                               lowest=lowest),
                              fresh, lowest=lowest, checked=shape, length=length)


def constant_or(facts, name: str, default):
    """The value of constant ``name``, else ``default``."""
    value = facts.constant(name)
    return default if value is None else value


def broadcast_operands(node, facts, names, elem_types, fresh) -> tuple:
    """(ops, blobs): ``names`` (of ONNX ``elem_types``) broadcast to their common shape, for Caffe2's kernels that do
    not broadcast (Where: the portable target's stock operators): each multiplied by ones of that shape with
    Caffe2's Mul, whose broadcasting is numpy's, empty dims included (its Expand reads a 0 as a 1), and x * 1 keeps
    -0.0, NaN and the infinities. The ones are the product of ones like each operand; bool goes through int32 (Mul
    has no bool kernel). Operands the model proves to be of one shape are kept."""
    dims = [facts.known_dims(name) for name in names]
    if dims[0] is not None and None not in dims[0] and all(dim == dims[0] for dim in dims):
        return [], list(names)
    ops, ones = [], None
    for name in names:
        like = fresh()
        ops.append(make_op("ConstantFill", [name], [like], node.name, value=1.0, dtype=caffe2_pb2.TensorProto.FLOAT))
        if ones is not None:
            product = fresh()
            ops.append(make_op("Mul", [ones, like], [product], node.name))
            like = product
        ones = like
    blobs = []
    for name, elem_type in zip(names, elem_types):
        bool_typed = elem_type == TensorProto.BOOL
        c2_type = CAFFE2_TYPES[TensorProto.INT32 if bool_typed else elem_type]
        typed, source, grown = fresh(), name, fresh()
        ops.append(make_op("Cast", [ones], [typed], node.name, to=c2_type))
        if bool_typed:
            source = fresh()
            ops.append(make_op("Cast", [name], [source], node.name, to=caffe2_pb2.TensorProto.INT32))
        ops.append(make_op("Mul", [source, typed], [grown], node.name))
        if bool_typed:
            narrow = fresh()
            ops.append(make_op("Cast", [grown], [narrow], node.name, to=caffe2_pb2.TensorProto.BOOL))
            grown = narrow
        blobs.append(grown)
    return ops, blobs


def extreme(node, facts, first: str, second: str, out: str, fresh, larger: bool, elem_type=TensorProto.INT64) -> list:
    """Ops writing to ``out`` the larger (smaller, unless ``larger``) of ``first`` and ``second``, broadcast as numpy:
    torch's maximum (minimum), or for the portable target (``facts.torch_kernels`` False) the first where it is at
    least (at most) the second or NaN, else the second, by Caffe2's GE (LE), IsNaN and Where of the operands
    broadcast (`broadcast_operands`): a NaN on either side is kept and a tie of 0.0 and -0.0 gives the first, as
    torch's (other types keep torch's kernels, which the portable target refuses). Caffe2's Max is float32 only,
    broadcasts nothing and drops NaN."""
    if facts.torch_kernels or elem_type not in CAFFE2_NUMBERS:
        return [make_op("ATen", [first, second], [out], node.name, operator="maximum" if larger else "minimum")]
    ops, (wide_first, wide_second) = broadcast_operands(node, facts, [first, second], [elem_type] * 2, fresh)
    keep = fresh()
    ops.append(make_op("GE" if larger else "LE", [wide_first, wide_second], [keep], node.name))
    if elem_type in FLOATS:
        nan, is_nan, either = fresh(), fresh(), fresh()
        ops += [make_op("IsNaN", [wide_first], [nan], node.name),  # uint8
                make_op("Cast", [nan], [is_nan], node.name, to=caffe2_pb2.TensorProto.BOOL),
                make_op("Or", [keep, is_nan], [either], node.name)]
        keep = either
    return ops + [make_op("Where", [keep, wide_first, wide_second], [out], node.name)]


def reversed_axis(node, opset, facts, data: str, out: str, axis: int, fresh) -> list:
    """Ops writing ``data`` with ``axis`` reversed to ``out``: torch's flip, or for the portable target Caffe2's Gather
    by the axis' indices from last to first (made by Range from its length read at run time)."""
    if facts.torch_kernels:
        return [make_op("ATen", [data], [out], node.name, operator="flip", dims=[axis])]
    more, dim = axis_length(node, data, axis, fresh)
    length, one, last, counted, backwards = fresh(), fresh(), fresh(), fresh(), fresh()
    return more + [make_op("Squeeze", [dim], [length], node.name, dims=[0])] + counted_by_range(
        node, opset, length, fresh) + [
        int64_scalar(node, one, 1), make_op("Sub", [length, one], [last], node.name),
        make_op("Range", [length], [counted], node.name), make_op("Sub", [last, counted], [backwards], node.name),
        make_op("Gather", [data, backwards], [out], node.name, axis=axis)]


def counted_from_end(node, index: str, length: str, zero: str, fresh) -> tuple:
    """(ops, blob): int64 ``index`` with ``length`` added where it is below ``zero`` (an int64 0): ONNX's indices
    counting from the end. No overflow: a length is added to negatives only."""
    negative, shift, offset, counted = fresh(), fresh(), fresh(), fresh()
    return [make_op("LT", [index, zero], [negative], node.name),
            make_op("Cast", [negative], [shift], node.name, to=caffe2_pb2.TensorProto.INT64),
            make_op("Mul", [shift, length], [offset], node.name),
            make_op("Add", [index, offset], [counted], node.name)], counted


def within_length(node, index: str, length: str, zero: str, message: str, fresh) -> list:
    """Ops stopping the net with ``message`` unless every entry of int64 ``index`` lies in [0, ``length``)."""
    low, high, inside = fresh(), fresh(), fresh()
    return [make_op("GE", [index, zero], [low], node.name), make_op("LT", [index, length], [high], node.name),
            make_op("And", [low, high], [inside], node.name), refusal(node.name, inside, message, index)]


def row_major_position(node, data: str, coordinates, fresh) -> tuple:
    """(ops, blob): the row-major position in ``data`` of the entries whose coordinates along its leading dims are
    ``coordinates`` (int64 blobs that broadcast against each other), by Horner's rule over its dims read at run
    time."""
    ops, position = [], coordinates[0]
    for dim, coordinate in enumerate(coordinates[1:], 1):
        extent, scaled, summed = fresh(), fresh(), fresh()
        ops += [make_op("Shape", [data], [extent], node.name, axes=[dim]),
                make_op("Mul", [position, extent], [scaled], node.name),
                make_op("Add", [scaled, coordinate], [summed], node.name)]
        position = summed
    return ops, position
