"""What an imported model is fed and what it computes, checked while the net runs, by stock Caffe2 operators.

Import checks every size a model declares (`model_input.check_model`), but some sizes are values: a shape fed or
computed (ConstantOfShape, Expand, Reshape), Tile's repeats, OneHot's depth, Range's bounds, the dims a Pad grows.
Caffe2's kernels multiply such dims in 64 bits without checking for overflow (a shape [2**62 + 1, 4] counts 4
elements while its axis 0 claims 2**62 + 1 rows, so the next Gather reads past the buffer), and some count in 32 bits
(Range's length, OneHot's positions made by Range). So before an op allocates from a value, its translation adds ops
that stop the net with Caffe2's ``Assert`` (`refusal`) unless the size is within the cap:

- the dims are cast to float64 and each is held to [0, cap] (`capped_dims`); their product in float64 is then within
  a few ulps of the true one (no factor is past 2**53 and at most ``MAX_RANK`` of them are multiplied), and is
  compared with the cap: no 64-bit count can wrap before it is checked;
- the cap is ``PYCUMSUM_OP_MAX_TENSOR_BYTES`` as read when the model is imported, divided by the element size, and is
  written into the net (an int64 constant cast to float64: exact), so a C++ predictor running the saved nets makes
  the same checks; where a Caffe2 kernel counts in 32 bits the cap is also held below 2**31 (`COUNTER_LIMIT`).

Each message names the ONNX node, what it checks and the cap; the Assert's ``debug_info`` names the blob checked, whose
value `CheckedRep.run` adds to the one-line `RunRefused` it raises (a C++ predictor reports the message alone).

`input_checks` makes the checks of the graph's inputs against what the model declares (rank, every fixed dim, the dims
one ``dim_param`` ties together), run first in the predict net; `CheckedRep` checks, in Python, the element types and
names of what is fed (Caffe2 has no operator reading a blob's type).
"""
import math
import re
from typing import Dict, Tuple

import numpy as np
import onnx.mapping
from caffe2.proto import caffe2_pb2
from caffe2.python import utils
from caffe2.python.onnx.backend_rep import Caffe2Rep

from ..input_limits import MAX_RANK, limit

#: Caffe2's Range counts its length in a 32-bit int (OneHot's positions come from it): a count is held below this.
COUNTER_LIMIT = 2 ** 31 - 1
_DOUBLE = caffe2_pb2.TensorProto.DOUBLE
_INT64 = caffe2_pb2.TensorProto.INT64


class RunRefused(RuntimeError):
    """A run the net's checks stopped: one line naming the ONNX node or input, what was wrong and the value."""


def make_op(op_type: str, inputs, outputs, name: str = "", **args) -> caffe2_pb2.OperatorDef:
    """A Caffe2 OperatorDef (arguments sorted by name, as `utils.MakeArgument` makes them)."""
    op = caffe2_pb2.OperatorDef()
    op.type, op.name = op_type, name
    op.input.extend(inputs)
    op.output.extend(outputs)
    op.arg.extend(utils.MakeArgument(key, value) for key, value in sorted(args.items()))
    return op


def element_cap(itemsize: int, counter: bool = False) -> int:
    """The most elements of ``itemsize`` bytes one tensor may have (``PYCUMSUM_OP_MAX_TENSOR_BYTES``, read now), held
    below `COUNTER_LIMIT` where a Caffe2 kernel counts them in 32 bits (``counter``)."""
    cap = limit("PYCUMSUM_OP_MAX_TENSOR_BYTES") // itemsize
    return min(cap, COUNTER_LIMIT) if counter else cap


def refusal(name: str, condition: str, message: str, checked: str = "") -> caffe2_pb2.OperatorDef:
    """Caffe2's Assert of bool blob ``condition`` (every element true, else the net stops with ``message``);
    ``checked`` is the blob whose value `CheckedRep` reports with the message."""
    op = make_op("Assert", [condition], [], name, error_msg=message)
    op.debug_info = checked
    return op


def exact_double(name: str, value: float, fresh) -> Tuple[list, str]:
    """(ops, blob): a float64 scalar holding ``value`` exactly. An op argument is a float32 (Caffe2's Argument.f), so a
    double it cannot hold is made as its 53-bit integer mantissa (an int64 argument, cast: exact) times powers of two
    that float32 holds (each product exact: only the exponent changes, and no partial product is smaller than the
    result, so none underflows first)."""
    blob = fresh()
    if not math.isfinite(value) or float(np.float32(value)) == value:
        return [make_op("ConstantFill", [], [blob], name, shape=[], dtype=_DOUBLE, value=value)], blob
    mantissa, exponent = math.frexp(value)
    whole, exponent = int(mantissa * 2 ** 53), exponent - 53
    integer = fresh()
    ops = [make_op("ConstantFill", [], [integer], name, shape=[], dtype=_INT64, value=whole),
           make_op("Cast", [integer], [blob], name, to=_DOUBLE)]
    while exponent:
        step = max(-126, min(127, exponent))
        power, product = fresh(), fresh()
        ops += [make_op("ConstantFill", [], [power], name, shape=[], dtype=_DOUBLE, value=float(2.0 ** step)),
                make_op("Mul", [blob, power], [product], name)]
        blob, exponent = product, exponent - step
    return ops, blob


def whole_double(name: str, value: int, fresh) -> Tuple[list, str]:
    """(ops, blob): a float64 scalar holding the whole number ``value`` (below 2**53) exactly, through int64."""
    integer, blob = fresh(), fresh()
    return [make_op("ConstantFill", [], [integer], name, shape=[], dtype=_INT64, value=int(value)),
            make_op("Cast", [integer], [blob], name, to=_DOUBLE)], blob


def as_double(name: str, blob: str, fresh) -> Tuple[list, str]:
    """(ops, blob): ``blob`` cast to float64."""
    out = fresh()
    return [make_op("Cast", [blob], [out], name, to=_DOUBLE)], out


def product(name: str, values: str, length, fresh, message: str) -> Tuple[list, str]:
    """(ops, blob): the product of the entries of float64 vector ``values`` by stock operators (every build has them):
    a Reshape to its ``length`` entries (which stops the net if the vector has another length: the product is never
    of part of it), or where the import does not know the length, 1s put before it up to `MAX_RANK` entries (a
    longer vector stops the net with ``message``); then one Split into its entries and a Mul per entry."""
    held = fresh()
    if length is None:
        count, most, fits, ones, joined = fresh(), fresh(), fresh(), fresh(), fresh()
        ops = [make_op("Size", [values], [count], name),
               make_op("ConstantFill", [], [most], name, shape=[], dtype=_INT64, value=MAX_RANK),
               make_op("LE", [count, most], [fits], name),
               refusal(name, fits, "{} ({} dims at most: MAX_RANK)".format(message, MAX_RANK), count),
               make_op("ConstantFill", [], [ones], name, shape=[MAX_RANK], dtype=_DOUBLE, value=1.0),
               make_op("Concat", [ones, values], [joined, fresh()], name, axis=0),
               # Caffe2's Slice: the start -k is the length + 1 - k
               make_op("Slice", [joined], [held], name, starts=[-MAX_RANK - 1], ends=[-1])]
        length = MAX_RANK
    elif length == 0:
        return [make_op("ConstantFill", [], [held], name, shape=[1], dtype=_DOUBLE, value=1.0)], held
    else:
        ops = [make_op("Reshape", [values], [held, fresh()], name, shape=[length])]
    entries = [fresh() for _ in range(length)]
    ops.append(make_op("Split", [held], entries, name, axis=0))
    out = entries[0]
    for entry in entries[1:]:
        out, former = fresh(), out
        ops.append(make_op("Mul", [former, entry], [out], name))
    return ops, out


def magnitudes(name: str, values: str, fresh) -> Tuple[list, str]:
    """(ops, blob): the magnitudes of the float64 whole numbers in ``values``, as their product by their signs
    (Caffe2's Abs is float32 only; a -0.0 stays -0.0, which no product of dims tells from 0)."""
    sign, out = fresh(), fresh()
    return [make_op("Sign", [values], [sign], name), make_op("Mul", [values, sign], [out], name)], out


def capped_dims(name: str, dims: str, cap: int, message: str, fresh, lowest: int = 0, checked: str = "",
                factor: str = "", length=None) -> list:
    """Ops stopping the net unless every entry of float64 vector ``dims`` (``length`` entries, when known) lies in
    [``lowest``, ``cap``] and the product of their magnitudes (times float64 scalar ``factor``, itself within
    [0, cap], when given) is at most ``cap`` (`product`)."""
    low, high, at_least, at_most, inside = fresh(), fresh(), fresh(), fresh(), fresh()
    more, high = whole_double(name, cap, fresh)
    ops = more + [make_op("ConstantFill", [], [low], name, shape=[], dtype=_DOUBLE, value=float(lowest)),
                  make_op("GE", [dims, low], [at_least], name), make_op("LE", [dims, high], [at_most], name),
                  make_op("And", [at_least, at_most], [inside], name), refusal(name, inside, message, checked)]
    magnitude = dims
    if lowest < 0:  # Reshape's -1: the other dims' product bounds the count
        more, magnitude = magnitudes(name, dims, fresh)
        ops += more
    more, total = product(name, magnitude, length, fresh, message)
    ops += more
    if factor:
        scaled = fresh()
        ops.append(make_op("Mul", [total, factor], [scaled], name))
        total = scaled
    within = fresh()
    return ops + [make_op("LE", [total, high], [within], name), refusal(name, within, message, checked)]


def capped_scalar(name: str, value: str, cap: int, message: str, fresh, lowest: int = 0, checked: str = "") -> list:
    """Ops stopping the net unless float64 ``value`` (any shape) lies in [``lowest``, ``cap``] (NaN does not)."""
    low, at_least, at_most, inside = fresh(), fresh(), fresh(), fresh()
    more, high = whole_double(name, cap, fresh)
    return more + [make_op("ConstantFill", [], [low], name, shape=[], dtype=_DOUBLE, value=float(lowest)),
                   make_op("GE", [value, low], [at_least], name), make_op("LE", [value, high], [at_most], name),
                   make_op("And", [at_least, at_most], [inside], name), refusal(name, inside, message, checked)]


def size_message(where: str, what: str, itemsize: int, counter: bool = False, lowest: int = 0) -> str:
    """The message of a size check (`capped_dims`): ``where`` (the node's label) and ``what`` it checks."""
    cap = element_cap(itemsize, counter)
    return ("{}: {} asks for a tensor of more than {} elements of {} bytes, or holds a dim outside [{}, {}] "
            "(PYCUMSUM_OP_MAX_TENSOR_BYTES{})".format(where, what, cap, itemsize, lowest, cap,
                                                      "; Caffe2 counts it in 32 bits" if counter else ""))


def input_checks(graph, fresh) -> list:
    """Ops checking each graph input against its declared shape when the net runs: its rank, each fixed dim, and the
    dims one ``dim_param`` names being equal. Caffe2's kernels trust the dims they are given (an input of another
    rank reaches BatchMatMul or Conv, whose translations the declared shape chose); `declared` says which inputs
    these checks hold to their declared dims."""
    ops, tied = [], {}
    for info in graph.input:  # an initializer's too: it is a default the caller may replace
        if not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
            continue
        dims = info.type.tensor_type.shape.dim
        spelled = "[{}]".format(", ".join(str(dim.dim_value) if dim.HasField("dim_value") else
                                          (dim.dim_param or "?") for dim in dims))
        message = "ONNX model input {!r} does not have the declared shape {}".format(info.name[:200], spelled)
        shape, count, rank, same = fresh(), fresh(), fresh(), fresh()
        ops += [make_op("Shape", [info.name], [shape]), make_op("Size", [shape], [count]),
                make_op("ConstantFill", [], [rank], shape=[], dtype=_INT64, value=len(dims)),
                make_op("EQ", [count, rank], [same]), refusal("", same, message, shape)]
        fixed = [(axis, dim.dim_value) for axis, dim in enumerate(dims) if dim.HasField("dim_value")]
        if fixed:
            picked, wanted, equal = fresh(), fresh(), fresh()
            ops += [make_op("Shape", [info.name], [picked], axes=[axis for axis, _ in fixed]),
                    make_op("GivenTensorInt64Fill", [], [wanted], values=[value for _, value in fixed],
                            shape=[len(fixed)]),
                    make_op("EQ", [picked, wanted], [equal]), refusal("", equal, message, shape)]
        for axis, dim in enumerate(dims):
            if dim.HasField("dim_param") and dim.dim_param:
                tied.setdefault(dim.dim_param, []).append((info.name, axis, shape))
    for param, places in tied.items():
        (first, axis, _), rest = places[0], places[1:]
        if not rest:
            continue
        reference = fresh()
        ops.append(make_op("Shape", [first], [reference], axes=[axis]))
        for name, other_axis, other_shape in rest:
            length, equal = fresh(), fresh()
            ops += [make_op("Shape", [name], [length], axes=[other_axis]), make_op("EQ", [reference, length], [equal]),
                    refusal("", equal, "ONNX model inputs {!r} (dim {}) and {!r} (dim {}) differ in dim {!r}, which "
                            "the model declares one".format(first[:200], axis, name[:200], other_axis, param[:200]),
                            other_shape)]
    return ops


def declared(facts, name: str) -> bool:
    """Whether blob ``name`` holds, when the net runs, the dims the model gives it: a constant, or a graph input whose
    shape is declared (`input_checks` stops the net otherwise)."""
    return facts.is_constant(name) or (name in facts.graph_inputs and facts.dims(name) is not None)


_ASSERT_MESSAGE = re.compile(r"Error message: (.*?) \(Error from operator:", re.S)


class CheckedRep(Caffe2Rep):
    """Caffe2's rep of a translated model, whose ``run`` checks what it is fed first: only the model's own inputs (by
    name, or in order), each of the element type the model declares (Caffe2 converts nothing: a float64 array fed to
    a float input reaches float kernels as 8-byte elements). A run the net's checks stop raises `RunRefused`, one
    line: the check's message and the value of the blob it checked."""

    def __init__(self, rep: Caffe2Rep, graph):
        super(CheckedRep, self).__init__(rep.init_net, rep.predict_net, rep.workspace, rep.uninitialized)
        self._types: Dict[str, np.dtype] = {}
        for info in graph.input:
            elem_type = info.type.tensor_type.elem_type if info.type.HasField("tensor_type") else 0
            dtype = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE.get(elem_type)
            self._types[info.name] = None if dtype is None else np.dtype(dtype)
        self._fed = set(self._types)  # an initializer that is also an input is a default the caller may replace

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            named = dict(inputs)
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) != len(self.uninitialized):
                raise RunRefused("the model takes {} inputs ({}), {} given".format(
                    len(self.uninitialized), ", ".join(repr(name) for name in self.uninitialized), len(inputs)))
            named = dict(zip(self.uninitialized, inputs))
        else:
            named = {self.uninitialized[0]: inputs} if len(self.uninitialized) == 1 else {None: inputs}
        for name, value in named.items():
            self._check_feed(name, value)
        try:
            return super(CheckedRep, self).run(named, **kwargs)
        except RuntimeError as error:
            raise self._refusal(error) from None

    def _check_feed(self, name, value) -> None:
        if name not in self._fed:
            raise RunRefused("{!r} is not an input of the model (its inputs: {})".format(
                name, ", ".join(repr(known) for known in sorted(self._fed))))
        wanted = self._types.get(name)
        got = getattr(value, "dtype", None)
        if wanted is not None and got != wanted:
            raise RunRefused("input {!r}: element type {} fed, the model declares {}".format(
                name, "of Python type {}".format(type(value).__name__) if got is None else got, wanted))

    def _refusal(self, error: RuntimeError) -> Exception:
        """`RunRefused` for a failure of one of the net's Asserts (its message, and the value of the blob it checked),
        else ``error`` as it is."""
        found = _ASSERT_MESSAGE.search(str(error))
        if not found:
            return error
        message = found.group(1).strip()
        checked = next((op.debug_info for op in self.predict_net.op if op.type == "Assert" and any(
            arg.name == "error_msg" and arg.s.decode("utf-8", "replace") == message for arg in op.arg)), "")
        if checked and self.workspace.HasBlob(checked):
            value = np.asarray(self.workspace.FetchBlob(checked))
            message += "; the value checked: [{}{}]".format(", ".join(str(item) for item in value.reshape(-1)[:16]),
                                                            ", ..." if value.size > 16 else "")
        return RunRefused(message.replace("\n", " "))


def checked_rep(rep: Caffe2Rep, model) -> CheckedRep:
    """``rep`` (prepared from ``model``) as a `CheckedRep`."""
    return CheckedRep(rep, model.graph)


def itemsize(elem_type) -> int:
    """The bytes of one element of ONNX ``elem_type``, for the caps (8 where numpy has no such type)."""
    dtype = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE.get(elem_type)
    return 8 if dtype is None or np.dtype(dtype).kind == "O" else np.dtype(dtype).itemsize
