"""Elementwise maps of one input (and Xor): Caffe2's kernels where its converter translates them right, else
torch's kernel by the ATen op, bit for bit torch's."""
from typing import Callable, FrozenSet, NamedTuple, Tuple

from onnx import TensorProto

from ..run_checks import make_op
from .contract import (ANY, AT_MOST_FIRST, BOOL, BROADCAST, FLOAT, NEWEST, NUMBERS, SMALL_INTS, ZERO_ONE, Form,
                       broadcast_dims, broadcast_rank, declare, same_dims, same_rank, stock)
from .helpers import FLOATS, attribute, refuse

# Caffe2's transcendental and activation kernels are float only
stock("Sqrt", Form((7, NEWEST)), types=frozenset([TensorProto.FLOAT, TensorProto.DOUBLE]), rank=same_rank,
      dims=same_dims, elements=AT_MOST_FIRST)
for _op_type in ("Exp", "Log", "Erf", "Tanh", "Relu", "Sigmoid", "Reciprocal"):
    stock(_op_type, Form((7, NEWEST)), types=FLOAT, rank=same_rank, dims=same_dims, elements=AT_MOST_FIRST)
# torch's hardsigmoid, and its hardswish before opset 14
stock("HardSigmoid", Form((6, NEWEST), {"alpha": ANY, "beta": ANY}), types=FLOAT, rank=same_rank, dims=same_dims,
      elements=AT_MOST_FIRST)

#: ONNX's SELU constants (its defaults of alpha and gamma)
_SELU = (1.67326319217681884765625, 1.05070102214813232421875)
_FLOAT_DOUBLE = frozenset([TensorProto.FLOAT, TensorProto.DOUBLE])


class _Torch(NamedTuple):
    """An ONNX elementwise op run by torch's kernel."""
    #: the first opset of its form (it covers up to `NEWEST`)
    first: int
    #: the attributes it takes (any value)
    attributes: Tuple[str, ...]
    #: the element types it runs right on: torch's kernels have no float16 on CPU (Sign's NaN mask and Softsign's sum
    #: differ in it); double only where onnxruntime has a double kernel to prove it
    types: FrozenSet[int]
    #: torch's ATen operator
    operator: str
    #: its arguments from the node's attributes
    arguments: Callable = lambda node: {}
    #: Caffe2's operator for float32 (bool: Xor), where it is right (within 2e-6 relative of onnxruntime, ±inf, NaN
    #: and -0.0 included): the portable target's form, which builds without ATen
    stock: str = ""
    #: its arguments from the node's attributes
    stock_arguments: Callable = lambda node: {}


_ELEMENTWISE = {
    "Sign": _Torch(9, (), NUMBERS | SMALL_INTS, "sign"),
    "Ceil": _Torch(6, (), _FLOAT_DOUBLE, "ceil"), "Floor": _Torch(6, (), _FLOAT_DOUBLE, "floor"),
    "Round": _Torch(11, (), _FLOAT_DOUBLE, "round"),  # half to even, as ONNX
    "Sin": _Torch(7, (), _FLOAT_DOUBLE, "sin", stock="Sin"), "Cos": _Torch(7, (), FLOAT, "cos", stock="Cos"),
    "Tan": _Torch(7, (), FLOAT, "tan", stock="Tan"), "Asin": _Torch(7, (), FLOAT, "asin", stock="Asin"),
    "Acos": _Torch(7, (), FLOAT, "acos", stock="Acos"), "Atan": _Torch(7, (), FLOAT, "atan", stock="Atan"),
    "Sinh": _Torch(9, (), FLOAT, "sinh", stock="Sinh"), "Cosh": _Torch(9, (), FLOAT, "cosh", stock="Cosh"),
    "Asinh": _Torch(9, (), FLOAT, "asinh"),
    "Acosh": _Torch(9, (), FLOAT, "acosh"), "Atanh": _Torch(9, (), FLOAT, "atanh"),
    "IsNaN": _Torch(9, (), frozenset([TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16]), "isnan"),
    "Elu": _Torch(6, ("alpha",), FLOAT, "elu", lambda node: {"alpha": float(attribute(node, "alpha", 1.0))},
                  stock="Elu", stock_arguments=lambda node: {"alpha": float(attribute(node, "alpha", 1.0))}),
    "Selu": _Torch(6, ("alpha", "gamma"), FLOAT, "elu", lambda node: {
        "alpha": float(attribute(node, "alpha", _SELU[0])), "scale": float(attribute(node, "gamma", _SELU[1])),
        "input_scale": 1.0}, stock="Selu", stock_arguments=lambda node: {
            "alpha": float(attribute(node, "alpha", _SELU[0])), "scale": float(attribute(node, "gamma", _SELU[1]))}),
    "Celu": _Torch(12, ("alpha",), FLOAT, "celu", lambda node: {"alpha": float(attribute(node, "alpha", 1.0))}),
    "LeakyRelu": _Torch(6, ("alpha",), FLOAT, "leaky_relu",
                        lambda node: {"negative_slope": float(attribute(node, "alpha", 0.01))}, stock="LeakyRelu",
                        stock_arguments=lambda node: {"alpha": float(attribute(node, "alpha", 0.01))}),
    "ThresholdedRelu": _Torch(10, ("alpha",), FLOAT, "threshold",
                              lambda node: {"threshold": float(attribute(node, "alpha", 1.0)), "value": 0.0}),
    "Xor": _Torch(7, (), BOOL, "logical_xor", stock="Xor"),  # both broadcast as numpy
    # log(exp(x) + 1): torch's is x above 20, where they agree in float32 and float64 within 1e-8 relative
    "Softplus": _Torch(1, (), FLOAT, "softplus", lambda node: {"beta": 1.0, "threshold": 20.0}),
}
#: IsInf's (detect_negative, detect_positive) -> torch's operator
_IS_INF = {(1, 1): "isinf", (0, 1): "isposinf", (1, 0): "isneginf"}


@declare("IsInf", Form((10, NEWEST), {"detect_negative": ZERO_ONE, "detect_positive": ZERO_ONE}),
         types=_FLOAT_DOUBLE, rank=same_rank, dims=same_dims)
def _elementwise(node, facts, opset, fresh):
    """An elementwise op by torch's kernel (`_ELEMENTWISE`; IsInf by which infinities it detects), or for the portable
    target by Caffe2's where its entry names one and the input is float32."""
    if node.op_type == "IsInf":
        detect = (int(attribute(node, "detect_negative", 1)), int(attribute(node, "detect_positive", 1)))
        if detect not in _IS_INF:
            raise refuse(node, opset, "detect_negative=0 with detect_positive=0 has no translation")
        operator, args = _IS_INF[detect], {}
    else:
        torch_op = _ELEMENTWISE[node.op_type]
        operator, args = torch_op.operator, torch_op.arguments(node)
        if not facts.torch_kernels and torch_op.stock and facts.elem_type(node.input[0]) in (TensorProto.FLOAT,
                                                                                               TensorProto.BOOL):
            return [make_op(torch_op.stock, list(node.input), [node.output[0]], node.name,
                            **torch_op.stock_arguments(node))]
    if node.op_type == "Sign" and facts.elem_type(node.input[0]) in FLOATS:
        return _nan_kept(node, "sign", {}, float("nan"), fresh)
    if node.op_type == "ThresholdedRelu":
        return _nan_kept(node, operator, args, 0.0, fresh)
    return [make_op("ATen", list(node.input), [node.output[0]], node.name, operator=operator, **args)]


for _op_type, _torch_op in _ELEMENTWISE.items():
    declare(_op_type, Form((_torch_op.first, NEWEST), {name: ANY for name in _torch_op.attributes}),
            types=_torch_op.types, rank=broadcast_rank if _op_type == "Xor" else same_rank,
            dims=broadcast_dims if _op_type == "Xor" else same_dims,
            elements=BROADCAST if _op_type == "Xor" else AT_MOST_FIRST)(_elementwise)


def _nan_kept(node, operator, args, value, fresh):
    """torch's ``operator`` with ``value`` where the input is NaN: ONNX's Sign of NaN is NaN (torch's 0, numpy's
    NaN), its ThresholdedRelu's 0 (``x > alpha``; torch's threshold keeps NaN)."""
    computed, nan = fresh(), fresh()
    return [make_op("ATen", [node.input[0]], [computed], node.name, operator=operator, **args),
            make_op("ATen", [node.input[0]], [nan], node.name, operator="isnan"),
            make_op("ATen", [computed, nan], [node.output[0]], node.name, operator="masked_fill", value=value)]


@declare("HardSwish", Form((14, NEWEST)), types=FLOAT, rank=same_rank, dims=same_dims)
def _hard_swish(node, facts, opset, fresh):
    """ONNX's x * HardSigmoid(x) (alpha 1/6, beta 0.5), as defined: torch's hardswish overflows x * (x + 3) / 6."""
    gate = fresh()
    return [make_op("HardSigmoid", [node.input[0]], [gate], node.name, alpha=1 / 6, beta=0.5),
            make_op("Mul", [node.input[0], gate], [node.output[0]], node.name)]


@declare("Softsign", Form((1, NEWEST)), types=FLOAT, rank=same_rank, dims=same_dims)
def _softsign(node, facts, opset, fresh):
    """ONNX's x / (1 + |x|), as defined (NaN for ±inf), by torch's kernels; Caffe2's for the portable target (within
    2e-6 relative of onnxruntime, ±inf, NaN and -0.0 included)."""
    if not facts.torch_kernels:
        return [make_op("Softsign", [node.input[0]], [node.output[0]], node.name)]
    magnitude, denominator = fresh(), fresh()
    return [make_op("ATen", [node.input[0]], [magnitude], node.name, operator="abs"),
            make_op("ATen", [magnitude], [denominator], node.name, operator="add", other=1.0),
            make_op("ATen", [node.input[0], denominator], [node.output[0]], node.name, operator="div")]
