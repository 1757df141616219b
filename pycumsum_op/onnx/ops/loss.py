"""The losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (the latter of torch's log_softmax over axis 1),
by torch's ``nll_loss_forward`` / ``nll_loss2d_forward`` kernels through the ATen op."""
from caffe2.proto import caffe2_pb2
from onnx import TensorProto

from ..run_checks import declared, make_op, refusal
from .contract import ANY, DECLARATIONS, FLOAT, NEWEST, Form, declare, given, label
from .helpers import attribute, checked_type, constant_blob, int64_scalar, rank_checked, refuse

_LOSS = {"reduction": frozenset(["none", "sum", "mean"]), "ignore_index": ANY}
_TARGETS = frozenset([TensorProto.INT32, TensorProto.INT64])
#: ``reduction`` -> torch's: "none" is 0, "sum" 2; "mean" is the sum over the kernel's total weight, divided here
#: (torch's kernel leaves the sum undivided where the total weight is 0, ONNX divides: 0 / 0 is NaN)
_TORCH_REDUCTION = {"none": 0, "sum": 2, "mean": 2}


def _reduction(node) -> str:
    value = attribute(node, "reduction", "mean")
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _loss_rank(node, known, facts):
    """The loss's rank: the target's (the input's less one) for reduction "none", else 0 (a scalar). A
    SoftmaxCrossEntropyLoss that gives log_prob too has outputs of two ranks: None."""
    if len(node.output) > 1 and node.output[1]:
        return None
    if _reduction(node) != "none":
        return 0
    rank = known(node.input[0])
    return None if rank is None else rank - 1


@declare("NegativeLogLikelihoodLoss", Form((12, NEWEST), _LOSS),
         types=frozenset([TensorProto.FLOAT, TensorProto.DOUBLE]), inputs=("input", "target", "weight"),
         rank=_loss_rank)
# Double, as LogSoftmax: onnxruntime's double log_softmax gives -46.05 where a NaN should make NaN; no oracle
@declare("SoftmaxCrossEntropyLoss", Form((12, NEWEST), _LOSS), types=FLOAT, inputs=("scores", "labels", "weights"),
         rank=_loss_rank)
def _loss(node, facts, opset, fresh):
    """torch's ``nll_loss_forward`` (input of rank 2) or ``nll_loss2d_forward`` (rank 4; any other rank reshaped to
    (N, C, d1 * ... * dk, 1) and its target to (N, d1 * ... * dk, 1), the "none" loss reshaped back to the
    target's shape), with weights of ones where none are given; SoftmaxCrossEntropyLoss first takes torch's
    log_softmax over axis 1 (its log_prob). The kernel sums the weighted losses and their weights; "mean" is their
    quotient, ONNX's sum(w[t] * l) / sum(w[t]) over the entries not ignored, NaN where that is 0 / 0 (every entry
    ignored, or none at all). torch's kernel fails on a target outside [0, C) and ONNX leaves one undefined, so the
    net is stopped, naming the node, on a target that is neither in [0, C) nor ``ignore_index``; the target's and
    the weights' dims are checked against the input's where the model does not prove them."""
    if not facts.torch_kernels:
        raise refuse(node, opset, "the portable target runs no torch kernel, and Caffe2 has no operator computing "
                                  "ONNX's {}".format(node.op_type))
    names = DECLARATIONS[node.op_type].inputs
    data, target = node.input[0], node.input[1]
    rank = facts.rank(data)
    if rank is None:
        raise refuse(node, opset, "the rank of input 0 ({}) {!r} is unknown".format(names[0], data))
    if rank < 2:
        raise refuse(node, opset, "input 0 ({}) {!r} has rank {}; the loss takes (N, C) or (N, C, d1, ..., dk)".format(
            names[0], data, rank))
    elem_type = facts.elem_type(data)
    target_type = checked_type(node, opset, facts, target, "input 1 ({})".format(names[1]), _TARGETS,
                               "ONNX's {} takes INT32 or INT64 targets".format(node.op_type))
    reduction = _reduction(node)
    ignore_index = attribute(node, "ignore_index")
    ops = []
    scores = data
    if node.op_type == "SoftmaxCrossEntropyLoss":
        scores = node.output[1] if len(node.output) > 1 and node.output[1] else fresh()
        ops.append(make_op("ATen", [data], [scores], node.name, operator="log_softmax", dim=1))
    ops += _dims_checked(node, opset, facts, 1, target, list(range(rank))[:1] + list(range(2, rank)), fresh)
    labels = target
    if target_type == TensorProto.INT32:  # torch's kernels take int64 targets
        labels = fresh()
        ops.append(make_op("Cast", [target], [labels], node.name, to=caffe2_pb2.TensorProto.INT64))
    ops += _targets_checked(node, opset, data, labels, ignore_index, fresh)
    if given(node, 2):
        weights = node.input[2]
        checked_type(node, opset, facts, weights, "input 2 ({})".format(names[2]), [elem_type],
                     "ONNX's {} takes weights of its input's type".format(node.op_type))
        ops += _dims_checked(node, opset, facts, 2, weights, [1], fresh)
    else:  # torch's kernels resolve through the ATen op only with weights given
        weights, classes = fresh(), fresh()
        ops += [make_op("Shape", [data], [classes], node.name, axes=[1]),
                make_op("ConstantFill", [classes], [weights], node.name, input_as_shape=1, value=1.0,
                        dtype=caffe2_pb2.TensorProto.DOUBLE if elem_type == TensorProto.DOUBLE else
                        caffe2_pb2.TensorProto.FLOAT)]
    kernel = "nll_loss_forward" if rank == 2 else "nll_loss2d_forward"
    if rank not in (2, 4):
        more, scores, labels = _as_images(node, scores, labels, rank, fresh)
        ops += more
    loss = node.output[0] if reduction == "sum" or (reduction == "none" and rank in (2, 4)) else fresh()
    total = fresh()
    # no target equals a negative ignore_index where the model gives none: the check above holds them in [0, C)
    ops.append(make_op("ATen", [scores, labels, weights], [loss, total], node.name, operator=kernel,
                       reduction=_TORCH_REDUCTION[reduction],
                       ignore_index=int(ignore_index) if ignore_index is not None else -1))
    if reduction == "mean":
        ops.append(make_op("Div", [loss, total], [node.output[0]], node.name))
    elif reduction == "none" and rank not in (2, 4):
        shape = fresh()
        ops += [make_op("Shape", [target], [shape], node.name),
                make_op("Reshape", [loss, shape], [node.output[0], fresh()], node.name)]
    return ops


def _dims_checked(node, opset, facts, position: int, name: str, axes, fresh) -> list:
    """Ops stopping the net unless input ``position`` (blob ``name``) has the dims of input 0 at ``axes`` (the
    target: all but C; the weights: C alone): torch's kernels would fail on other dims, not name the node. Where the
    model proves both inputs' dims (`declared`), they are compared here, and a mismatch refused."""
    data = node.input[0]
    what = "input {} ({}) {!r}".format(position, DECLARATIONS[node.op_type].inputs[position], name)
    dims, wanted = facts.dims(name), facts.dims(data)
    if dims is not None and len(dims) != len(axes):
        raise refuse(node, opset, "{} has rank {}; ONNX's {} wants {}".format(what, len(dims), node.op_type,
                                                                           len(axes)))
    if declared(facts, name) and declared(facts, data) and None not in list(dims) + list(wanted):
        if list(dims) != [wanted[axis] for axis in axes]:
            raise refuse(node, opset, "{} has dims {}, input 0 {!r} has {}; ONNX's {} wants {}".format(
                what, list(dims), data, list(wanted), node.op_type, [wanted[axis] for axis in axes]))
        return []
    ops = rank_checked(node, opset, position, name, facts, fresh, len(axes))
    shape, expected, same = fresh(), fresh(), fresh()
    return ops + [make_op("Shape", [name], [shape], node.name), make_op("Shape", [data], [expected], node.name,
                                                                         axes=list(axes)),
                  make_op("EQ", [shape, expected], [same], node.name),
                  refusal(node.name, same, "{}: {} does not have the dims of input 0 {!r} at axes {}".format(
                      label(node, opset), what, data, list(axes)), shape)]


def _targets_checked(node, opset, data: str, labels: str, ignore_index, fresh) -> list:
    """Ops stopping the net unless every target (int64 blob ``labels``) lies in [0, C) or equals ``ignore_index``."""
    classes, zero, low, high, inside = fresh(), fresh(), fresh(), fresh(), fresh()
    ops = [make_op("Shape", [data], [classes], node.name, axes=[1]), int64_scalar(node, zero, 0),
           make_op("GE", [labels, zero], [low], node.name), make_op("LT", [labels, classes], [high], node.name),
           make_op("And", [low, high], [inside], node.name)]
    if ignore_index is not None:
        ignored, either, kept = fresh(), fresh(), inside
        ops += [int64_scalar(node, ignored, int(ignore_index)), make_op("EQ", [labels, ignored], [either], node.name)]
        inside = fresh()
        ops.append(make_op("Or", [kept, either], [inside], node.name))
    return ops + [refusal(node.name, inside, "{}: a target of input 1 {!r} is outside [0, C) (C: dim 1 of input 0 "
                                             "{!r}){}".format(label(node, opset), node.input[1], data,
                                                              "" if ignore_index is None else
                                                              " and not ignore_index {}".format(int(ignore_index))),
                          labels)]


def _as_images(node, scores: str, labels: str, rank: int, fresh) -> tuple:
    """(ops, scores, labels): an input of rank 3 or above 4 as the (N, C, D, 1) images torch's 2-D kernel takes
    (D: d1 * ... * dk, counted from the dims at run time, so a 0 among them needs no -1), its target as (N, D, 1)."""
    leading, batch, spatial, count, images, flat = fresh(), fresh(), fresh(), fresh(), fresh(), fresh()
    image_shape, flat_shape = fresh(), fresh()
    one, fill = constant_blob([1], fresh)
    ops = [fill, make_op("Shape", [scores], [leading], node.name, axes=[0, 1]),
           make_op("Shape", [scores], [batch], node.name, axes=[0]),
           make_op("Shape", [scores], [spatial], node.name, axes=list(range(2, rank))),
           make_op("ATen", [spatial], [count], node.name, operator="prod", dim=0, keepdim=True),
           make_op("Concat", [leading, count, one], [image_shape, fresh()], node.name, axis=0),
           make_op("Concat", [batch, count, one], [flat_shape, fresh()], node.name, axis=0),
           make_op("Reshape", [scores, image_shape], [images, fresh()], node.name),
           make_op("Reshape", [labels, flat_shape], [flat, fresh()], node.name)]
    return ops, images, flat
