"""Ops that make or move a shape: Reshape, Unsqueeze, Squeeze, Flatten, Expand, Tile, Shape, Size, ConstantOfShape,
Range, Dropout (inference: a copy), Transpose, and those Caffe2's converter translates right (Concat, Cast,
Constant, Identity). Every shape read from a value is checked at run time before the op that allocates it."""
import numpy as np
import onnx.numpy_helper
from caffe2.proto import caffe2_pb2
from onnx import TensorProto

from ...input_limits import MAX_RANK, check_tensor, shape_text
from ...lowering.aten_gradient import imported_form
from ..run_checks import (as_double, capped_dims, capped_scalar, declared, element_cap, exact_double, itemsize,
                          magnitudes, make_op, product, refusal, size_message, whole_double)
from .contract import (ANY, AT_MOST_FIRST, BOOL, MOVED, NEWEST, NUMBERS, STOCK, Form, declare, first_known_rank,
                       fixed_rank, given, label, same_dims, same_rank, shape_length_rank, stock)
from .helpers import (CAFFE2_TYPES, FLOATS, attribute, checked_shape, checked_type, constant_blob, filled_blob,
                      int64_scalar, node_axes, normalized, refuse, type_text, within_rank)

#: Caffe2's CPU Cast has no float16 (nor the types Caffe2 has no tensor for)
_CASTS = MOVED - {TensorProto.FLOAT16}

stock("Concat", Form((4, NEWEST), {"axis": ANY}), types=MOVED, rank=first_known_rank)
stock("Cast", Form((9, NEWEST), {"to": _CASTS}), types=_CASTS, rank=same_rank, dims=same_dims, elements=AT_MOST_FIRST,
      why="Caffe2's Cast writes STRING wrong and has no CPU kernel for FLOAT16 (ONNX's numbers: 1 FLOAT, 2 UINT8, "
          "3 INT8, 4 UINT16, 5 INT16, 6 INT32, 7 INT64, 9 BOOL, 11 DOUBLE)")
stock("Constant", Form((9, NEWEST), {"value": ANY}), types=NUMBERS | BOOL, typed=("output", 0))
stock("Identity", Form((7, NEWEST)), types=MOVED, rank=same_rank, dims=same_dims, elements=AT_MOST_FIRST)


def _unsqueeze_rank(node, known, facts):
    """Unsqueeze's: the input's rank plus one per axis."""
    axes = facts.axes(node)
    rank = known(node.input[0])
    return None if axes is None or rank is None else rank + len(axes)


def _unsqueeze_dims(node, known_dims, facts):
    """Unsqueeze's: the input's dims with a 1 at each axis."""
    axes, dims = facts.axes(node), known_dims(node.input[0])
    if axes is None or dims is None:
        return None
    rank = len(dims) + len(axes)
    ones = {axis + rank if axis < 0 else axis for axis in axes}
    if len(ones) != len(axes) or not ones <= set(range(rank)):
        return None
    rest = iter(dims)
    return [1 if axis in ones else next(rest) for axis in range(rank)]


def _expand_rank(node, known, facts):
    """Expand's: the larger of the input's rank and the shape's length."""
    rank, length = known(node.input[0]), shape_length_rank(node, known, facts)
    return None if rank is None or length is None else max(rank, length)


@declare("Reshape", Form((5, NEWEST), {"allowzero": frozenset([0])}), types=MOVED, shape_input=1,
         why="Caffe2's Reshape copies a 0 in the shape from the input (allowzero=0); allowzero=1 has no form",
         rank=shape_length_rank, elements=AT_MOST_FIRST)
def _reshape(node, facts, opset, fresh):
    """Caffe2's Reshape copies a 0 of the shape from the input's dims only when the input is not empty (ONNX
    copies it always): zeros are replaced by the dims first, from the model or at run time. A shape whose length
    the model does not state (computed, or fed with a symbolic length) is read when the net runs: the output's rank
    is then unknown to the import, and the ops after it that need one refuse."""
    data, shape = node.input
    dims, out = facts.dims(data), [node.output[0], fresh()]
    declared = facts.dims(shape)
    if declared is not None and len(declared) != 1:  # before any list is made from its length
        raise refuse(node, opset, "the shape {!r} is declared with dims {}; ONNX takes a 1-D shape".format(
            shape, shape_text(declared)))
    values = facts.constant(shape)
    if values is not None:
        within_rank(node, opset, values.size, "the shape {!r}".format(shape))
        values = [int(v) for v in values.reshape(-1)]
        if min(values, default=0) < -1 or values.count(-1) > 1:  # Caffe2 divides by them: a shape [-2, -1] crashed it
            raise refuse(node, opset, "the shape {!r} is {}; ONNX gives meaning to one -1 and to 0s, no other "
                                       "negative dim".format(shape, shape_text(values)))
        zeros = [k for k, v in enumerate(values) if v == 0]
        if values and (not zeros or dims is not None and all(k < len(dims) and dims[k] is not None for k in zeros)):
            written = [dims[k] if v == 0 else v for k, v in enumerate(values)]
            ops = _count_fixed(node, opset, facts, written, fresh)
            if not zeros:
                return ops + [make_op("Reshape", [data, shape], out, node.name)]
            blob, fill = constant_blob(written, fresh)
            return ops + [fill, make_op("Reshape", [data, blob], out, node.name)]
    count = _length(facts, opset, shape)
    if count is not None:
        within_rank(node, opset, count, "the shape {!r}".format(shape))
    ops, data_dims, padded, prefix = [], fresh(), fresh(), fresh()
    # a 0 past the input's rank copies no dim (onnxruntime fails): it becomes a -2, which the check below stops
    padding, fill = constant_blob([-2] * (MAX_RANK if count is None else count), fresh)
    ops += [make_op("Shape", [data], [data_dims], node.name), fill,
            make_op("Concat", [data_dims, padding], [padded, fresh()], node.name, axis=0)]
    if count is None:  # the output's rank is the shape's length, read when the net runs
        length, start = fresh(), fresh()
        ops += _length_bound(node, opset, shape, length, fresh) + [
            make_op("GivenTensorInt64Fill", [], [start], node.name, values=[0], shape=[1]),
            make_op("Slice", [padded, start, length], [prefix], node.name)]
    else:
        ops.append(make_op("Slice", [padded], [prefix], node.name, starts=[0], ends=[count]))
    zero, is_zero, new_shape = fresh(), fresh(), fresh()
    ops += [int64_scalar(node, zero, 0),
            make_op("EQ", [shape, zero], [is_zero], node.name),
            make_op("Where", [is_zero, prefix, shape], [new_shape], node.name)]  # one length: Caffe2's Where
    ops += checked_shape(node, opset, new_shape, itemsize(facts.elem_type(data)), fresh, lowest=-1, named=shape,
                         length=count)
    ops += _count_agrees(node, opset, data, new_shape, shape, count, fresh)
    if count:
        return ops + [make_op("Reshape", [data, new_shape], out, node.name)]
    # Caffe2's Reshape refuses an empty shape (a scalar): the shape gets a leading 1, dropped after
    one, led, lifted = fresh(), fresh(), fresh()
    return ops + [make_op("GivenTensorInt64Fill", [], [one], node.name, values=[1], shape=[1]),
                  make_op("Concat", [one, new_shape], [led, fresh()], node.name, axis=0),
                  make_op("Reshape", [data, led], [lifted, fresh()], node.name),
                  make_op("Squeeze", [lifted], [node.output[0]], node.name, dims=[0])]


def _count_refused(node, opset, data: str, shape: str) -> str:
    """The message of a Reshape's count check."""
    return ("{}: the shape {!r} does not hold the elements of input 0 {!r} (with a -1: none of its other dims may "
            "be 0)".format(label(node, opset), shape, data))


def _count_fixed(node, opset, facts, written, fresh) -> list:
    """Ops stopping the net unless input 0 has the element count of the constant shape ``written`` (its 0s replaced
    by the dims they copy), where the import cannot tell: Caffe2's Reshape checks the count of a non-empty input
    only, and reshapes an empty one to any shape, whose elements it then reads from memory it does not own. A -1
    takes the count that is left (0 for an empty input), which needs the other dims' product not 0, as onnxruntime
    does."""
    data = node.input[0]
    others = int(np.prod([v for v in written if v != -1], dtype=object))
    if -1 in written:
        if not others:
            raise refuse(node, opset, "the shape {!r} is {} with a 0: no count to infer its -1 from".format(
                node.input[1], shape_text(written)))
        return []
    dims = facts.dims(data)
    if declared(facts, data) and dims is not None and None not in dims:
        if int(np.prod(dims, dtype=object)) != others:
            raise refuse(node, opset, "input 0 {!r} of dims {} cannot be reshaped to {}".format(
                data, shape_text(dims), shape_text(written)))
        return []
    size, wanted, same = fresh(), fresh(), fresh()
    return [make_op("Size", [data], [size], node.name),
            int64_scalar(node, wanted, min(others, 2 ** 63 - 1)),  # a larger count fails the check all the same
            make_op("EQ", [size, wanted], [same], node.name),
            refusal(node.name, same, _count_refused(node, opset, data, node.input[1]), size)]


def _count_agrees(node, opset, data: str, new_shape: str, shape: str, length, fresh) -> list:
    """`_count_fixed` for a shape read when the net runs (int64 blob ``new_shape`` of ``length`` entries when known, its
    dims checked within the cap): without a -1 the product of its dims is the input's count; with one, that product
    is not 0."""
    more, dims = as_double(node.name, new_shape, fresh)
    more_magnitudes, magnitude = magnitudes(node.name, dims, fresh)
    more_product, total = product(node.name, magnitude, length, fresh, _count_refused(node, opset, data, shape))
    minus, free, frees, count, size, whole = (fresh() for _ in range(6))
    zero, with_free, nonzero, fits_free, without, equal, fits, agrees = (fresh() for _ in range(8))
    double = caffe2_pb2.TensorProto.DOUBLE
    return more + [make_op("ConstantFill", [], [minus], node.name, shape=[], dtype=double, value=-1.0),
                   make_op("EQ", [dims, minus], [free], node.name),
                   make_op("Cast", [free], [frees], node.name, to=double),
                   make_op("ReduceSum", [frees], [count], node.name, axes=[0], keepdims=0)] + \
        more_magnitudes + more_product + [
            make_op("Size", [data], [size], node.name), make_op("Cast", [size], [whole], node.name, to=double),
            make_op("ConstantFill", [], [zero], node.name, shape=[], dtype=double, value=0.0),
            make_op("GT", [count, zero], [with_free], node.name), make_op("GT", [total, zero], [nonzero], node.name),
            make_op("And", [with_free, nonzero], [fits_free], node.name),
            make_op("Not", [with_free], [without], node.name), make_op("EQ", [total, whole], [equal], node.name),
            make_op("And", [without, equal], [fits], node.name), make_op("Or", [fits_free, fits], [agrees], node.name),
            refusal(node.name, agrees, _count_refused(node, opset, data, shape), new_shape)]


def _length_bound(node, opset, shape: str, length: str, fresh) -> list:
    """Ops writing the length of 1-D blob ``shape`` to ``length`` ((1,) int64), stopping the net unless it is at most
    `MAX_RANK` (the zeros it is sliced from)."""
    most, short = fresh(), fresh()
    return [make_op("Shape", [shape], [length], node.name),
            make_op("GivenTensorInt64Fill", [], [most], node.name, values=[MAX_RANK], shape=[1]),
            make_op("LE", [length, most], [short], node.name),
            refusal(node.name, short, "{}: the shape {!r} has more than the {} dimensions a shape may have "
                                      "(MAX_RANK)".format(label(node, opset), shape, MAX_RANK), shape)]


def _length(facts, opset, name: str):
    """The length of 1-D blob ``name`` (a Reshape's shape): inferred, constant, or read off the nodes that make
    it (torch concatenates scalars unsqueezed at axis 0); None when unknown."""
    dims = facts.dims(name)
    if dims and dims[0] is not None:
        return dims[0]
    value = facts.constant(name)
    if value is not None:
        return value.size
    node = facts.producer(name)
    if node is None:
        return None
    if node.op_type == "Unsqueeze" and facts.rank(node.input[0]) == 0:
        return 1
    if node.op_type == "Concat" and attribute(node, "axis") in (0, -1):
        pieces = [_length(facts, opset, piece) for piece in node.input]
        return None if None in pieces else sum(pieces)
    if node.op_type == "Cast":
        return _length(facts, opset, node.input[0])
    return None


@declare("Unsqueeze", Form((1, 12), {"axes": ANY}), Form((13, NEWEST), constants=(1,)), types=MOVED,
         inputs=("data", "axes"), shape_input=1, rank=_unsqueeze_rank, dims=_unsqueeze_dims,
         elements=AT_MOST_FIRST)
def _unsqueeze(node, facts, opset, fresh):
    axes = node_axes(node, opset, facts)
    if not axes:
        raise refuse(node, opset, "axes are required")
    rank = facts.rank(node.input[0])
    if rank is None and len(axes) == 1 and axes[0] < 0:  # torch's unsqueeze counts from the end as ONNX does
        return [make_op("ATen", [node.input[0]], [node.output[0]], node.name, operator="unsqueeze", dim=axes[0])]
    axes = normalized(node, opset, axes, None if rank is None else rank + len(axes))
    return [make_op("ExpandDims", [node.input[0]], [node.output[0]], node.name, dims=sorted(axes))]


@declare("Squeeze", Form((1, 12), {"axes": ANY}), Form((13, NEWEST), constants=(1,)), types=MOVED,
         inputs=("data", "axes"), shape_input=1, elements=AT_MOST_FIRST)
def _squeeze(node, facts, opset, fresh):
    data = node.input[0]
    axes = node_axes(node, opset, facts)
    dims = facts.dims(data)
    if axes is None:
        if dims is None or None in dims:
            raise refuse(node, opset, "no axes, and the dims of input {!r} are not all known".format(data))
        axes = [axis for axis, dim in enumerate(dims) if dim == 1]
    axes = normalized(node, opset, axes, None if dims is None else len(dims))
    if not axes:
        return [make_op("Copy", [data], [node.output[0]], node.name)]
    return [make_op("Squeeze", [data], [node.output[0]], node.name, dims=sorted(axes))]


@declare("Flatten", Form((1, NEWEST), {"axis": ANY}), types=MOVED, rank=fixed_rank(2), elements=AT_MOST_FIRST)
def _flatten(node, facts, opset, fresh):
    data = node.input[0]
    rank = facts.rank(data)
    axis = int(attribute(node, "axis", 1))
    if axis < 0:
        if rank is None:
            raise refuse(node, opset, "axis {} counts from the end, but the input's rank is unknown".format(axis))
        axis += rank
    if rank is not None and not 0 <= axis <= rank:
        raise refuse(node, opset, "axis {} is out of range for rank {}".format(axis, rank))
    return [make_op("Flatten", [data], [node.output[0]], node.name, axis=axis)]


# Caffe2's Expand has no bool kernel
@declare("Expand", Form((8, NEWEST)), types=NUMBERS | BOOL, shape_input=1, rank=_expand_rank)
def _expand(node, facts, opset, fresh):
    """Caffe2's Expand broadcasts as ONNX's does, over int32, int64, float and double, but reads a 0 in the shape as
    a 1 and enforces (math_cpu.cc) on an empty input dim that the shape broadcasts: unless the model proves that
    neither happens, x is multiplied by ones of the shape with the ATen op, or Caffe2's Mul for the portable target
    (both broadcast empty dims as ONNX does, and x * 1 keeps -0.0, NaN and the infinities). Bool goes through int32
    (Caffe2's Expand has no bool kernel)."""
    data, shape = node.input
    elem_type = facts.elem_type(data)
    if elem_type not in CAFFE2_TYPES:
        raise refuse(node, opset, "input {!r} is {}; Caffe2's Expand takes int32, int64, float, double (and "
                                   "bool, through int32)".format(data, type_text(elem_type)))
    ops, source, target = [], data, node.output[0]
    if elem_type == TensorProto.BOOL:
        source, target = fresh(), fresh()
        ops.append(make_op("Cast", [data], [source], node.name, to=caffe2_pb2.TensorProto.INT32))
    values, dims = facts.constant(shape), facts.dims(data)
    if values is not None and values.size and values.min() < 0:  # Caffe2's Expand read [-2, -2] as a 1
        raise refuse(node, opset, "the shape {!r} is {}; a negative dim has no meaning".format(
            shape, shape_text(values.reshape(-1).tolist())))
    if values is None or not facts.is_constant(data):
        ops += _broadcast_bound(node, opset, data, shape, itemsize(TensorProto.INT32 if elem_type == TensorProto.BOOL
                                                                    else elem_type), fresh)
    if values is not None and 0 not in values.reshape(-1).tolist() and dims is not None and None not in dims \
            and 0 not in dims:
        ops.append(make_op("Expand", [source, shape], [target], node.name))
    else:
        ones = fresh()
        c2_type = CAFFE2_TYPES[TensorProto.INT32 if elem_type == TensorProto.BOOL else elem_type]
        ops += filled_blob(node, shape, ones, c2_type, 1.0 if elem_type in FLOATS else 1, fresh)
        ops.append(make_op("ATen", [source, ones], [target], node.name, operator="mul") if facts.torch_kernels
                   else make_op("Mul", [source, ones], [target], node.name))
    if elem_type == TensorProto.BOOL:
        ops.append(make_op("Cast", [target], [node.output[0]], node.name, to=caffe2_pb2.TensorProto.BOOL))
    return ops


def _padded(node, dims: str, fresh) -> tuple:
    """(ops, blob): the int64 vector ``dims`` with 1s before it to `MAX_RANK` entries (numpy's broadcasting aligns
    dims from the last; Caffe2's Slice reads start -k as length + 1 - k)."""
    ones, fill = constant_blob([1] * MAX_RANK, fresh)
    joined, padded = fresh(), fresh()
    return [fill, make_op("Concat", [ones, dims], [joined, fresh()], node.name, axis=0),
            make_op("Slice", [joined], [padded], node.name, starts=[-MAX_RANK - 1], ends=[-1])], padded


def _broadcast_bound(node, opset, data: str, shape: str, size: int, fresh) -> list:
    """Ops stopping the net unless Expand's output, ``data`` broadcast with the shape in blob ``shape`` (fed or
    computed), is within ``PYCUMSUM_OP_MAX_TENSOR_BYTES``: the shape has at most `MAX_RANK` entries, each in [0, cap]
    (the ones Expand multiplies by are filled to it), and the product of the larger of each pair of aligned dims (a
    bound of the broadcast's dims) is within the cap."""
    where = label(node, opset)
    message = size_message(where, "the shape {!r} broadcast with input 0 {!r}".format(shape, data), size)
    ops, wide, count, most, short = [], fresh(), fresh(), fresh(), fresh()
    ops += [make_op("Cast", [shape], [wide], node.name, to=caffe2_pb2.TensorProto.INT64),
            make_op("Size", [wide], [count], node.name), int64_scalar(node, most, MAX_RANK),
            make_op("LE", [count, most], [short], node.name),
            refusal(node.name, short, "{}: the shape {!r} has more than the {} dimensions a shape may have "
                                      "(MAX_RANK)".format(where, shape, MAX_RANK), wide)]
    more, entries = as_double(node.name, wide, fresh)
    ops += more + capped_scalar(node.name, entries, element_cap(size), message, fresh, checked=wide)
    data_dims = fresh()
    ops.append(make_op("Shape", [data], [data_dims], node.name))
    aligned = []
    for dims in (data_dims, wide):
        more, padded = _padded(node, dims, fresh)
        more_double, double = as_double(node.name, padded, fresh)
        ops += more + more_double
        aligned.append(double)
    larger, first_larger = fresh(), fresh()
    ops += [make_op("GE", aligned, [first_larger], node.name),  # whole numbers: Caffe2's Max is float32 only
            make_op("Where", [first_larger] + aligned, [larger], node.name)]
    return ops + capped_dims(node.name, larger, element_cap(size), message, fresh, checked=wide, length=MAX_RANK)


# Caffe2's NumpyTile (the stock converter's), after run-time checks of the output's size: repeats constant or fed at
# run time (opset 1's tiles/axis differ)
@declare("Tile", Form((6, NEWEST)), types=MOVED, inputs=("input", "repeats"), shape_input=1, rank=same_rank)
def _tile(node, facts, opset, fresh):
    """Caffe2's NumpyTile (what its stock converter makes), after ops stopping the net unless every repeat lies in
    [0, cap] and the input's dims times the repeats ask for a tensor within ``PYCUMSUM_OP_MAX_TENSOR_BYTES``: the
    repeats may be fed, and NumpyTile multiplies the dims in 64 bits unchecked."""
    data, repeats = node.input
    size = itemsize(facts.elem_type(data))
    message = size_message(label(node, opset), "input 0 {!r} tiled by the repeats {!r}".format(data, repeats), size)
    dims, wide = fresh(), fresh()
    ops = [make_op("Shape", [data], [dims], node.name),
           make_op("Cast", [repeats], [wide], node.name, to=caffe2_pb2.TensorProto.INT64)]
    more_dims, dims_double = as_double(node.name, dims, fresh)
    more_repeats, repeats_double = as_double(node.name, wide, fresh)
    tiled = fresh()
    ops += more_dims + more_repeats + capped_scalar(node.name, repeats_double, element_cap(size), message, fresh,
                                                    checked=wide)
    # repeats of another length than the rank fail the Mul (NumpyTile would refuse them too), one repeat broadcasts
    ops.append(make_op("Mul", [dims_double, repeats_double], [tiled], node.name))
    ops += capped_dims(node.name, tiled, element_cap(size), message, fresh, checked=wide, length=facts.rank(data))
    return ops + [make_op("NumpyTile", [data, repeats], [node.output[0]], node.name)]


@declare("Shape", Form((1, 14), translation=STOCK), Form((15, NEWEST), {"start": ANY, "end": ANY}), types=MOVED,
         rank=fixed_rank(1))
def _shape(node, facts, opset, fresh):
    """The dims of the input from ``start`` to ``end`` (opset 15; clamped as ONNX's), by Caffe2's Shape ``axes``;
    the rank must be known unless the whole shape is taken."""
    start, end = int(attribute(node, "start", 0)), attribute(node, "end")
    if start == 0 and end is None:
        return [make_op("Shape", [node.input[0]], [node.output[0]], node.name)]
    rank = facts.rank(node.input[0])
    if rank is None:
        raise refuse(node, opset, "start/end need the input's rank, which the model does not state")
    axes = list(range(rank))[start:rank if end is None else int(end)]
    if not axes:
        return [make_op("GivenTensorInt64Fill", [], [node.output[0]], node.name, values=[], shape=[0])]
    return [make_op("Shape", [node.input[0]], [node.output[0]], node.name, axes=axes)]


@declare("Size", Form((1, NEWEST)), types=MOVED, rank=fixed_rank(0))
def _size(node, facts, opset, fresh):
    """Caffe2's Size: the input's element count, an int64 scalar."""
    return [make_op("Size", [node.input[0]], [node.output[0]], node.name)]


# the C++ converter has no bool
@declare("ConstantOfShape", Form((9, NEWEST), {"value": ANY}), types=NUMBERS | BOOL, typed=("output", 0),
         shape_input=0, length_is_rank=True, rank=shape_length_rank)
def _constant_of_shape(node, facts, opset, fresh):
    """Caffe2's ConstantFill of the shape (``input_as_shape``). A shape known only at run time is checked first
    (`checked_shape`). Its ``value`` argument is a float32 (Caffe2's Argument.f; an integer one is int64, exact): a
    double float32 cannot hold (0.1, 1e300) fills ones, multiplied by the value made exactly (`exact_double`)."""
    value = attribute(node, "value")
    if value is None:
        elem_type, number = TensorProto.FLOAT, 0.0
    else:
        elem_type, number = value.data_type, onnx.numpy_helper.to_array(value).reshape(-1)
        if number.size != 1:
            raise refuse(node, opset, "the value must hold one element, got {}".format(number.size))
        number = number[0].item()
    if elem_type not in CAFFE2_TYPES:
        raise refuse(node, opset, "value of type {} (Caffe2's ConstantFill makes {})".format(
            TensorProto.DataType.Name(elem_type), ", ".join(TensorProto.DataType.Name(t) for t in CAFFE2_TYPES)))
    number = float(number) if elem_type in FLOATS else int(number)
    inexact = elem_type == TensorProto.DOUBLE and np.isfinite(number) and float(np.float32(number)) != number
    c2_type, out = CAFFE2_TYPES[elem_type], node.output[0]
    filled, fill_value = (fresh(), 1.0) if inexact else (out, number)
    length, shape = facts.dims(node.input[0]), facts.constant(node.input[0])
    if shape is not None:  # checked here: Caffe2 multiplies the dims unchecked (a shape [-2, -2] crashed it)
        within_rank(node, opset, shape.size, "the shape {!r}".format(node.input[0]))
        if shape.size and shape.min() < 0:
            raise refuse(node, opset, "the shape {!r} is {}; a negative dim has no meaning".format(
                node.input[0], shape_text(shape.reshape(-1).tolist())))
        check_tensor(shape.reshape(-1).tolist(), itemsize(elem_type), "{}: its output".format(label(node, opset)))
    if shape is not None and shape.size == 0:  # a scalar
        ops = [make_op("ConstantFill", [], [filled], node.name, shape=[], dtype=c2_type, value=fill_value)]
    else:
        ops = [] if shape is not None else checked_shape(node, opset, node.input[0], itemsize(elem_type), fresh,
                                                         length=length[0] if length else None)
        if shape is not None or (length and length[0]):  # ConstantFill refuses an empty shape
            ops.append(make_op("ConstantFill", [node.input[0]], [filled], node.name, input_as_shape=1, dtype=c2_type,
                           value=fill_value))
        else:
            ops += filled_blob(node, node.input[0], filled, c2_type, fill_value, fresh)
    if inexact:
        more, exact = exact_double(node.name, number, fresh)
        ops += more + [make_op("ATen", [filled, exact], [out], node.name, operator="mul") if facts.torch_kernels
                       else make_op("Mul", [filled, exact], [out], node.name)]
    return ops


#: ONNX element type -> Caffe2's, of the types Caffe2's Range takes
_RANGE_TYPES = {elem_type: c2_type for elem_type, c2_type in CAFFE2_TYPES.items() if elem_type != TensorProto.BOOL}


# Caffe2's Range: a negative integer delta
@declare("Range", Form((11, NEWEST)), types=NUMBERS)
def _range(node, facts, opset, fresh):
    """Caffe2's Range counts ONNX's max(ceil((limit - start) / delta), 0) elements for floats and for a positive
    integer delta, but truncates the count for a negative one (Range(4, -1, -2) gives [4, 2], ONNX [4, 2, 0]):
    an integer Range with a negative delta runs as -Range(-start, -limit, -delta), the sign read at run time
    unless delta is a constant."""
    start, limit, delta = node.input
    elem_type = checked_type(node, opset, facts, start, "start", _RANGE_TYPES,
                       "Caffe2's Range takes int32, int64, float and double")
    step = facts.constant(delta)
    if step is not None and step.size == 1 and float(step.reshape(-1)[0]) == 0:
        raise refuse(node, opset, "delta {!r} is 0".format(delta))
    ops = _range_bound(node, opset, start, limit, delta, itemsize(elem_type), fresh)
    if elem_type in (TensorProto.FLOAT, TensorProto.DOUBLE) or (step is not None and step.size == 1 and
                                                               step.reshape(-1)[0] > 0):
        return ops + [make_op("Range", [start, limit, delta], [node.output[0]], node.name)]
    c2_type = _RANGE_TYPES[elem_type]
    sign = fresh()
    if step is not None and step.size == 1:
        ops.append(make_op("ConstantFill", [], [sign], node.name, shape=[], dtype=c2_type, value=-1))
    else:  # 1 - 2 * (delta < 0)
        zero, one, negative, flag, twice = (fresh() for _ in range(5))
        ops += [make_op("ConstantFill", [], [zero], node.name, shape=[], dtype=c2_type, value=0),
                make_op("ConstantFill", [], [one], node.name, shape=[], dtype=c2_type, value=1),
                make_op("LT", [delta, zero], [negative], node.name),
                make_op("Cast", [negative], [flag], node.name, to=c2_type),
                make_op("Add", [flag, flag], [twice], node.name),
                make_op("Sub", [one, twice], [sign], node.name)]
    signed, counted = [], fresh()
    for name in (start, limit, delta):
        signed.append(fresh())
        ops.append(make_op("Mul", [name, sign], [signed[-1]], node.name))
    return ops + [make_op("Range", signed, [counted], node.name),
                  make_op("Mul", [counted, sign], [node.output[0]], node.name)]


def _range_bound(node, opset, start: str, limit: str, delta: str, size: int, fresh) -> list:
    """Ops stopping the net unless Range's count, (limit - start) / delta computed in float64, is at most the cap and
    below 2**31: Caffe2's Range computes it in the input's type (an int64 difference can wrap) and keeps it in a
    32-bit int (a count past it wraps). A NaN count (a delta of 0 over no span) fails the check too."""
    ops, doubles = [], []
    for name in (start, limit, delta):
        more, double = as_double(node.name, name, fresh)
        ops += more
        doubles.append(double)
    span, count, within = fresh(), fresh(), fresh()
    cap = element_cap(size, counter=True)
    more, high = whole_double(node.name, cap, fresh)
    return ops + more + [
        make_op("Sub", [doubles[1], doubles[0]], [span], node.name), make_op("Div", [span, doubles[2]], [count],
                                                                             node.name),
        make_op("LE", [count, high], [within], node.name),
        refusal(node.name, within, "{}: (limit {!r} - start {!r}) / delta {!r} counts more than {} elements "
                                   "(PYCUMSUM_OP_MAX_TENSOR_BYTES; Caffe2's Range counts them in 32 bits)".format(
                                       label(node, opset), limit, start, delta, cap), count)]


# onnxruntime's kernels; Caffe2 copies any
@declare("Dropout", Form((7, 11), {"ratio": ANY}), Form((12, NEWEST), {"seed": ANY}, constants=(2,)),
         types=frozenset([TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16]),
         inputs=("data", "ratio", "training_mode"), rank=same_rank, dims=same_dims)
def _dropout(node, facts, opset, fresh):
    """Dropout in inference: Y is X, the mask (opset 12 on) all true. From opset 12 on, ``training_mode`` must be a
    constant false (ratio is then unused)."""
    if given(node, 2):
        training = facts.constant(node.input[2])
        if training is None or training.size != 1 or bool(training.reshape(())):
            raise refuse(node, opset, "input 2 (training_mode) must be a constant false (inference only)")
    ops = [make_op("Copy", [node.input[0]], [node.output[0]], node.name)]
    if len(node.output) > 1 and node.output[1]:
        if opset < 12:  # opset 12 defines it all true in inference; onnxruntime writes it all false before
            raise refuse(node, opset, "output 1 (mask) has no inference value before opset 12")
        ops.append(make_op("ConstantFill", [node.input[0]], [node.output[1]], node.name,
                       dtype=caffe2_pb2.TensorProto.BOOL, value=True))
    return ops


@declare("Transpose", Form((1, NEWEST), {"perm": ANY}), types=NUMBERS, rank=same_rank, elements=AT_MOST_FIRST)
def _transpose(node, facts, opset, fresh):
    """Caffe2's Transpose (``perm`` as its ``axes``; none reverses the axes, as ONNX's default) copies rows where the
    last axis stays last and runs a batched 2-D transpose where only the last two axes swap, but walks any other
    permutation element by element (attention's keys turned to (B, h, d, S), (0, 2, 3, 1): ten times torch's time).
    There torch's permute, where the target allows the ATen op (which returns its result contiguous): either only
    moves elements. Its gradient permutes back (`imported_form`)."""
    perm = attribute(node, "perm")
    perm = None if perm is None else [int(axis) for axis in perm]
    last = None if perm is None else len(perm) - 1
    if facts.torch_kernels and perm and sorted(perm) == list(range(len(perm))) and perm[-1] != last and \
            perm[:-2] + perm[-2:][::-1] != list(range(len(perm))):
        return [make_op("ATen", [node.input[0]], [node.output[0]], node.name, **imported_form("permute", dims=perm))]
    return [make_op("Transpose", [node.input[0]], [node.output[0]], node.name,
                    **({} if perm is None else {"axes": perm}))]
