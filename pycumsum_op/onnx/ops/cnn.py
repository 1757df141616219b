"""The CNN core, as Caffe2's Conv (or torch's conv2d), MaxPool, AveragePool, SpatialBN and Pad; Caffe2's window
ops read the window from `_window`."""
import numpy as np
from caffe2.proto import caffe2_pb2
from onnx import TensorProto

from ...input_limits import InputTooLarge, check_tensor, shape_text
from ..run_checks import (as_double, capped_dims, capped_scalar, declared, element_cap, itemsize, make_op, refusal,
                          size_message, whole_double)
from .contract import ANY, FLOAT, NEWEST, ZERO_ONE, Form, declare, given, label, same_rank
from .helpers import (CAFFE2_NUMBERS, CAFFE2_TYPES, attribute, constant_blob, constant_or, extreme, int64_scalar,
                      int_list, rank_checked, refuse)

#: Conv's and the pools' window; dilations other than 1 are refused for the pools by the translation
_WINDOW = {"auto_pad": frozenset(["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]), "dilations": ANY,
           "kernel_shape": ANY, "pads": ANY, "strides": ANY}


#: the window ops' spatial ranks Caffe2's CPU kernels run (its pools: 1-3 dims; Conv any, held to the same)
_SPATIAL_RANKS = (1, 2, 3)


_SAME = {"SAME_UPPER": 0, "SAME_LOWER": 1}  # ONNX's SAME_LOWER puts the odd pad at the beginning


def _window(node, opset, facts, kernel, ceil_mode=False) -> dict:
    """Caffe2's ``kernels``, ``strides``, ``dilations`` and ``pads`` (begins, then ends: ONNX's order too) of ONNX
    Conv/pool ``node`` over ``kernel``. auto_pad SAME_UPPER/SAME_LOWER and ceil_mode become explicit pads, which
    needs the input's spatial dims (refused where the model leaves one symbolic); ceil_mode's extra window is end
    padding, refused where that window lies wholly in the padding (onnxruntime gives it the lowest float, torch
    drops it)."""
    rank = len(kernel)
    if rank not in _SPATIAL_RANKS:
        raise refuse(node, opset, "{} spatial dims; Caffe2's window ops take 1 to 3".format(rank))
    strides = [int(v) for v in attribute(node, "strides", [1] * rank)]
    dilations = [int(v) for v in attribute(node, "dilations", [1] * rank)]
    pads = [int(v) for v in attribute(node, "pads", [0] * 2 * rank)]
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise refuse(node, opset, "strides {}, dilations {} or pads {} do not fit the kernel {}".format(
            strides, dilations, pads, kernel))
    if min(kernel + strides + dilations) < 1 or min(pads) < 0:
        raise refuse(node, opset, "kernel {}, strides {}, dilations {} must be positive and pads {} not "
                                   "negative".format(kernel, strides, dilations, pads))
    auto_pad = attribute(node, "auto_pad", b"NOTSET").decode()
    if auto_pad == "VALID":
        pads = [0] * 2 * rank
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in _SAME and set(dilations) != {1}:
        raise refuse(node, opset, "auto_pad={} with dilations {} (onnxruntime refuses it)".format(auto_pad, dilations))
    if auto_pad in _SAME or ceil_mode:
        dims = facts.dims(node.input[0])
        spatial = dims[2:] if dims is not None and len(dims) == rank + 2 else None
        if spatial is None or None in spatial:
            raise refuse(node, opset, "{} needs the input's spatial dims, which the model does not state".format(
                "auto_pad={}".format(auto_pad) if auto_pad in _SAME else "ceil_mode=1"))
        for axis, (size, stride, span) in enumerate(zip(spatial, strides, spans)):
            if auto_pad in _SAME:
                total = (-(-size // stride) - 1) * stride + span - size
                if total < 0:  # ONNX's definition then pads by a negative amount, which onnxruntime reads as a shift
                    raise refuse(node, opset, "auto_pad={} over spatial dim {} of {} with stride {} and kernel {} "
                                               "pads by {} (a negative pad has no Caffe2 form)".format(
                                                   auto_pad, axis, size, stride, span, total))
                pads[axis] = (total + _SAME[auto_pad]) // 2
                pads[axis + rank] = total - pads[axis]
            reach = size + pads[axis] + pads[axis + rank] - span
            if ceil_mode and reach >= 0 and reach % stride:
                last = (reach // stride + 1) * stride  # where ceil_mode's extra window starts
                if last >= size + pads[axis]:
                    raise refuse(node, opset, "ceil_mode=1 adds a window wholly in the padding of spatial "
                                               "dim {}".format(axis))
                pads[axis + rank] += last + span - (size + pads[axis] + pads[axis + rank])
    return {"kernels": list(kernel), "strides": strides, "dilations": dilations, "pads": pads}


def _guard_filled(node, opset, facts, fresh, kernel: str, spatial: bool = True) -> list:
    """Caffe2's Conv and pools fail on an empty channel or spatial dim, its SpatialBN on an empty channel dim
    ("inner_size > 0", "C != 0", naming no ONNX node): such a dim stated by the model is refused, one it leaves
    symbolic is checked by an Assert naming the node when the net runs."""
    data = node.input[0]
    dims = facts.dims(data)
    checked = None if dims is None else dims[1:] if spatial else dims[1:2]
    what = "an empty channel or spatial dim" if spatial else "an empty channel dim"
    if checked is not None and 0 in checked:
        raise refuse(node, opset, "input 0 {!r} has dims {}; Caffe2's {} fails on {}".format(data, dims, kernel, what))
    if checked is not None and None not in checked:
        return []
    shape, rest, zero, filled = fresh(), fresh(), fresh(), fresh()
    return [make_op("Shape", [data], [shape], node.name),
            make_op("Slice", [shape], [rest], node.name, starts=[1], ends=[-1 if spatial else 2]),
            int64_scalar(node, zero, 0), make_op("GT", [rest, zero], [filled], node.name),
            make_op("Assert", [filled], [], node.name, error_msg="{}: input 0 {!r} has {}, on which Caffe2's {} "
                "fails".format(label(node, opset), data, what, kernel))]


@declare("Conv", Form((1, NEWEST), dict(_WINDOW, group=ANY)), types=FLOAT, rank=same_rank)
def _conv(node, facts, opset, fresh):
    """Caffe2's Conv: the kernel from ``kernel_shape`` or W's dims, which must be stated and not empty (an empty W
    kills the process: SIGFPE)."""
    weights = node.input[1]
    dims = facts.dims(weights)
    if dims is None or None in dims or len(dims) < 3:
        raise refuse(node, opset, "input 1 (W) {!r} has dims {}; its dims must be stated".format(weights, dims))
    if 0 in dims:
        raise refuse(node, opset, "input 1 (W) {!r} has dims {}; Caffe2's Conv fails on an empty W".format(
            weights, dims))
    kernel = [int(v) for v in attribute(node, "kernel_shape", dims[2:])]
    if kernel != dims[2:]:
        raise refuse(node, opset, "kernel_shape {} is not W's spatial dims {}".format(kernel, dims[2:]))
    if any(facts.elem_type(name) != TensorProto.FLOAT for name in node.input[1:] if name):
        raise refuse(node, opset, "W and B must be float as X (Caffe2's Conv is float)")
    args = _window(node, opset, facts, kernel)
    group, rank = int(attribute(node, "group", 1)), len(kernel)
    ops = _guard_filled(node, opset, facts, fresh, "Conv") + _dims_checked(node, opset, 1, weights, dims, facts, fresh)
    inputs, pads = [name for name in node.input if name], args["pads"]
    torchs = facts.torch_kernels and (group > 1 or max(kernel) > 1) and len(inputs) == 3 and rank == 2 \
        and pads[:rank] == pads[rank:] and np.isfinite(constant_or(facts, weights, np.nan)).all()
    if torchs or max(kernel) > 1 or any(pads) or max(args["strides"]) > 1:
        # Caffe2's Conv multiplies a 1 x 1 window at stride 1 without pads straight from its input (its shortcut
        # allocates no im2col buffer): a bound of none would cost about 18 ops per convolution on every run
        ops += _im2col_bound(node, opset, facts, dims, args, group, fresh)
    if torchs:
        # torch's kernels take a fraction of Caffe2's im2col loop's time on grouped and depthwise windows and some
        # of it on wider ones (a 1 x 1 window is one GEMM either way, Caffe2's the faster); the ATen op's conv
        # resolves with a bias only, and pads both sides alike. torch's kernel skips the padding that ONNX
        # multiplies by the weights: the same sums where every weight is finite (0 x inf is NaN)
        return ops + [make_op("ATen", inputs, [node.output[0]], node.name, operator="conv2d", stride=args["strides"],
                          padding=pads[:rank], dilation=args["dilations"], groups=group)]
    return ops + [make_op("Conv", inputs, [node.output[0]], node.name, group=group, **args)]


def _dims_checked(node, opset, position: int, name: str, dims, facts, fresh) -> list:
    """Ops stopping the net unless input ``position`` (blob ``name``) has exactly the ``dims`` the model states when the
    net runs, unless that is `declared` (Caffe2's Conv dies of SIGFPE on an empty W, whatever the value infos say)."""
    if declared(facts, name):
        return []
    shape, wanted, same = fresh(), fresh(), fresh()
    return rank_checked(node, opset, position, name, facts, fresh, len(dims)) + [
        make_op("Shape", [name], [shape], node.name),
        make_op("GivenTensorInt64Fill", [], [wanted], node.name, values=list(dims), shape=[len(dims)]),
        make_op("EQ", [shape, wanted], [same], node.name),
        refusal(node.name, same, "{}: input {} {!r} does not have the dims {} the model states".format(
            label(node, opset), position, name, shape_text(dims)), shape)]


def _im2col_bound(node, opset, facts, weight_dims, args: dict, group: int, fresh) -> list:
    """Caffe2's Conv lays each image out in a buffer of (input channels x kernel) x output positions floats (im2col):
    charged here where the model states a graph input's spatial dims, else checked when the net runs, against a
    bound of the output positions (each spatial dim plus its pads)."""
    where = label(node, opset)
    rank = len(args["kernels"])
    per_position = int(weight_dims[1]) * group * int(np.prod(args["kernels"]))
    check_tensor([per_position], 4, "{}: its im2col buffer per output position".format(where))
    data = node.input[0]
    dims = facts.dims(data)
    pads = [args["pads"][axis] + args["pads"][axis + rank] for axis in range(rank)]
    if data in facts.graph_inputs and dims is not None and len(dims) == rank + 2 and None not in dims:
        spans = [(k - 1) * d + 1 for k, d in zip(args["kernels"], args["dilations"])]
        positions = [max((size + pad - span) // stride + 1, 0)
                     for size, pad, span, stride in zip(dims[2:], pads, spans, args["strides"])]
        check_tensor([per_position] + positions, 4, "{}: its im2col buffer".format(where))
        return []
    shape, spatial, grown = fresh(), fresh(), fresh()
    added, fill = constant_blob(pads, fresh)
    ops = [make_op("Shape", [data], [shape], node.name), make_op("Slice", [shape], [spatial], node.name, starts=[2],
                                                                 ends=[-1]),
           fill, make_op("Add", [spatial, added], [grown], node.name)]
    more, bound = as_double(node.name, grown, fresh)
    more_factor, factor = whole_double(node.name, per_position, fresh)
    return ops + more + more_factor + capped_dims(node.name, bound, element_cap(4), size_message(
        where, "its im2col buffer (the spatial dims of input 0 {!r} and its pads, times {} per position)".format(
            data, per_position), 4), fresh, checked=shape, factor=factor, length=rank)


@declare("MaxPool", Form((1, 9), dict(_WINDOW, storage_order=frozenset([0]))),
         Form((10, NEWEST), dict(_WINDOW, ceil_mode=ZERO_ONE, storage_order=frozenset([0]))), types=FLOAT,
         rank=same_rank)
@declare("AveragePool", Form((7, 9), dict(_WINDOW, count_include_pad=ZERO_ONE)),
         Form((10, NEWEST), dict(_WINDOW, ceil_mode=ZERO_ONE, count_include_pad=ZERO_ONE)), types=FLOAT,
         rank=same_rank)
@declare("GlobalMaxPool", Form((1, NEWEST)), types=FLOAT, rank=same_rank)
@declare("GlobalAveragePool", Form((1, NEWEST)), types=FLOAT, rank=same_rank)
def _pool(node, facts, opset, fresh):
    """Caffe2's MaxPool / AveragePool, global or over a window (no dilations, pads smaller than the kernel, as its
    kernels take them). Its MaxPool skips some NaNs of a window and not others (`_nan_max`)."""
    data, out = node.input[0], node.output[0]
    if len(node.output) > 1 and node.output[1]:
        raise refuse(node, opset, "output 1 (Indices) has no Caffe2 form")
    operator = "MaxPool" if "Max" in node.op_type else "AveragePool"
    kernel = [int(v) for v in attribute(node, "kernel_shape", [])]
    spatial = (facts.rank(data) or 0) - 2 if node.op_type.startswith("Global") else len(kernel)
    if node.op_type.startswith("Global"):
        rank = facts.rank(data)
        if rank is None or rank - 2 not in _SPATIAL_RANKS:
            raise refuse(node, opset, "input 0 {!r} has rank {}; Caffe2's pools take 1 to 3 spatial dims".format(
                data, rank))
        args = {"global_pooling": 1}
    else:
        args = _window(node, opset, facts, kernel, bool(attribute(node, "ceil_mode", 0)))
        if set(args.pop("dilations")) != {1}:
            raise refuse(node, opset, "dilations other than 1 (Caffe2's pools have none)")
        if any(pad >= size for pad, size in zip(args["pads"], args["kernels"] * 2)):  # begins, then ends
            raise refuse(node, opset, "pads {} (with ceil_mode's) not smaller than the kernel {}, as Caffe2's pools "
                                       "need".format(args["pads"], args["kernels"]))
        if operator == "AveragePool":
            args["count_include_pad"] = int(attribute(node, "count_include_pad", 0))
    ops = _guard_filled(node, opset, facts, fresh, operator)
    # Caffe2's ConvPoolOpBase demands explicit kernels of an op whose *name* holds "Pool" (torch names the node
    # "GlobalAveragePool_46"), which global pooling reads off its input at run time
    name = node.name.replace("Pool", "pool") if "global_pooling" in args else node.name
    if operator == "AveragePool":
        return ops + [make_op(operator, [data], [out], name, **args)]
    return ops + _nan_max(node, data, out, args, name, fresh, spatial == 3, facts.torch_kernels)


def _nan_max(node, data, out, args, name, fresh, three_dims: bool, torch_kernels: bool) -> list:
    """MaxPool with a NaN wherever its window holds one (torch's max_pool; onnxruntime's own kernels disagree with
    each other on NaN: its 2-D pool gives NaN for [1, NaN], its 1-D one skips every NaN): Caffe2's kernel skips a
    NaN in some places of a window and not in others, so the windows holding a NaN are found by pooling the NaN
    mask, and filled with NaN (torch's masked_fill by the ATen op; for the portable target Caffe2's IsNaN, EQ and Where
    of a filled copy). Its 3-D kernel starts each window from the lowest float, which it also writes for a window of
    -inf only: those windows, found by pooling the mask of entries other than -inf, are filled with -inf first."""
    pooled = fresh()
    ops = [make_op("MaxPool", [data], [pooled], name, **args)]
    fills = [("isnan", {}, False, float("nan"))]
    if three_dims:
        fills.insert(0, ("ne", {"other": float("-inf")}, True, float("-inf")))
    for number, (test, test_args, fill_where_none, value) in enumerate(fills):
        tested, mask, hit, hits = (fresh() for _ in range(4))
        target = out if number == len(fills) - 1 else fresh()
        if torch_kernels:
            ops.append(make_op("ATen", [data], [tested], node.name, operator=test, **test_args))
        elif test == "isnan":
            ops.append(make_op("IsNaN", [data], [tested], node.name))
        else:  # not -inf
            low, equal = fresh(), fresh()
            ops += [make_op("ConstantFill", [data], [low], node.name, value=float("-inf")),
                    make_op("EQ", [data, low], [equal], node.name), make_op("Not", [equal], [tested], node.name)]
        ops += [make_op("Cast", [tested], [mask], node.name, to=caffe2_pb2.TensorProto.FLOAT),
                make_op("MaxPool", [mask], [hit], name, **args),
                make_op("Cast", [hit], [hits], node.name, to=caffe2_pb2.TensorProto.BOOL)]
        if fill_where_none:  # no entry passed the test: the window is all -inf
            none = fresh()
            ops.append(make_op("Not", [hits], [none], node.name))
            hits = none
        if torch_kernels:
            ops.append(make_op("ATen", [pooled, hits], [target], node.name, operator="masked_fill", value=value))
        else:
            filled = fresh()
            ops += [make_op("ConstantFill", [pooled], [filled], node.name, value=value),
                    make_op("Where", [hits, filled, pooled], [target], node.name)]
        pooled = target
    return ops


# inference only: opset 7's spatial=0 and opset 14's training_mode=1 compute other statistics
@declare("BatchNormalization", Form((7, 8), {"epsilon": ANY, "momentum": ANY, "spatial": frozenset([1])}),
         Form((9, 13), {"epsilon": ANY, "momentum": ANY}),
         Form((14, NEWEST), {"epsilon": ANY, "momentum": ANY, "training_mode": frozenset([0])}), types=FLOAT)
def _batch_norm(node, facts, opset, fresh):
    """Caffe2's SpatialBN in inference (``is_test``): the running mean and variance outputs are training's. It reads
    the rank when it runs (N, C, then any spatial dims): an input of a rank the model does not state is checked to
    have 2 dims at least when the net runs."""
    if len([name for name in node.output if name]) > 1:
        raise refuse(node, opset, "outputs past Y (the running statistics) are training's; only Y is translated")
    if any(facts.elem_type(name) != TensorProto.FLOAT for name in node.input[1:]):
        raise refuse(node, opset, "scale, B, mean and var must be float as X (Caffe2's SpatialBN is float)")
    rank = facts.rank(node.input[0])
    if rank is not None and rank < 2:
        raise refuse(node, opset, "input 0 {!r} has rank {}; Caffe2's SpatialBN needs (N, C, ...)".format(
            node.input[0], rank))
    ops = [] if rank is not None else rank_checked(node, opset, 0, node.input[0], facts, fresh, 2, exact=False,
                                                   why="as ONNX's BatchNormalization needs (N, C, ...)")
    epsilon = float(attribute(node, "epsilon", 1e-5))
    if not epsilon > 0:  # Caffe2's SpatialBN enforces epsilon > 0; torch's batch_norm computes the formula with it
        return ops + [make_op("ATen", list(node.input), [node.output[0]], node.name, operator="batch_norm",
                              training=False, momentum=0.0, eps=epsilon, cudnn_enabled=False)]
    return ops + _guard_filled(node, opset, facts, fresh, "SpatialBN", spatial=False) + [
        make_op("SpatialBN", list(node.input), [node.output[0]], node.name, is_test=1, epsilon=epsilon)]


_PAD_MODES = frozenset(["constant", "reflect", "edge"])


# torch writes a Pad of zeros before its AveragePool; reflect and edge pads of F.pad
@declare("Pad", Form((2, 10), {"mode": _PAD_MODES, "pads": ANY, "value": ANY}),
         Form((11, NEWEST), {"mode": _PAD_MODES}),
         types=frozenset([TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT8,
                          TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8, TensorProto.BOOL]),
         inputs=("data", "pads", "constant_value"), rank=same_rank)
def _pad(node, facts, opset, fresh):
    """Constant padding by constant pads and value is torch's ``constant_pad_nd`` (`_constant_pad`); pads or a value
    fed or computed at run time, and modes reflect and edge, are one gather per axis (`_gathered_pad`). Zero pads
    are a Copy. A constant ``value`` travels in a float32 op argument, so one float32 cannot hold exactly (a double
    0.1, a large integer) is refused."""
    data = node.input[0]
    mode = attribute(node, "mode", b"constant").decode()
    pads = None  # fed or computed: read when the net runs
    if opset < 11:
        pads, value = [int(v) for v in attribute(node, "pads", [])], float(attribute(node, "value", 0.0))
    else:
        if facts.constant(node.input[1]) is not None:
            pads = int_list(node, opset, facts, 1, "pads") or []
        value = 0.0
        if given(node, 2) and mode == "constant":
            constant = facts.constant(node.input[2])
            if constant is None:
                value = node.input[2]  # fed or computed: a blob
            elif constant.size != 1:
                raise refuse(node, opset, "input 2 (constant_value) holds {} values, not one".format(constant.size))
            else:
                value = constant.reshape(()).item()
    rank = facts.rank(data)
    if rank is None or (pads is not None and len(pads) != 2 * rank):
        raise refuse(node, opset, "pads {} do not fit input 0 {!r} of rank {}".format(
            "fed at run time" if pads is None else pads, data, rank if rank is not None else "unknown"))
    if pads is not None and not any(pads):
        return [make_op("Copy", [data], [node.output[0]], node.name)]
    fed_value = isinstance(value, str)
    if mode == "constant" and not fed_value and not (np.isnan(value) or float(np.float32(value)) == value):
        raise refuse(node, opset, "constant_value {!r} is not a float32 value (Caffe2 passes it as one)".format(value))
    size = itemsize(facts.elem_type(data))
    if pads is not None and max(abs(pad) for pad in pads) > element_cap(size):  # a dim plus its pads stays in int64
        raise InputTooLarge("{}: pads {} reach past the {} elements a tensor may have (PYCUMSUM_OP_MAX_TENSOR_BYTES)"
                            .format(label(node, opset), shape_text(pads), element_cap(size)))
    if mode == "constant" and pads is not None and not fed_value and not facts.torch_kernels and \
            facts.elem_type(data) in CAFFE2_NUMBERS:
        return _concatenated_pad(node, opset, facts, rank, pads, value, fresh)
    if mode == "constant" and pads is not None and not fed_value:
        return _constant_pad(node, opset, facts, rank, pads, value, fresh)
    return _gathered_pad(node, opset, facts, rank, mode, pads, value, fresh)


def _constant_pad(node, opset, facts, rank: int, pads, value, fresh) -> list:
    """torch's ``constant_pad_nd`` (the ATen op: any rank, and negative pads crop as ONNX's do), where the model
    proves that no output dim it fails on is empty (else `_gathered_pad`)."""
    data = node.input[0]
    size = itemsize(facts.elem_type(data))
    # torch lists (begin, end) from the last dim back, and only from the first padded one (ONNX: all begins, then
    # all ends); unless no pad is positive, it fails where a dim it lists comes out empty
    first = next(axis for axis in range(rank) if pads[axis] or pads[axis + rank])
    torch_pads = [pad for axis in reversed(range(first, rank)) for pad in (pads[axis], pads[axis + rank])]
    ops = []
    if max(pads) > 0:
        dims = facts.dims(data)
        sizes = [None if dims is None or dims[axis] is None else dims[axis] + pads[axis] + pads[axis + rank]
                 for axis in range(first, rank)]
        if 0 in sizes or None in sizes:
            return _gathered_pad(node, opset, facts, rank, "constant", pads, value, fresh)
        if dims is None or None in dims:  # the output's dims, the input's read at run time plus the pads
            all_growth, fill_all = constant_blob([pads[axis] + pads[axis + rank] for axis in range(rank)], fresh)
            whole, grown_all = fresh(), fresh()
            more, dims_double = as_double(node.name, grown_all, fresh)
            ops += [make_op("Shape", [data], [whole], node.name), fill_all,
                    make_op("Add", [whole, all_growth], [grown_all], node.name)] + more + capped_dims(
                node.name, dims_double, element_cap(size), size_message(
                    label(node, opset), "its output (input 0 {!r} and the pads)".format(data), size), fresh,
                checked=grown_all, length=rank)
    return ops + [make_op("ATen", [data], [node.output[0]], node.name, operator="constant_pad_nd", pad=torch_pads,
                      value=float(value))]


def _concatenated_pad(node, opset, facts, rank: int, pads, value, fresh) -> list:
    """Constant padding by constant pads for the portable target, in ONNX's order: the negative pads crop first (one
    Slice, after a check that no axis is cropped past its length), then along each axis with positive pads slabs of
    ``value`` (Caffe2's ConstantFill, of the dims read at run time with that axis' pad) are concatenated before and
    after; the output's dims are held to the cap before anything is allocated."""
    data, where = node.input[0], label(node, opset)
    elem_type = facts.elem_type(data)
    size = itemsize(elem_type)
    whole, current = fresh(), data
    ops = [make_op("Shape", [data], [whole], node.name)]
    crops = [max(0, -pads[axis]) for axis in range(rank)], [max(0, -pads[axis + rank]) for axis in range(rank)]
    if any(crops[0]) or any(crops[1]):
        cropped, fill_cropped, kept, zero, fits = constant_blob(
            [begin + end for begin, end in zip(*crops)], fresh) + (fresh(), fresh(), fresh())
        ops += [fill_cropped, make_op("Sub", [whole, cropped], [kept], node.name), int64_scalar(node, zero, 0),
                make_op("GE", [kept, zero], [fits], node.name),
                refusal(node.name, fits, "{}: pads {} crop input 0 {!r} past its dims".format(
                    where, shape_text(pads), data), whole)]
    growth, fill_growth = constant_blob([pads[axis] + pads[axis + rank] for axis in range(rank)], fresh)
    grown = fresh()
    more, dims_double = as_double(node.name, grown, fresh)
    ops += [fill_growth, make_op("Add", [whole, growth], [grown], node.name)] + more + capped_dims(
        node.name, dims_double, element_cap(size), size_message(where, "its output (input 0 {!r} and the pads)".format(
            data), size), fresh, checked=grown, length=rank)
    if any(crops[0]) or any(crops[1]):
        for axis in range(rank):  # Caffe2's Slice cuts one axis at a time; an end of -1 - k drops k entries
            if crops[0][axis] or crops[1][axis]:
                cut = fresh()
                ops.append(make_op("Slice", [current], [cut], node.name,
                                   starts=[crops[0][axis] if other == axis else 0 for other in range(rank)],
                                   ends=[-1 - crops[1][axis] if other == axis else -1 for other in range(rank)]))
                current = cut
    return ops + _slabs(node, rank, elem_type, current, [(max(0, pads[axis]), max(0, pads[axis + rank]))
                                                         for axis in range(rank)], _slab_fill(node, opset, elem_type,
                                                                                              value),
                        node.output[0], fresh)


def _slab_fill(node, opset, elem_type, value):
    """Pad's constant ``value`` as ConstantFill's argument for ``elem_type``: a float, or a whole number for
    integers (refused otherwise)."""
    if elem_type in (TensorProto.FLOAT, TensorProto.DOUBLE):
        return float(value)
    if float(value).is_integer():
        return int(value)
    raise refuse(node, opset, "constant_value {!r} is not a whole number for input 0 {!r} of integers".format(
        value, node.input[0]))


def _slabs(node, rank: int, elem_type, source: str, pads, fill, out: str, fresh) -> list:
    """Ops writing ``source`` with slabs of ``fill`` concatenated before and after each axis (``pads``: (begin, end)
    per axis, none negative) to ``out``: Caffe2's ConstantFill of the dims read at run time with that axis' pad, and
    Concat."""
    ops, current = [], source
    padded = [axis for axis, (begin, end) in enumerate(pads) if begin or end]
    for axis in padded:
        dims, parts = fresh(), [current]
        ops.append(make_op("Shape", [current], [dims], node.name))
        for pad, first in zip(pads[axis], (True, False)):
            if not pad:
                continue
            (others, fill_others), (own, fill_own) = (
                constant_blob([int(other != axis) for other in range(rank)], fresh),
                constant_blob([pad if other == axis else 0 for other in range(rank)], fresh))
            kept, slab_dims, slab = fresh(), fresh(), fresh()
            ops += [fill_others, fill_own, make_op("Mul", [dims, others], [kept], node.name),
                    make_op("Add", [kept, own], [slab_dims], node.name),
                    make_op("ConstantFill", [slab_dims], [slab], node.name, input_as_shape=1,
                            dtype=CAFFE2_TYPES[elem_type], value=fill)]
            parts.insert(0 if first else len(parts), slab)
        target = out if axis == padded[-1] else fresh()
        ops.append(make_op("Concat", parts, [target, fresh()], node.name, axis=axis))
        current = target
    if current != out:  # nothing padded
        ops.append(make_op("Copy", [current], [out], node.name))
    return ops


def _gathered_pad(node, opset, facts, rank: int, mode: str, pads, value, fresh) -> list:
    """Pad as one Gather per axis (every axis when the pads are fed or the mode constant, else the padded ones), of
    the indices each output position reads, made from the dims and pads when the net runs; ``pads`` None: input 1
    read then.

    A negative pad crops first, and the positive ones pad what is left: onnxruntime's order (its reflect reads the
    cropped axis). Position j of an axis of length d, begin pad b, end pad e reads the input at i = j - b: in
    constant mode the input is first padded by one ``value`` on each side (torch's constant_pad_nd, no dim empty)
    and i is clamped to [-1, d], shifted by 1; in edge mode i is clamped to [0, d - 1] (the cropped axis's ends are
    the input's there); in reflect mode i is reflected within the cropped axis [lo, d - hi) (lo, hi the crops).
    Reflect needs each positive pad shorter than the cropped axis and edge a cropped axis that is not empty
    (onnxruntime reads memory it does not own there): checked, as the pads' count (2 per dim) and the output's dims
    within the cap (Range counts in 32 bits)."""
    data, out, where = node.input[0], node.output[0], label(node, opset)
    size = itemsize(facts.elem_type(data))
    ops = rank_checked(node, opset, 0, data, facts, fresh, rank)
    if pads is None:
        fed = node.input[1]  # int64, as ONNX types it
        count, wanted, fits, begins, ends = (fresh() for _ in range(5))
        ops += [make_op("Size", [fed], [count], node.name), int64_scalar(node, wanted, 2 * rank),
                make_op("EQ", [count, wanted], [fits], node.name),
                refusal(node.name, fits, "{}: the pads {!r} do not hold 2 entries per dim of input 0 {!r} (rank "
                                         "{})".format(where, node.input[1], data, rank), fed)]
        more, fed_double = as_double(node.name, fed, fresh)
        cap = element_cap(size, counter=True)
        ops += more + capped_scalar(node.name, fed_double, cap, "{}: the pads {!r} reach outside [-{}, {}] (PYCUMSUM_"
                                    "OP_MAX_TENSOR_BYTES)".format(where, node.input[1], cap, cap), fresh, lowest=-cap,
                                    checked=fed)
        ops += [make_op("Slice", [fed], [begins], node.name, starts=[0], ends=[rank]),
                make_op("Slice", [fed], [ends], node.name, starts=[rank], ends=[2 * rank])]
        axes = range(rank)
    else:
        begins, fill_begins = constant_blob(pads[:rank], fresh)
        ends, fill_ends = constant_blob(pads[rank:], fresh)
        ops += [fill_begins, fill_ends]
        # constant mode pads every axis by one value first: each is gathered back
        axes = range(rank) if mode == "constant" else [axis for axis in range(rank) if pads[axis] or pads[axis + rank]]
    shape, grown, dims = fresh(), fresh(), fresh()
    more, dims_double = as_double(node.name, dims, fresh)
    ops += [make_op("Shape", [data], [shape], node.name), make_op("Add", [shape, begins], [grown], node.name),
            make_op("Add", [grown, ends], [dims], node.name)] + more + capped_dims(
        node.name, dims_double, element_cap(size, counter=True), size_message(
            where, "its output (input 0 {!r} and the pads)".format(data), size, counter=True), fresh, checked=dims,
        length=rank)
    zero, one, minus_one = fresh(), fresh(), fresh()
    ops += [make_op("GivenTensorInt64Fill", [], [blob], node.name, values=[number], shape=[1])
            for blob, number in ((zero, 0), (one, 1), (minus_one, -1))]
    source = data
    if mode == "constant":
        more, source = _bordered(node, opset, facts, rank, value, fresh)
        ops += more
    if not axes:  # rank 0: no pads
        return ops + [make_op("Copy", [data], [out], node.name)]
    for number, axis in enumerate(axes):
        length, begin, end, wide, count, positions, read = (fresh() for _ in range(7))
        ops += [make_op("Shape", [data], [length], node.name, axes=[axis]),
                make_op("Slice", [begins], [begin], node.name, starts=[axis], ends=[axis + 1]),
                make_op("Slice", [ends], [end], node.name, starts=[axis], ends=[axis + 1]),
                make_op("Slice", [dims], [wide], node.name, starts=[axis], ends=[axis + 1]),
                make_op("Squeeze", [wide], [count], node.name, dims=[0]),
                make_op("Range", [count], [positions], node.name),
                make_op("Sub", [positions, begin], [read], node.name)]
        if mode == "constant":
            more, indices = _clamped(node, facts, read, minus_one, length, fresh)
            shifted = fresh()
            ops += more + [make_op("Add", [indices, one], [shifted], node.name)]
            indices = shifted
        else:
            more, indices = _edge_or_reflect(node, opset, facts, mode, axis, read, length, begin, end, zero, one,
                                             fresh)
            ops += more
        target = out if number == len(axes) - 1 else fresh()
        ops.append(make_op("Gather", [source, indices], [target], node.name, axis=axis))
        source = target
    return ops


def _bordered(node, opset, facts, rank: int, value, fresh) -> tuple:
    """(ops, blob): input 0 with one ``value`` (a number, or a blob holding one) on each side of every axis, by
    torch's constant_pad_nd (no dim comes out empty), or for the portable target by slabs (`_slabs`); a value blob
    is written where a border of ones, padded around zeros of the input's shape, is true, after the check that it
    holds one element."""
    data, bordered = node.input[0], fresh()
    elem_type = facts.elem_type(data)
    if not isinstance(value, str) and not facts.torch_kernels and elem_type in CAFFE2_NUMBERS:
        fill = _slab_fill(node, opset, elem_type, value)
        return _slabs(node, rank, elem_type, data, [(1, 1)] * rank, fill, bordered, fresh), bordered
    if not isinstance(value, str):
        return [make_op("ATen", [data], [bordered], node.name, operator="constant_pad_nd", pad=[1] * 2 * rank,
                        value=float(value))], bordered
    count, one, single, padded, inside, border = (fresh() for _ in range(6))
    return [make_op("Size", [value], [count], node.name), int64_scalar(node, one, 1),
            make_op("EQ", [count, one], [single], node.name),
            refusal(node.name, single, "{}: input 2 (constant_value) {!r} does not hold one element".format(
                label(node, opset), value), count),
            make_op("ATen", [data], [padded], node.name, operator="constant_pad_nd", pad=[1] * 2 * rank, value=0.0),
            make_op("ConstantFill", [data], [inside], node.name, dtype=caffe2_pb2.TensorProto.BOOL, value=False),
            make_op("ATen", [inside], [border], node.name, operator="constant_pad_nd", pad=[1] * 2 * rank,
                    value=1.0),
            make_op("ATen", [border, value, padded], [bordered], node.name, operator="where")], bordered


def _clamped(node, facts, values: str, low: str, high: str, fresh) -> tuple:
    """(ops, blob): int64 ``values`` held to [``low``, ``high``] ((1,) blobs), by `extreme`."""
    above, clamped = fresh(), fresh()
    return extreme(node, facts, values, low, above, fresh, larger=True) + extreme(
        node, facts, above, high, clamped, fresh, larger=False), clamped


def _edge_or_reflect(node, opset, facts, mode: str, axis: int, read: str, length: str, begin: str, end: str, zero: str,
                     one: str, fresh) -> tuple:
    """(ops, blob): the indices of input 0 along ``axis`` that positions ``read`` (j - b) take in ``mode`` edge or
    reflect (see `_gathered_pad`), after the check that the cropped axis allows the pads."""
    ops, crops, grows = [], [], []
    for pad in (begin, end):
        negated, crop, grow = fresh(), fresh(), fresh()
        ops += [make_op("Negative", [pad], [negated], node.name),
                make_op("ATen", [negated, zero], [crop], node.name, operator="maximum"),
                make_op("ATen", [pad, zero], [grow], node.name, operator="maximum")]
        crops.append(crop)
        grows.append(grow)
    partial, kept, widest, unpadded, allowed, fits = (fresh() for _ in range(6))
    ops += [make_op("Sub", [length, crops[0]], [partial], node.name),
            make_op("Sub", [partial, crops[1]], [kept], node.name),  # the cropped axis's length
            make_op("ATen", grows, [widest], node.name, operator="maximum"),
            make_op("EQ", [widest, zero], [unpadded], node.name),
            make_op("LT" if mode == "reflect" else "LE", [widest if mode == "reflect" else one, kept], [allowed],
                    node.name),
            make_op("Or", [unpadded, allowed], [fits], node.name),
            refusal(node.name, fits, "{}: a pad of axis {} of input 0 {!r} is {} (after its crops), which mode {} "
                                     "needs".format(label(node, opset), axis, node.input[0],
                                                    "not shorter than the axis" if mode == "reflect" else "empty",
                                                    mode), length)]
    if mode == "edge":
        last = fresh()
        more, indices = _clamped(node, facts, read, zero, last, fresh)
        return ops + [make_op("Sub", [length, one], [last], node.name)] + more, indices
    inside, last, magnitude, back, distance, reflected, indices = (fresh() for _ in range(7))
    return ops + [make_op("Sub", [read, crops[0]], [inside], node.name),  # within the cropped axis
                  make_op("Sub", [kept, one], [last], node.name),
                  make_op("ATen", [inside], [magnitude], node.name, operator="abs"),
                  make_op("Sub", [last, magnitude], [back], node.name),
                  make_op("ATen", [back], [distance], node.name, operator="abs"),
                  make_op("Sub", [last, distance], [reflected], node.name),
                  make_op("Add", [reflected, crops[0]], [indices], node.name)], indices
