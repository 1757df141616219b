"""InstanceNormalization, as Caffe2's InstanceNorm (NCHW: the statistics of each (n, c) over the other dims)."""
from onnx import TensorProto

from ..run_checks import make_op
from .contract import ANY, FLOAT, NEWEST, Form, declare, label, same_rank
from .helpers import attribute, int64_scalar, refuse


@declare("InstanceNormalization", Form((6, NEWEST), {"epsilon": ANY}), types=FLOAT, inputs=("input", "scale", "B"),
         rank=same_rank)
def _instance_norm(node, facts, opset, fresh):
    """Caffe2's InstanceNorm, which equals onnxruntime on (N, C, D1, ...) of rank 3 and more, with ±inf and NaN,
    but dies (SIGFPE, SIGSEGV) on an empty batch or spatial dim and fails on an empty channel dim: an empty dim the
    model states is refused, one it leaves symbolic is checked by an Assert naming the node when the net runs."""
    data, scale, bias = node.input
    if any(facts.elem_type(name) != TensorProto.FLOAT for name in (scale, bias)):
        raise refuse(node, opset, "scale {!r} and B {!r} must be float as input (Caffe2's InstanceNorm is "
                                   "float)".format(scale, bias))
    dims = facts.dims(data)
    if dims is None or len(dims) < 3:  # onnxruntime refuses rank 2; Caffe2's kernel reads a rank it is not given
        raise refuse(node, opset, "input 0 {!r} has dims {}; InstanceNormalization needs (N, C, D1, ...), and the "
                                   "model must state its rank".format(data, dims))
    if 0 in dims:
        raise refuse(node, opset, "input 0 {!r} has dims {}; Caffe2's InstanceNorm dies on an empty dim".format(
            data, dims))
    epsilon = float(attribute(node, "epsilon", 1e-5))
    if not epsilon >= 0:
        raise refuse(node, opset, "epsilon {} is negative (a variance plus it may be negative)".format(epsilon))
    ops = []
    if None in dims:
        shape, zero, filled = fresh(), fresh(), fresh()
        ops = [make_op("Shape", [data], [shape], node.name), int64_scalar(node, zero, 0),
               make_op("GT", [shape, zero], [filled], node.name),
               make_op("Assert", [filled], [], node.name, error_msg="{}: input 0 {!r} has an empty dim, on which "
                       "Caffe2's InstanceNorm dies".format(label(node, opset), data))]
    return ops + [make_op("InstanceNorm", [data, scale, bias], [node.output[0]], node.name, epsilon=epsilon,
                          order="NCHW")]
