"""Slice and Split: Caffe2's Slice where the bounds fit it, else cuts and strided takes that read each length at run
time; Split by Caffe2's Split from constant parts."""
from typing import List

from caffe2.proto import caffe2_pb2
from onnx import TensorProto

from ...input_limits import shape_text
from ..run_checks import COUNTER_LIMIT, make_op
from .contract import ANY, AT_MOST_FIRST, MOVED, NEWEST, Form, declare, same_rank
from .helpers import (attribute, axis_length, constant_blob, counted_by_range, counted_from_end, extreme, int64_scalar,
                      int_list, normalized, refuse, reversed_axis, taken)
#: ONNX writes "to the end" of a Slice as a huge int64 (torch: 2**63 - 1); past this any dimension is reached.
_HUGE = 2 ** 31 - 1


#: ONNX's (and torch's) "to the end" of a Slice.
_END = 2 ** 63 - 1


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
    ops.append(make_op("Cast", [name], [cast], node.name, to=caffe2_pb2.TensorProto.INT64))
    for axis in range(rank):
        if axis in axes:  # a Slice, not a Gather: Caffe2's Gather shape inference crashes on unknown shapes
            picked, index = fresh(), axes.index(axis)
            ops.append(make_op("Slice", [cast], [picked], node.name, starts=[index], ends=[index + 1]))
            pieces.append(picked)
        else:
            default, fill = constant_blob([_END if end else 0], fresh)
            ops.append(fill)
            pieces.append(default)
    full = fresh()
    ops.append(make_op("Concat", pieces, [full, fresh()], node.name, axis=0))
    return ops, full


def _cuts(node, data, out, bounds, fresh):
    """Slices of ``data`` into ``out``, one per (ops, starts blob, ends blob) of ``bounds`` (the ops make the
    blobs): Caffe2's Slice cuts one axis at a time."""
    ops, current = [], data
    for number, (more, starts, ends) in enumerate(bounds):
        target = out if number == len(bounds) - 1 else fresh()
        ops += more + [make_op("Slice", [current, starts, ends], [target], node.name)]
        current = target
    return ops


def _clamped_slice(node, facts, data, out, starts, ends, axes, rank, fresh):
    """A Slice of ``data`` along ``axes`` by the full-rank int64 ONNX ``starts`` / ``ends`` blobs (step 1), clamped
    at run time as ONNX clamps them, against the lengths of ``data``: a negative bound counts from the end, then
    each is held to [0, length] and an end to at least its start, so that Caffe2's Slice reads them as they are."""
    ops, lengths, zero = [], fresh(), fresh()
    ops += [make_op("Shape", [data], [lengths], node.name),
            int64_scalar(node, zero, 0)]
    clamped = []
    for bound in (starts, ends):
        floor, held = fresh(), fresh()
        more, counted = counted_from_end(node, bound, lengths, zero, fresh)
        ops += more + extreme(node, facts, counted, zero, floor, fresh, larger=True) + extreme(
            node, facts, floor, lengths, held, fresh, larger=False)
        clamped.append(held)
    first, last = clamped[0], fresh()
    ops += extreme(node, facts, clamped[1], first, last, fresh, larger=True)
    cuts = []
    for axis in axes:  # this axis' bounds; 0 and the end (clamped by Caffe2's Slice) elsewhere
        (picked, pick), (others, fill) = (constant_blob([int(a == axis) for a in range(rank)], fresh),
                                          constant_blob([0 if a == axis else _END for a in range(rank)], fresh))
        start, masked, end = fresh(), fresh(), fresh()
        cuts.append(([pick, fill, make_op("Mul", [first, picked], [start], node.name),
                      make_op("Mul", [last, picked], [masked], node.name), make_op("Add", [masked, others], [end],
                                                                                   node.name)],
                     start, end))
    return ops + _cuts(node, data, out, cuts, fresh)


def _strided(node, opset, facts, data, out, axis, start_step, fresh):
    """Every step-th element of ``axis`` from a start to the end, the axis' length read at run time. Caffe2's Range
    computes its length in 32-bit arithmetic, so a start past the end (up to 2**63 - 1) would wrap around to a
    length of millions: the start is held to the length first, so Range counts at most the length."""
    ops, (start, step) = [], start_step
    shape, length, first, held, stride, indices = fresh(), fresh(), fresh(), fresh(), fresh(), fresh()
    ops += [make_op("Shape", [data], [shape], node.name, axes=[axis]),
            make_op("Squeeze", [shape], [length], node.name, dims=[0])] + counted_by_range(node, opset, length, fresh)
    ops += [int64_scalar(node, first, start)] + extreme(node, facts, first, length, held, fresh, larger=False) + [
            int64_scalar(node, stride, step),
            make_op("Range", [held, length, stride], [indices], node.name),
            make_op("Gather", [data, indices], [out], node.name, axis=axis)]
    return ops


def _stepped(node, opset, facts, data, out, axis, picked: range, dim: int, fresh):
    """The elements ``picked`` of ``axis`` (its length ``dim`` known), gathered by indices that Caffe2's Range makes
    at run time: a list of them in the net would cost as many entries as the model says the axis is long. Range
    computes its length in 32-bit arithmetic and rounds it toward zero for a negative step, so it makes the indices
    in increasing order (flipped after, for a negative step), by a step no longer than ``dim`` (past it only one
    index is taken, whatever the step), from a start and to a stop both held to the axis' length read at run time:
    Range then counts at most the input's length, whatever the model declares."""
    count, step = len(picked), min(abs(picked.step), max(dim, 1))
    low = (picked[-1] if picked.step < 0 else picked.start) if count else 0
    shape, length, first, stop, stride, held_first, held_stop, indices = (fresh() for _ in range(8))
    ops = [make_op("Shape", [data], [shape], node.name, axes=[axis]),
           make_op("Squeeze", [shape], [length], node.name, dims=[0])] + counted_by_range(node, opset, length,
                                                                                          fresh) + [
           int64_scalar(node, first, low), int64_scalar(node, stop, low + count * step),
           int64_scalar(node, stride, step)] + extreme(node, facts, first, length, held_first, fresh, larger=False) + \
        extreme(node, facts, stop, length, held_stop, fresh, larger=False) + [
            make_op("Range", [held_first, held_stop, stride], [indices], node.name)]
    if picked.step < 0 and count > 1:
        increasing, indices = indices, fresh()
        ops += reversed_axis(node, opset, facts, increasing, indices, 0, fresh)
    return ops + [make_op("Gather", [data, indices], [out], node.name, axis=axis)]


@declare("Slice", Form((10, NEWEST), constants=(3, 4)), types=MOVED, inputs=("data", "starts", "ends", "axes", "steps"),
         why="Caffe2's stock Slice converter returns its input unchanged for starts/ends given as inputs, and "
             "pycumsum_op translates only constant axes and steps",
         rank=same_rank, elements=AT_MOST_FIRST,
         counted=((1, 0, "starts", "axes"), (2, 0, "ends", "axes"), (3, 0, "axes", "axes"), (4, 0, "steps", "axes")))
def _slice(node, facts, opset, fresh) -> List[caffe2_pb2.OperatorDef]:
    data, out = node.input[0], node.output[0]
    rank = facts.rank(data)
    dims = facts.dims(data) or ([None] * rank if rank is not None else None)
    if rank is None:
        return _slice_any_rank(node, facts, opset, fresh)
    count = facts.dims(node.input[1])
    if count is not None and len(count) != 1:  # before any list is made from its length
        raise refuse(node, opset, "starts {!r} is declared with dims {}; ONNX takes a 1-D list".format(
            node.input[1], shape_text(count)))
    axes = int_list(node, opset, facts, 3, "axes")
    if axes is None and (count is None or count[0] is None):
        raise refuse(node, opset, "no axes, and the length of starts {!r} is unknown".format(node.input[1]))
    if axes is None and count[0] > rank:
        raise refuse(node, opset, "starts {!r} has {} entries, more than the rank {} of input {!r}".format(
            node.input[1], count[0], rank, data))
    axes = normalized(node, opset, list(range(count[0])) if axes is None else axes, rank)
    steps = int_list(node, opset, facts, 4, "steps") or [1] * len(axes)
    if not facts.is_constant(node.input[1]) or not facts.is_constant(node.input[2]):
        if set(steps) != {1}:
            raise refuse(node, opset, "steps {} with starts or ends known only at run time".format(steps))
        ops, bounds = [], []
        for position, end in ((1, False), (2, True)):
            values = facts.constant(node.input[position])
            if values is None:
                more, blob = _full_bounds(node, fresh, position, axes, rank, end)
            else:
                full = [_END if end else 0] * rank
                for axis, value in zip(axes, values.reshape(-1).tolist()):
                    full[axis] = int(value)
                blob, fill = constant_blob(full, fresh)
                more = [fill]
            ops += more
            bounds.append(blob)
        return ops + _clamped_slice(node, facts, data, out, bounds[0], bounds[1], axes, rank, fresh)
    starts = int_list(node, opset, facts, 1, "starts")
    ends = int_list(node, opset, facts, 2, "ends")
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise refuse(node, opset, "starts, ends, axes and steps differ in length")
    if 0 in steps:
        raise refuse(node, opset, "a step is 0")
    c2_starts, c2_ends = [0] * rank, [-1] * rank  # Caffe2's Slice: -1 is the end, so -k means dim + 1 - k
    onnx_starts, onnx_ends = [0] * rank, [_END] * rank  # the same bounds as ONNX reads them
    clamped = False  # a bound only a run-time clamp takes as ONNX does (`_safe_on_any_length`)
    picks = []  # (axis, the range of indices, (start, step) to the end, or None for a whole reversal)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        dim = dims[axis]
        if dim is not None:
            if step < 0 and end >= dim:
                raise refuse(node, opset, "end {} past axis {} (length {}) with step {}: onnxruntime and the ONNX "
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
            raise refuse(node, opset, "step {} (from {} to {}) over axis {}, whose length the model leaves "
                                       "symbolic: export with that length fixed".format(step, start, end, axis))
    cut = [axis for axis, step in zip(axes, steps) if step == 1]
    ops, current = [], data
    if clamped:
        current = out if not picks else fresh()
        (first, fill_starts), (last, fill_ends) = constant_blob(onnx_starts, fresh), constant_blob(onnx_ends, fresh)
        ops += [fill_starts, fill_ends] + _clamped_slice(node, facts, data, current, first, last, cut, rank, fresh)
    else:
        cuts = []
        for axis in cut:
            if (c2_starts[axis], c2_ends[axis]) != (0, -1):
                (first, fill_starts), (last, fill_ends) = (
                    constant_blob([c2_starts[axis] if a == axis else 0 for a in range(rank)], fresh),
                    constant_blob([c2_ends[axis] if a == axis else -1 for a in range(rank)], fresh))
                cuts.append(([fill_starts, fill_ends], first, last))
        if cuts:
            current = out if not picks else fresh()
            ops += _cuts(node, data, current, cuts, fresh)
    for number, (axis, indices) in enumerate(picks):
        target = out if number == len(picks) - 1 else fresh()
        if indices is None:
            ops += reversed_axis(node, opset, facts, current, target, axis, fresh)
        elif isinstance(indices, tuple):
            ops += _strided(node, opset, facts, current, target, axis, indices, fresh)
        else:
            ops += _stepped(node, opset, facts, current, target, axis, indices, dims[axis], fresh)
        current = target
    if not ops:
        ops.append(make_op("Copy", [data], [out], node.name))
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
    axes = int_list(node, opset, facts, 3, "axes")
    if axes is None:
        count = facts.dims(node.input[1])
        if count is None or len(count) != 1 or count[0] is None:
            raise refuse(node, opset, "no axes, and the length of starts {!r} is unknown".format(node.input[1]))
        axes = list(range(count[0]))
    steps = int_list(node, opset, facts, 4, "steps") or [1] * len(axes)
    if len(steps) != len(axes):
        raise refuse(node, opset, "axes and steps differ in length")
    if 0 in steps:
        raise refuse(node, opset, "a step is 0")
    if len(set(axes)) != len(axes) or (min(axes) < 0 <= max(axes)):
        raise refuse(node, opset, "axes {} count from the start and from the end (or repeat), and the rank of input "
                                   "{!r} is unknown".format(axes, data))
    if min(axes) < 0 and facts.elem_type(data) == TensorProto.UINT16:
        raise refuse(node, opset, "axes {} count from the end of uint16 input {!r} of unknown rank: torch's "
                                   "index_select has no uint16".format(axes, data))
    ops, bounds = [], []
    for position in (1, 2):
        values = facts.constant(node.input[position])
        if values is not None and values.size != len(axes):
            raise refuse(node, opset, "starts, ends, axes and steps differ in length")
        blob = fresh()
        ops.append(make_op("Cast", [node.input[position]], [blob], node.name, to=caffe2_pb2.TensorProto.INT64))
        bounds.append(blob)
    (zero, fill_zero), (one, fill_one), (minus_one, fill_minus_one) = (constant_blob([v], fresh) for v in (0, 1, -1))
    ops += [fill_zero, fill_one, fill_minus_one]
    current = data
    for number, (axis, step) in enumerate(zip(axes, steps)):
        more, length = axis_length(node, current, axis, fresh)
        ops += more + counted_by_range(node, opset, length, fresh)
        last = fresh()
        ops.append(make_op("Sub", [length, one], [last], node.name))
        high = length if step > 0 else last
        held = []
        for bound, floor in ((bounds[0], zero), (bounds[1], zero if step > 0 else minus_one)):
            picked, floored, ceiled = fresh(), fresh(), fresh()
            more, counted = counted_from_end(node, picked, length, zero, fresh)
            ops += [make_op("Slice", [bound], [picked], node.name, starts=[number], ends=[number + 1])] + more + [
                    make_op("ATen", [counted, floor], [floored], node.name, operator="maximum"),
                    make_op("ATen", [floored, high], [ceiled], node.name, operator="minimum")]
            held.append(ceiled)
        start, end = held
        span, positive, at_least_one, stride, rounded, total, count, steps_blob, offsets, indices = (
            fresh() for _ in range(10))
        stride_value, fill = constant_blob([min(abs(step), _END)], fresh)
        ops += [fill,
                make_op("Sub", [end, start] if step > 0 else [start, end], [span], node.name),
                make_op("ATen", [span, zero], [positive], node.name, operator="maximum"),
                make_op("ATen", [length, one], [at_least_one], node.name, operator="maximum"),
                make_op("ATen", [stride_value, at_least_one], [stride], node.name, operator="minimum"),
                make_op("Sub", [stride, one], [rounded], node.name),
                make_op("Add", [positive, rounded], [total], node.name),
                make_op("Div", [total, stride], [count], node.name),
                make_op("Range", [count], [steps_blob], node.name),
                make_op("Mul", [steps_blob, stride], [offsets], node.name),
                make_op("Add" if step > 0 else "Sub", [start, offsets], [indices], node.name)]
        target = out if number == len(axes) - 1 else fresh()
        ops.append(taken(node, current, indices, target, axis))
        current = target
    return ops


@declare("Split", Form((2, 12), {"axis": ANY, "split": ANY}), Form((13, NEWEST), {"axis": ANY}, constants=(1,)),
         types=MOVED, inputs=("input", "split"), rank=same_rank)
def _split(node, facts, opset, fresh):
    """Caffe2's Split along ``axis``: the parts' lengths from ``split`` (the attribute before opset 13, a constant
    input after), else equal parts (the axis' length must divide, as ONNX requires; Caffe2 fails the run otherwise,
    as onnxruntime does)."""
    axis = int(attribute(node, "axis", 0))
    rank = facts.rank(node.input[0])
    if axis < 0:
        if rank is None:
            raise refuse(node, opset, "a negative axis needs the input's rank, which the model does not state")
        axis += rank
    split = int_list(node, opset, facts, 1, "split") if opset >= 13 else attribute(node, "split")
    if split and (min(split) < 0 or sum(split) > COUNTER_LIMIT):
        # Caffe2's Split checks the parts' sum against the axis' length in 32 bits, and takes a negative part
        raise refuse(node, opset, "split {} holds a negative part or sums past {} (Caffe2 sums the parts in 32 "
                                   "bits)".format(shape_text(split), COUNTER_LIMIT))
    args = {"axis": axis} if not split else {"axis": axis, "split": [int(part) for part in split]}
    return [make_op("Split", [node.input[0]], list(node.output), node.name, **args)]
