"""Softmax and LogSoftmax: before opset 13 over the input flattened to 2-D at the axis, from 13 over one axis."""
from ...lowering.aten_gradient import imported_form
from ..run_checks import make_op
from .contract import ANY, FLOAT, NEWEST, Form, declare, same_dims, same_rank
from .arithmetic import runs_torchs_arithmetic
from .helpers import attribute, normalized, refuse
# Caffe2's flattens to 2-D at the axis, as ONNX before 13; from 13 one axis: Caffe2's or torch's
@declare("Softmax", Form((1, 12), {"axis": ANY}), Form((13, NEWEST), {"axis": ANY}), types=FLOAT, rank=same_rank,
         dims=same_dims)
def _softmax(node, facts, opset, fresh):
    """Before opset 13, Caffe2's Softmax (over every axis from ``axis`` on, default 1, as ONNX then defines it), its
    axis checked against the rank where the model states it (a scalar has none: Caffe2 would fail the run). From
    opset 13 on, along one axis: the last by Caffe2's Softmax, another by torch's softmax (the ATen op). A masked
    score on the last axis, of a stated rank (torch's takes a rank 0, which ONNX refuses), goes to torch's softmax
    too where the target allows it: its input made by Where or by an Add torch's kernel runs (an attention mask
    broadcast), whose rows may hold float32's lowest value, on which Caffe2's exponential takes six times torch's time.
    torch's softmax has a Caffe2 gradient along any axis (`imported_form`)."""
    rank = facts.rank(node.input[0])
    if opset < 13:
        axis = int(attribute(node, "axis", 1))
        if rank is not None:
            (axis,) = normalized(node, opset, [axis], rank)
        return [make_op("Softmax", [node.input[0]], [node.output[0]], node.name, axis=axis)]
    axis = int(attribute(node, "axis", -1))
    if axis == -1 and rank is None:
        return [make_op("Softmax", [node.input[0]], [node.output[0]], node.name, axis=-1)]
    if rank is None:
        raise refuse(node, opset, "axis {} with the rank of input {!r} unknown".format(axis, node.input[0]))
    (axis,) = normalized(node, opset, [axis], rank)
    scores = facts.producer(node.input[0])
    masked = facts.torch_kernels and scores is not None and (scores.op_type == "Where" or scores.op_type == "Add"
                                                             and runs_torchs_arithmetic(scores, facts))
    if axis == rank - 1 and not masked:
        return [make_op("Softmax", [node.input[0]], [node.output[0]], node.name, axis=axis)]
    return [make_op("ATen", [node.input[0]], [node.output[0]], node.name, **imported_form("softmax", dim=axis))]


# ONNX < 13: 2-D at the axis (the last only). Double: onnxruntime's double kernel gives [-inf, NaN] for [0, inf], its
# float kernel and torch's [NaN, NaN]; no oracle
@declare("LogSoftmax", Form((1, 12), {"axis": ANY}), Form((13, NEWEST), {"axis": ANY}), types=FLOAT, rank=same_rank,
         dims=same_dims)
def _log_softmax(node, facts, opset, fresh):
    """torch's log_softmax by the ATen op (Caffe2 has no LogSoftmax, and Log of its Softmax gives -inf where the
    probability underflows). From opset 13 on along any one axis; before it ONNX flattens the input to 2-D at ``axis``
    (default 1) and normalises each row: the last axis is that already, another is Caffe2's Flatten at ``axis``,
    log_softmax of each row, and a Reshape back to the input's shape."""
    rank = facts.rank(node.input[0])
    axis = int(attribute(node, "axis", 1 if opset < 13 else -1))
    if rank is None:
        raise refuse(node, opset, "the rank of input {!r} is unknown".format(node.input[0]))
    (axis,) = normalized(node, opset, [axis], rank)
    if opset >= 13 or axis == rank - 1:
        return [make_op("ATen", [node.input[0]], [node.output[0]], node.name, operator="log_softmax", dim=axis)]
    rows, normalised, shape = fresh(), fresh(), fresh()
    return [make_op("Flatten", [node.input[0]], [rows], node.name, axis=axis),
            make_op("ATen", [rows], [normalised], node.name, operator="log_softmax", dim=1),
            make_op("Shape", [node.input[0]], [shape], node.name),
            make_op("Reshape", [normalised, shape], [node.output[0], fresh()], node.name)]
