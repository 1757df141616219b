"""Arithmetic, comparisons and logic on numbers, broadcast as numpy does (Caffe2's elementwise ops have no legacy
broadcast=1 here): Caffe2's kernels, or torch's (the ATen op) where Caffe2's are wrong or slow."""
import numpy as np
from caffe2.proto import caffe2_pb2
from onnx import TensorProto

from ...lowering.aten_gradient import imported_form
from ..run_checks import make_op
from .contract import (ANY, AT_MOST_FIRST, BOOL, BROADCAST, FLOAT, MOVED, NEWEST, NUMBERS, SMALL_INTS, Form,
                       broadcast_dims, broadcast_rank, declare, given, same_dims, same_rank, stock)
from .helpers import CAFFE2_NUMBERS, CAFFE2_TYPES, FLOATS, NUMPY_FLOATS, attribute, extreme, refuse, type_text

stock("Or", Form((7, NEWEST)), types=BOOL, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
stock("And", Form((7, NEWEST)), types=BOOL, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
stock("Equal", Form((7, NEWEST)), types=NUMBERS | BOOL, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
stock("Less", Form((7, NEWEST)), types=NUMBERS, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
stock("Greater", Form((7, NEWEST)), types=NUMBERS, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
stock("Not", Form((7, NEWEST)), types=BOOL, rank=same_rank, dims=same_dims, elements=AT_MOST_FIRST)


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


def runs_torchs_arithmetic(node, facts) -> bool:
    """Whether `_arithmetic` runs Add/Sub/Mul/Div ``node`` by torch's kernel: float operands, a target that allows the
    ATen op, and an operand broadcast (`_broadcasts`) or a Div whose dividend may be."""
    if not facts.torch_kernels or not all(facts.elem_type(name) in FLOATS[1:] for name in node.input):
        return False
    dims = [facts.known_dims(name) for name in node.input]
    return (node.op_type == "Div" and not _covers(*dims)) or _broadcasts(*dims)


@declare("Add", Form((7, NEWEST)), types=NUMBERS, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
@declare("Sub", Form((7, NEWEST)), types=NUMBERS, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
@declare("Mul", Form((7, NEWEST)), types=NUMBERS, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
@declare("Div", Form((7, NEWEST)), types=NUMBERS, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
def _arithmetic(node, facts, opset, fresh):
    """Add, Sub, Mul, Div: Caffe2's kernels broadcast as numpy does, but take several times torch's time where an
    operand is broadcast (`_broadcasts`: a scalar, a bias, an attention mask of (B, 1, 1, S) added to scores of
    (B, h, S, S), whose index Caffe2's kernel walks entry by entry); and Caffe2's Div of a dividend smaller than the
    result multiplies by the divisor's reciprocal, which overflows for a subnormal divisor (0 / 1e-45 gave NaN) and
    rounds twice. Float operands then go to torch's kernel through the ATen op, where the target allows it (IEEE's
    sum, difference, product and quotient: onnxruntime's values); for the portable target such a dividend is first
    multiplied by ones of the divisor's shape. Operands of the same dims keep Caffe2's kernel, as fast as torch's
    there (the ATen op allocates its output on every run). Each of torch's forms has a Caffe2 gradient (`imported_form`:
    Caffe2's gradient of the same arithmetic)."""
    floats = all(facts.elem_type(name) in FLOATS[1:] for name in node.input)
    broadcast_dividend = node.op_type == "Div" and floats and not _covers(*(facts.known_dims(name)
                                                                            for name in node.input))
    if runs_torchs_arithmetic(node, facts):
        return [make_op("ATen", list(node.input), [node.output[0]], node.name, **imported_form(node.op_type.lower()))]
    if broadcast_dividend:  # stock operators only: the dividend first given the result's shape (x * 1 is x)
        dividend, divisor = node.input
        ones, widened = fresh(), fresh()
        c2_type = caffe2_pb2.TensorProto.DOUBLE if facts.elem_type(divisor) == TensorProto.DOUBLE else \
            caffe2_pb2.TensorProto.FLOAT
        return [make_op("ConstantFill", [divisor], [ones], node.name, value=1.0, dtype=c2_type),
                make_op("Mul", [dividend, ones], [widened], node.name),
                make_op("Div", [widened, divisor], [node.output[0]], node.name)]
    return [make_op(node.op_type, list(node.input), [node.output[0]], node.name)]


@declare("Pow", Form((7, NEWEST)), types=FLOAT, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
def _pow(node, facts, opset, fresh):
    base, exponent = node.input
    base_type, exponent_type = facts.elem_type(base), facts.elem_type(exponent)
    if base_type not in FLOATS[1:]:
        raise refuse(node, opset, "the base {!r} is {}, only float and double bases are translated".format(
            base, type_text(base_type)))
    value = facts.constant(exponent)
    base_rank = facts.rank(base)
    if value is not None and value.size == 1 and value.ndim <= (0 if base_rank is None else base_rank):
        if float(value.reshape(())) == 2.0:  # a norm's square: one product, as torch and onnxruntime compute it
            return [make_op("Mul", [base, base], [node.output[0]], node.name)]
        return [make_op("Pow", [base], [node.output[0]], node.name, exponent=float(value.reshape(())))]
    if exponent_type != base_type:
        raise refuse(node, opset, "a tensor exponent of another type than the base ({} vs {})".format(
            TensorProto.DataType.Name(exponent_type) if exponent_type else "unknown",
            TensorProto.DataType.Name(base_type)))
    return [make_op("ATen", [base, exponent], [node.output[0]], node.name, operator="pow")]


# Caffe2's Abs and Negative are float-only; ATen has no uint16
@declare("Abs", Form((6, NEWEST)), types=MOVED - {TensorProto.UINT16, TensorProto.BOOL}, rank=same_rank, dims=same_dims,
         elements=AT_MOST_FIRST)
@declare("Neg", Form((6, NEWEST)),
         types=MOVED - {TensorProto.INT16, TensorProto.UINT8, TensorProto.UINT16, TensorProto.BOOL},
         rank=same_rank, dims=same_dims,
         elements=AT_MOST_FIRST)
def _sign_op(node, facts, opset, fresh):
    """Abs and Neg: Caffe2's Abs is float-only, torch's takes integers too; Caffe2's Negative takes float, double,
    int32 and int64, and its Sign too: the portable target's Abs of int32 and int64 is x times its sign (of a double
    it would be -0.0 at -0.0)."""
    elem_type, data, out = facts.elem_type(node.input[0]), node.input[0], node.output[0]
    if elem_type == TensorProto.FLOAT:
        return [make_op({"Abs": "Abs", "Neg": "Negative"}[node.op_type], [data], [out], node.name)]
    if facts.torch_kernels or elem_type not in CAFFE2_NUMBERS or (node.op_type, elem_type) == ("Abs",
                                                                                           TensorProto.DOUBLE):
        return [make_op("ATen", [data], [out], node.name, operator=node.op_type.lower())]
    if node.op_type == "Neg":
        return [make_op("Negative", [data], [out], node.name)]
    sign = fresh()
    return [make_op("Sign", [data], [sign], node.name), make_op("Mul", [data, sign], [out], node.name)]


# Caffe2's Clip (float) before opset 11; then torch's maximum/minimum, bounds constant or fed. ONNX's Clip-11 is
# floating only (onnxruntime: float and float16); from 12 on onnxruntime's float16 kernel reads an absent max as 0,
# so float16 has no oracle there
@declare("Clip", Form((6, 10), {"min": ANY, "max": ANY}),
         Form((11, 11), types=frozenset([TensorProto.FLOAT, TensorProto.FLOAT16])),
         Form((12, NEWEST), types=NUMBERS | {TensorProto.INT8, TensorProto.UINT8}), types=FLOAT, rank=same_rank,
         dims=same_dims)
def _clip(node, facts, opset, fresh):
    """Caffe2's Clip for float with constant bounds (attributes before opset 11, inputs after); from opset 11 on any
    other type, or a bound fed at run time, is min(max(x, min), max) by torch's maximum and minimum (the ATen op,
    the bounds as tensors of x's type, so no value passes through a float32 argument). As onnxruntime: a min above
    the max gives the max, a NaN x stays NaN, a NaN bound is no bound (replaced by -inf / inf), and an absent bound
    of a float type is its lowest or max finite value (ONNX's Clip-6 defaults: ±inf become finite). The portable
    target takes `extreme`'s stock form, and Caffe2's IsNaN and Where for a NaN bound."""
    data, elem_type = node.input[0], facts.elem_type(node.input[0])
    if opset < 11:
        if elem_type != TensorProto.FLOAT:
            raise refuse(node, opset, "only float inputs are translated before opset 11 (Caffe2's Clip is float)")
        bounds = {name: float(attribute(node, name)) for name in ("min", "max")
                  if attribute(node, name) is not None}
        return [make_op("Clip", [data], [node.output[0]], node.name, **bounds)]
    bounds = {"min": node.input[1] if given(node, 1) else None, "max": node.input[2] if given(node, 2) else None}
    if elem_type == TensorProto.FLOAT16 and None in bounds.values():
        # ONNX's definition clips to float16's lowest / max finite value there; onnxruntime keeps ±inf at opset 11
        # (and reads an absent max as 0 from 12 on): no oracle to prove either against
        raise refuse(node, opset, "a float16 input with a bound absent: onnxruntime and ONNX's definition disagree "
                                   "on what an absent bound clips ±inf to")
    rank = facts.rank(data)
    for position, (what, name) in enumerate(sorted(bounds.items(), key=lambda item: item[0] != "min"), 1):
        # onnxruntime keeps x's shape for a bound of one element; torch broadcasts it, so its dims must not add any
        dims = facts.dims(name) if name else []
        if dims is None or any(dim != 1 for dim in dims) or (dims and (rank is None or len(dims) > rank)):
            raise refuse(node, opset, "input {} ({}) {!r} has dims {}; only a scalar bound (or one of 1-dims no "
                                       "more than x's rank) is translated".format(position, what, name, dims))
    constants = {what: None if name is None else facts.constant(name) for what, name in bounds.items()}
    if elem_type == TensorProto.FLOAT and all(name is None or constants[what] is not None
                                              for what, name in bounds.items()):
        values = {what: float(value.reshape(())) for what, value in constants.items() if value is not None}
        return [make_op("Clip", [data], [node.output[0]], node.name, **values)]
    floating = elem_type in FLOATS
    steps = [(what, operator, infinity) for what, operator, infinity in (("min", "maximum", -np.inf),
                                                                        ("max", "minimum", np.inf))
             if bounds[what] is not None or floating]
    ops, current = [], data
    for number, (what, operator, infinity) in enumerate(steps):
        name, target = bounds[what], node.output[0] if number == len(steps) - 1 else fresh()
        if name is None and not facts.torch_kernels and elem_type == TensorProto.FLOAT:
            name = fresh()
            ops.append(make_op("GivenTensorFill", [], [name], node.name, shape=[],
                               values=[float(np.finfo(np.float32).max) * (-1 if what == "min" else 1)]))
        elif name is None:  # onnxruntime's absent bound of a float type: its lowest or max finite value
            name, finite = fresh(), fresh()
            if elem_type == TensorProto.DOUBLE:  # the double's next to ∓inf: an op argument is float32
                infinite, zero = fresh(), fresh()
                ops += [make_op("ConstantFill", [], [infinite], node.name, shape=[],
                                dtype=caffe2_pb2.TensorProto.DOUBLE,
                            value=infinity),
                        make_op("ConstantFill", [], [zero], node.name, shape=[], dtype=caffe2_pb2.TensorProto.DOUBLE,
                            value=0.0),
                        make_op("ATen", [infinite, zero], [name], node.name, operator="nextafter")]
            else:  # exact in float32; torch's clamp_min has no float16 kernel, its maximum has
                value = float(np.finfo(NUMPY_FLOATS[elem_type]).max) * (-1 if what == "min" else 1)
                ops += [make_op("GivenTensorFill", [], [finite], node.name, values=[value], shape=[]),
                        make_op("ATen", [finite, data], [name], node.name, operator="type_as")]
        elif floating and (constants[what] is None or np.isnan(constants[what]).any()):  # a NaN bound: none
            nan, filled = fresh(), fresh()
            if facts.torch_kernels or elem_type not in CAFFE2_NUMBERS:
                ops += [make_op("ATen", [name], [nan], node.name, operator="isnan"),
                        make_op("ATen", [name, nan], [filled], node.name, operator="masked_fill", value=infinity)]
            else:
                mask, unbounded = fresh(), fresh()
                ops += [make_op("IsNaN", [name], [nan], node.name),  # uint8
                        make_op("Cast", [nan], [mask], node.name, to=caffe2_pb2.TensorProto.BOOL),
                        make_op("ConstantFill", [name], [unbounded], node.name, value=infinity,
                                dtype=CAFFE2_TYPES[elem_type]),
                        make_op("Where", [mask, unbounded, name], [filled], node.name)]
            name = filled
        ops += extreme(node, facts, current, name, target, fresh, operator == "maximum", elem_type)
        current = target
    return ops or [make_op("Copy", [data], [node.output[0]], node.name)]


# Caffe2's Max does not broadcast (it keeps A's shape). Max/Min of int8, int16 and uint8: by onnx's node tests
# (onnxruntime has no such kernels); Mean's float16 sum rounds otherwise
@declare("Max", Form((8, NEWEST)), types=NUMBERS | SMALL_INTS | {TensorProto.FLOAT16}, rank=broadcast_rank,
         dims=broadcast_dims,
         elements=BROADCAST)
@declare("Min", Form((8, NEWEST)), types=NUMBERS | SMALL_INTS | {TensorProto.FLOAT16}, rank=broadcast_rank,
         dims=broadcast_dims,
         elements=BROADCAST)
@declare("Sum", Form((8, NEWEST)), types=frozenset([TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16]),
         rank=broadcast_rank, dims=broadcast_dims)
@declare("Mean", Form((8, NEWEST)), types=FLOAT, rank=broadcast_rank, dims=broadcast_dims)
def _extremum(node, facts, opset, fresh):
    """Max, Min, Sum and Mean of any number of inputs, broadcast as numpy: torch's maximum, minimum or add, input
    after input (Mean: the sum divided by their number); for the portable target Caffe2's operators
    (`_stock_pair`)."""
    operator = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}[node.op_type]
    inputs = list(node.input)
    mean = node.op_type == "Mean" and len(inputs) > 1
    if len(inputs) == 1:
        return [make_op("Copy", inputs, [node.output[0]], node.name)]
    ops, current = [], inputs[0]
    for number, other in enumerate(inputs[1:]):
        target = node.output[0] if number == len(inputs) - 2 and not mean else fresh()
        if facts.torch_kernels or facts.elem_type(inputs[0]) not in CAFFE2_NUMBERS:
            ops.append(make_op("ATen", [current, other], [target], node.name, operator=operator))
        else:
            ops += _stock_pair(node, facts, facts.elem_type(inputs[0]), current, other, target, fresh)
        current = target
    if mean and facts.torch_kernels:
        ops.append(make_op("ATen", [current], [node.output[0]], node.name, operator="div", other=float(len(inputs))))
    elif mean:
        count = fresh()
        ops += [make_op("ConstantFill", [], [count], node.name, shape=[], value=float(len(inputs))),
                make_op("Div", [current, count], [node.output[0]], node.name)]
    return ops


def _stock_pair(node, facts, elem_type, first: str, second: str, out: str, fresh) -> list:
    """Ops writing ``out``: the sum of ``first`` and ``second`` by Caffe2's Add, or their larger (smaller) by
    `extreme`."""
    if node.op_type in ("Sum", "Mean"):
        return [make_op("Add", [first, second], [out], node.name)]
    return extreme(node, facts, first, second, out, fresh, node.op_type == "Max", elem_type)


# Caffe2's GE and LE (its stock converter maps neither GreaterOrEqual nor LessOrEqual)
@declare("GreaterOrEqual", Form((12, NEWEST)), types=NUMBERS, rank=broadcast_rank, dims=broadcast_dims,
         elements=BROADCAST)
@declare("LessOrEqual", Form((12, NEWEST)), types=NUMBERS, rank=broadcast_rank, dims=broadcast_dims, elements=BROADCAST)
def _compare(node, facts, opset, fresh):
    """GreaterOrEqual and LessOrEqual: Caffe2's GE and LE, which broadcast as numpy (no legacy ``broadcast``)."""
    operator = {"GreaterOrEqual": "GE", "LessOrEqual": "LE"}[node.op_type]
    return [make_op(operator, list(node.input), [node.output[0]], node.name)]
