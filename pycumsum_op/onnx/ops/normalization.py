"""InstanceNormalization: the statistics of each (n, c) over the other dims, in two passes of Caffe2's ReduceMean.

Caffe2's InstanceNorm computes the variance as E[x**2] - E[x]**2 in float32, which cancels: an instance of mean 1000
and deviation 0.01 came out up to 7 off onnxruntime's (which subtracts the mean first), and one whose squares
overflow float32 came out 0 or NaN."""
from onnx import TensorProto

from ..run_checks import make_op
from .contract import ANY, FLOAT, NEWEST, Form, declare, label, same_rank
from .helpers import attribute, int64_scalar, refuse


@declare("InstanceNormalization", Form((6, NEWEST), {"epsilon": ANY}), types=FLOAT, inputs=("input", "scale", "B"),
         rank=same_rank)
def _instance_norm(node, facts, opset, fresh):
    """(x - mean) / sqrt(variance + epsilon) * scale + B on (N, C, D1, ...) of rank 3 and more, the variance that
    of the centred values, rounded as onnxruntime rounds it. An empty dim, on which ONNX's mean has no value (and
    Caffe2's InstanceNorm died), is refused where the model states it and stopped by an Assert naming the node where
    it is symbolic."""
    data, scale, bias = node.input
    if any(facts.elem_type(name) != TensorProto.FLOAT for name in (scale, bias)):
        raise refuse(node, opset, "scale {!r} and B {!r} must be float as input (Caffe2's ReduceMean is "
                                   "float)".format(scale, bias))
    dims = facts.dims(data)
    if dims is None or len(dims) < 3:  # onnxruntime refuses rank 2; Caffe2's kernel reads a rank it is not given
        raise refuse(node, opset, "input 0 {!r} has dims {}; InstanceNormalization needs (N, C, D1, ...), and the "
                                   "model must state its rank".format(data, dims))
    if 0 in dims:
        raise refuse(node, opset, "input 0 {!r} has dims {}; an empty dim leaves an instance without a mean".format(
            data, dims))
    epsilon = float(attribute(node, "epsilon", 1e-5))
    if not epsilon >= 0:
        raise refuse(node, opset, "epsilon {} is negative (a variance plus it may be negative)".format(epsilon))
    ops = []
    if None in dims:
        shape, zero, filled = fresh(), fresh(), fresh()
        ops = [make_op("Shape", [data], [shape], node.name), int64_scalar(node, zero, 0),
               make_op("GT", [shape, zero], [filled], node.name),
               make_op("Assert", [filled], [], node.name, error_msg="{}: input 0 {!r} has an empty dim, which leaves "
                       "an instance without a mean".format(label(node, opset), data))]
    spatial, channels = list(range(2, len(dims))), [-1] + [1] * (len(dims) - 2)
    mean, centered, squares, variance, eps, widened, deviation, inverse = (fresh() for _ in range(8))
    per_channel = {name: (fresh(), fresh()) for name in (scale, bias)}
    channel_scale, moved, channel_shift, scaled = fresh(), fresh(), fresh(), fresh()
    ops += [make_op("ReduceMean", [data], [mean], node.name, axes=spatial, keepdims=1),
            make_op("Sub", [data, mean], [centered], node.name),
            make_op("Mul", [centered, centered], [squares], node.name),
            make_op("ReduceMean", [squares], [variance], node.name, axes=spatial, keepdims=1),
            make_op("ConstantFill", [], [eps], node.name, shape=[], value=epsilon),
            make_op("Add", [variance, eps], [widened], node.name),
            make_op("Sqrt", [widened], [deviation], node.name),
            make_op("Reciprocal", [deviation], [inverse], node.name)]
    ops += [make_op("Reshape", [name], list(made), node.name, shape=channels) for name, made in per_channel.items()]
    # x * s + (B - mean * s), s = scale / sqrt(variance + epsilon): onnxruntime's order of rounding
    return ops + [make_op("Mul", [inverse, per_channel[scale][0]], [channel_scale], node.name),
                  make_op("Mul", [mean, channel_scale], [moved], node.name),
                  make_op("Sub", [per_channel[bias][0], moved], [channel_shift], node.name),
                  make_op("Mul", [data, channel_scale], [scaled], node.name),
                  make_op("Add", [scaled, channel_shift], [node.output[0]], node.name)]
