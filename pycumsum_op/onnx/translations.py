"""pycumsum_op's own translations of ONNX nodes to Caffe2 C++ operators (the forms `forms.FORMS` marks `OWN`).

Each translation takes the node (a NodeProto), the model's `GraphFacts`, the opset and a maker of fresh
blob names, and returns the Caffe2 OperatorDefs; a value it cannot express faithfully (a Slice step over
a dimension the model leaves symbolic, an axis that needs the unknown rank, ...) is a `FormRefused`
naming the node. Where Caffe2 has a portable operator with ONNX's meaning it is used (Slice, Gather with
``wrap_indices``, ExpandDims, Squeeze, Reduce*, Reshape, Softmax, Pow with a constant exponent);
otherwise Caffe2's ``ATen`` operator runs torch's kernel (``flip`` for a reversed axis of symbolic
length, ``where``, ``pow`` with a tensor exponent, ``maximum`` / ``minimum``, ``index_put`` for
ScatterND), whose broadcasting is ONNX's. LSTM, GRU and RNN become Caffe2's ``RecurrentNetwork``, built by
Caffe2's own RNN converter (`_recurrent`). Registered scans whose entry names an ONNX operator
(`pycumsum_op.scans`, ``onnx=``) become their Caffe2 op (`scan_operator`).

What a translation builds is counted before it is built: a list or a number of ops that follows a count read
from the model (a Slice's axes, a Reshape's shape, ScatterND's index columns) is refused past ``MAX_RANK``
entries (`_within_rank`), and no list follows a dim (a strided Slice's indices come from Caffe2's ``Range`` at
run time). A bound handed to a Caffe2 kernel is first clamped to the range that kernel computes in (``Range``
counts its length in 32 bits).
"""
from typing import Callable, Dict, List

import numpy as np
import onnx.numpy_helper
from caffe2.proto import caffe2_pb2
from caffe2.python import core, utils, workspace
from caffe2.python.onnx.backend import Caffe2Backend, OnnxNode  # torch >= 1.10: checked by __init__
from onnx import TensorProto, helper

from ..input_limits import MAX_RANK, InputTooLarge, check_tensor, shape_text
from ..ops.net_ops import add_scan_op
from ..scans import SCANS, Refused
from .forms import FormRefused, given, label
from .run_checks import (COUNTER_LIMIT, as_double, capped_dims, capped_scalar, declared, element_cap, exact_double,
                         itemsize, make_op as _op, refusal, size_message, whole_double)

#: ONNX element types a scan's import may get -> the dtype= that keeps the result in that type (ONNX scans
#: keep their input's type; PyCumSum, like torch, would give int64 for int32).
SCAN_DTYPES = {
    TensorProto.FLOAT16: None,
    TensorProto.FLOAT: None,
    TensorProto.DOUBLE: None,
    TensorProto.INT32: "int32",
    TensorProto.INT64: None,
}
_FLOATS = (TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE)
_NUMPY_FLOATS = {TensorProto.FLOAT16: np.float16, TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64}
#: ONNX writes "to the end" of a Slice as a huge int64 (torch: 2**63 - 1); past this any dimension is reached.
_HUGE = 2 ** 31 - 1
#: ONNX's (and torch's) "to the end" of a Slice.
_END = 2 ** 63 - 1


def _refuse(node, opset, why: str) -> FormRefused:
    return FormRefused("{}: {}".format(label(node, opset), why))


def _attribute(node, name: str, default=None):
    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return default


def _within_rank(node, opset, entries: int, what: str) -> None:
    """`InputTooLarge` unless ``entries`` (what a translation makes one op argument, list or op per) fit in a shape's
    `MAX_RANK` dimensions: checked on the count, before anything is built from it."""
    if entries > MAX_RANK:
        raise InputTooLarge("{}: {} has {} entries, more than the {} dimensions a shape may have (MAX_RANK)".format(
            label(node, opset), what, entries, MAX_RANK))


def _int64_scalar(node, name: str, value: int) -> caffe2_pb2.OperatorDef:
    """The op filling blob ``name`` with the int64 scalar ``value``."""
    return _op("ConstantFill", [], [name], node.name, shape=[], dtype=caffe2_pb2.TensorProto.INT64, value=value)


def _int_list(node, opset, facts, position: int, what: str):
    """The constant int vector at input ``position`` (None when the input is absent or empty)."""
    if not given(node, position):
        return None
    value = facts.constant(node.input[position])
    if value is None:
        raise _refuse(node, opset, "input {} ({}) is not a constant".format(position, what))
    if value.dtype.kind not in "iu" or value.ndim > 1:
        raise _refuse(node, opset, "input {} ({}) must be a 1-D integer tensor, got shape {} dtype {}".format(
            position, what, value.shape, value.dtype))
    _within_rank(node, opset, value.size, "input {} ({}) {!r}".format(position, what, node.input[position]))
    return [int(v) for v in value.reshape(-1)]


def _axes(node, opset, facts, position: int = 1):
    """The node's axes: from input ``position`` from opset 13 on where the op takes them so, else the attribute."""
    if opset >= 13 and node.op_type in ("Unsqueeze", "Squeeze", "ReduceSum"):
        return _int_list(node, opset, facts, position, "axes")
    axes = _attribute(node, "axes")
    return None if axes is None else [int(a) for a in axes]


def _normalized(node, opset, axes, rank, what: str = "axis"):
    """``axes`` made non-negative for ``rank`` (None: unknown, so only non-negative axes pass)."""
    out = []
    for axis in axes:
        if axis < 0:
            if rank is None:
                raise _refuse(node, opset, "{} {} counts from the end, but the input's rank is unknown".format(
                    what, axis))
            axis += rank
        if rank is not None and not 0 <= axis < rank:
            raise _refuse(node, opset, "{} {} is out of range for rank {}".format(what, axis, rank))
        out.append(axis)
    if len(set(out)) != len(out):
        raise _refuse(node, opset, "repeated {} in {}".format(what, axes))
    return out


def _constant_blob(values, fresh) -> tuple:
    """(name, op) of a predict-net constant: an int64 vector."""
    name = fresh()
    return name, _op("GivenTensorInt64Fill", [], [name], values=[int(v) for v in values], shape=[len(values)])


def _onnx_range(start: int, end: int, step: int, dim: int) -> range:
    """The indices ONNX Slice takes along a dim of length ``dim`` (its clamping differs from Python's for
    negative steps: a start before the first element is the first element)."""
    start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), dim), min(max(end, 0), dim), step)
    return range(min(max(start, 0), dim - 1), min(max(end, -1), dim - 1), step)


def _caffe2_bound(value: int, end: bool) -> int:
    """An ONNX Slice start or end as Caffe2's Slice reads it (-1 is the end, so -k means dim + 1 - k; a bound past
    the dim is clamped)."""
    if end and value >= _HUGE:
        return -1
    return value if value >= 0 else value - 1


def _safe_on_any_length(start: int, end: int) -> bool:
    """Whether Caffe2's Slice takes ONNX's [start, end) with step 1 as ONNX does whatever the axis' length: it
    clamps a bound past the length, but refuses a start that counts back past the first element and an end before
    the start, where ONNX clamps both (an empty slice)."""
    return start >= 0 and (end >= start or end >= _HUGE)


def _full_bounds(node, fresh, position, axes, rank, end):
    """(ops, blob): the full-rank int64 vector of ONNX starts (or ends) of input ``position``, known only at run time,
    at ``axes``; 0 (or the end) at the other axes."""
    name, ops = node.input[position], []
    cast, pieces = fresh(), []
    ops.append(_op("Cast", [name], [cast], node.name, to=caffe2_pb2.TensorProto.INT64))
    for axis in range(rank):
        if axis in axes:  # a Slice, not a Gather: Caffe2's Gather shape inference crashes on unknown shapes
            picked, index = fresh(), axes.index(axis)
            ops.append(_op("Slice", [cast], [picked], node.name, starts=[index], ends=[index + 1]))
            pieces.append(picked)
        else:
            default, fill = _constant_blob([_END if end else 0], fresh)
            ops.append(fill)
            pieces.append(default)
    full = fresh()
    ops.append(_op("Concat", pieces, [full, fresh()], node.name, axis=0))
    return ops, full


def _cuts(node, data, out, bounds, fresh):
    """Slices of ``data`` into ``out``, one per (ops, starts blob, ends blob) of ``bounds`` (the ops make the
    blobs): Caffe2's Slice cuts one axis at a time."""
    ops, current = [], data
    for number, (more, starts, ends) in enumerate(bounds):
        target = out if number == len(bounds) - 1 else fresh()
        ops += more + [_op("Slice", [current, starts, ends], [target], node.name)]
        current = target
    return ops


def _clamped_slice(node, data, out, starts, ends, axes, rank, fresh):
    """A Slice of ``data`` along ``axes`` by the full-rank int64 ONNX ``starts`` / ``ends`` blobs (step 1), clamped
    at run time as ONNX clamps them, against the lengths of ``data``: a negative bound counts from the end, then
    each is held to [0, length] and an end to at least its start, so that Caffe2's Slice reads them as they are."""
    ops, lengths, zero = [], fresh(), fresh()
    ops += [_op("Shape", [data], [lengths], node.name),
            _int64_scalar(node, zero, 0)]
    clamped = []
    for bound in (starts, ends):
        negative, shift, offset, counted, floor, held = (fresh() for _ in range(6))
        ops += [_op("LT", [bound, zero], [negative], node.name),
                _op("Cast", [negative], [shift], node.name, to=caffe2_pb2.TensorProto.INT64),
                _op("Mul", [shift, lengths], [offset], node.name),
                _op("Add", [bound, offset], [counted], node.name),  # no overflow: a length added to a negative
                _op("ATen", [counted], [floor], node.name, operator="clamp_min", min=0),
                _op("ATen", [floor, lengths], [held], node.name, operator="minimum")]
        clamped.append(held)
    first, last = clamped[0], fresh()
    ops.append(_op("ATen", [clamped[1], first], [last], node.name, operator="maximum"))
    cuts = []
    for axis in axes:  # this axis' bounds; 0 and the end (clamped by Caffe2's Slice) elsewhere
        (picked, pick), (others, fill) = (_constant_blob([int(a == axis) for a in range(rank)], fresh),
                                          _constant_blob([0 if a == axis else _END for a in range(rank)], fresh))
        start, masked, end = fresh(), fresh(), fresh()
        cuts.append(([pick, fill, _op("Mul", [first, picked], [start], node.name),
                      _op("Mul", [last, picked], [masked], node.name), _op("Add", [masked, others], [end], node.name)],
                     start, end))
    return ops + _cuts(node, data, out, cuts, fresh)


def _counted_by_range(node, opset, length: str, fresh) -> list:
    """Ops stopping the net unless the int64 ``length`` (of an axis whose indices Caffe2's Range makes) is below 2**31:
    Range keeps its count in a 32-bit int, and an axis may be longer (an empty tensor of any declared length is fed
    in no memory), so a count past it would wrap (2**32 + 2**30 indices asked for 2**30)."""
    most, within = fresh(), fresh()
    return [_int64_scalar(node, most, COUNTER_LIMIT), _op("LE", [length, most], [within], node.name),
            refusal(node.name, within, "{}: an axis of input 0 {!r} is longer than the {} indices Caffe2's Range "
                                       "counts (in 32 bits)".format(label(node, opset), node.input[0], COUNTER_LIMIT),
                    length)]


def _strided(node, opset, data, out, axis, start_step, fresh):
    """Every step-th element of ``axis`` from a start to the end, the axis' length read at run time. Caffe2's Range
    computes its length in 32-bit arithmetic, so a start past the end (up to 2**63 - 1) would wrap around to a
    length of millions: the start is held to the length first, so Range counts at most the length."""
    ops, (start, step) = [], start_step
    shape, length, first, held, stride, indices = fresh(), fresh(), fresh(), fresh(), fresh(), fresh()
    ops += [_op("Shape", [data], [shape], node.name, axes=[axis]),
            _op("Squeeze", [shape], [length], node.name, dims=[0])] + _counted_by_range(node, opset, length, fresh)
    ops += [_int64_scalar(node, first, start),
            _op("ATen", [first, length], [held], node.name, operator="minimum"),
            _int64_scalar(node, stride, step),
            _op("Range", [held, length, stride], [indices], node.name),
            _op("Gather", [data, indices], [out], node.name, axis=axis)]
    return ops


def _stepped(node, opset, data, out, axis, picked: range, dim: int, fresh):
    """The elements ``picked`` of ``axis`` (its length ``dim`` known), gathered by indices that Caffe2's Range makes
    at run time: a list of them in the net would cost as many entries as the model says the axis is long. Range
    computes its length in 32-bit arithmetic and rounds it toward zero for a negative step, so it makes the indices
    in increasing order (flipped after, for a negative step), by a step no longer than ``dim`` (past it only one
    index is taken, whatever the step), from a start and to a stop both held to the axis' length read at run time:
    Range then counts at most the input's length, whatever the model declares."""
    count, step = len(picked), min(abs(picked.step), max(dim, 1))
    low = (picked[-1] if picked.step < 0 else picked.start) if count else 0
    shape, length, first, stop, stride, held_first, held_stop, indices = (fresh() for _ in range(8))
    ops = [_op("Shape", [data], [shape], node.name, axes=[axis]),
           _op("Squeeze", [shape], [length], node.name, dims=[0])] + _counted_by_range(node, opset, length, fresh) + [
           _int64_scalar(node, first, low), _int64_scalar(node, stop, low + count * step),
           _int64_scalar(node, stride, step),
           _op("ATen", [first, length], [held_first], node.name, operator="minimum"),
           _op("ATen", [stop, length], [held_stop], node.name, operator="minimum"),
           _op("Range", [held_first, held_stop, stride], [indices], node.name)]
    if picked.step < 0 and count > 1:
        increasing, indices = indices, fresh()
        ops.append(_op("ATen", [increasing], [indices], node.name, operator="flip", dims=[0]))
    return ops + [_op("Gather", [data, indices], [out], node.name, axis=axis)]


def _slice(node, facts, opset, fresh) -> List[caffe2_pb2.OperatorDef]:
    data, out = node.input[0], node.output[0]
    rank = facts.rank(data)
    dims = facts.dims(data) or ([None] * rank if rank is not None else None)
    if rank is None:
        return _slice_any_rank(node, facts, opset, fresh)
    count = facts.dims(node.input[1])
    if count is not None and len(count) != 1:  # before any list is made from its length
        raise _refuse(node, opset, "starts {!r} is declared with dims {}; ONNX takes a 1-D list".format(
            node.input[1], shape_text(count)))
    axes = _int_list(node, opset, facts, 3, "axes")
    if axes is None and (count is None or count[0] is None):
        raise _refuse(node, opset, "no axes, and the length of starts {!r} is unknown".format(node.input[1]))
    if axes is None and count[0] > rank:
        raise _refuse(node, opset, "starts {!r} has {} entries, more than the rank {} of input {!r}".format(
            node.input[1], count[0], rank, data))
    axes = _normalized(node, opset, list(range(count[0])) if axes is None else axes, rank)
    steps = _int_list(node, opset, facts, 4, "steps") or [1] * len(axes)
    if not facts.is_constant(node.input[1]) or not facts.is_constant(node.input[2]):
        if set(steps) != {1}:
            raise _refuse(node, opset, "steps {} with starts or ends known only at run time".format(steps))
        ops, bounds = [], []
        for position, end in ((1, False), (2, True)):
            values = facts.constant(node.input[position])
            if values is None:
                more, blob = _full_bounds(node, fresh, position, axes, rank, end)
            else:
                full = [_END if end else 0] * rank
                for axis, value in zip(axes, values.reshape(-1).tolist()):
                    full[axis] = int(value)
                blob, fill = _constant_blob(full, fresh)
                more = [fill]
            ops += more
            bounds.append(blob)
        return ops + _clamped_slice(node, data, out, bounds[0], bounds[1], axes, rank, fresh)
    starts = _int_list(node, opset, facts, 1, "starts")
    ends = _int_list(node, opset, facts, 2, "ends")
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise _refuse(node, opset, "starts, ends, axes and steps differ in length")
    if 0 in steps:
        raise _refuse(node, opset, "a step is 0")
    c2_starts, c2_ends = [0] * rank, [-1] * rank  # Caffe2's Slice: -1 is the end, so -k means dim + 1 - k
    onnx_starts, onnx_ends = [0] * rank, [_END] * rank  # the same bounds as ONNX reads them
    clamped = False  # a bound only a run-time clamp takes as ONNX does (`_safe_on_any_length`)
    picks = []  # (axis, the range of indices, (start, step) to the end, or None for a whole reversal)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        dim = dims[axis]
        if dim is not None:
            if step < 0 and end >= dim:
                raise _refuse(node, opset, "end {} past axis {} (length {}) with step {}: onnxruntime and the ONNX "
                                           "specification disagree on it".format(end, axis, dim, step))
            picked = _onnx_range(start, end, step, dim)
            if step == 1:
                c2_starts[axis], c2_ends[axis] = picked.start, max(picked.start, picked.stop)
                onnx_starts[axis], onnx_ends[axis] = c2_starts[axis], c2_ends[axis]
            else:
                picks.append((axis, picked))
        elif step == 1:
            c2_starts[axis], c2_ends[axis] = _caffe2_bound(start, False), _caffe2_bound(end, True)
            onnx_starts[axis], onnx_ends[axis] = start, end
            clamped = clamped or not _safe_on_any_length(start, end)
        elif step == -1 and (start == -1 or start >= _HUGE) and end < -_HUGE:
            picks.append((axis, None))
        elif step > 1 and start >= 0 and end >= _HUGE:  # every step-th from start to the end: Range at run time
            picks.append((axis, (start, step)))
        else:
            raise _refuse(node, opset, "step {} (from {} to {}) over axis {}, whose length the model leaves "
                                       "symbolic: export with that length fixed".format(step, start, end, axis))
    cut = [axis for axis, step in zip(axes, steps) if step == 1]
    ops, current = [], data
    if clamped:
        current = out if not picks else fresh()
        (first, fill_starts), (last, fill_ends) = _constant_blob(onnx_starts, fresh), _constant_blob(onnx_ends, fresh)
        ops += [fill_starts, fill_ends] + _clamped_slice(node, data, current, first, last, cut, rank, fresh)
    else:
        cuts = []
        for axis in cut:
            if (c2_starts[axis], c2_ends[axis]) != (0, -1):
                (first, fill_starts), (last, fill_ends) = (
                    _constant_blob([c2_starts[axis] if a == axis else 0 for a in range(rank)], fresh),
                    _constant_blob([c2_ends[axis] if a == axis else -1 for a in range(rank)], fresh))
                cuts.append(([fill_starts, fill_ends], first, last))
        if cuts:
            current = out if not picks else fresh()
            ops += _cuts(node, data, current, cuts, fresh)
    for number, (axis, indices) in enumerate(picks):
        target = out if number == len(picks) - 1 else fresh()
        if indices is None:
            ops.append(_op("ATen", [current], [target], node.name, operator="flip", dims=[axis]))
        elif isinstance(indices, tuple):
            ops += _strided(node, opset, current, target, axis, indices, fresh)
        else:
            ops += _stepped(node, opset, current, target, axis, indices, dims[axis], fresh)
        current = target
    if not ops:
        ops.append(_op("Copy", [data], [out], node.name))
    return ops


def _slice_any_rank(node, facts, opset, fresh):
    """A Slice of an input whose rank the model leaves unknown (axes and steps constant): Caffe2's Slice takes bounds
    for every dim, so each axis is instead cut by gathering the indices ONNX takes, made at run time from the
    axis' length: each bound counted from the end when negative, clamped as ONNX clamps it ([0, length] for a
    positive step, [-1, length - 1] for a negative one), then max(0, ceil((end - start) / step)) indices from the
    start by the step, which is first held to the length (past it only one index is taken), so that Caffe2's Range
    counts at most the length. An axis counted from the end needs no rank; one list of axes counting both ways is
    refused, as the rank would be needed to rule out a repeated axis, which ONNX forbids."""
    data, out = node.input[0], node.output[0]
    axes = _int_list(node, opset, facts, 3, "axes")
    if axes is None:
        count = facts.dims(node.input[1])
        if count is None or len(count) != 1 or count[0] is None:
            raise _refuse(node, opset, "no axes, and the length of starts {!r} is unknown".format(node.input[1]))
        axes = list(range(count[0]))
    steps = _int_list(node, opset, facts, 4, "steps") or [1] * len(axes)
    if len(steps) != len(axes):
        raise _refuse(node, opset, "axes and steps differ in length")
    if 0 in steps:
        raise _refuse(node, opset, "a step is 0")
    if len(set(axes)) != len(axes) or (min(axes) < 0 <= max(axes)):
        raise _refuse(node, opset, "axes {} count from the start and from the end (or repeat), and the rank of input "
                                   "{!r} is unknown".format(axes, data))
    if min(axes) < 0 and facts.elem_type(data) == TensorProto.UINT16:
        raise _refuse(node, opset, "axes {} count from the end of uint16 input {!r} of unknown rank: torch's "
                                   "index_select has no uint16".format(axes, data))
    ops, bounds = [], []
    for position in (1, 2):
        values = facts.constant(node.input[position])
        if values is not None and values.size != len(axes):
            raise _refuse(node, opset, "starts, ends, axes and steps differ in length")
        blob = fresh()
        ops.append(_op("Cast", [node.input[position]], [blob], node.name, to=caffe2_pb2.TensorProto.INT64))
        bounds.append(blob)
    (zero, fill_zero), (one, fill_one), (minus_one, fill_minus_one) = (_constant_blob([v], fresh) for v in (0, 1, -1))
    ops += [fill_zero, fill_one, fill_minus_one]
    current = data
    for number, (axis, step) in enumerate(zip(axes, steps)):
        more, length = _axis_length(node, current, axis, fresh)
        ops += more + _counted_by_range(node, opset, length, fresh)
        last = fresh()
        ops.append(_op("Sub", [length, one], [last], node.name))
        high = length if step > 0 else last
        held = []
        for bound, floor in ((bounds[0], zero), (bounds[1], zero if step > 0 else minus_one)):
            picked, negative, shift, offset, counted, floored, ceiled = (fresh() for _ in range(7))
            ops += [_op("Slice", [bound], [picked], node.name, starts=[number], ends=[number + 1]),
                    _op("LT", [picked, zero], [negative], node.name),
                    _op("Cast", [negative], [shift], node.name, to=caffe2_pb2.TensorProto.INT64),
                    _op("Mul", [shift, length], [offset], node.name),
                    _op("Add", [picked, offset], [counted], node.name),  # no overflow: a length added to a negative
                    _op("ATen", [counted, floor], [floored], node.name, operator="maximum"),
                    _op("ATen", [floored, high], [ceiled], node.name, operator="minimum")]
            held.append(ceiled)
        start, end = held
        span, positive, at_least_one, stride, rounded, total, count, steps_blob, offsets, indices = (
            fresh() for _ in range(10))
        stride_value, fill = _constant_blob([min(abs(step), _END)], fresh)
        ops += [fill,
                _op("Sub", [end, start] if step > 0 else [start, end], [span], node.name),
                _op("ATen", [span, zero], [positive], node.name, operator="maximum"),
                _op("ATen", [length, one], [at_least_one], node.name, operator="maximum"),
                _op("ATen", [stride_value, at_least_one], [stride], node.name, operator="minimum"),
                _op("Sub", [stride, one], [rounded], node.name),
                _op("Add", [positive, rounded], [total], node.name),
                _op("Div", [total, stride], [count], node.name),
                _op("Range", [count], [steps_blob], node.name),
                _op("Mul", [steps_blob, stride], [offsets], node.name),
                _op("Add" if step > 0 else "Sub", [start, offsets], [indices], node.name)]
        target = out if number == len(axes) - 1 else fresh()
        ops.append(_take(node, current, indices, target, axis))
        current = target
    return ops


def _unsqueeze(node, facts, opset, fresh):
    axes = _axes(node, opset, facts)
    if not axes:
        raise _refuse(node, opset, "axes are required")
    rank = facts.rank(node.input[0])
    if rank is None and len(axes) == 1 and axes[0] < 0:  # torch's unsqueeze counts from the end as ONNX does
        return [_op("ATen", [node.input[0]], [node.output[0]], node.name, operator="unsqueeze", dim=axes[0])]
    axes = _normalized(node, opset, axes, None if rank is None else rank + len(axes))
    return [_op("ExpandDims", [node.input[0]], [node.output[0]], node.name, dims=sorted(axes))]


def _squeeze(node, facts, opset, fresh):
    data = node.input[0]
    axes = _axes(node, opset, facts)
    dims = facts.dims(data)
    if axes is None:
        if dims is None or None in dims:
            raise _refuse(node, opset, "no axes, and the dims of input {!r} are not all known".format(data))
        axes = [axis for axis, dim in enumerate(dims) if dim == 1]
    axes = _normalized(node, opset, axes, None if dims is None else len(dims))
    if not axes:
        return [_op("Copy", [data], [node.output[0]], node.name)]
    return [_op("Squeeze", [data], [node.output[0]], node.name, dims=sorted(axes))]


def _reduce(node, facts, opset, fresh):
    data = node.input[0]
    axes = _axes(node, opset, facts)
    rank = facts.rank(data)
    if not axes:
        if rank is None:
            raise _refuse(node, opset, "it reduces every axis, but the rank of input {!r} is unknown".format(data))
        axes = list(range(rank))
    if rank is not None:  # Caffe2's Reduce* count negative axes from the end as ONNX does
        axes = _normalized(node, opset, axes, rank)
    keepdims = int(_attribute(node, "keepdims", 1))
    if node.op_type == "ReduceProd":
        if rank == 0:  # the product over no axis of a scalar: the scalar (torch's prod takes no dim of it)
            return [_op("Copy", [data], [node.output[0]], node.name)]
        return _reduce_prod(node, opset, data, sorted(set(axes)), rank, keepdims, fresh)
    if node.op_type in _EMPTY_EXTREMA and facts.elem_type(data) in _FLOATS:
        dims = facts.dims(data)
        if dims is None or any(dims[axis] in (None, 0) for axis in axes):
            return _extremum_of_empty(node, data, sorted(set(axes)), keepdims, fresh)
    if node.op_type == "ReduceLogSumExp":  # torch's logsumexp: shifted by the maximum, as onnxruntime's
        return [_op("ATen", [data], [node.output[0]], node.name, operator="logsumexp", dim=sorted(axes),
                    keepdim=bool(keepdims))]
    if node.op_type not in ("ReduceSumSquare", "ReduceL2"):
        return [_op(node.op_type, [data], [node.output[0]], node.name, axes=sorted(axes), keepdims=keepdims)]
    # ONNX's sum of x * x (and its square root), as numpy: each square may overflow (Caffe2's ReduceL2 does not)
    squared, total = fresh(), node.output[0] if node.op_type == "ReduceSumSquare" else fresh()
    ops = [_op("Mul", [data, data], [squared], node.name),
           _op("ReduceSum", [squared], [total], node.name, axes=sorted(axes), keepdims=keepdims)]
    return ops + ([_op("Sqrt", [total], [node.output[0]], node.name)] if node.op_type == "ReduceL2" else [])


#: ONNX's value of a reduction over no element (its identity), where Caffe2's differs: its ReduceMax starts from the
#: lowest finite float (-3.4e38), ONNX's from -inf
_EMPTY_EXTREMA = {"ReduceMax": float("-inf"), "ReduceMin": float("inf")}


def _extremum_of_empty(node, data, axes, keepdims, fresh) -> list:
    """Caffe2's ReduceMax / ReduceMin, then ONNX's -inf / inf wherever the reduced axes hold no element (their lengths,
    read at run time, multiply to 0): torch's masked_fill by a scalar mask."""
    reduced, lengths, count, zero, empty = fresh(), fresh(), fresh(), fresh(), fresh()
    ops, pieces = [_op(node.op_type, [data], [reduced], node.name, axes=axes, keepdims=keepdims)], []
    for axis in axes:
        more, length = _axis_length(node, data, axis, fresh)
        ops += more
        pieces.append(length)
    return ops + [_op("Concat", pieces, [lengths, fresh()], node.name, axis=0),
                  _op("ATen", [lengths], [count], node.name, operator="prod", dim=0, keepdim=False),
                  _int64_scalar(node, zero, 0), _op("EQ", [count, zero], [empty], node.name),
                  _op("ATen", [reduced, empty], [node.output[0]], node.name, operator="masked_fill",
                      value=_EMPTY_EXTREMA[node.op_type])]


def _reduce_prod(node, opset, data, axes, rank, keepdims, fresh):
    """torch's prod. Over several axes, one pass over their entries in row-major order, as onnxruntime and numpy
    multiply them (axis after axis, a partial product can underflow to 0 where another holds inf: NaN for inf): the
    reduced axes moved last (Transpose) and made one (Reshape to the kept dims and their count), then the kept
    dims' 1s put back for keepdims (ExpandDims)."""
    if len(axes) == 1:
        return [_op("ATen", [data], [node.output[0]], node.name, operator="prod", dim=axes[0], keepdim=bool(keepdims))]
    if rank is None:
        raise _refuse(node, opset, "it reduces {} axes of input {!r}, whose rank is unknown".format(len(axes), data))
    kept = [axis for axis in range(rank) if axis not in axes]
    moved, reduced_dims, count, shape, rows, old_shape = (fresh() for _ in range(6))
    ops = [_op("Transpose", [data], [moved], node.name, axes=kept + axes),
           _op("Shape", [data], [reduced_dims], node.name, axes=axes),
           _op("ATen", [reduced_dims], [count], node.name, operator="prod", dim=0, keepdim=True)]
    if kept:  # the kept dims read at run time, then the reduced entries' count (no -1: a kept dim may be 0)
        kept_dims, split = fresh(), fresh()
        ops += [_op("Shape", [data], [kept_dims], node.name, axes=kept),
                _op("Concat", [kept_dims, count], [shape, split], node.name, axis=0)]
    else:
        shape = count
    reduced = fresh() if keepdims else node.output[0]
    ops += [_op("Reshape", [moved, shape], [rows, old_shape], node.name),
            _op("ATen", [rows], [reduced], node.name, operator="prod", dim=len(kept), keepdim=False)]
    if keepdims:
        ops.append(_op("ExpandDims", [reduced], [node.output[0]], node.name, dims=axes))
    return ops


def _type_text(elem_type) -> str:
    """An ONNX element type as a refusal names it."""
    return TensorProto.DataType.Name(elem_type) if elem_type else "of a type the model does not state"


def _typed(node, opset, facts, name: str, what: str, accepted, why: str) -> int:
    """The element type of blob ``name`` (``what`` in the node), refused unless it is one of ``accepted``."""
    elem_type = facts.elem_type(name)
    if elem_type not in accepted:
        raise _refuse(node, opset, "{} {!r} is {}; {}".format(what, name, _type_text(elem_type), why))
    return elem_type


def _pow(node, facts, opset, fresh):
    base, exponent = node.input
    base_type, exponent_type = facts.elem_type(base), facts.elem_type(exponent)
    if base_type not in _FLOATS[1:]:
        raise _refuse(node, opset, "the base {!r} is {}, only float and double bases are translated".format(
            base, _type_text(base_type)))
    value = facts.constant(exponent)
    base_rank = facts.rank(base)
    if value is not None and value.size == 1 and value.ndim <= (0 if base_rank is None else base_rank):
        if float(value.reshape(())) == 2.0:  # a norm's square: one product, as torch and onnxruntime compute it
            return [_op("Mul", [base, base], [node.output[0]], node.name)]
        return [_op("Pow", [base], [node.output[0]], node.name, exponent=float(value.reshape(())))]
    if exponent_type != base_type:
        raise _refuse(node, opset, "a tensor exponent of another type than the base ({} vs {})".format(
            TensorProto.DataType.Name(exponent_type) if exponent_type else "unknown",
            TensorProto.DataType.Name(base_type)))
    return [_op("ATen", [base, exponent], [node.output[0]], node.name, operator="pow")]


def _reshape(node, facts, opset, fresh):
    """Caffe2's Reshape copies a 0 of the shape from the input's dims only when the input is not empty (ONNX
    copies it always): zeros are replaced by the dims first, from the model or at run time."""
    data, shape = node.input
    dims, out = facts.dims(data), [node.output[0], fresh()]
    declared = facts.dims(shape)
    if declared is not None and len(declared) != 1:  # before any list is made from its length
        raise _refuse(node, opset, "the shape {!r} is declared with dims {}; ONNX takes a 1-D shape".format(
            shape, shape_text(declared)))
    values = facts.constant(shape)
    if values is not None:
        _within_rank(node, opset, values.size, "the shape {!r}".format(shape))
        values = [int(v) for v in values.reshape(-1)]
        if min(values, default=0) < -1 or values.count(-1) > 1:  # Caffe2 divides by them: a shape [-2, -1] crashed it
            raise _refuse(node, opset, "the shape {!r} is {}; ONNX gives meaning to one -1 and to 0s, no other "
                                       "negative dim".format(shape, shape_text(values)))
        zeros = [k for k, v in enumerate(values) if v == 0]
        if not zeros:
            return [_op("Reshape", [data, shape], out, node.name)]
        if dims is not None and all(k < len(dims) and dims[k] is not None for k in zeros):
            blob, fill = _constant_blob([dims[k] if v == 0 else v for k, v in enumerate(values)], fresh)
            return [fill, _op("Reshape", [data, blob], out, node.name)]
    count = _length(facts, opset, shape)
    if count is None:
        raise _refuse(node, opset, "a 0 in the shape may copy a dim, but the length of the shape {!r} is "
                                   "unknown".format(shape))
    _within_rank(node, opset, count, "the shape {!r}".format(shape))
    ops, data_dims, padded, prefix = [], fresh(), fresh(), fresh()
    padding, fill = _constant_blob([0] * count, fresh)  # a 0 past the input's rank is invalid: never taken
    ops += [_op("Shape", [data], [data_dims], node.name), fill,
            _op("Concat", [data_dims, padding], [padded, fresh()], node.name, axis=0),
            _op("Slice", [padded], [prefix], node.name, starts=[0], ends=[count])]
    zero, is_zero, new_shape = fresh(), fresh(), fresh()
    ops += [_int64_scalar(node, zero, 0),
            _op("EQ", [shape, zero], [is_zero], node.name),
            _op("ATen", [is_zero, prefix, shape], [new_shape], node.name, operator="where")]
    ops += _checked_shape(node, opset, new_shape, itemsize(facts.elem_type(data)), fresh, lowest=-1, named=shape)
    return ops + [_op("Reshape", [data, new_shape], out, node.name)]


def _gather(node, facts, opset, fresh):
    data = node.input[0]
    (axis,) = _normalized(node, opset, [int(_attribute(node, "axis", 0))], facts.rank(data))
    return [_op("Gather", list(node.input), [node.output[0]], node.name, axis=axis, wrap_indices=1)]


def _filled(node, shape: str, out: str, dtype: int, value, fresh) -> list:
    """Ops filling ``out`` with ``value`` (Caffe2 ``dtype``) in the shape held by 1-D int64 blob ``shape``, whatever
    its length: Caffe2's ConstantFill refuses an empty shape (a scalar), so it fills (1, *shape) and drops the 1."""
    padded, filled = fresh(), fresh()
    one, fill = _constant_blob([1], fresh)
    return [fill, _op("Concat", [one, shape], [padded, fresh()], node.name, axis=0),
            _op("ConstantFill", [padded], [filled], node.name, input_as_shape=1, dtype=dtype, value=value),
            _op("Squeeze", [filled], [out], node.name, dims=[0])]


#: ONNX element type -> Caffe2's, of the types Caffe2's Expand and ConstantFill take
_EXPAND_TYPES = {TensorProto.INT32: caffe2_pb2.TensorProto.INT32, TensorProto.INT64: caffe2_pb2.TensorProto.INT64,
                 TensorProto.FLOAT: caffe2_pb2.TensorProto.FLOAT, TensorProto.DOUBLE: caffe2_pb2.TensorProto.DOUBLE}


def _expand(node, facts, opset, fresh):
    """Caffe2's Expand broadcasts as ONNX's does, over int32, int64, float and double, but reads a 0 in the shape as
    a 1 and enforces (math_cpu.cc) on an empty input dim that the shape broadcasts: unless the model proves that
    neither happens, x is multiplied by ones of the shape with the ATen op (torch broadcasts empty dims as ONNX
    does, and x * 1 keeps -0.0, NaN and the infinities). Bool goes through int32 (Caffe2's Expand has no bool
    kernel)."""
    data, shape = node.input
    elem_type = facts.elem_type(data)
    if elem_type not in _EXPAND_TYPES and elem_type != TensorProto.BOOL:
        raise _refuse(node, opset, "input {!r} is {}; Caffe2's Expand takes int32, int64, float, double (and "
                                   "bool, through int32)".format(data, _type_text(elem_type)))
    ops, source, target = [], data, node.output[0]
    if elem_type == TensorProto.BOOL:
        source, target = fresh(), fresh()
        ops.append(_op("Cast", [data], [source], node.name, to=caffe2_pb2.TensorProto.INT32))
    values, dims = facts.constant(shape), facts.dims(data)
    if values is not None and values.size and values.min() < 0:  # Caffe2's Expand read [-2, -2] as a 1
        raise _refuse(node, opset, "the shape {!r} is {}; a negative dim has no meaning".format(
            shape, shape_text(values.reshape(-1).tolist())))
    if values is None or not facts.is_constant(data):
        ops += _broadcast_bound(node, opset, data, shape, itemsize(TensorProto.INT32 if elem_type == TensorProto.BOOL
                                                                    else elem_type), fresh)
    if values is not None and 0 not in values.reshape(-1).tolist() and dims is not None and None not in dims \
            and 0 not in dims:
        ops.append(_op("Expand", [source, shape], [target], node.name))
    else:
        ones = fresh()
        c2_type = _EXPAND_TYPES.get(elem_type, caffe2_pb2.TensorProto.INT32)
        ops += _filled(node, shape, ones, c2_type, 1.0 if elem_type in _FLOATS else 1, fresh)
        ops.append(_op("ATen", [source, ones], [target], node.name, operator="mul"))
    if elem_type == TensorProto.BOOL:
        ops.append(_op("Cast", [target], [node.output[0]], node.name, to=caffe2_pb2.TensorProto.BOOL))
    return ops


def _padded(node, dims: str, fresh) -> tuple:
    """(ops, blob): the int64 vector ``dims`` with 1s before it to `MAX_RANK` entries (numpy's broadcasting aligns
    dims from the last; Caffe2's Slice reads start -k as length + 1 - k)."""
    ones, fill = _constant_blob([1] * MAX_RANK, fresh)
    joined, padded = fresh(), fresh()
    return [fill, _op("Concat", [ones, dims], [joined, fresh()], node.name, axis=0),
            _op("Slice", [joined], [padded], node.name, starts=[-MAX_RANK - 1], ends=[-1])], padded


def _broadcast_bound(node, opset, data: str, shape: str, size: int, fresh) -> list:
    """Ops stopping the net unless Expand's output, ``data`` broadcast with the shape in blob ``shape`` (fed or
    computed), is within ``PYCUMSUM_OP_MAX_TENSOR_BYTES``: the shape has at most `MAX_RANK` entries, each in [0, cap]
    (the ones Expand multiplies by are filled to it), and the product of the larger of each pair of aligned dims (a
    bound of the broadcast's dims) is within the cap."""
    where = label(node, opset)
    message = size_message(where, "the shape {!r} broadcast with input 0 {!r}".format(shape, data), size)
    ops, wide, count, most, short = [], fresh(), fresh(), fresh(), fresh()
    ops += [_op("Cast", [shape], [wide], node.name, to=caffe2_pb2.TensorProto.INT64),
            _op("Size", [wide], [count], node.name), _int64_scalar(node, most, MAX_RANK),
            _op("LE", [count, most], [short], node.name),
            refusal(node.name, short, "{}: the shape {!r} has more than the {} dimensions a shape may have "
                                      "(MAX_RANK)".format(where, shape, MAX_RANK), wide)]
    more, entries = as_double(node.name, wide, fresh)
    ops += more + capped_scalar(node.name, entries, element_cap(size), message, fresh, checked=wide)
    data_dims = fresh()
    ops.append(_op("Shape", [data], [data_dims], node.name))
    aligned = []
    for dims in (data_dims, wide):
        more, padded = _padded(node, dims, fresh)
        more_double, double = as_double(node.name, padded, fresh)
        ops += more + more_double
        aligned.append(double)
    larger = fresh()
    ops.append(_op("ATen", aligned, [larger], node.name, operator="maximum"))
    return ops + capped_dims(node.name, larger, element_cap(size), message, fresh, checked=wide)


def _matmul(node, facts, opset, fresh):
    """Caffe2's BatchMatMul (broadcast=1, as Caffe2's converter writes it) multiplies as ONNX's MatMul when both
    operands have rank 2 or more, empty dims included; with a 1-D operand it gives (1,) for ONNX's scalar and
    dies of SIGFPE on an empty dim ((3,) x (3, 0), (0,) x (0, 3), (2, 0) x (0,)). Where an operand may be 1-D, the
    ATen op runs torch's matmul, which is numpy's (ONNX's)."""
    ranks = [facts.rank(name) for name in node.input]
    if all(rank is not None and rank >= 2 for rank in ranks):
        # the ranks the model states chose BatchMatMul: checked when the net runs, as a 1-D operand kills it
        ops = [op for position, name in enumerate(node.input)
               for op in _rank_checked(node, opset, position, name, facts, fresh, 2, exact=False)]
        return ops + [_op("BatchMatMul", list(node.input), [node.output[0]], node.name, broadcast=1)]
    return [_op("ATen", list(node.input), [node.output[0]], node.name, operator="matmul")]


def _gemm(node, facts, opset, fresh):
    """Caffe2's FC (what its C++ converter makes of Gemm), after checks: FC dies of SIGFPE on an empty B (a K or N of
    0), so a constant B must hold elements and any other is checked when the net runs, with A's and B's rank 2."""
    a, b = node.input[:2]
    ops = _rank_checked(node, opset, 0, a, facts, fresh, 2) + _rank_checked(node, opset, 1, b, facts, fresh, 2)
    weights = facts.constant(b)
    if weights is not None and weights.size == 0:
        raise _refuse(node, opset, "input 1 (B) {!r} has dims {}; Caffe2's FC dies on an empty B".format(
            b, shape_text(weights.shape)))
    if weights is None:
        dims, zero, filled = fresh(), fresh(), fresh()
        ops += [_op("Shape", [b], [dims], node.name), _int64_scalar(node, zero, 0),
                _op("GT", [dims, zero], [filled], node.name),
                refusal(node.name, filled, "{}: input 1 (B) {!r} is empty, on which Caffe2's FC dies".format(
                    label(node, opset), b), dims)]
    converter = workspace.C.Caffe2Backend(Caffe2Backend._dummy_name)
    try:
        init_ops, made = converter.convert_node(node.SerializeToString(), facts.value_infos(node.input), opset)
    except RuntimeError as error:  # as `backend.node_ops` reports the stock converters' failures
        raise _refuse(node, opset, "Caffe2's converter failed: {}".format(
            (str(error).strip().splitlines() or ["RuntimeError"])[0])) from None
    for serialized in list(init_ops) + list(made):
        ops.append(caffe2_pb2.OperatorDef())
        ops[-1].ParseFromString(serialized)
    return ops


def _rank_checked(node, opset, position: int, name: str, facts, fresh, rank: int, exact: bool = True) -> list:
    """Ops stopping the net unless input ``position`` (blob ``name``) has rank ``rank`` (at least ``rank`` unless
    ``exact``) when the net runs: a translation chose its kernel by the rank the model states, and a value info is no
    proof of what a node computes (a constant or a checked input is: `declared`). Caffe2's BatchMatMul and FC die of
    SIGFPE on operands of other shapes."""
    if declared(facts, name):
        return []
    dims, count, wanted, same = fresh(), fresh(), fresh(), fresh()
    return [_op("Shape", [name], [dims], node.name), _op("Size", [dims], [count], node.name),
            _int64_scalar(node, wanted, rank), _op("EQ" if exact else "GE", [count, wanted], [same], node.name),
            refusal(node.name, same, "{}: input {} {!r} does not have rank {}{}, which the model states".format(
                label(node, opset), position, name, "" if exact else "at least ", rank), dims)]


def _einsum(node, facts, opset, fresh):
    """Einsum of the two kinds transformers write: the outer product of two vectors (`_outer`; rotary embeddings),
    and a matrix product (ProphetNet's attention: ``nbtc,nbsc->nbts``) of two operands over the same leading batch
    letters, each operand's last two letters a matrix (either way round) sharing the one letter summed, the output
    the batch letters and the other two in either order: Caffe2's BatchMatMul between Transposes of the last two
    axes where a term has them the other way round, the form proven at the edges (empty dims among them); any other
    equation is refused."""
    equation = _attribute(node, "equation", b"")
    equation = (equation.decode("ascii", "replace") if isinstance(equation, bytes) else str(equation)).replace(" ", "")
    inputs, _, out = equation.partition("->")
    terms = inputs.split(",")
    if len(node.input) == 2 and len(terms) == 2 and all(len(t) == 1 and t.isalpha() for t in terms) and \
            len(out) == 2 and sorted(out) == sorted(terms) and terms[0] != terms[1]:
        return _outer(node, opset, facts, fresh, terms, out)
    shape_ok = (len(node.input) == 2 and len(terms) == 2 and out and all(t.isalpha() for t in terms + [out]) and
                all(len(set(t)) == len(t) for t in terms + [out]))
    if shape_ok:
        (a, b), batch = terms, out[:-2]
        contracted = set(a[-2:]) & set(b[-2:])
        shape_ok = (len(a) == len(b) == len(out) >= 2 and a[:-2] == b[:-2] == batch and len(contracted) == 1 and
                    not contracted & set(out) and set(out[-2:]) == (set(a[-2:]) ^ set(b[-2:])))
    if not shape_ok:
        raise _refuse(node, opset, "equation {!r}: only a matrix product over shared leading batch letters "
                                   "(such as 'nbtc,nbsc->nbts') or the outer product of two vectors ('i,j->ij') is "
                                   "translated".format(equation[:200]))
    ranks = [facts.rank(name) for name in node.input]
    if ranks != [len(a), len(b)]:
        raise _refuse(node, opset, "equation {!r} needs inputs of ranks {} and {}; the model states {}".format(
            equation, len(a), len(b), ranks))
    (summed,) = contracted
    swap = list(range(len(a) - 2)) + [len(a) - 1, len(a) - 2]
    ops, operands = [op for position, (name, term) in enumerate(zip(node.input, terms))
                     for op in _rank_checked(node, opset, position, name, facts, fresh, len(term))], []
    for name, term, wanted in ((node.input[0], a, 1), (node.input[1], b, 0)):
        if term.index(summed) - len(term) + 2 == wanted:  # the summed letter is where a matrix product wants it
            operands.append(name)
        else:
            moved = fresh()
            ops.append(_op("Transpose", [name], [moved], node.name, axes=swap))
            operands.append(moved)
    if out[-2] == (set(a[-2:]) - contracted).pop():
        return ops + [_op("BatchMatMul", operands, [node.output[0]], node.name, broadcast=1)]
    product = fresh()
    return ops + [_op("BatchMatMul", operands, [product], node.name, broadcast=1),
                  _op("Transpose", [product], [node.output[0]], node.name, axes=swap)]


def _outer(node, opset, facts, fresh, terms, out) -> list:
    """The outer product of two vectors (a rotary embedding's ``i,j->ij``): the output's row vector as a column
    (Caffe2's ExpandDims) times the other, by torch's mul (the ATen op: numpy's broadcasting, empty vectors too)."""
    if [facts.rank(name) for name in node.input] != [1, 1]:
        raise _refuse(node, opset, "equation '{},{}->{}' needs two vectors; the model states ranks {}".format(
            terms[0], terms[1], out, [facts.rank(name) for name in node.input]))
    rows, columns = node.input if out[0] == terms[0] else reversed(node.input)
    ops = [op for position, name in enumerate(node.input) for op in _rank_checked(node, opset, position, name, facts,
                                                                                   fresh, 1)]
    # the product's size, one vector's length times the other's, within the cap before torch allocates it
    size = itemsize(facts.elem_type(node.input[0]))
    lengths, length, joined = fresh(), fresh(), fresh()
    ops += [_op("Shape", [rows], [lengths], node.name), _op("Shape", [columns], [length], node.name),
            _op("Concat", [lengths, length], [joined, fresh()], node.name, axis=0)]
    more, dims = as_double(node.name, joined, fresh)
    ops += more + capped_dims(node.name, dims, element_cap(size), size_message(
        label(node, opset), "the outer product of {!r} and {!r}".format(*node.input), size), fresh, checked=joined)
    column = fresh()
    return ops + [_op("ExpandDims", [rows], [column], node.name, dims=[1]),
                  _op("ATen", [column, columns], [node.output[0]], node.name, operator="mul")]


#: ONNX element type -> Caffe2's, of the types Caffe2's Range takes
_RANGE_TYPES = dict(_EXPAND_TYPES)


def _range(node, facts, opset, fresh):
    """Caffe2's Range counts ONNX's max(ceil((limit - start) / delta), 0) elements for floats and for a positive
    integer delta, but truncates the count for a negative one (Range(4, -1, -2) gives [4, 2], ONNX [4, 2, 0]):
    an integer Range with a negative delta runs as -Range(-start, -limit, -delta), the sign read at run time
    unless delta is a constant."""
    start, limit, delta = node.input
    elem_type = _typed(node, opset, facts, start, "start", _RANGE_TYPES,
                       "Caffe2's Range takes int32, int64, float and double")
    step = facts.constant(delta)
    if step is not None and step.size == 1 and float(step.reshape(-1)[0]) == 0:
        raise _refuse(node, opset, "delta {!r} is 0".format(delta))
    ops = _range_bound(node, opset, start, limit, delta, itemsize(elem_type), fresh)
    if elem_type in (TensorProto.FLOAT, TensorProto.DOUBLE) or (step is not None and step.size == 1 and
                                                               step.reshape(-1)[0] > 0):
        return ops + [_op("Range", [start, limit, delta], [node.output[0]], node.name)]
    c2_type = _RANGE_TYPES[elem_type]
    sign = fresh()
    if step is not None and step.size == 1:
        ops.append(_op("ConstantFill", [], [sign], node.name, shape=[], dtype=c2_type, value=-1))
    else:  # 1 - 2 * (delta < 0)
        zero, one, negative, flag, twice = (fresh() for _ in range(5))
        ops += [_op("ConstantFill", [], [zero], node.name, shape=[], dtype=c2_type, value=0),
                _op("ConstantFill", [], [one], node.name, shape=[], dtype=c2_type, value=1),
                _op("LT", [delta, zero], [negative], node.name),
                _op("Cast", [negative], [flag], node.name, to=c2_type),
                _op("Add", [flag, flag], [twice], node.name),
                _op("Sub", [one, twice], [sign], node.name)]
    signed, counted = [], fresh()
    for name in (start, limit, delta):
        signed.append(fresh())
        ops.append(_op("Mul", [name, sign], [signed[-1]], node.name))
    return ops + [_op("Range", signed, [counted], node.name),
                  _op("Mul", [counted, sign], [node.output[0]], node.name)]


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
        _op("Sub", [doubles[1], doubles[0]], [span], node.name), _op("Div", [span, doubles[2]], [count], node.name),
        _op("LE", [count, high], [within], node.name),
        refusal(node.name, within, "{}: (limit {!r} - start {!r}) / delta {!r} counts more than {} elements "
                                   "(PYCUMSUM_OP_MAX_TENSOR_BYTES; Caffe2's Range counts them in 32 bits)".format(
                                       label(node, opset), limit, start, delta, cap), count)]


def _tile(node, facts, opset, fresh):
    """Caffe2's NumpyTile (what its stock converter makes), after ops stopping the net unless every repeat lies in
    [0, cap] and the input's dims times the repeats ask for a tensor within ``PYCUMSUM_OP_MAX_TENSOR_BYTES``: the
    repeats may be fed, and NumpyTile multiplies the dims in 64 bits unchecked."""
    data, repeats = node.input
    size = itemsize(facts.elem_type(data))
    message = size_message(label(node, opset), "input 0 {!r} tiled by the repeats {!r}".format(data, repeats), size)
    dims, wide = fresh(), fresh()
    ops = [_op("Shape", [data], [dims], node.name),
           _op("Cast", [repeats], [wide], node.name, to=caffe2_pb2.TensorProto.INT64)]
    more_dims, dims_double = as_double(node.name, dims, fresh)
    more_repeats, repeats_double = as_double(node.name, wide, fresh)
    tiled = fresh()
    ops += more_dims + more_repeats + capped_scalar(node.name, repeats_double, element_cap(size), message, fresh,
                                                    checked=wide)
    # torch's mul: a repeats of another length than the rank fails there in one line (NumpyTile would refuse it too)
    ops.append(_op("ATen", [dims_double, repeats_double], [tiled], node.name, operator="mul"))
    ops += capped_dims(node.name, tiled, element_cap(size), message, fresh, checked=wide)
    return ops + [_op("NumpyTile", [data, repeats], [node.output[0]], node.name)]


def _clip(node, facts, opset, fresh):
    """Caffe2's Clip for float with constant bounds (attributes before opset 11, inputs after); from opset 11 on any
    other type, or a bound fed at run time, is min(max(x, min), max) by torch's maximum and minimum (the ATen op,
    the bounds as tensors of x's type, so no value passes through a float32 argument). As onnxruntime: a min above
    the max gives the max, a NaN x stays NaN, a NaN bound is no bound (replaced by -inf / inf), and an absent bound
    of a float type is its lowest or max finite value (ONNX's Clip-6 defaults: ±inf become finite)."""
    data, elem_type = node.input[0], facts.elem_type(node.input[0])
    if opset < 11:
        if elem_type != TensorProto.FLOAT:
            raise _refuse(node, opset, "only float inputs are translated before opset 11 (Caffe2's Clip is float)")
        bounds = {name: float(_attribute(node, name)) for name in ("min", "max")
                  if _attribute(node, name) is not None}
        return [_op("Clip", [data], [node.output[0]], node.name, **bounds)]
    bounds = {"min": node.input[1] if given(node, 1) else None, "max": node.input[2] if given(node, 2) else None}
    if elem_type == TensorProto.FLOAT16 and None in bounds.values():
        # ONNX's definition clips to float16's lowest / max finite value there; onnxruntime keeps ±inf at opset 11
        # (and reads an absent max as 0 from 12 on): no oracle to prove either against
        raise _refuse(node, opset, "a float16 input with a bound absent: onnxruntime and ONNX's definition disagree "
                                   "on what an absent bound clips ±inf to")
    rank = facts.rank(data)
    for position, (what, name) in enumerate(sorted(bounds.items(), key=lambda item: item[0] != "min"), 1):
        # onnxruntime keeps x's shape for a bound of one element; torch broadcasts it, so its dims must not add any
        dims = facts.dims(name) if name else []
        if dims is None or any(dim != 1 for dim in dims) or (dims and (rank is None or len(dims) > rank)):
            raise _refuse(node, opset, "input {} ({}) {!r} has dims {}; only a scalar bound (or one of 1-dims no "
                                       "more than x's rank) is translated".format(position, what, name, dims))
    constants = {what: None if name is None else facts.constant(name) for what, name in bounds.items()}
    if elem_type == TensorProto.FLOAT and all(name is None or constants[what] is not None
                                              for what, name in bounds.items()):
        values = {what: float(value.reshape(())) for what, value in constants.items() if value is not None}
        return [_op("Clip", [data], [node.output[0]], node.name, **values)]
    floating = elem_type in _FLOATS
    steps = [(what, operator, infinity) for what, operator, infinity in (("min", "maximum", -np.inf),
                                                                        ("max", "minimum", np.inf))
             if bounds[what] is not None or floating]
    ops, current = [], data
    for number, (what, operator, infinity) in enumerate(steps):
        name, target = bounds[what], node.output[0] if number == len(steps) - 1 else fresh()
        if name is None:  # onnxruntime's absent bound of a float type: its lowest or max finite value
            name, extreme = fresh(), fresh()
            if elem_type == TensorProto.DOUBLE:  # the double's next to ∓inf: an op argument is float32
                infinite, zero = fresh(), fresh()
                ops += [_op("ConstantFill", [], [infinite], node.name, shape=[], dtype=caffe2_pb2.TensorProto.DOUBLE,
                            value=infinity),
                        _op("ConstantFill", [], [zero], node.name, shape=[], dtype=caffe2_pb2.TensorProto.DOUBLE,
                            value=0.0),
                        _op("ATen", [infinite, zero], [name], node.name, operator="nextafter")]
            else:  # exact in float32; torch's clamp_min has no float16 kernel, its maximum has
                value = float(np.finfo(_NUMPY_FLOATS[elem_type]).max) * (-1 if what == "min" else 1)
                ops += [_op("GivenTensorFill", [], [extreme], node.name, values=[value], shape=[]),
                        _op("ATen", [extreme, data], [name], node.name, operator="type_as")]
        elif floating and (constants[what] is None or np.isnan(constants[what]).any()):
            nan, filled = fresh(), fresh()
            ops += [_op("ATen", [name], [nan], node.name, operator="isnan"),
                    _op("ATen", [name, nan], [filled], node.name, operator="masked_fill", value=infinity)]
            name = filled
        ops.append(_op("ATen", [current, name], [target], node.name, operator=operator))
        current = target
    return ops or [_op("Copy", [data], [node.output[0]], node.name)]


def _sign_op(node, facts, opset, fresh):
    """Abs and Neg: Caffe2's kernels are float-only, torch's take integers too."""
    if facts.elem_type(node.input[0]) == TensorProto.FLOAT:
        return [_op({"Abs": "Abs", "Neg": "Negative"}[node.op_type], [node.input[0]], [node.output[0]], node.name)]
    return [_op("ATen", [node.input[0]], [node.output[0]], node.name, operator=node.op_type.lower())]


#: ONNX's SELU constants (its defaults of alpha and gamma)
_SELU = (1.67326319217681884765625, 1.05070102214813232421875)
#: ONNX elementwise op -> (torch's ATen operator, its arguments from the node's attributes): torch's kernel by the
#: ATen op, bit for bit torch's
_ELEMENTWISE = {
    "Sign": ("sign", lambda node: {}), "Ceil": ("ceil", lambda node: {}), "Floor": ("floor", lambda node: {}),
    "Round": ("round", lambda node: {}),  # half to even, as ONNX
    "Sin": ("sin", lambda node: {}), "Cos": ("cos", lambda node: {}), "Tan": ("tan", lambda node: {}),
    "Asin": ("asin", lambda node: {}), "Acos": ("acos", lambda node: {}), "Atan": ("atan", lambda node: {}),
    "Sinh": ("sinh", lambda node: {}), "Cosh": ("cosh", lambda node: {}), "Asinh": ("asinh", lambda node: {}),
    "Acosh": ("acosh", lambda node: {}), "Atanh": ("atanh", lambda node: {}), "IsNaN": ("isnan", lambda node: {}),
    "Elu": ("elu", lambda node: {"alpha": float(_attribute(node, "alpha", 1.0))}),
    "Selu": ("elu", lambda node: {"alpha": float(_attribute(node, "alpha", _SELU[0])),
                                  "scale": float(_attribute(node, "gamma", _SELU[1])), "input_scale": 1.0}),
    "Celu": ("celu", lambda node: {"alpha": float(_attribute(node, "alpha", 1.0))}),
    "LeakyRelu": ("leaky_relu", lambda node: {"negative_slope": float(_attribute(node, "alpha", 0.01))}),
    "ThresholdedRelu": ("threshold", lambda node: {"threshold": float(_attribute(node, "alpha", 1.0)), "value": 0.0}),
    "Xor": ("logical_xor", lambda node: {}),  # broadcasts as numpy
    # log(exp(x) + 1): torch's is x above 20, where they agree in float32 and float64 within 1e-8 relative
    "Softplus": ("softplus", lambda node: {"beta": 1.0, "threshold": 20.0}),
}
#: IsInf's (detect_negative, detect_positive) -> torch's operator
_IS_INF = {(1, 1): "isinf", (0, 1): "isposinf", (1, 0): "isneginf"}


def _broadcasts(first, second) -> bool:
    """Whether an operand of dims ``first`` or ``second`` (None: unknown; a dim None: symbolic) is known to be
    broadcast: the ranks differ (a scalar, a bias), or one has a 1 where the other's dim is not known to be 1 (an
    attention mask of (B, 1, 1, S) against scores of (B, h, S, S)). An operand of unknown rank counts as none."""
    if first is None or second is None:
        return False
    return len(first) != len(second) or any((this == 1) != (other == 1) for this, other in zip(first, second))


def _covers(dividend, divisor) -> bool:
    """Whether dims ``dividend`` are known to be the broadcast of both (None: unknown; a dim None: symbolic)."""
    if dividend is None or divisor is None or len(dividend) < len(divisor):
        return False
    return all(right == 1 or (left is not None and left == right)
               for left, right in zip(dividend[len(dividend) - len(divisor):], divisor))


def _torchs_arithmetic(node, facts) -> bool:
    """Whether `_arithmetic` runs Add/Sub/Mul/Div ``node`` by torch's kernel: float operands, a target that allows the
    ATen op, and an operand broadcast (`_broadcasts`) or a Div whose dividend may be."""
    if not facts.torch_kernels or not all(facts.elem_type(name) in _FLOATS[1:] for name in node.input):
        return False
    dims = [facts.known_dims(name) for name in node.input]
    return (node.op_type == "Div" and not _covers(*dims)) or _broadcasts(*dims)


def _arithmetic(node, facts, opset, fresh):
    """Add, Sub, Mul, Div: Caffe2's kernels broadcast as numpy does, but take several times torch's time where an
    operand is broadcast (`_broadcasts`: a scalar, a bias, an attention mask of (B, 1, 1, S) added to scores of
    (B, h, S, S), whose index Caffe2's kernel walks entry by entry); and Caffe2's Div of a dividend smaller than the
    result multiplies by the divisor's reciprocal, which overflows for a subnormal divisor (0 / 1e-45 gave NaN) and
    rounds twice. Float operands then go to torch's kernel through the ATen op, where the target allows it (IEEE's
    sum, difference, product and quotient: onnxruntime's values); for the portable target such a dividend is first
    multiplied by ones of the divisor's shape. Operands of the same dims keep Caffe2's kernel, as fast as torch's
    there (the ATen op allocates its output on every run)."""
    floats = all(facts.elem_type(name) in _FLOATS[1:] for name in node.input)
    broadcast_dividend = node.op_type == "Div" and floats and not _covers(*(facts.known_dims(name)
                                                                            for name in node.input))
    if _torchs_arithmetic(node, facts):
        return [_op("ATen", list(node.input), [node.output[0]], node.name, operator=node.op_type.lower())]
    if broadcast_dividend:  # stock operators only: the dividend first given the result's shape (x * 1 is x)
        dividend, divisor = node.input
        ones, widened = fresh(), fresh()
        c2_type = caffe2_pb2.TensorProto.DOUBLE if facts.elem_type(divisor) == TensorProto.DOUBLE else \
            caffe2_pb2.TensorProto.FLOAT
        return [_op("ConstantFill", [divisor], [ones], node.name, value=1.0, dtype=c2_type),
                _op("Mul", [dividend, ones], [widened], node.name),
                _op("Div", [widened, divisor], [node.output[0]], node.name)]
    return [_op(node.op_type, list(node.input), [node.output[0]], node.name)]


def _elementwise(node, facts, opset, fresh):
    """An elementwise op by torch's kernel (`_ELEMENTWISE`; IsInf by which infinities it detects)."""
    if node.op_type == "IsInf":
        detect = (int(_attribute(node, "detect_negative", 1)), int(_attribute(node, "detect_positive", 1)))
        if detect not in _IS_INF:
            raise _refuse(node, opset, "detect_negative=0 with detect_positive=0 has no translation")
        operator, args = _IS_INF[detect], {}
    else:
        operator, arguments = _ELEMENTWISE[node.op_type]
        args = arguments(node)
    if node.op_type == "Sign" and facts.elem_type(node.input[0]) in _FLOATS:
        return _nan_kept(node, "sign", {}, float("nan"), fresh)
    if node.op_type == "ThresholdedRelu":
        return _nan_kept(node, operator, args, 0.0, fresh)
    return [_op("ATen", list(node.input), [node.output[0]], node.name, operator=operator, **args)]


def _nan_kept(node, operator, args, value, fresh):
    """torch's ``operator`` with ``value`` where the input is NaN: ONNX's Sign of NaN is NaN (torch's 0, numpy's
    NaN), its ThresholdedRelu's 0 (``x > alpha``; torch's threshold keeps NaN)."""
    computed, nan = fresh(), fresh()
    return [_op("ATen", [node.input[0]], [computed], node.name, operator=operator, **args),
            _op("ATen", [node.input[0]], [nan], node.name, operator="isnan"),
            _op("ATen", [computed, nan], [node.output[0]], node.name, operator="masked_fill", value=value)]


def _hard_swish(node, facts, opset, fresh):
    """ONNX's x * HardSigmoid(x) (alpha 1/6, beta 0.5), as defined: torch's hardswish overflows x * (x + 3) / 6."""
    gate = fresh()
    return [_op("HardSigmoid", [node.input[0]], [gate], node.name, alpha=1 / 6, beta=0.5),
            _op("Mul", [node.input[0], gate], [node.output[0]], node.name)]


def _softsign(node, facts, opset, fresh):
    """ONNX's x / (1 + |x|), as defined (NaN for ±inf), by torch's kernels."""
    magnitude, denominator = fresh(), fresh()
    return [_op("ATen", [node.input[0]], [magnitude], node.name, operator="abs"),
            _op("ATen", [magnitude], [denominator], node.name, operator="add", other=1.0),
            _op("ATen", [node.input[0], denominator], [node.output[0]], node.name, operator="div")]


def _shape(node, facts, opset, fresh):
    """The dims of the input from ``start`` to ``end`` (opset 15; clamped as ONNX's), by Caffe2's Shape ``axes``;
    the rank must be known unless the whole shape is taken."""
    start, end = int(_attribute(node, "start", 0)), _attribute(node, "end")
    if start == 0 and end is None:
        return [_op("Shape", [node.input[0]], [node.output[0]], node.name)]
    rank = facts.rank(node.input[0])
    if rank is None:
        raise _refuse(node, opset, "start/end need the input's rank, which the model does not state")
    axes = list(range(rank))[start:rank if end is None else int(end)]
    if not axes:
        return [_op("GivenTensorInt64Fill", [], [node.output[0]], node.name, values=[], shape=[0])]
    return [_op("Shape", [node.input[0]], [node.output[0]], node.name, axes=axes)]


def _where(node, facts, opset, fresh):
    return [_op("ATen", list(node.input), [node.output[0]], node.name, operator="where")]


def _softmax(node, facts, opset, fresh):
    """Before opset 13, Caffe2's Softmax (over every axis from ``axis`` on, default 1, as ONNX then defines it), its
    axis checked against the rank where the model states it (a scalar has none: Caffe2 would fail the run). From
    opset 13 on, along one axis: the last by Caffe2's Softmax, another by torch's softmax (the ATen op). A masked
    score on the last axis, of a stated rank (torch's takes a rank 0, which ONNX refuses), goes to torch's softmax
    too where the target allows it: its input made by Where or by an Add torch's kernel runs (an attention mask
    broadcast), whose rows may hold float32's lowest value, on which Caffe2's exponential takes six times torch's time
    (those ATen ops have no Caffe2 gradient: Caffe2's Softmax keeps the gradient of every other)."""
    rank = facts.rank(node.input[0])
    if opset < 13:
        axis = int(_attribute(node, "axis", 1))
        if rank is not None:
            (axis,) = _normalized(node, opset, [axis], rank)
        return [_op("Softmax", [node.input[0]], [node.output[0]], node.name, axis=axis)]
    axis = int(_attribute(node, "axis", -1))
    if axis == -1 and rank is None:
        return [_op("Softmax", [node.input[0]], [node.output[0]], node.name, axis=-1)]
    if rank is None:
        raise _refuse(node, opset, "axis {} with the rank of input {!r} unknown".format(axis, node.input[0]))
    (axis,) = _normalized(node, opset, [axis], rank)
    scores = facts.producer(node.input[0])
    masked = facts.torch_kernels and scores is not None and (scores.op_type == "Where" or scores.op_type == "Add"
                                                             and _torchs_arithmetic(scores, facts))
    if axis == rank - 1 and not masked:
        return [_op("Softmax", [node.input[0]], [node.output[0]], node.name, axis=axis)]
    return [_op("ATen", [node.input[0]], [node.output[0]], node.name, operator="softmax", dim=axis)]


def _transpose(node, facts, opset, fresh):
    """Caffe2's Transpose (``perm`` as its ``axes``; none reverses the axes, as ONNX's default) copies rows where the
    last axis stays last and runs a batched 2-D transpose where only the last two axes swap, but walks any other
    permutation element by element (attention's keys turned to (B, h, d, S), (0, 2, 3, 1): ten times torch's time).
    There torch's permute, where the target allows the ATen op (which returns its result contiguous): either only
    moves elements."""
    perm = _attribute(node, "perm")
    perm = None if perm is None else [int(axis) for axis in perm]
    last = None if perm is None else len(perm) - 1
    if facts.torch_kernels and perm and sorted(perm) == list(range(len(perm))) and perm[-1] != last and \
            perm[:-2] + perm[-2:][::-1] != list(range(len(perm))):
        return [_op("ATen", [node.input[0]], [node.output[0]], node.name, operator="permute", dims=perm)]
    return [_op("Transpose", [node.input[0]], [node.output[0]], node.name, **({} if perm is None else {"axes": perm}))]


def _compare(node, facts, opset, fresh):
    """GreaterOrEqual and LessOrEqual: Caffe2's GE and LE, which broadcast as numpy (no legacy ``broadcast``)."""
    operator = {"GreaterOrEqual": "GE", "LessOrEqual": "LE"}[node.op_type]
    return [_op(operator, list(node.input), [node.output[0]], node.name)]


#: Trilu's k past this reaches no entry of any tensor; torch's triu and tril add k to a row index in int64, so a k
#: near 2**63 would wrap around
_FAR_DIAGONAL = 2 ** 62


def _trilu(node, facts, opset, fresh):
    """Trilu over the last two axes: a constant k (default 0) is torch's triu or tril by the ATen op (k as its
    ``diagonal``, held to +-2**62); a k known only at run time zeroes, by torch's masked_fill, the entries whose
    column - row is below k (upper) or above it (lower), the rows' and columns' indices made by Caffe2's Range from
    the input's dims read at run time."""
    data, out = node.input[0], node.output[0]
    upper = bool(_attribute(node, "upper", 1))
    rank = facts.rank(data)
    if rank is None or rank < 2:
        raise _refuse(node, opset, "input 0 {!r} has rank {}; Trilu takes rank 2 or more".format(
            data, rank if rank is not None else "unknown"))
    if not given(node, 1) or facts.is_constant(node.input[1]):
        k = 0
        if given(node, 1):
            value = facts.constant(node.input[1])
            if value is None or value.size != 1 or value.ndim > 1 or value.dtype.kind not in "iu":
                raise _refuse(node, opset, "input 1 (k) must be an integer scalar")
            k = int(value.reshape(()))
        k = max(-_FAR_DIAGONAL, min(_FAR_DIAGONAL, k))
        return [_op("ATen", [data], [out], node.name, operator="triu" if upper else "tril", diagonal=k)]
    k = node.input[1]
    if facts.elem_type(k) != TensorProto.INT64:  # compared with int64 column - row
        raise _refuse(node, opset, "input 1 (k) {!r} is not int64".format(k))
    dims = facts.dims(k)
    if dims is None or len(dims) > 1 or (dims and dims[0] != 1):
        raise _refuse(node, opset, "input 1 (k) {!r} is declared with dims {}; a k fed at run time must be "
                                   "declared a scalar".format(k, "unknown" if dims is None else shape_text(dims)))
    ops, indices = [], []
    for axis in (rank - 2, rank - 1):
        shape, length, index = fresh(), fresh(), fresh()
        ops += [_op("Shape", [data], [shape], node.name, axes=[axis]),
                _op("Squeeze", [shape], [length], node.name, dims=[0])] + _counted_by_range(node, opset, length, fresh)
        ops.append(_op("Range", [length], [index], node.name))
        indices.append(index)
    rows, offsets, dropped = fresh(), fresh(), fresh()
    ops += [_op("ExpandDims", [indices[0]], [rows], node.name, dims=[1]),
            _op("Sub", [indices[1], rows], [offsets], node.name),  # column - row, (rows, columns)
            _op("LT" if upper else "GT", [offsets, k], [dropped], node.name),
            _op("ATen", [data, dropped], [out], node.name, operator="masked_fill", value=0)]
    return ops


def _extremum(node, facts, opset, fresh):
    """Max, Min, Sum and Mean of any number of inputs, broadcast as numpy: torch's maximum, minimum or add, input
    after input (Mean: the sum divided by their number)."""
    operator = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}[node.op_type]
    inputs = list(node.input)
    mean = node.op_type == "Mean" and len(inputs) > 1
    if len(inputs) == 1:
        return [_op("Copy", inputs, [node.output[0]], node.name)]
    ops, current = [], inputs[0]
    for number, other in enumerate(inputs[1:]):
        target = node.output[0] if number == len(inputs) - 2 and not mean else fresh()
        ops.append(_op("ATen", [current, other], [target], node.name, operator=operator))
        current = target
    if mean:
        ops.append(_op("ATen", [current], [node.output[0]], node.name, operator="div", other=float(len(inputs))))
    return ops


def _split(node, facts, opset, fresh):
    """Caffe2's Split along ``axis``: the parts' lengths from ``split`` (the attribute before opset 13, a constant
    input after), else equal parts (the axis' length must divide, as ONNX requires; Caffe2 fails the run otherwise,
    as onnxruntime does)."""
    axis = int(_attribute(node, "axis", 0))
    rank = facts.rank(node.input[0])
    if axis < 0:
        if rank is None:
            raise _refuse(node, opset, "a negative axis needs the input's rank, which the model does not state")
        axis += rank
    split = _int_list(node, opset, facts, 1, "split") if opset >= 13 else _attribute(node, "split")
    if split and (min(split) < 0 or sum(split) > COUNTER_LIMIT):
        # Caffe2's Split checks the parts' sum against the axis' length in 32 bits, and takes a negative part
        raise _refuse(node, opset, "split {} holds a negative part or sums past {} (Caffe2 sums the parts in 32 "
                                   "bits)".format(shape_text(split), COUNTER_LIMIT))
    args = {"axis": axis} if not split else {"axis": axis, "split": [int(part) for part in split]}
    return [_op("Split", [node.input[0]], list(node.output), node.name, **args)]


#: the index types OneHot translates (onnxruntime's other one, float, it truncates to an integer first)
_ONE_HOT_INDICES = (TensorProto.INT32, TensorProto.INT64)


def _one_hot(node, facts, opset, fresh):
    """ONNX's OneHot as where(indices == positions, on, off): the positions 0..depth-1 (Caffe2's Range) laid along
    ``axis`` and compared with the indices unsqueezed there, so an index outside the range matches none (all off).
    From opset 11 on an index in [-depth, -1] counts from the end (it also matches position - depth); opset 9's
    definition gives it all off (onnxruntime departs from it and wraps). A depth below 1 fails onnxruntime's run: a
    constant one is refused, a fed one stops the net's Assert."""
    indices, depth, values = node.input
    _typed(node, opset, facts, indices, "input 0 (indices)", _ONE_HOT_INDICES,
           "only int32 and int64 indices are translated")
    rank = facts.rank(indices)
    if rank == 0:
        raise _refuse(node, opset, "input 0 (indices) {!r} has rank 0; ONNX's OneHot needs rank 1 or more".format(
            indices))
    value_dims = facts.dims(values)
    if value_dims != [2]:
        raise _refuse(node, opset, "input 2 (values) {!r} has dims {}; [off, on] must be stated as 2 values".format(
            values, value_dims))
    axis = int(_attribute(node, "axis", -1))
    if axis >= 0:  # counted from the end, so that the positions' trailing 1-dims need no rank
        if rank is None:
            raise _refuse(node, opset, "axis {} needs the rank of input 0 (indices), which the model does not "
                                       "state".format(axis))
        axis -= rank + 1
    if axis < -(rank if rank is not None else MAX_RANK) - 1 or axis > -1:
        raise _refuse(node, opset, "axis {} is out of range for indices of rank {}".format(
            int(_attribute(node, "axis", -1)), rank))
    ops, count = [], fresh()
    where = label(node, opset)
    size = itemsize(facts.elem_type(values))
    constant = facts.constant(depth)
    if constant is not None:
        if constant.size != 1 or constant.dtype.kind not in "iuf" or not np.isfinite(constant).all():
            raise _refuse(node, opset, "input 1 (depth) must be one finite number, got {!r}".format(constant))
        length = int(constant.reshape(-1)[0])  # onnxruntime truncates a float depth
        if length < 1:
            raise _refuse(node, opset, "input 1 (depth) is {}; onnxruntime fails a depth below 1".format(length))
        # charged before anything is built: the positions (int64, counted by Caffe2's Range in 32 bits) and, where
        # the model states every dim of the indices, the output; else the output is checked when the net runs
        check_tensor([length], 8, "{}: its positions".format(where))
        if length > COUNTER_LIMIT:
            raise _refuse(node, opset, "input 1 (depth) is {}, past the {} positions Caffe2's Range counts in 32 "
                                       "bits".format(length, COUNTER_LIMIT))
        known = facts.dims(indices)
        if known is not None and None not in known:
            check_tensor(known + [length], size, "{}: its output".format(where))
        ops.append(_int64_scalar(node, count, length))
        more, depth_value = whole_double(node.name, length, fresh)
        ops += more
    else:
        depth_type = facts.elem_type(depth)
        if depth_type not in (TensorProto.INT32, TensorProto.INT64, TensorProto.FLOAT, TensorProto.DOUBLE):
            raise _refuse(node, opset, "input 1 (depth) {!r}, fed at run time, is {}; only int32, int64, float and "
                                       "double are translated".format(depth, _type_text(depth_type)))
        depth_dims = facts.dims(depth)
        if depth_dims is None or len(depth_dims) > 1 or any(dim != 1 for dim in depth_dims):
            raise _refuse(node, opset, "input 1 (depth) {!r} has dims {}; a fed depth must be stated as one "
                                       "value".format(depth, depth_dims))
        # held to [1, cap] as a float64 before it is truncated to int64 as onnxruntime truncates it (a float past
        # int64 would convert to anything), and below 2**31: Caffe2's Range counts the positions in 32 bits
        more, depth_value = as_double(node.name, depth, fresh)
        ops += more + capped_scalar(node.name, depth_value, element_cap(8, counter=True), "{}: input 1 (depth) {!r} "
                                    "is below 1 or more than {} (PYCUMSUM_OP_MAX_TENSOR_BYTES; Caffe2's Range counts "
                                    "it in 32 bits)".format(where, depth, element_cap(8, counter=True)),
                                    fresh, lowest=1, checked=depth)
        ops.append(_op("Cast", [depth_value], [count], node.name, to=caffe2_pb2.TensorProto.INT64))
    if constant is None or known is None or None in known:  # the output: every index times the depth
        index_dims = fresh()
        ops.append(_op("Shape", [indices], [index_dims], node.name))
        more, dims = as_double(node.name, index_dims, fresh)
        ops += more + capped_dims(node.name, dims, element_cap(size), size_message(
            where, "its output (the dims of input 0 (indices) {!r} and the depth)".format(indices), size), fresh,
            checked=index_dims, factor=depth_value)
    wide, laid, positions, hit = fresh(), fresh(), fresh(), fresh()
    ops += [_op("Cast", [indices], [wide], node.name, to=caffe2_pb2.TensorProto.INT64),
            _op("ATen", [wide], [laid], node.name, operator="unsqueeze", dim=axis),
            _op("Range", [count], [positions], node.name)]
    if axis < -1:
        along = fresh()
        ops.append(_op("ExpandDims", [positions], [along], node.name, dims=list(range(1, -axis))))
        positions = along
    # torch's eq and logical_or: Caffe2's EQ and Or die of SIGFPE broadcasting against an empty dim
    ops.append(_op("ATen", [laid, positions], [hit], node.name, operator="eq"))
    if opset >= 11:
        from_end, hit_end, either = fresh(), fresh(), fresh()
        ops += [_op("Sub", [positions, count], [from_end], node.name),
                _op("ATen", [laid, from_end], [hit_end], node.name, operator="eq"),
                _op("ATen", [hit, hit_end], [either], node.name, operator="logical_or")]
        hit = either
    off, on, first, second = fresh(), fresh(), fresh(), fresh()
    ops += [_int64_scalar(node, first, 0), _int64_scalar(node, second, 1),
            _op("Gather", [values, first], [off], node.name), _op("Gather", [values, second], [on], node.name),
            _op("ATen", [hit, on, off], [node.output[0]], node.name, operator="where")]
    return ops


def _size(node, facts, opset, fresh):
    """Caffe2's Size: the input's element count, an int64 scalar."""
    return [_op("Size", [node.input[0]], [node.output[0]], node.name)]


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
        axes = _attribute(node, "axes") if opset < 13 else (
            facts.constant(node.input[1]) if len(node.input) > 1 else None)
        return 1 if axes is not None and [int(a) for a in np.reshape(axes, -1)] == [-1] else None
    if node.op_type == "Concat" and _attribute(node, "axis") == -1:
        pieces = [_last_dim(facts, opset, piece) for piece in node.input]
        return None if None in pieces else sum(pieces)
    return None


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
    if node.op_type == "Concat" and _attribute(node, "axis") in (0, -1):
        pieces = [_length(facts, opset, piece) for piece in node.input]
        return None if None in pieces else sum(pieces)
    if node.op_type == "Cast":
        return _length(facts, opset, node.input[0])
    return None


def _scatter_nd(node, facts, opset, fresh):
    data, indices, updates = node.input
    depth = _last_dim(facts, opset, indices)
    if depth is None:
        raise _refuse(node, opset, "the last dim of indices {!r} is unknown".format(indices))
    # two ops per indexed dimension: counted before they are made
    _within_rank(node, opset, depth, "the last dim of indices {!r} (one index per dimension of data)".format(indices))
    if facts.rank(data) is not None and depth > facts.rank(data):
        raise _refuse(node, opset, "the last dim of indices {!r} is {}, more than the rank {} of data {!r}".format(
            indices, depth, facts.rank(data), data))
    index_rank = facts.rank(indices)
    if index_rank is None:  # updates' shape is indices.shape[:-1] + data.shape[depth:]
        if facts.rank(updates) is None or facts.rank(data) is None:
            raise _refuse(node, opset, "the rank of indices {!r} is unknown".format(indices))
        index_rank = facts.rank(updates) - (facts.rank(data) - depth) + 1
    ops, columns = [], []
    for column in range(depth):  # index_put takes one index tensor per indexed dimension
        picked = fresh()
        ops.append(_op("Slice", [indices], [picked], node.name, starts=[0] * (index_rank - 1) + [column],
                       ends=[-1] * (index_rank - 1) + [column + 1]))
        squeezed = fresh()
        ops.append(_op("Squeeze", [picked], [squeezed], node.name, dims=[index_rank - 1]))
        columns.append(squeezed)
    ops.append(_op("ATen", [data] + columns + [updates], [node.output[0]], node.name, operator="index_put",
                   accumulate=0))
    return ops


#: ONNX element type -> Caffe2's (a ConstantOfShape value's type: the types Caffe2's ConstantFill makes).
_FILL_TYPES = {
    TensorProto.FLOAT: caffe2_pb2.TensorProto.FLOAT, TensorProto.DOUBLE: caffe2_pb2.TensorProto.DOUBLE,
    TensorProto.INT32: caffe2_pb2.TensorProto.INT32, TensorProto.INT64: caffe2_pb2.TensorProto.INT64,
    TensorProto.BOOL: caffe2_pb2.TensorProto.BOOL,
}


def _constant_of_shape(node, facts, opset, fresh):
    """Caffe2's ConstantFill of the shape (``input_as_shape``). A shape known only at run time is checked first
    (`_checked_shape`). Its ``value`` argument is a float32 (Caffe2's Argument.f; an integer one is int64, exact): a
    double float32 cannot hold (0.1, 1e300) fills ones, multiplied by the value made exactly (`exact_double`)."""
    value = _attribute(node, "value")
    if value is None:
        elem_type, number = TensorProto.FLOAT, 0.0
    else:
        elem_type, number = value.data_type, onnx.numpy_helper.to_array(value).reshape(-1)
        if number.size != 1:
            raise _refuse(node, opset, "the value must hold one element, got {}".format(number.size))
        number = number[0].item()
    if elem_type not in _FILL_TYPES:
        raise _refuse(node, opset, "value of type {} (Caffe2's ConstantFill makes {})".format(
            TensorProto.DataType.Name(elem_type), ", ".join(TensorProto.DataType.Name(t) for t in _FILL_TYPES)))
    number = float(number) if elem_type in _FLOATS else int(number)
    inexact = elem_type == TensorProto.DOUBLE and np.isfinite(number) and float(np.float32(number)) != number
    c2_type, out = _FILL_TYPES[elem_type], node.output[0]
    filled, fill_value = (fresh(), 1.0) if inexact else (out, number)
    length, shape = facts.dims(node.input[0]), facts.constant(node.input[0])
    if shape is not None:  # checked here: Caffe2 multiplies the dims unchecked (a shape [-2, -2] crashed it)
        _within_rank(node, opset, shape.size, "the shape {!r}".format(node.input[0]))
        if shape.size and shape.min() < 0:
            raise _refuse(node, opset, "the shape {!r} is {}; a negative dim has no meaning".format(
                node.input[0], shape_text(shape.reshape(-1).tolist())))
        check_tensor(shape.reshape(-1).tolist(), itemsize(elem_type), "{}: its output".format(label(node, opset)))
    if shape is not None and shape.size == 0:  # a scalar
        ops = [_op("ConstantFill", [], [filled], node.name, shape=[], dtype=c2_type, value=fill_value)]
    else:
        ops = [] if shape is not None else _checked_shape(node, opset, node.input[0], itemsize(elem_type), fresh)
        if shape is not None or (length and length[0]):  # ConstantFill refuses an empty shape
            ops.append(_op("ConstantFill", [node.input[0]], [filled], node.name, input_as_shape=1, dtype=c2_type,
                           value=fill_value))
        else:
            ops += _filled(node, node.input[0], filled, c2_type, fill_value, fresh)
    if inexact:
        more, exact = exact_double(node.name, number, fresh)
        ops += more + [_op("ATen", [filled, exact], [out], node.name, operator="mul")]
    return ops


def _checked_shape(node, opset, shape: str, size: int, fresh, lowest: int = 0, named: str = "") -> list:
    """Ops stopping the net unless the shape in 1-D blob ``shape`` (fed or computed; ``named``: the ONNX input it comes
    from) asks for a tensor of elements of ``size`` bytes within ``PYCUMSUM_OP_MAX_TENSOR_BYTES``, each dim in
    [``lowest``, cap] (Reshape's -1: ``lowest`` -1): Caffe2 multiplies the dims in 64 bits unchecked ([2**62 + 1, 4]
    would count 4 elements)."""
    what = "the shape {!r}".format(named or shape)
    more, dims = as_double(node.name, shape, fresh)
    return more + capped_dims(node.name, dims, element_cap(size), size_message(label(node, opset), what, size,
                                                                               lowest=lowest),
                              fresh, lowest=lowest, checked=shape)


#: ONNX LSTM / GRU / RNN -> (gates per direction, initial states, outputs)
_RECURRENT = {"LSTM": (4, 2, 3), "GRU": (3, 1, 2), "RNN": (1, 1, 2)}


def _zero_states(node, x: str, directions: int, hidden_size: int, fresh) -> tuple:
    """(ops, blob): zeros of shape (directions, batch, hidden_size), the batch read off ``x`` on every run."""
    shape, batch, dims, zeros = fresh(), fresh(), fresh(), fresh()
    front, front_fill = _constant_blob([directions], fresh)
    back, back_fill = _constant_blob([hidden_size], fresh)
    return [_op("Shape", [x], [shape], node.name), _op("Slice", [shape], [batch], node.name, starts=[1], ends=[2]),
            front_fill, back_fill, _op("Concat", [front, batch, back], [dims, fresh()], node.name, axis=0),
            _op("ConstantFill", [dims], [zeros], node.name, input_as_shape=1, value=0.0)], zeros


def _checked_lengths(node, opset, x: str, lengths: str, fresh) -> list:
    """Ops that fail the net unless every sequence length lies in [0, seq_length]: Caffe2's recurrent ops do not
    check them (a negative one corrupts the process' memory; one past the end is read as the end)."""
    length, wide, zero, low, high, valid = (fresh() for _ in range(6))
    return [_op("Shape", [x], [length], node.name, axes=[0]),
            _op("Cast", [lengths], [wide], node.name, to=caffe2_pb2.TensorProto.INT64),
            _int64_scalar(node, zero, 0),
            _op("GE", [wide, zero], [low], node.name), _op("LE", [wide, length], [high], node.name),
            _op("And", [low, high], [valid], node.name),
            _op("Assert", [valid], [], node.name, error_msg="{}: input 4 (sequence_lens) {!r} holds a length "
                "outside [0, sequence length]".format(label(node, opset), lengths))]


#: the recurrent inputs' names (ONNX's), by position
_RECURRENT_INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c")
#: a dim that is the batch size (X's dim 1), and one that is free (X's sequence length)
_BATCH, _FREE = "batch", None


def _recurrent_shapes(gates: int, directions: int, hidden_size: int, input_size: int) -> dict:
    """Input position -> the dims ONNX requires of it (ints, `_BATCH` or `_FREE`)."""
    return {0: [_FREE, _BATCH, input_size], 1: [directions, gates * hidden_size, input_size],
            2: [directions, gates * hidden_size, hidden_size], 3: [directions, 2 * gates * hidden_size],
            4: [_BATCH], 5: [directions, _BATCH, hidden_size], 6: [directions, _BATCH, hidden_size]}


def _spelled(want) -> str:
    return "[{}]".format(", ".join("seq_length" if dim is _FREE else str(dim) for dim in want))


def _checked_recurrent_shapes(node, opset, facts, positions, shapes, fresh) -> list:
    """Every given recurrent input's shape against ``shapes`` (`_recurrent_shapes`): a dim the model states is
    checked here (`FormRefused`), one it leaves symbolic by ops that fail the net in one line before Caffe2's
    RecurrentNetwork reads it. That op checks none of them: too few directions in an initial state or in R make
    it write past its buffers (the process dies: "double free or corruption", SIGSEGV), an empty one gives a
    wrong sequence length, a wrong batch or input size stops it in an enforce naming no ONNX node."""
    x_dims = facts.dims(node.input[0])
    batch = x_dims[1] if x_dims is not None and len(x_dims) == 3 else None  # the run's batch: X's dim 1
    ops, batch_blob = [], None
    for position in positions:
        name, want = node.input[position], shapes[position]
        what = "input {} ({}) {!r}".format(position, _RECURRENT_INPUTS[position], name)
        dims = facts.dims(name)
        spelled = _spelled(["batch {}".format(batch) if d is _BATCH and batch is not None else d for d in want])
        stated = "[{}]".format(", ".join("?" if dim is None else str(dim) for dim in dims or []))
        if dims is not None and len(dims) != len(want):
            raise _refuse(node, opset, "{} has rank {}, but its dims must be {}".format(what, len(dims), spelled))
        if dims is not None and any(dim is not None and expected is not _FREE and (
                dim != expected if expected is not _BATCH else batch is not None and dim != batch)
                for dim, expected in zip(dims, want)):
            raise _refuse(node, opset, "{} has dims {}, but hidden_size={}, {} direction(s), W and X make them "
                                       "{}".format(what, stated, shapes[2][2], shapes[1][0], spelled))
        if dims is not None and all(expected is _FREE or (position == 0 and expected is _BATCH) or (
                dim is not None and (expected is not _BATCH or batch is not None))
                for dim, expected in zip(dims, want)):
            continue  # every dim the run reads is stated and right
        message = "{}: {} does not have the dims {} (from hidden_size, direction, W and X's dim 1)".format(
            label(node, opset), what, _spelled(["batch" if d is _BATCH else d for d in want]))
        shape = fresh()
        ops.append(_op("Shape", [name], [shape], node.name))
        if dims is None:  # the rank first: the dims are then compared position by position
            count, rank, same = fresh(), fresh(), fresh()
            ops += [_op("Size", [shape], [count], node.name), _int64_scalar(node, rank, len(want)),
                    _op("EQ", [count, rank], [same], node.name),
                    _op("Assert", [same], [], node.name, error_msg=message)]
        pieces = []
        for k, expected in enumerate(want):
            if expected is _BATCH and position != 0:
                if batch_blob is None:  # X is checked first: its rank is 3 here
                    whole, batch_blob = fresh(), fresh()
                    ops += [_op("Shape", [node.input[0]], [whole], node.name),
                            _op("Slice", [whole], [batch_blob], node.name, starts=[1], ends=[2])]
                pieces.append(batch_blob)
            elif expected is _FREE or expected is _BATCH:  # X's own sequence length and batch size
                piece = fresh()
                ops.append(_op("Slice", [shape], [piece], node.name, starts=[k], ends=[k + 1]))
                pieces.append(piece)
            else:
                piece, fill = _constant_blob([expected], fresh)
                ops.append(fill)
                pieces.append(piece)
        expected_dims, equal = fresh(), fresh()
        ops += [_op("Concat", pieces, [expected_dims, fresh()], node.name, axis=0),
                _op("EQ", [shape, expected_dims], [equal], node.name),
                _op("Assert", [equal], [], node.name, error_msg=message)]
    # RecurrentNetwork fails on an empty batch, in an enforce naming no ONNX node (onnxruntime 1.19.2 aborts the
    # process on one)
    if batch == 0:
        raise _refuse(node, opset, "input 0 (X) {!r} has batch size 0, on which Caffe2's RecurrentNetwork "
                                   "fails".format(node.input[0]))
    if batch is None:
        whole, count, zero, positive = fresh(), fresh(), fresh(), fresh()
        ops += [_op("Shape", [node.input[0]], [whole], node.name),
                _op("Slice", [whole], [count], node.name, starts=[1], ends=[2]),
                _int64_scalar(node, zero, 0),
                _op("GT", [count, zero], [positive], node.name),
                _op("Assert", [positive], [], node.name, error_msg="{}: input 0 (X) {!r} has batch size 0, on "
                    "which Caffe2's RecurrentNetwork fails".format(label(node, opset), node.input[0]))]
    return ops


def _recurrent(node, facts, opset, fresh):
    """ONNX LSTM, GRU and RNN as Caffe2's C++ ``RecurrentNetwork`` operator, built by Caffe2's own RNN converter
    (``Caffe2Backend._create_rnn_variant``: ``rnn_cell.LSTM`` / ``gru_cell.GRU`` / ``rnn_cell.BasicRNN``, ONNX's
    gates reordered into Caffe2's: LSTM i o f c -> i f o c, GRU z r h -> r z h), which cannot take
    torch.onnx.export's nodes as they are written:

    - it finds the input size only in a graph input or value info named like W, and torch's W is an
      initializer that is neither: the size is given from the model's facts (W's dims, else X's last dim);
    - it reshapes W, R and B in place (to drop the direction axis), so a second run of the net would fail and
      the model's own weights would change: it is given copies, made on every run;
    - it takes every input and output by position: an absent B becomes zeros, absent initial states zeros of
      the run's batch size, and the outputs the model does not read get fresh names (their ops are dropped);
    - with both directions its Y is (seq, hidden, batch, 2), not ONNX's (seq, 2, batch, hidden) (torch's own
      export reshapes Y back to (seq, batch, 2 * hidden) and hides it): its Reshape is corrected.
    """
    gates, states, outputs = _RECURRENT[node.op_type]
    if _attribute(node, "hidden_size") is None:
        raise _refuse(node, opset, "attribute hidden_size is not given")
    hidden_size = int(_attribute(node, "hidden_size"))
    directions = 2 if _attribute(node, "direction", b"forward") == b"bidirectional" else 1
    if hidden_size < 1:
        raise _refuse(node, opset, "hidden_size {} is not positive".format(hidden_size))
    x, w = node.input[:2]
    if facts.elem_type(x) != TensorProto.FLOAT:
        raise _refuse(node, opset, "input {!r} is not float (Caffe2's recurrent cells compute in float)".format(x))
    activations = _attribute(node, "activations")
    if activations is not None and len(activations) != directions:
        raise _refuse(node, opset, "{} activations for {} direction(s)".format(len(activations), directions))
    if given(node, 7):
        raise _refuse(node, opset, "input 7 (P, the peephole weights) is given; Caffe2's LSTM cell has no "
                                   "peepholes")
    w_dims, x_dims = facts.dims(w), facts.dims(x)
    expected = [directions, gates * hidden_size]
    if w_dims and len(w_dims) == 3 and any(dim is not None and dim != want for dim, want in zip(w_dims, expected)):
        raise _refuse(node, opset, "W {!r} has dims {}, but hidden_size={} and {} direction(s) make them [{}, {}, "
                                   "input size]".format(w, w_dims, hidden_size, directions, *expected))
    input_size = w_dims[2] if w_dims and len(w_dims) == 3 else None
    if input_size is None and x_dims and len(x_dims) == 3:
        input_size = x_dims[2]
    if input_size is None:
        raise _refuse(node, opset, "the input size is unknown (neither W {!r} nor X {!r} has a known last "
                                   "dim)".format(w, x))
    shapes = _recurrent_shapes(gates, directions, hidden_size, input_size)
    ops = _checked_recurrent_shapes(node, opset, facts, [p for p in range(5 + states) if given(node, p)], shapes,
                                    fresh)
    ops += _checked_lengths(node, opset, x, node.input[4], fresh) if given(node, 4) else []
    inputs = [x]
    for position in (1, 2, 3):
        copy = fresh()
        if given(node, position):
            ops.append(_op("Copy", [node.input[position]], [copy], node.name))
        else:  # B
            ops.append(_op("ConstantFill", [], [copy], node.name, shape=[directions, 2 * gates * hidden_size],
                           value=0.0))
        inputs.append(copy)
    inputs.append(node.input[4] if given(node, 4) else "")  # sequence_lens
    zeros = None
    for position in range(5, 5 + states):
        if given(node, position):
            inputs.append(node.input[position])
            continue
        if zeros is None:
            more, zeros = _zero_states(node, x, directions, hidden_size, fresh)
            ops += more
        inputs.append(zeros)
    wanted = [name for name in node.output[:outputs] if name]
    names = [name or fresh() for name in list(node.output[:outputs]) + [""] * (outputs - len(node.output))]
    stock_node = OnnxNode(node)
    stock_node.inputs, stock_node.outputs = inputs, names
    for default in ("layout", "input_forget"):  # 0, the forms' only value: the converter knows neither
        stock_node.attrs.pop(default, None)
    stand_in = helper.make_model(helper.make_graph([], "stand_in", [], [], value_info=[
        helper.make_tensor_value_info(inputs[1], TensorProto.FLOAT, [directions, gates * hidden_size, input_size])]))
    with core.NameScope("", reset=True):
        converted = Caffe2Backend._create_rnn_variant(stand_in, stand_in, stock_node, opset)
    for op in list(converted.init_ops) + list(converted.ops):
        if op.output and op.output[0] in names and op.output[0] not in wanted:
            continue  # an output the model does not read
        if op.type == "Reshape" and [list(arg.ints) for arg in op.arg if arg.name == "shape"] == [[0, 0, -1, 2]]:
            # both directions' outputs, concatenated as (seq, batch, 2 * hidden), go to (seq, 2, batch, hidden)
            # through (seq, batch, 2, hidden); the converter's (seq, batch, hidden, 2) gives (seq, hidden, batch, 2)
            del op.arg[:]
            op.arg.extend([utils.MakeArgument("shape", [0, 0, 2, -1])])
        op.name = node.name
        ops.append(op)
    return ops


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
        raise _refuse(node, opset, "{} spatial dims; Caffe2's window ops take 1 to 3".format(rank))
    strides = [int(v) for v in _attribute(node, "strides", [1] * rank)]
    dilations = [int(v) for v in _attribute(node, "dilations", [1] * rank)]
    pads = [int(v) for v in _attribute(node, "pads", [0] * 2 * rank)]
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise _refuse(node, opset, "strides {}, dilations {} or pads {} do not fit the kernel {}".format(
            strides, dilations, pads, kernel))
    if min(kernel + strides + dilations) < 1 or min(pads) < 0:
        raise _refuse(node, opset, "kernel {}, strides {}, dilations {} must be positive and pads {} not "
                                   "negative".format(kernel, strides, dilations, pads))
    auto_pad = _attribute(node, "auto_pad", b"NOTSET").decode()
    if auto_pad == "VALID":
        pads = [0] * 2 * rank
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in _SAME and set(dilations) != {1}:
        raise _refuse(node, opset, "auto_pad={} with dilations {} (onnxruntime refuses it)".format(auto_pad, dilations))
    if auto_pad in _SAME or ceil_mode:
        dims = facts.dims(node.input[0])
        spatial = dims[2:] if dims is not None and len(dims) == rank + 2 else None
        if spatial is None or None in spatial:
            raise _refuse(node, opset, "{} needs the input's spatial dims, which the model does not state".format(
                "auto_pad={}".format(auto_pad) if auto_pad in _SAME else "ceil_mode=1"))
        for axis, (size, stride, span) in enumerate(zip(spatial, strides, spans)):
            if auto_pad in _SAME:
                total = (-(-size // stride) - 1) * stride + span - size
                if total < 0:  # ONNX's definition then pads by a negative amount, which onnxruntime reads as a shift
                    raise _refuse(node, opset, "auto_pad={} over spatial dim {} of {} with stride {} and kernel {} "
                                               "pads by {} (a negative pad has no Caffe2 form)".format(
                                                   auto_pad, axis, size, stride, span, total))
                pads[axis] = (total + _SAME[auto_pad]) // 2
                pads[axis + rank] = total - pads[axis]
            reach = size + pads[axis] + pads[axis + rank] - span
            if ceil_mode and reach >= 0 and reach % stride:
                last = (reach // stride + 1) * stride  # where ceil_mode's extra window starts
                if last >= size + pads[axis]:
                    raise _refuse(node, opset, "ceil_mode=1 adds a window wholly in the padding of spatial "
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
        raise _refuse(node, opset, "input 0 {!r} has dims {}; Caffe2's {} fails on {}".format(data, dims, kernel, what))
    if checked is not None and None not in checked:
        return []
    shape, rest, zero, filled = fresh(), fresh(), fresh(), fresh()
    return [_op("Shape", [data], [shape], node.name),
            _op("Slice", [shape], [rest], node.name, starts=[1], ends=[-1 if spatial else 2]),
            _int64_scalar(node, zero, 0), _op("GT", [rest, zero], [filled], node.name),
            _op("Assert", [filled], [], node.name, error_msg="{}: input 0 {!r} has {}, on which Caffe2's {} "
                "fails".format(label(node, opset), data, what, kernel))]


def _conv(node, facts, opset, fresh):
    """Caffe2's Conv: the kernel from ``kernel_shape`` or W's dims, which must be stated and not empty (an empty W
    kills the process: SIGFPE)."""
    weights = node.input[1]
    dims = facts.dims(weights)
    if dims is None or None in dims or len(dims) < 3:
        raise _refuse(node, opset, "input 1 (W) {!r} has dims {}; its dims must be stated".format(weights, dims))
    if 0 in dims:
        raise _refuse(node, opset, "input 1 (W) {!r} has dims {}; Caffe2's Conv fails on an empty W".format(
            weights, dims))
    kernel = [int(v) for v in _attribute(node, "kernel_shape", dims[2:])]
    if kernel != dims[2:]:
        raise _refuse(node, opset, "kernel_shape {} is not W's spatial dims {}".format(kernel, dims[2:]))
    if any(facts.elem_type(name) != TensorProto.FLOAT for name in node.input[1:] if name):
        raise _refuse(node, opset, "W and B must be float as X (Caffe2's Conv is float)")
    args = _window(node, opset, facts, kernel)
    group, rank = int(_attribute(node, "group", 1)), len(kernel)
    ops = _guard_filled(node, opset, facts, fresh, "Conv") + _dims_checked(node, opset, 1, weights, dims, facts, fresh)
    inputs, pads = [name for name in node.input if name], args["pads"]
    torchs = facts.torch_kernels and (group > 1 or max(kernel) > 1) and len(inputs) == 3 and rank == 2 \
        and pads[:rank] == pads[rank:] and np.isfinite(_constant_or(facts, weights, np.nan)).all()
    if torchs or max(kernel) > 1 or any(pads) or max(args["strides"]) > 1:
        # Caffe2's Conv multiplies a 1 x 1 window at stride 1 without pads straight from its input (its shortcut
        # allocates no im2col buffer): a bound of none would cost about 18 ops per convolution on every run
        ops += _im2col_bound(node, opset, facts, dims, args, group, fresh)
    if torchs:
        # torch's kernels take a fraction of Caffe2's im2col loop's time on grouped and depthwise windows and some
        # of it on wider ones (a 1 x 1 window is one GEMM either way, Caffe2's the faster); the ATen op's conv
        # resolves with a bias only, and pads both sides alike. torch's kernel skips the padding that ONNX
        # multiplies by the weights: the same sums where every weight is finite (0 x inf is NaN)
        return ops + [_op("ATen", inputs, [node.output[0]], node.name, operator="conv2d", stride=args["strides"],
                          padding=pads[:rank], dilation=args["dilations"], groups=group)]
    return ops + [_op("Conv", inputs, [node.output[0]], node.name, group=group, **args)]


def _constant_or(facts, name: str, default):
    """The value of constant ``name``, else ``default``."""
    value = facts.constant(name)
    return default if value is None else value


def _dims_checked(node, opset, position: int, name: str, dims, facts, fresh) -> list:
    """Ops stopping the net unless input ``position`` (blob ``name``) has exactly the ``dims`` the model states when the
    net runs, unless that is `declared` (Caffe2's Conv dies of SIGFPE on an empty W, whatever the value infos say)."""
    if declared(facts, name):
        return []
    shape, wanted, same = fresh(), fresh(), fresh()
    return _rank_checked(node, opset, position, name, facts, fresh, len(dims)) + [
        _op("Shape", [name], [shape], node.name),
        _op("GivenTensorInt64Fill", [], [wanted], node.name, values=list(dims), shape=[len(dims)]),
        _op("EQ", [shape, wanted], [same], node.name),
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
    added, fill = _constant_blob(pads, fresh)
    ops = [_op("Shape", [data], [shape], node.name), _op("Slice", [shape], [spatial], node.name, starts=[2], ends=[-1]),
           fill, _op("ATen", [spatial, added], [grown], node.name, operator="add")]
    more, bound = as_double(node.name, grown, fresh)
    more_factor, factor = whole_double(node.name, per_position, fresh)
    return ops + more + more_factor + capped_dims(node.name, bound, element_cap(4), size_message(
        where, "its im2col buffer (the spatial dims of input 0 {!r} and its pads, times {} per position)".format(
            data, per_position), 4), fresh, checked=shape, factor=factor)


def _pool(node, facts, opset, fresh):
    """Caffe2's MaxPool / AveragePool, global or over a window (no dilations, pads smaller than the kernel, as its
    kernels take them). Its MaxPool skips some NaNs of a window and not others (`_nan_max`)."""
    data, out = node.input[0], node.output[0]
    if len(node.output) > 1 and node.output[1]:
        raise _refuse(node, opset, "output 1 (Indices) has no Caffe2 form")
    operator = "MaxPool" if "Max" in node.op_type else "AveragePool"
    kernel = [int(v) for v in _attribute(node, "kernel_shape", [])]
    spatial = (facts.rank(data) or 0) - 2 if node.op_type.startswith("Global") else len(kernel)
    if node.op_type.startswith("Global"):
        rank = facts.rank(data)
        if rank is None or rank - 2 not in _SPATIAL_RANKS:
            raise _refuse(node, opset, "input 0 {!r} has rank {}; Caffe2's pools take 1 to 3 spatial dims".format(
                data, rank))
        args = {"global_pooling": 1}
    else:
        args = _window(node, opset, facts, kernel, bool(_attribute(node, "ceil_mode", 0)))
        if set(args.pop("dilations")) != {1}:
            raise _refuse(node, opset, "dilations other than 1 (Caffe2's pools have none)")
        if any(pad >= size for pad, size in zip(args["pads"], args["kernels"] * 2)):  # begins, then ends
            raise _refuse(node, opset, "pads {} (with ceil_mode's) not smaller than the kernel {}, as Caffe2's pools "
                                       "need".format(args["pads"], args["kernels"]))
        if operator == "AveragePool":
            args["count_include_pad"] = int(_attribute(node, "count_include_pad", 0))
    ops = _guard_filled(node, opset, facts, fresh, operator)
    # Caffe2's ConvPoolOpBase demands explicit kernels of an op whose *name* holds "Pool" (torch names the node
    # "GlobalAveragePool_46"), which global pooling reads off its input at run time
    name = node.name.replace("Pool", "pool") if "global_pooling" in args else node.name
    if operator == "AveragePool":
        return ops + [_op(operator, [data], [out], name, **args)]
    return ops + _nan_max(node, data, out, args, name, fresh, spatial == 3)


def _nan_max(node, data, out, args, name, fresh, three_dims: bool) -> list:
    """MaxPool with a NaN wherever its window holds one (torch's max_pool; onnxruntime's own kernels disagree with
    each other on NaN: its 2-D pool gives NaN for [1, NaN], its 1-D one skips every NaN): Caffe2's kernel skips a
    NaN in some places of a window and not in others, so the windows holding a NaN are found by pooling the NaN
    mask, and filled with NaN (torch's masked_fill by the ATen op). Its 3-D kernel starts each window from the
    lowest float, which it also writes for a window of -inf only: those windows, found by pooling the mask of
    entries other than -inf, are filled with -inf first."""
    pooled = fresh()
    ops = [_op("MaxPool", [data], [pooled], name, **args)]
    fills = [("isnan", {}, False, float("nan"))]
    if three_dims:
        fills.insert(0, ("ne", {"other": float("-inf")}, True, float("-inf")))
    for number, (test, test_args, fill_where_none, value) in enumerate(fills):
        tested, mask, hit, hits = (fresh() for _ in range(4))
        target = out if number == len(fills) - 1 else fresh()
        ops += [_op("ATen", [data], [tested], node.name, operator=test, **test_args),
                _op("Cast", [tested], [mask], node.name, to=caffe2_pb2.TensorProto.FLOAT),
                _op("MaxPool", [mask], [hit], name, **args),
                _op("Cast", [hit], [hits], node.name, to=caffe2_pb2.TensorProto.BOOL)]
        if fill_where_none:  # no entry passed the test: the window is all -inf
            none = fresh()
            ops.append(_op("Not", [hits], [none], node.name))
            hits = none
        ops.append(_op("ATen", [pooled, hits], [target], node.name, operator="masked_fill", value=value))
        pooled = target
    return ops


def _batch_norm(node, facts, opset, fresh):
    """Caffe2's SpatialBN in inference (``is_test``): the running mean and variance outputs are training's."""
    if len([name for name in node.output if name]) > 1:
        raise _refuse(node, opset, "outputs past Y (the running statistics) are training's; only Y is translated")
    if any(facts.elem_type(name) != TensorProto.FLOAT for name in node.input[1:]):
        raise _refuse(node, opset, "scale, B, mean and var must be float as X (Caffe2's SpatialBN is float)")
    rank = facts.rank(node.input[0])
    if rank is None or rank < 2:
        raise _refuse(node, opset, "input 0 {!r} has rank {}; Caffe2's SpatialBN needs (N, C, ...)".format(
            node.input[0], rank if rank is not None else "unknown"))
    epsilon = float(_attribute(node, "epsilon", 1e-5))
    if not epsilon > 0:  # Caffe2's SpatialBN enforces epsilon > 0; torch's batch_norm computes the formula with it
        return [_op("ATen", list(node.input), [node.output[0]], node.name, operator="batch_norm", training=False,
                    momentum=0.0, eps=epsilon, cudnn_enabled=False)]
    return _guard_filled(node, opset, facts, fresh, "SpatialBN", spatial=False) + [
        _op("SpatialBN", list(node.input), [node.output[0]], node.name, is_test=1, epsilon=epsilon)]


def _flatten(node, facts, opset, fresh):
    data = node.input[0]
    rank = facts.rank(data)
    axis = int(_attribute(node, "axis", 1))
    if axis < 0:
        if rank is None:
            raise _refuse(node, opset, "axis {} counts from the end, but the input's rank is unknown".format(axis))
        axis += rank
    if rank is not None and not 0 <= axis <= rank:
        raise _refuse(node, opset, "axis {} is out of range for rank {}".format(axis, rank))
    return [_op("Flatten", [data], [node.output[0]], node.name, axis=axis)]


def _dropout(node, facts, opset, fresh):
    """Dropout in inference: Y is X, the mask (opset 12 on) all true. From opset 12 on, ``training_mode`` must be a
    constant false (ratio is then unused)."""
    if given(node, 2):
        training = facts.constant(node.input[2])
        if training is None or training.size != 1 or bool(training.reshape(())):
            raise _refuse(node, opset, "input 2 (training_mode) must be a constant false (inference only)")
    ops = [_op("Copy", [node.input[0]], [node.output[0]], node.name)]
    if len(node.output) > 1 and node.output[1]:
        if opset < 12:  # opset 12 defines it all true in inference; onnxruntime writes it all false before
            raise _refuse(node, opset, "output 1 (mask) has no inference value before opset 12")
        ops.append(_op("ConstantFill", [node.input[0]], [node.output[1]], node.name,
                       dtype=caffe2_pb2.TensorProto.BOOL, value=True))
    return ops


def _pad(node, facts, opset, fresh):
    """Constant padding by torch's ``constant_pad_nd`` (the ATen op: any rank, and negative pads crop as ONNX's
    do); zero pads are a Copy. An empty output dim it fails on is refused, or checked by an Assert where symbolic.
    Its ``value`` travels in a float32 op argument, so a value float32 cannot hold exactly (a double 0.1, a large
    integer) is refused."""
    data = node.input[0]
    if opset < 11:
        pads, value = [int(v) for v in _attribute(node, "pads", [])], float(_attribute(node, "value", 0.0))
    else:
        pads = _int_list(node, opset, facts, 1, "pads") or []
        value = 0.0
        if given(node, 2):
            constant = facts.constant(node.input[2])
            if constant is None or constant.size != 1:
                raise _refuse(node, opset, "input 2 (constant_value) is not a constant scalar")
            value = constant.reshape(()).item()
    rank = facts.rank(data)
    if rank is None or len(pads) != 2 * rank:
        raise _refuse(node, opset, "pads {} do not fit input 0 {!r} of rank {}".format(
            pads, data, rank if rank is not None else "unknown"))
    if not any(pads):
        return [_op("Copy", [data], [node.output[0]], node.name)]
    if not (np.isnan(value) or float(np.float32(value)) == value):
        raise _refuse(node, opset, "constant_value {!r} is not a float32 value (Caffe2 passes it as one)".format(value))
    size = itemsize(facts.elem_type(data))
    if max(abs(pad) for pad in pads) > element_cap(size):  # so that a dim plus its pads stays far inside int64
        raise InputTooLarge("{}: pads {} reach past the {} elements a tensor may have (PYCUMSUM_OP_MAX_TENSOR_BYTES)"
                            .format(label(node, opset), shape_text(pads), element_cap(size)))
    # torch lists (begin, end) from the last dim back, and only from the first padded one (ONNX: all begins, then
    # all ends); unless no pad is positive, it fails where a dim it lists comes out empty
    first = next(axis for axis in range(rank) if pads[axis] or pads[axis + rank])
    torch_pads = [pad for axis in reversed(range(first, rank)) for pad in (pads[axis], pads[axis + rank])]
    ops = []
    if max(pads) > 0:
        dims = facts.dims(data)
        growth = [pads[axis] + pads[axis + rank] for axis in range(first, rank)]
        sizes = [None if dims is None or dims[axis] is None else dims[axis] + grow
                 for axis, grow in zip(range(first, rank), growth)]
        why = "torch's constant_pad_nd fails on an empty dim among those from the first padded one on"
        if 0 in sizes:
            raise _refuse(node, opset, "its output has dims {} from axis {} on; {}".format(sizes, first, why))
        if None in sizes:
            shape, listed, grown, zero, filled = fresh(), fresh(), fresh(), fresh(), fresh()
            added, fill = _constant_blob(growth, fresh)
            ops = [_op("Shape", [data], [shape], node.name),
                   _op("Slice", [shape], [listed], node.name, starts=[first], ends=[-1]), fill,
                   _op("Add", [listed, added], [grown], node.name), _int64_scalar(node, zero, 0),
                   _op("GT", [grown, zero], [filled], node.name),
                   _op("Assert", [filled], [], node.name, error_msg="{}: its output has an empty dim from axis {} on; "
                       "{}".format(label(node, opset), first, why))]
        if dims is None or None in dims:  # the output's dims, the input's read at run time plus the pads
            all_growth, fill_all = _constant_blob([pads[axis] + pads[axis + rank] for axis in range(rank)], fresh)
            whole, grown_all = fresh(), fresh()
            more, dims_double = as_double(node.name, grown_all, fresh)
            ops += [_op("Shape", [data], [whole], node.name), fill_all,
                    _op("Add", [whole, all_growth], [grown_all], node.name)] + more + capped_dims(
                node.name, dims_double, element_cap(size), size_message(
                    label(node, opset), "its output (input 0 {!r} and the pads)".format(data), size), fresh,
                checked=grown_all)
    return ops + [_op("ATen", [data], [node.output[0]], node.name, operator="constant_pad_nd", pad=torch_pads,
                      value=float(value))]


def _log_softmax(node, facts, opset, fresh):
    """torch's log_softmax by the ATen op (Caffe2 has no LogSoftmax, and Log of its Softmax gives -inf where the
    probability underflows). From opset 13 on along any one axis; before it ONNX flattens the input to 2-D at ``axis``
    (default 1) and normalises each row: the last axis is that already, another is Caffe2's Flatten at ``axis``,
    log_softmax of each row, and a Reshape back to the input's shape."""
    rank = facts.rank(node.input[0])
    axis = int(_attribute(node, "axis", 1 if opset < 13 else -1))
    if rank is None:
        raise _refuse(node, opset, "the rank of input {!r} is unknown".format(node.input[0]))
    (axis,) = _normalized(node, opset, [axis], rank)
    if opset >= 13 or axis == rank - 1:
        return [_op("ATen", [node.input[0]], [node.output[0]], node.name, operator="log_softmax", dim=axis)]
    rows, normalised, shape = fresh(), fresh(), fresh()
    return [_op("Flatten", [node.input[0]], [rows], node.name, axis=axis),
            _op("ATen", [rows], [normalised], node.name, operator="log_softmax", dim=1),
            _op("Shape", [node.input[0]], [shape], node.name),
            _op("Reshape", [normalised, shape], [node.output[0], fresh()], node.name)]


def _arg_max(node, facts, opset, fresh):
    """Caffe2's ArgMax: the first index of the maximum, as ONNX's select_last_index=0."""
    (axis,) = _normalized(node, opset, [int(_attribute(node, "axis", 0))], facts.rank(node.input[0]))
    return [_op("ArgMax", [node.input[0]], [node.output[0]], node.name, axis=axis,
                keepdims=int(_attribute(node, "keepdims", 1)))]


def _axis_length(node, data: str, axis: int, fresh) -> tuple:
    """(ops, blob): the length of ``data`` along ``axis`` as a (1,) int64 vector, read at run time; an axis counting
    from the end needs no rank: Caffe2's Slice reads -1 as the end, so [axis - 1, axis) of the shape is that dim (an
    axis past the rank fails the net, as onnxruntime fails it)."""
    length = fresh()
    if axis >= 0:
        return [_op("Shape", [data], [length], node.name, axes=[axis])], length
    shape = fresh()
    return [_op("Shape", [data], [shape], node.name),
            _op("Slice", [shape], [length], node.name, starts=[axis - 1], ends=[axis])], length


def _take(node, data: str, indices: str, out: str, axis: int) -> caffe2_pb2.OperatorDef:
    """The op taking ``indices`` (int64, in range) of ``data`` along ``axis``: Caffe2's Gather (any type) for an axis
    counted from the start, torch's index_select for one counted from the end (no rank needed)."""
    if axis >= 0:
        return _op("Gather", [data, indices], [out], node.name, axis=axis)
    return _op("ATen", [data, indices], [out], node.name, operator="index_select", dim=axis)


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
        raise _refuse(node, opset, "input 0 {!r} is a scalar; TopK takes an axis of rank 1 or more".format(data))
    axis = int(_attribute(node, "axis", -1))
    if rank is not None or axis != -1:  # Caffe2's TopK reads axis -1 as the last, no other negative axis
        (axis,) = _normalized(node, opset, [axis], rank)
    dims = facts.dims(data)
    dim = dims[axis] if dims is not None and axis >= 0 else None
    if opset < 10:
        k_value = _attribute(node, "k")
        if k_value is None:
            raise _refuse(node, opset, "attribute k is required")
        k_value = int(k_value)
    else:
        k_value = facts.constant(node.input[1])
        if k_value is not None:
            if k_value.dtype.kind not in "iu" or k_value.size != 1:
                raise _refuse(node, opset, "input 1 (K) must hold one integer, got shape {} dtype {}".format(
                    k_value.shape, k_value.dtype))
            k_value = int(k_value.reshape(()))
    if k_value is not None and (k_value < 0 or (dim is not None and k_value > dim)):
        raise _refuse(node, opset, "k = {} is outside [0, {}], the length of axis {}".format(
            k_value, "length" if dim is None else dim, axis))
    if k_value == 0:  # no index taken: Caffe2's TopK refuses k = 0
        empty, fill = _constant_blob([], fresh)
        return [fill, _take(node, data, empty, values, axis),
                _op("Cast", [values], [indices], node.name, to=caffe2_pb2.TensorProto.INT64)]
    ops, nan, kept = [], fresh(), fresh()
    ops += [_op("ATen", [data], [nan], node.name, operator="isnan"), _op("Not", [nan], [kept], node.name),
            _op("Assert", [kept], [], node.name, error_msg="{}: input 0 (X) {!r} holds a NaN, which onnxruntime's "
                "TopK orders inconsistently".format(label(node, opset), data))]
    more, length = _axis_length(node, data, axis, fresh)
    if k_value is not None:
        k_blob, fill = _constant_blob([k_value], fresh)
        ops.append(fill)
    else:
        k_blob = fresh()
        ops.append(_op("Cast", [node.input[1]], [k_blob], node.name, to=caffe2_pb2.TensorProto.INT64))
    if k_value is None or dim is None:
        zero, low, high, valid = fresh(), fresh(), fresh(), fresh()
        ops += more + [_int64_scalar(node, zero, 0), _op("GE", [k_blob, zero], [low], node.name),
                       _op("LE", [k_blob, length], [high], node.name), _op("And", [low, high], [valid], node.name),
                       _op("Assert", [valid], [], node.name, error_msg="{}: k is outside [0, the length of axis "
                           "{}]".format(label(node, opset), axis))]
    source = data
    if int(_attribute(node, "largest", 1)) == 0:
        source = fresh()
        ops.append(_op("Negative", [data], [source], node.name))
    if k_value is not None:
        top, top_indices = (values, indices) if source == data else (fresh(), indices)
        ops.append(_op("TopK", [source], [top, top_indices], node.name, k=k_value, axis=axis))
    else:  # the top max(k, 1) cut to k: Caffe2's TopK refuses k = 0
        at_least_one, wide, wide_indices, count, top = fresh(), fresh(), fresh(), fresh(), fresh()
        ops += [_op("ATen", [k_blob], [at_least_one], node.name, operator="clamp_min", min=1),
                _op("TopK", [source, at_least_one], [wide, wide_indices], node.name, axis=axis),
                _op("Range", [k_blob], [count], node.name),
                _take(node, wide_indices, count, indices, axis)]
        if source == data:
            top = values
        ops.append(_take(node, wide, count, top, axis))
    if source != data:
        ops.append(_op("Negative", [top], [values], node.name))
    return ops


def _gather_elements(node, facts, opset, fresh):
    """torch's gather (the ATen op; int64 indices in range only): int32 indices are widened and a negative index
    counts from the end of the axis, its length read at run time (an index still out of range fails the net, as
    onnxruntime fails it)."""
    data, index = node.input
    rank = facts.rank(data)
    axis = int(_attribute(node, "axis", 0))
    if rank is not None or axis >= 0:
        (axis,) = _normalized(node, opset, [axis], rank)
    if facts.elem_type(index) not in (TensorProto.INT32, TensorProto.INT64):
        raise _refuse(node, opset, "input 1 (indices) {!r} is not int32 or int64".format(index))
    ops, length = _axis_length(node, data, axis, fresh)
    wide, zero, negative, shift, offset, wrapped = (fresh() for _ in range(6))
    ops += [_op("Cast", [index], [wide], node.name, to=caffe2_pb2.TensorProto.INT64),
            _int64_scalar(node, zero, 0),
            _op("LT", [wide, zero], [negative], node.name),
            _op("Cast", [negative], [shift], node.name, to=caffe2_pb2.TensorProto.INT64),
            _op("Mul", [shift, length], [offset], node.name),
            _op("Add", [wide, offset], [wrapped], node.name),
            _op("ATen", [data, wrapped], [node.output[0]], node.name, operator="gather", dim=axis)]
    return ops


_PROTOTYPES: Dict[tuple, caffe2_pb2.OperatorDef] = {}


def scan_entry(op_type: str):
    """The registered scan that imports ONNX ``op_type`` (its entry's ``onnx`` names it), or None."""
    for entry in SCANS.values():
        if not isinstance(entry.onnx, Refused) and entry.onnx == op_type:
            return entry
    return None


def scan_operator(node, facts, opset, fresh=None) -> caffe2_pb2.OperatorDef:
    """The Caffe2 op of registered scan imported from ONNX ``node`` (CumSum -> PyCumSum): its inputs (x, axis);
    a constant axis becomes ``axis=``, any other is read from its blob on every run."""
    entry = scan_entry(node.op_type)
    where = label(node, opset)
    if entry is None:
        raise FormRefused("{}: no registered scan imports it".format(where))
    if len(node.input) != 2 or len(node.output) != 1:
        raise FormRefused("{}: takes inputs (x, axis) and one output, got inputs {} and outputs {}".format(
            where, list(node.input), list(node.output)))
    x, axis_name = node.input
    elem_type = facts.elem_type(x)
    if elem_type is None:
        raise FormRefused("{}: the element type of input {!r} is unknown (ONNX shape inference did not find "
                         "it); {} keeps its input's type, so it is needed".format(where, x, node.op_type))
    if elem_type not in SCAN_DTYPES:
        why = ("Caffe2 has no tensor type for" if elem_type in (TensorProto.UINT32, TensorProto.UINT64,
                                                               TensorProto.BFLOAT16)
               else "ONNX {} does not take".format(node.op_type))
        raise FormRefused("{}: input {!r} has type {}, which {}; supported: {}".format(
            where, x, TensorProto.DataType.Name(elem_type), why,
            ", ".join(TensorProto.DataType.Name(t) for t in SCAN_DTYPES)))
    axis = constant_axis(facts, axis_name, where)
    flags = {name: bool(_attribute(node, name, 0)) for name in ("exclusive", "reverse")
             if name in entry.arguments}
    dtype = SCAN_DTYPES[elem_type] if "dtype" in entry.arguments else None
    key = (entry, axis, tuple(sorted(flags.items())), dtype)
    if key not in _PROTOTYPES:  # the op's pickled builders depend on these only: made once, copied per node
        net = core.Net("onnx_" + entry.name)
        with core.NameScope("", reset=True):
            add_scan_op(net, entry.name, "x" if axis is not None else ["x", "axis"], "y", axis=axis, dtype=dtype,
                        **flags)
        _PROTOTYPES[key] = net.Proto().op[0]
    op = caffe2_pb2.OperatorDef()
    op.CopyFrom(_PROTOTYPES[key])
    op.input[:] = [x] if axis is not None else [x, axis_name]
    op.output[:] = [node.output[0]]
    return op


def constant_axis(facts, name: str, where: str):
    """The axis if blob ``name`` is a constant (a Constant node or a non-input initializer), else None."""
    array = facts.constant(name)
    if array is None:
        return None
    if array.dtype not in (np.int32, np.int64) or array.size != 1 or array.ndim > 1:
        raise FormRefused("{}: the axis {!r} must be a 0-d int32 or int64 tensor, got shape {} dtype {}".format(
            where, name, tuple(array.shape), array.dtype))
    return int(array.reshape(()))


#: ONNX op -> its translation (a registered scan's op is found by `scan_entry`).
TRANSLATIONS: Dict[str, Callable] = {
    "Slice": _slice, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "ReduceSum": _reduce, "ReduceMean": _reduce, "ReduceMax": _reduce, "ReduceMin": _reduce, "ReduceL1": _reduce,
    "ReduceL2": _reduce, "ReduceSumSquare": _reduce, "ReduceProd": _reduce, "ReduceLogSumExp": _reduce,
    "Sum": _extremum, "Mean": _extremum, "Size": _size, "Split": _split, "OneHot": _one_hot,
    "Pow": _pow, "Reshape": _reshape, "Gather": _gather, "Where": _where, "Softmax": _softmax,
    "Max": _extremum, "Min": _extremum, "ScatterND": _scatter_nd, "ConstantOfShape": _constant_of_shape,
    "Expand": _expand, "MatMul": _matmul, "Gemm": _gemm, "Range": _range, "Clip": _clip, "Abs": _sign_op,
    "Neg": _sign_op,
    "LSTM": _recurrent, "GRU": _recurrent, "RNN": _recurrent,
    "Conv": _conv, "MaxPool": _pool, "AveragePool": _pool, "GlobalMaxPool": _pool, "GlobalAveragePool": _pool,
    "BatchNormalization": _batch_norm, "Flatten": _flatten, "Dropout": _dropout, "Pad": _pad,
    "LogSoftmax": _log_softmax, "ArgMax": _arg_max, "HardSwish": _hard_swish, "Softsign": _softsign,
    "Shape": _shape, "Tile": _tile, "IsInf": _elementwise, "TopK": _top_k, "GatherElements": _gather_elements,
    "GreaterOrEqual": _compare, "LessOrEqual": _compare, "Trilu": _trilu, "Einsum": _einsum,
    "Add": _arithmetic, "Sub": _arithmetic, "Mul": _arithmetic, "Div": _arithmetic, "Transpose": _transpose,
}
TRANSLATIONS.update((op, _elementwise) for op in _ELEMENTWISE)


def translate(node, facts, opset, fresh) -> List[caffe2_pb2.OperatorDef]:
    """The Caffe2 ops of an `OWN`-form ``node``."""
    if node.op_type in TRANSLATIONS:
        return TRANSLATIONS[node.op_type](node, facts, opset, fresh)
    return [scan_operator(node, facts, opset, fresh)]
