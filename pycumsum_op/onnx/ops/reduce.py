"""Reductions along axes: Caffe2's Reduce* (ReduceL1, ReduceSumSquare as ReduceSum of a Mul, ReduceL2 its Sqrt),
torch's prod and logsumexp; ArgMax; TopK by Caffe2's TopK."""
from caffe2.proto import caffe2_pb2
from onnx import TensorProto

from ..run_checks import make_op
from .contract import (ANY, AT_MOST_FIRST, FLOAT, NEWEST, NUMBERS, ZERO_ONE, Form, declare, label, reduced_rank,
                       same_rank)
from .helpers import FLOATS, attribute, axis_length, constant_blob, int64_scalar, node_axes, normalized, refuse, taken

_REDUCE = {"axes": ANY, "keepdims": ZERO_ONE}


@declare("ReduceSum", Form((1, 12), _REDUCE),
         Form((13, NEWEST), {"keepdims": ZERO_ONE, "noop_with_empty_axes": frozenset([0])}, constants=(1,)),
         types=NUMBERS, inputs=("data", "axes"), why="noop_with_empty_axes=1 has no Caffe2 form", rank=reduced_rank,
         elements=AT_MOST_FIRST)
@declare("ReduceMean", Form((1, NEWEST), _REDUCE), types=FLOAT, rank=reduced_rank, elements=AT_MOST_FIRST)
@declare("ReduceMax", Form((1, NEWEST), _REDUCE), types=NUMBERS, rank=reduced_rank, elements=AT_MOST_FIRST)
@declare("ReduceMin", Form((1, NEWEST), _REDUCE), types=NUMBERS, rank=reduced_rank, elements=AT_MOST_FIRST)
# Caffe2's ReduceL1 is float only (ReduceL2: onnxruntime's); torch's prod of int32 gives int64
@declare("ReduceL1", Form((1, NEWEST), _REDUCE), types=FLOAT, rank=reduced_rank)
@declare("ReduceL2", Form((1, NEWEST), _REDUCE), types=FLOAT, rank=reduced_rank)
@declare("ReduceSumSquare", Form((1, NEWEST), _REDUCE), types=NUMBERS, rank=reduced_rank)
@declare("ReduceProd", Form((1, NEWEST), _REDUCE), types=frozenset([TensorProto.FLOAT, TensorProto.INT64]),
         rank=reduced_rank, elements=AT_MOST_FIRST)
@declare("ReduceLogSumExp", Form((1, NEWEST), _REDUCE), types=frozenset([TensorProto.FLOAT, TensorProto.DOUBLE]),
         rank=reduced_rank)
def _reduce(node, facts, opset, fresh):
    data = node.input[0]
    axes = node_axes(node, opset, facts)
    rank = facts.rank(data)
    if not axes:
        if rank is None:
            raise refuse(node, opset, "it reduces every axis, but the rank of input {!r} is unknown".format(data))
        axes = list(range(rank))
    if rank is not None:  # Caffe2's Reduce* count negative axes from the end as ONNX does
        axes = normalized(node, opset, axes, rank)
    keepdims = int(attribute(node, "keepdims", 1))
    if node.op_type == "ReduceProd":
        if rank == 0:  # the product over no axis of a scalar: the scalar (torch's prod takes no dim of it)
            return [make_op("Copy", [data], [node.output[0]], node.name)]
        return _reduce_prod(node, opset, data, sorted(set(axes)), rank, keepdims, fresh)
    if node.op_type in _EMPTY_EXTREMA and facts.elem_type(data) in FLOATS:
        dims = facts.dims(data)
        if dims is None or any(dims[axis] in (None, 0) for axis in axes):
            return _extremum_of_empty(node, data, sorted(set(axes)), keepdims, fresh)
    if node.op_type == "ReduceLogSumExp":  # torch's logsumexp: shifted by the maximum, as onnxruntime's
        return [make_op("ATen", [data], [node.output[0]], node.name, operator="logsumexp", dim=sorted(axes),
                    keepdim=bool(keepdims))]
    if node.op_type not in ("ReduceSumSquare", "ReduceL2"):
        return [make_op(node.op_type, [data], [node.output[0]], node.name, axes=sorted(axes), keepdims=keepdims)]
    # ONNX's sum of x * x (and its square root), as numpy: each square may overflow (Caffe2's ReduceL2 does not)
    squared, total = fresh(), node.output[0] if node.op_type == "ReduceSumSquare" else fresh()
    ops = [make_op("Mul", [data, data], [squared], node.name),
           make_op("ReduceSum", [squared], [total], node.name, axes=sorted(axes), keepdims=keepdims)]
    return ops + ([make_op("Sqrt", [total], [node.output[0]], node.name)] if node.op_type == "ReduceL2" else [])


#: ONNX's value of a reduction over no element (its identity), where Caffe2's differs: its ReduceMax starts from the
#: lowest finite float (-3.4e38), ONNX's from -inf
_EMPTY_EXTREMA = {"ReduceMax": float("-inf"), "ReduceMin": float("inf")}


def _extremum_of_empty(node, data, axes, keepdims, fresh) -> list:
    """Caffe2's ReduceMax / ReduceMin, then ONNX's -inf / inf wherever the reduced axes hold no element (their lengths,
    read at run time, multiply to 0): torch's masked_fill by a scalar mask."""
    reduced, lengths, count, zero, empty = fresh(), fresh(), fresh(), fresh(), fresh()
    ops, pieces = [make_op(node.op_type, [data], [reduced], node.name, axes=axes, keepdims=keepdims)], []
    for axis in axes:
        more, length = axis_length(node, data, axis, fresh)
        ops += more
        pieces.append(length)
    return ops + [make_op("Concat", pieces, [lengths, fresh()], node.name, axis=0),
                  make_op("ATen", [lengths], [count], node.name, operator="prod", dim=0, keepdim=False),
                  int64_scalar(node, zero, 0), make_op("EQ", [count, zero], [empty], node.name),
                  make_op("ATen", [reduced, empty], [node.output[0]], node.name, operator="masked_fill",
                      value=_EMPTY_EXTREMA[node.op_type])]


def _reduce_prod(node, opset, data, axes, rank, keepdims, fresh):
    """torch's prod. Over several axes, one pass over their entries in row-major order, as onnxruntime and numpy
    multiply them (axis after axis, a partial product can underflow to 0 where another holds inf: NaN for inf): the
    reduced axes moved last (Transpose) and made one (Reshape to the kept dims and their count), then the kept
    dims' 1s put back for keepdims (ExpandDims)."""
    if len(axes) == 1:
        return [make_op("ATen", [data], [node.output[0]], node.name, operator="prod", dim=axes[0],
                        keepdim=bool(keepdims))]
    if rank is None:
        raise refuse(node, opset, "it reduces {} axes of input {!r}, whose rank is unknown".format(len(axes), data))
    kept = [axis for axis in range(rank) if axis not in axes]
    moved, reduced_dims, count, shape, rows, old_shape = (fresh() for _ in range(6))
    ops = [make_op("Transpose", [data], [moved], node.name, axes=kept + axes),
           make_op("Shape", [data], [reduced_dims], node.name, axes=axes),
           make_op("ATen", [reduced_dims], [count], node.name, operator="prod", dim=0, keepdim=True)]
    if kept:  # the kept dims read at run time, then the reduced entries' count (no -1: a kept dim may be 0)
        kept_dims, split = fresh(), fresh()
        ops += [make_op("Shape", [data], [kept_dims], node.name, axes=kept),
                make_op("Concat", [kept_dims, count], [shape, split], node.name, axis=0)]
    else:
        shape = count
    reduced = fresh() if keepdims else node.output[0]
    ops += [make_op("Reshape", [moved, shape], [rows, old_shape], node.name),
            make_op("ATen", [rows], [reduced], node.name, operator="prod", dim=len(kept), keepdim=False)]
    if keepdims:
        ops.append(make_op("ExpandDims", [reduced], [node.output[0]], node.name, dims=axes))
    return ops


#: select_last_index=1 has no form: onnxruntime's last index skips a NaN unless it comes first, which no reversal
#: of Caffe2's first-index scan reproduces
_ARG = {"axis": ANY, "keepdims": ZERO_ONE}


#: int64 by ONNX's definition (numpy's first index: tests/test_onnx_cnn_forms.py), onnxruntime having no int64 kernel
_ARG_TYPES = frozenset([TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64])


@declare("ArgMax", Form((1, 11), _ARG), Form((12, NEWEST), dict(_ARG, select_last_index=frozenset([0]))),
         types=_ARG_TYPES, rank=reduced_rank)
@declare("ArgMin", Form((1, 11), _ARG), Form((12, NEWEST), dict(_ARG, select_last_index=frozenset([0]))),
         types=_ARG_TYPES, rank=reduced_rank)
def _arg_extremum(node, facts, opset, fresh):
    """Caffe2's ArgMax / ArgMin: the first index of the extremum, as ONNX's select_last_index=0."""
    (axis,) = normalized(node, opset, [int(attribute(node, "axis", 0))], facts.rank(node.input[0]))
    return [make_op(node.op_type, [node.input[0]], [node.output[0]], node.name, axis=axis,
                    keepdims=int(attribute(node, "keepdims", 1)))]


# Caffe2's TopK is float only; sorted=0 leaves the order to the runtime, so onnxruntime's is no oracle
@declare("TopK", Form((1, 9), {"axis": ANY, "k": ANY}), Form((10, 10), {"axis": ANY}),
         Form((11, NEWEST), {"axis": ANY, "largest": ZERO_ONE, "sorted": frozenset([1])}), types=FLOAT,
         inputs=("X", "K"), rank=same_rank)
def _top_k(node, facts, opset, fresh):
    """Caffe2's TopK (float only): a heap that keeps the lower index of equal values and returns them sorted, as ONNX
    (largest and sorted); the smallest are the largest of -x, negated back (exact, -0.0 and the infinities
    included). onnxruntime orders a NaN inconsistently (it even drops +inf from the top k), and Caffe2's heap never
    takes one, so an Assert fails the net on a NaN input. Caffe2's TopK pads a k past the axis' length and refuses
    k = 0, where ONNX wants 0 <= k <= length: a constant k is checked against a stated length here and against the
    length at run time otherwise; k = 0 takes no index; a k read at run time is checked, then the top max(k, 1) are
    cut to k."""
    data, (values, indices) = node.input[0], (list(node.output) + [""])[:2]
    indices = indices or fresh()
    rank = facts.rank(data)
    if rank == 0:
        raise refuse(node, opset, "input 0 {!r} is a scalar; TopK takes an axis of rank 1 or more".format(data))
    axis = int(attribute(node, "axis", -1))
    if rank is not None or axis != -1:  # Caffe2's TopK reads axis -1 as the last, no other negative axis
        (axis,) = normalized(node, opset, [axis], rank)
    dims = facts.dims(data)
    dim = dims[axis] if dims is not None and axis >= 0 else None
    if opset < 10:
        k_value = attribute(node, "k")
        if k_value is None:
            raise refuse(node, opset, "attribute k is required")
        k_value = int(k_value)
    else:
        k_value = facts.constant(node.input[1])
        if k_value is not None:
            if k_value.dtype.kind not in "iu" or k_value.size != 1:
                raise refuse(node, opset, "input 1 (K) must hold one integer, got shape {} dtype {}".format(
                    k_value.shape, k_value.dtype))
            k_value = int(k_value.reshape(()))
    if k_value is not None and (k_value < 0 or (dim is not None and k_value > dim)):
        raise refuse(node, opset, "k = {} is outside [0, {}], the length of axis {}".format(
            k_value, "length" if dim is None else dim, axis))
    if k_value == 0:  # no index taken: Caffe2's TopK refuses k = 0
        empty, fill = constant_blob([], fresh)
        return [fill, taken(node, data, empty, values, axis),
                make_op("Cast", [values], [indices], node.name, to=caffe2_pb2.TensorProto.INT64)]
    ops, nan, kept = [], fresh(), fresh()
    ops += [make_op("ATen", [data], [nan], node.name, operator="isnan"), make_op("Not", [nan], [kept], node.name),
            make_op("Assert", [kept], [], node.name, error_msg="{}: input 0 (X) {!r} holds a NaN, which onnxruntime's "
                "TopK orders inconsistently".format(label(node, opset), data))]
    more, length = axis_length(node, data, axis, fresh)
    if k_value is not None:
        k_blob, fill = constant_blob([k_value], fresh)
        ops.append(fill)
    else:
        k_blob = fresh()
        ops.append(make_op("Cast", [node.input[1]], [k_blob], node.name, to=caffe2_pb2.TensorProto.INT64))
    if k_value is None or dim is None:
        zero, low, high, valid = fresh(), fresh(), fresh(), fresh()
        ops += more + [int64_scalar(node, zero, 0), make_op("GE", [k_blob, zero], [low], node.name),
                       make_op("LE", [k_blob, length], [high], node.name), make_op("And", [low, high], [valid],
                                                                                   node.name),
                       make_op("Assert", [valid], [], node.name, error_msg="{}: k is outside [0, the length of axis "
                           "{}]".format(label(node, opset), axis))]
    source = data
    if int(attribute(node, "largest", 1)) == 0:
        source = fresh()
        ops.append(make_op("Negative", [data], [source], node.name))
    if k_value is not None:
        top, top_indices = (values, indices) if source == data else (fresh(), indices)
        ops.append(make_op("TopK", [source], [top, top_indices], node.name, k=k_value, axis=axis))
    else:  # the top max(k, 1) cut to k: Caffe2's TopK refuses k = 0
        at_least_one, wide, wide_indices, count, top = fresh(), fresh(), fresh(), fresh(), fresh()
        ops += [make_op("ATen", [k_blob], [at_least_one], node.name, operator="clamp_min", min=1),
                make_op("TopK", [source, at_least_one], [wide, wide_indices], node.name, axis=axis),
                make_op("Range", [k_blob], [count], node.name),
                taken(node, wide_indices, count, indices, axis)]
        if source == data:
            top = values
        ops.append(taken(node, wide, count, top, axis))
    if source != data:
        ops.append(make_op("Negative", [top], [values], node.name))
    return ops
