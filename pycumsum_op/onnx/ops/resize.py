"""Resize (torch's interpolate: nearest with floor, bilinear with or without align_corners) over the spatial dims of
an (N, C, D1, ...) input, with the source positions of each axis computed when the net runs as onnxruntime computes
them (float32), so that scales and sizes may be constants or values of the graph."""
import numpy as np
from caffe2.proto import caffe2_pb2

from ..run_checks import as_double, capped_dims, element_cap, make_op, refusal, size_message
from .contract import FLOAT, NEWEST, Form, declare, given, label, same_rank
from .helpers import attribute, refuse

_FLOAT = caffe2_pb2.TensorProto.FLOAT
_INT64 = caffe2_pb2.TensorProto.INT64

#: how an output position maps to a source position (ONNX's coordinate_transformation_mode)
_COORDINATES = frozenset(["asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners"])
_ATTRIBUTES = {"coordinate_transformation_mode": _COORDINATES, "mode": frozenset(["nearest", "linear"]),
               "nearest_mode": frozenset(["floor"]), "cubic_coeff_a": frozenset([-0.75]),
               "exclude_outside": frozenset([0])}
#: the ranks whose spatial dims are resized as onnxruntime resizes them (linear: 4 only)
_RANKS = (3, 4, 5)


# torch writes cubic_coeff_a and nearest_mode with every mode; cubic, nearest other than floor, tf_crop_and_resize
# (the one mode roi changes) have no form
@declare("Resize", Form((11, 12), _ATTRIBUTES), Form((13, NEWEST), _ATTRIBUTES), types=FLOAT,
         inputs=("X", "roi", "scales", "sizes"), rank=same_rank)
def _resize(node, facts, opset, fresh):
    """Each spatial axis: its length L and output length O (scales: int(scale * L) in float32; sizes: O, scale
    O / L) and the source position of each output position (Range, then onnxruntime's float32 formula); then nearest:
    a Gather of the floor of each position (clamped to the axis) along each axis in turn; linear: the four
    neighbours' Gathers, each times the product of its two weights, summed in onnxruntime's order (its rounding, and
    0 x inf NaN where it is NaN there). Where every output length equals the input's, onnxruntime copies the input
    whatever the scales (int(1.25 * 2) is 2): the positions are then the output positions themselves, and linear takes
    the first neighbour alone. N and C must keep their lengths. The sizes are checked against the tensor cap before
    any Gather."""
    data, out = node.input[0], node.output[0]
    if not facts.torch_kernels:
        raise refuse(node, opset, "the portable target has no form of it (it clamps positions with torch's kernels)")
    mode = attribute(node, "mode", b"nearest").decode()
    coordinates = attribute(node, "coordinate_transformation_mode", b"half_pixel").decode()
    if mode == "nearest" and attribute(node, "nearest_mode") is None:
        raise refuse(node, opset, "nearest_mode round_prefer_floor (the default) has no form; floor has")
    rank = facts.rank(data)
    if rank not in _RANKS:
        raise refuse(node, opset, "input 0 {!r} has rank {}; Resize is translated for (N, C, D1, ...) of rank 3 to "
                                   "5".format(data, rank))
    if mode == "linear" and rank != 4:  # onnxruntime's 1-D and 3-D kernels weigh NaN and inf otherwise
        raise refuse(node, opset, "input 0 {!r} has rank {}; linear Resize is translated for rank 4 (N, C, H, "
                                   "W)".format(data, rank))
    scales = node.input[2] if given(node, 2) and not _empty(facts, node.input[2]) else None
    sizes = node.input[3] if given(node, 3) else None
    if (scales is None) == (sizes is None):
        raise refuse(node, opset, "exactly one of input 2 (scales) and input 3 (sizes) must be given")
    given_values = facts.constant(scales or sizes)
    if given_values is not None and given_values.size != rank:
        raise refuse(node, opset, "input {} ({}) has {} entries for input 0 of rank {}".format(
            2 if scales else 3, "scales" if scales else "sizes", given_values.size, rank))
    if scales and given_values is not None and not (given_values > 0).all():
        raise refuse(node, opset, "input 2 (scales) {} holds a scale that is not positive".format(
            given_values.tolist()))
    # align_corners divides by the resized length, scale x L in ONNX's definition (onnx's node test of a downsampling
    # by 0.6 expects 3.142857), the whole output length in onnxruntime's (4): they agree where scale x L is whole
    if coordinates == "align_corners" and scales is not None and not _whole_lengths(facts.dims(data), given_values):
        raise refuse(node, opset, "align_corners with scales is translated only where each scale x length is a "
                                  "whole number the model proves (ONNX's definition and onnxruntime differ "
                                  "otherwise); give sizes")
    if scales and given_values is not None and (given_values == 1).all():
        return [make_op("Copy", [data], [out], node.name)]  # every output length is the input's: onnxruntime copies
    where = label(node, opset)
    ops, dims = [], fresh()
    ops.append(make_op("Shape", [data], [dims], node.name))
    ops += _outer_kept(node, opset, scales, sizes, given_values, dims, fresh)
    axes = [_axis_lengths(node, where, scales, sizes, dims, axis, fresh) for axis in range(2, rank)]
    for more, *_ in axes:
        ops += more
    lengths = [(length, size) for _, length, _, size, _ in axes]
    more, copied = _kept(node, lengths, fresh)
    ops += _bounded(node, where, dims, lengths, fresh) + more
    positions = []
    for _, _, length, size, scale in axes:
        position, more = _positions(node, coordinates, length, size, scale, copied, fresh)
        ops += more
        positions.append((position, length))
    if mode == "linear":
        return ops + _bilinear(node, data, out, positions, copied, fresh)
    blob = data
    for axis, (position, length) in enumerate(positions, start=2):
        target = out if axis == rank - 1 else fresh()
        ops += _nearest(node, blob, target, axis, position, length, fresh)
        blob = target
    return ops


def _empty(facts, name: str) -> bool:
    """Whether blob ``name`` is stated empty (opset 11 and 12 name an empty scales where sizes are given)."""
    value = facts.constant(name)
    return facts.dims(name) == [0] if value is None else value.size == 0


def _outer_kept(node, opset, scales, sizes, values, dims: str, fresh) -> list:
    """Ops stopping the net unless N and C keep their lengths (scales 1, sizes the input's), refused at import where
    the scales are constants: the translation resizes the spatial dims only."""
    if values is not None and scales:
        if values[:2].tolist() != [1, 1]:
            raise refuse(node, opset, "input 2 (scales) {} resizes N or C; only the spatial dims are "
                                       "translated".format(values.tolist()))
        return []
    named, outer, wanted, same = scales or sizes, fresh(), fresh(), fresh()
    ops = [make_op("Slice", [named], [outer], node.name, starts=[0], ends=[2])]
    if scales:
        ops.append(make_op("ConstantFill", [], [wanted], node.name, shape=[2], dtype=_FLOAT, value=1.0))
    else:
        ops.append(make_op("Slice", [dims], [wanted], node.name, starts=[0], ends=[2]))
    return ops + [make_op("EQ", [outer, wanted], [same], node.name),
                  refusal(node.name, same, "{}: input {} ({}) {!r} resizes N or C; only the spatial dims are "
                                           "translated".format(label(node, opset), 2 if scales else 3,
                                                               "scales" if scales else "sizes", named), outer)]


def _float(node, value: float, fresh) -> tuple:
    """(op, blob): a (1,) float32 constant."""
    blob = fresh()
    return make_op("ConstantFill", [], [blob], node.name, shape=[1], dtype=_FLOAT, value=value), blob


def _axis_lengths(node, where: str, scales, sizes, dims: str, axis: int, fresh) -> tuple:
    """(ops, L, L as float, O, scale) of spatial ``axis``: its length as a (1,) int64 and a (1,) float32 blob, its
    output length as a (1,) int64 blob and its scale as a (1,) float32 blob, as onnxruntime computes them: from a
    scale, O = int(scale * L) in float32 (checked within the cap before the cast); from a size, scale = O / L, and
    L = 0 only with O = 0."""
    length, length_float, scale, size = fresh(), fresh(), fresh(), fresh()
    ops = [make_op("Slice", [dims], [length], node.name, starts=[axis], ends=[axis + 1]),
           make_op("Cast", [length], [length_float], node.name, to=_FLOAT)]
    cap = element_cap(4, counter=True)
    if scales:
        product, zero_op, zero, positive = fresh(), *_float(node, 0.0, fresh), fresh()
        ops += [make_op("Slice", [scales], [scale], node.name, starts=[axis], ends=[axis + 1]), zero_op,
                make_op("GT", [scale, zero], [positive], node.name),
                refusal(node.name, positive, "{}: input 2 (scales) {!r} holds a scale that is not positive".format(
                    where, scales), scale),
                make_op("Mul", [scale, length_float], [product], node.name)]
        more, double = as_double(node.name, product, fresh)
        ops += more + capped_dims(node.name, double, cap, size_message(
            where, "dim {} of input 0 {!r} times its scale".format(axis, node.input[0]), 4, counter=True), fresh,
            checked=double, length=1)
        return ops + [make_op("Cast", [product], [size], node.name, to=_INT64)], length, length_float, size, scale
    size_float, filled, nonempty, kept, zero = fresh(), fresh(), fresh(), fresh(), fresh()
    ops += [make_op("Slice", [sizes], [size], node.name, starts=[axis], ends=[axis + 1]),
            make_op("Cast", [size], [size_float], node.name, to=_FLOAT),
            make_op("Div", [size_float, length_float], [scale], node.name),
            make_op("ConstantFill", [], [zero], node.name, shape=[1], dtype=_INT64, value=0),
            make_op("GT", [length, zero], [filled], node.name), make_op("GT", [size, zero], [nonempty], node.name),
            make_op("EQ", [filled, nonempty], [kept], node.name),
            refusal(node.name, kept, "{}: input 3 (sizes) {!r} makes dim {} of input 0 {!r} empty or an empty one "
                                     "not (a scale of 0 or infinity)".format(where, sizes, axis, node.input[0]), size)]
    return ops, length, length_float, size, scale


def _bounded(node, where: str, dims: str, lengths, fresh) -> list:
    """Ops stopping the net unless N x C x the larger of the input and output length of each spatial axis (which
    bounds the output and each axis' intermediate result) is within the cap, every output length in [0, 2**31)
    (Caffe2's Range counts the positions in 32 bits)."""
    more, outer = as_double(node.name, dims, fresh)
    first = fresh()
    ops = more + [make_op("Slice", [outer], [first], node.name, starts=[0], ends=[2])]
    parts = [first]
    for length, size in lengths:
        longer, size_double, length_double, size_longer = fresh(), fresh(), fresh(), fresh()
        ops += [make_op("Cast", [size], [size_double], node.name, to=caffe2_pb2.TensorProto.DOUBLE),
                make_op("Cast", [length], [length_double], node.name, to=caffe2_pb2.TensorProto.DOUBLE),
                make_op("GE", [size_double, length_double], [size_longer], node.name),  # Caffe2's Max: float32 only
                make_op("Where", [size_longer, size_double, length_double], [longer], node.name)]
        parts.append(longer)
    joined = fresh()
    ops.append(make_op("Concat", parts, [joined, fresh()], node.name, axis=0))
    return ops + capped_dims(node.name, joined, element_cap(4, counter=True), size_message(
        where, "its output (N, C and the larger of each spatial dim and its output length)", 4, counter=True),
        fresh, checked=joined, length=2 + len(lengths))


def _kept(node, lengths, fresh) -> tuple:
    """(ops, blob): a (1,) bool, whether every spatial output length (int64) equals the input's (onnxruntime then
    copies the input, whatever the scales)."""
    ops, flag = [], None
    for length, size in lengths:
        same = fresh()
        ops.append(make_op("EQ", [size, length], [same], node.name))
        if flag is not None:
            both = fresh()
            ops.append(make_op("And", [flag, same], [both], node.name))
            same = both
        flag = same
    return ops, flag


def _positions(node, coordinates: str, length: str, size: str, scale: str, copied: str, fresh) -> tuple:
    """(blob, ops): the source position of each output position x of an axis (float32, onnxruntime's formulas and
    order of operations: asymmetric x / s, half_pixel (x + 0.5) / s - 0.5, pytorch_half_pixel that or 0 where O is
    1, align_corners x * (L - 1) / (O - 1) or 0 where O is 1); x itself where ``copied``."""
    counted, index, chosen = fresh(), fresh(), fresh()
    ops = [make_op("Range", [size], [counted], node.name), make_op("Cast", [counted], [index], node.name, to=_FLOAT)]
    position, ops = _formula(node, coordinates, index, length, size, scale, ops, fresh)
    return chosen, ops + [make_op("ATen", [copied, index, position], [chosen], node.name, operator="where")]


def _formula(node, coordinates: str, index: str, length: str, size: str, scale: str, ops: list, fresh) -> tuple:
    """(blob, ops): ``ops`` and then onnxruntime's position of each output position ``index`` (see `_positions`)."""
    if coordinates == "asymmetric":
        position = fresh()
        return position, ops + [make_op("Div", [index, scale], [position], node.name)]
    if coordinates == "align_corners":
        one_op, one = _float(node, 1.0, fresh)
        size_float, reach, span, stretched, position = (fresh() for _ in range(5))
        ops += [one_op, make_op("Cast", [size], [size_float], node.name, to=_FLOAT),
                make_op("Sub", [length, one], [reach], node.name), make_op("Sub", [size_float, one], [span], node.name),
                make_op("Mul", [index, reach], [stretched], node.name),
                make_op("Div", [stretched, span], [position], node.name)]
        return _zero_unless_longer(node, position, size, ops, fresh)
    half_op, half = _float(node, 0.5, fresh)
    shifted, scaled, position = fresh(), fresh(), fresh()
    ops += [half_op, make_op("Add", [index, half], [shifted], node.name),
            make_op("Div", [shifted, scale], [scaled], node.name),
            make_op("Sub", [scaled, half], [position], node.name)]
    if coordinates == "half_pixel":
        return position, ops
    return _zero_unless_longer(node, position, size, ops, fresh)


def _zero_unless_longer(node, position: str, size: str, ops: list, fresh) -> tuple:
    """(blob, ops): ``position`` where the output length is above 1, else 0."""
    one, longer, zero_op, zero = fresh(), fresh(), *_float(node, 0.0, fresh)
    chosen = fresh()
    return chosen, ops + [make_op("ConstantFill", [], [one], node.name, shape=[1], dtype=_INT64, value=1),
                          make_op("GT", [size, one], [longer], node.name), zero_op,
                          make_op("ATen", [longer, position, zero], [chosen], node.name, operator="where")]


def _clamped(node, position: str, length: str, fresh) -> tuple:
    """(ops, blob, last): ``position`` held to [0, L - 1] as onnxruntime holds it (the upper bound first); ``last``
    is L - 1."""
    one_op, one = _float(node, 1.0, fresh)
    zero_op, zero = _float(node, 0.0, fresh)
    last, below, clamped = fresh(), fresh(), fresh()
    return [one_op, zero_op, make_op("Sub", [length, one], [last], node.name),
            make_op("ATen", [position, last], [below], node.name, operator="minimum"),
            make_op("ATen", [below, zero], [clamped], node.name, operator="maximum")], clamped, last


def _nearest(node, data: str, out: str, axis: int, position: str, length: str, fresh) -> list:
    """The input at the floor of each position, held to the axis."""
    floored, index = fresh(), fresh()
    ops, clamped, _ = _clamped(node, floored, length, fresh)
    return [make_op("Floor", [position], [floored], node.name)] + ops + [
        make_op("Cast", [clamped], [index], node.name, to=_INT64),
        make_op("Gather", [data, index], [out], node.name, axis=axis)]


def _neighbours(node, position: str, length: str, fresh) -> tuple:
    """(ops, [(i0, w0), (i1, w1)]): onnxruntime's two neighbours of each position along an axis, as int64 indices,
    with their weights: the position held to [0, L - 1], i0 its floor and i1 = min(i0 + 1, L - 1), weighted by
    i1 - x and x - i0 (0.5 each where i0 = i1)."""
    ops, clamped, last = _clamped(node, position, length, fresh)
    one_op, one = _float(node, 1.0, fresh)
    half_op, half = _float(node, 0.5, fresh)
    low, next_float, high, near, far, same, same_float, halves, low_weight, high_weight = (fresh() for _ in range(10))
    ops += [one_op, half_op, make_op("Floor", [clamped], [low], node.name),
            make_op("Add", [low, one], [next_float], node.name),
            make_op("ATen", [next_float, last], [high], node.name, operator="minimum"),
            make_op("Sub", [high, clamped], [near], node.name), make_op("Sub", [clamped, low], [far], node.name),
            make_op("EQ", [low, high], [same], node.name),
            make_op("Cast", [same], [same_float], node.name, to=_FLOAT),
            make_op("Mul", [same_float, half], [halves], node.name),
            make_op("Add", [near, halves], [low_weight], node.name),
            make_op("Add", [far, halves], [high_weight], node.name)]
    pairs = []
    for neighbour, weight in ((low, low_weight), (high, high_weight)):
        index = fresh()
        ops.append(make_op("Cast", [neighbour], [index], node.name, to=_INT64))
        pairs.append((index, weight))
    return ops, pairs


def _bilinear(node, data: str, out: str, positions, copied: str, fresh) -> list:
    """onnxruntime's bilinear interpolation over (H, W): each of the four neighbours (row i0 or i1, column i0 or i1)
    times the product of its row and column weight, summed in onnxruntime's order ((i0, i0), (i0, i1), (i1, i0),
    (i1, i1)), one rounding each as there (interpolating one axis after the other rounds otherwise, far off where
    values near float32's extremes cancel); the (i0, i0) neighbour alone where ``copied`` (the positions are then the
    input's own, and onnxruntime copies it: no 0 x inf of the next neighbour)."""
    (row_position, row_length), (column_position, column_length) = positions
    ops, rows = _neighbours(node, row_position, row_length, fresh)
    more, columns = _neighbours(node, column_position, column_length, fresh)
    ops += more
    terms, first = [], None
    for row_index, row_weight in rows:
        band, tall = fresh(), fresh()
        ops += [make_op("Gather", [data, row_index], [band], node.name, axis=2),
                make_op("ExpandDims", [row_weight], [tall], node.name, dims=[1])]  # (H', 1) against the (W',) columns
        for column_index, column_weight in columns:
            taken, weight, term = fresh(), fresh(), fresh()
            ops += [make_op("Gather", [band, column_index], [taken], node.name, axis=3),
                    make_op("Mul", [column_weight, tall], [weight], node.name),
                    make_op("Mul", [weight, taken], [term], node.name)]
            terms.append(term)
            first = first or taken
    total = terms[0]
    for term in terms[1:]:
        summed = fresh()
        ops.append(make_op("Add", [total, term], [summed], node.name))
        total = summed
    return ops + [make_op("ATen", [copied, first, total], [out], node.name, operator="where")]


def _whole_lengths(dims, scales) -> bool:
    """Whether constant ``scales`` times the spatial ``dims`` are whole numbers the model proves (float32, as the
    lengths are computed): a whole scale makes any length whole, another needs the dim stated."""
    if scales is None:
        return False
    return all(float(scale).is_integer() or (dims is not None and dims[axis] is not None and
                                             float(np.float32(scale) * np.float32(dims[axis])).is_integer())
               for axis, scale in enumerate(scales.tolist()) if axis >= 2)
