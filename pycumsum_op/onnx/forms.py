"""The ONNX node forms the translation accepts, each proven equal to onnxruntime by the tests; any other form
is refused with one line naming the ONNX op, the opset and why.

Caffe2's ONNX backend translates whatever it is given, and some of its translations are silently wrong:
Slice with starts and ends as inputs (how torch exports every slice from opset 10 on) comes back as its
input unchanged. So no node reaches a translation unless its *form* is on `FORMS`: the op, the model's
opset range, the attributes it may carry (and their accepted values), and which inputs must be constants
(initializers that are not graph inputs, or Constant nodes). A form is translated by Caffe2's stock
converter (`STOCK`) or by pycumsum_op's own translation (`OWN`: `pycumsum_op.onnx.translations`, which
may still refuse a value it cannot express faithfully, e.g. a Slice step over a dimension the model
leaves symbolic). `tests/test_onnx_forms.py` runs every form against onnxruntime.

A form whose Caffe2 kernels exist for some element types only states them (`Form.types`, measured); the
type comes from the graph's inferred types (``elem_type``), and a blob whose type the graph does not state is
refused for such a form.

>>> from onnx import TensorProto, helper
>>> check_node(helper.make_node("Relu", ["x"], ["y"]), 13, elem_type={"x": TensorProto.FLOAT}.get).translation
'stock'
>>> check_node(helper.make_node("Relu", ["x"], ["y"]), 13, elem_type={"x": TensorProto.DOUBLE}.get)
Traceback (most recent call last):
...
pycumsum_op.onnx.forms.FormRefused: ONNX Relu node 'y' (opset 13): input 0 'x' is DOUBLE; Caffe2 runs Relu right on FLOAT only
>>> check_node(helper.make_node("Slice", ["x", "s", "e", "a"], ["y"]), 13)
Traceback (most recent call last):
...
pycumsum_op.onnx.forms.FormRefused: ONNX Slice node 'y' (opset 13): input 3 (axes) is not a constant; Caffe2's stock Slice converter returns its input unchanged for starts/ends given as inputs, and pycumsum_op translates only constant axes and steps
"""
from typing import Dict, FrozenSet, Mapping, NamedTuple, Optional, Tuple

from onnx import TensorProto, helper

STOCK = "stock"
OWN = "pycumsum_op"
#: The newest opset any form covers (onnx 1.10's newest): a later opset's changes are unreviewed.
NEWEST = 15


class FormRefused(ValueError):
    """A node whose form is not on the allow-list: one line naming the op, the opset and why."""


class Form(NamedTuple):
    """One accepted form of an ONNX op."""
    #: the model opsets (of the default domain) the form covers, first and last
    opsets: Tuple[int, int]
    #: the attributes the node may carry -> the values accepted (None: any value)
    attributes: Mapping[str, Optional[FrozenSet]] = {}
    #: the input positions that must be constants
    constants: Tuple[int, ...] = ()
    #: who translates it: `STOCK` (Caffe2's converter) or `OWN` (`pycumsum_op.onnx.translations`)
    translation: str = STOCK
    #: the ONNX element types (TensorProto.DataType) of blob `typed` that Caffe2's kernels run right, as measured
    #: by tests/onnx_form_types.py (None: any type); a blob of another type, or of a type the graph does not
    #: state, is refused
    types: Optional[FrozenSet[int]] = None
    #: the blob whose element type is checked: ("input", position) or ("output", position)
    typed: Tuple[str, int] = ("input", 0)


def _forms(*forms):
    return tuple(forms)


_ANY = None
_UNARY = _forms(Form((7, NEWEST)))
_BINARY = _forms(Form((7, NEWEST)))  # Caffe2's elementwise ops broadcast as numpy does (no legacy broadcast=1)
#: the same, translated by pycumsum_op: torch's kernel where Caffe2's broadcast walks every index (`_arithmetic`)
_ARITHMETIC = _forms(Form((7, NEWEST), translation=OWN))
_REDUCE = {"axes": _ANY, "keepdims": frozenset([0, 1])}
_LSTM = {"hidden_size": _ANY, "direction": frozenset(["forward", "bidirectional"]), "input_forget": frozenset([0])}
_GRU = {"hidden_size": _ANY, "direction": frozenset(["forward", "bidirectional"]),
        "linear_before_reset": frozenset([0, 1])}
#: Caffe2's BasicRNN takes one activation for both directions
_RNN = {"hidden_size": _ANY, "direction": frozenset(["forward", "bidirectional"]),
        "activations": frozenset([("Tanh",), ("Relu",), ("Tanh", "Tanh"), ("Relu", "Relu")])}

_ZERO_ONE = frozenset([0, 1])
#: Conv's and the pools' window; dilations other than 1 are refused for the pools by the translation
_WINDOW = {"auto_pad": frozenset(["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]), "dilations": _ANY,
           "kernel_shape": _ANY, "pads": _ANY, "strides": _ANY}

_F = TensorProto
_FLOAT = frozenset([_F.FLOAT])
_BOOL = frozenset([_F.BOOL])
_SMALL_INTS = frozenset([_F.INT8, _F.INT16, _F.UINT8])
#: Caffe2's arithmetic, comparison and reduction kernels
_NUMBERS = frozenset([_F.FLOAT, _F.DOUBLE, _F.INT32, _F.INT64])
#: what Caffe2 moves without arithmetic (gathers, slices, reshapes, copies): every type its tensors hold but
#: uint32/uint64 (no Caffe2 tensor type) and strings (no numpy array in and out of its workspace)
_MOVED = frozenset([_F.FLOAT, _F.DOUBLE, _F.FLOAT16, _F.INT8, _F.INT16, _F.INT32, _F.INT64, _F.UINT8, _F.UINT16,
                    _F.BOOL])
#: Caffe2's CPU Cast has no float16 (nor the types Caffe2 has no tensor for)
_CASTS = _MOVED - {_F.FLOAT16}

#: ONNX op -> its accepted forms (the first one that fits is used).
FORMS: Dict[str, Tuple[Form, ...]] = {
    # elementwise, translated by Caffe2's stock converter
    "Sqrt": _UNARY, "Exp": _UNARY, "Log": _UNARY, "Erf": _UNARY, "Tanh": _UNARY,
    "Relu": _UNARY, "Sigmoid": _UNARY, "Not": _UNARY, "Reciprocal": _UNARY, "Identity": _UNARY,
    "Add": _ARITHMETIC, "Sub": _ARITHMETIC, "Mul": _ARITHMETIC, "Div": _ARITHMETIC, "Or": _BINARY, "And": _BINARY,
    "Equal": _BINARY, "Less": _BINARY, "Greater": _BINARY,
    "MatMul": _forms(Form((9, NEWEST), translation=OWN)),  # Caffe2's BatchMatMul: 1-D operands
    "Einsum": _forms(Form((12, NEWEST), {"equation": _ANY}, translation=OWN)),  # batched matrix products only
    # Caffe2's FC by its C++ converter, after checks of A's and B's shapes (FC dies on an empty B)
    "Gemm": _forms(Form((9, NEWEST), {"alpha": _ANY, "beta": _ANY, "transA": _ANY, "transB": _ANY}, translation=OWN)),
    "Transpose": _forms(Form((1, NEWEST), {"perm": _ANY}, translation=OWN)),  # Caffe2's or torch's permute
    "Concat": _forms(Form((4, NEWEST), {"axis": _ANY})),
    "Cast": _forms(Form((9, NEWEST), {"to": _CASTS})),
    "Constant": _forms(Form((9, NEWEST), {"value": _ANY})),
    "Shape": _forms(Form((1, 14)), Form((15, NEWEST), {"start": _ANY, "end": _ANY}, translation=OWN)),
    "Range": _forms(Form((11, NEWEST), translation=OWN)),  # Caffe2's Range: a negative integer delta
    "Softmax": _forms(Form((1, 12), {"axis": _ANY}, translation=OWN),  # Caffe2's flattens to 2-D at axis, as < 13
                      Form((13, NEWEST), {"axis": _ANY}, translation=OWN)),  # one axis: Caffe2's or torch's
    # pycumsum_op's own translations
    "CumSum": _forms(Form((11, NEWEST), {"exclusive": _ANY, "reverse": _ANY}, translation=OWN)),
    "Slice": _forms(Form((10, NEWEST), {}, constants=(3, 4), translation=OWN)),
    "Unsqueeze": _forms(Form((1, 12), {"axes": _ANY}, translation=OWN),
                        Form((13, NEWEST), {}, constants=(1,), translation=OWN)),
    "Squeeze": _forms(Form((1, 12), {"axes": _ANY}, translation=OWN),
                      Form((13, NEWEST), {}, constants=(1,), translation=OWN)),
    "ReduceSum": _forms(Form((1, 12), _REDUCE, translation=OWN),
                        Form((13, NEWEST), {"keepdims": frozenset([0, 1]), "noop_with_empty_axes": frozenset([0])},
                             constants=(1,), translation=OWN)),
    "ReduceMean": _forms(Form((1, NEWEST), _REDUCE, translation=OWN)),
    "ReduceMax": _forms(Form((1, NEWEST), _REDUCE, translation=OWN)),
    "ReduceMin": _forms(Form((1, NEWEST), _REDUCE, translation=OWN)),
    "Pow": _forms(Form((7, NEWEST), translation=OWN)),
    "Reshape": _forms(Form((5, NEWEST), {"allowzero": frozenset([0])}, translation=OWN)),
    "Gather": _forms(Form((1, NEWEST), {"axis": _ANY}, translation=OWN)),
    "Where": _forms(Form((9, NEWEST), translation=OWN)),
    "Expand": _forms(Form((8, NEWEST), translation=OWN)),  # Caffe2's Expand has no bool kernel
    "Abs": _forms(Form((6, NEWEST), translation=OWN)),  # Caffe2's Abs and Negative are float-only
    "Neg": _forms(Form((6, NEWEST), translation=OWN)),
    # Caffe2's Clip (float) before opset 11; then torch's maximum/minimum, bounds constant or fed. ONNX's Clip-11 is
    # floating only (onnxruntime: float and float16); from 12 on onnxruntime's float16 kernel reads an absent max as
    # 0, so float16 has no oracle there
    "Clip": _forms(Form((6, 10), {"min": _ANY, "max": _ANY}, translation=OWN),
                   Form((11, 11), translation=OWN, types=frozenset([_F.FLOAT, _F.FLOAT16])),
                   Form((12, NEWEST), translation=OWN, types=_NUMBERS | {_F.INT8, _F.UINT8})),
    "Max": _forms(Form((8, NEWEST), translation=OWN)),  # Caffe2's Max does not broadcast (it keeps A's shape)
    "Min": _forms(Form((8, NEWEST), translation=OWN)),
    "ConstantOfShape": _forms(Form((9, NEWEST), {"value": _ANY}, translation=OWN)),  # C++: no bool
    "ScatterND": _forms(Form((11, 15), translation=OWN)),  # opset 16 adds reduction
    # Caffe2's RecurrentNetwork, built by its own RNN converter: ONNX's default activations (RNN: Tanh or Relu),
    # no clip, no peepholes (refused by the translation)
    "LSTM": _forms(Form((7, 13), _LSTM, translation=OWN),
                   Form((14, NEWEST), dict(_LSTM, layout=frozenset([0])), translation=OWN)),
    "GRU": _forms(Form((7, 13), _GRU, translation=OWN),
                  Form((14, NEWEST), dict(_GRU, layout=frozenset([0])), translation=OWN)),
    "RNN": _forms(Form((7, 13), _RNN, translation=OWN),
                  Form((14, NEWEST), dict(_RNN, layout=frozenset([0])), translation=OWN)),
    # the CNN core, as Caffe2's Conv, MaxPool, AveragePool, SpatialBN and Flatten (translations: `_window`)
    "Conv": _forms(Form((1, NEWEST), dict(_WINDOW, group=_ANY), translation=OWN)),
    "MaxPool": _forms(Form((1, 9), dict(_WINDOW, storage_order=frozenset([0])), translation=OWN),
                      Form((10, NEWEST), dict(_WINDOW, ceil_mode=_ZERO_ONE, storage_order=frozenset([0])),
                           translation=OWN)),
    "AveragePool": _forms(Form((7, 9), dict(_WINDOW, count_include_pad=_ZERO_ONE), translation=OWN),
                          Form((10, NEWEST), dict(_WINDOW, ceil_mode=_ZERO_ONE, count_include_pad=_ZERO_ONE),
                               translation=OWN)),
    "GlobalMaxPool": _forms(Form((1, NEWEST), translation=OWN)),
    "GlobalAveragePool": _forms(Form((1, NEWEST), translation=OWN)),
    # inference only: opset 7's spatial=0 and opset 14's training_mode=1 compute other statistics
    "BatchNormalization": _forms(Form((7, 8), {"epsilon": _ANY, "momentum": _ANY, "spatial": frozenset([1])},
                                      translation=OWN),
                                 Form((9, 13), {"epsilon": _ANY, "momentum": _ANY}, translation=OWN),
                                 Form((14, NEWEST), {"epsilon": _ANY, "momentum": _ANY,
                                                     "training_mode": frozenset([0])}, translation=OWN)),
    "Flatten": _forms(Form((1, NEWEST), {"axis": _ANY}, translation=OWN)),
    "HardSigmoid": _forms(Form((6, NEWEST), {"alpha": _ANY, "beta": _ANY})),  # torch's hardsigmoid, hardswish < 14
    "LogSoftmax": _forms(Form((1, 12), {"axis": _ANY}, translation=OWN),  # ONNX < 13: 2-D at axis (the last only)
                         Form((13, NEWEST), {"axis": _ANY}, translation=OWN)),
    "ArgMax": _forms(Form((1, 11), {"axis": _ANY, "keepdims": _ZERO_ONE}, translation=OWN),
                     Form((12, NEWEST), {"axis": _ANY, "keepdims": _ZERO_ONE, "select_last_index": frozenset([0])},
                          translation=OWN)),
    # constant mode only (reflect and edge have no form); torch writes a Pad of zeros before its AveragePool
    "Pad": _forms(Form((2, 10), {"mode": frozenset(["constant"]), "pads": _ANY, "value": _ANY}, translation=OWN),
                  Form((11, NEWEST), {"mode": frozenset(["constant"])}, constants=(1, 2), translation=OWN)),
    "Dropout": _forms(Form((7, 11), {"ratio": _ANY}, translation=OWN),
                      Form((12, NEWEST), {"seed": _ANY}, constants=(2,), translation=OWN)),
    # elementwise by torch's kernels (the ATen op; translations: `_elementwise`)
    "Sign": _forms(Form((9, NEWEST), translation=OWN)), "Ceil": _forms(Form((6, NEWEST), translation=OWN)),
    "Floor": _forms(Form((6, NEWEST), translation=OWN)), "Round": _forms(Form((11, NEWEST), translation=OWN)),
    **{op: _forms(Form((7, NEWEST), translation=OWN)) for op in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan")},
    **{op: _forms(Form((9, NEWEST), translation=OWN)) for op in ("Sinh", "Cosh", "Asinh", "Acosh", "Atanh")},
    "Elu": _forms(Form((6, NEWEST), {"alpha": _ANY}, translation=OWN)),
    "Selu": _forms(Form((6, NEWEST), {"alpha": _ANY, "gamma": _ANY}, translation=OWN)),
    "Celu": _forms(Form((12, NEWEST), {"alpha": _ANY}, translation=OWN)),
    "LeakyRelu": _forms(Form((6, NEWEST), {"alpha": _ANY}, translation=OWN)),
    "ThresholdedRelu": _forms(Form((10, NEWEST), {"alpha": _ANY}, translation=OWN)),
    "HardSwish": _forms(Form((14, NEWEST), translation=OWN)),  # as x * HardSigmoid(x)
    "Softplus": _forms(Form((1, NEWEST), translation=OWN)), "Softsign": _forms(Form((1, NEWEST), translation=OWN)),
    "IsNaN": _forms(Form((9, NEWEST), translation=OWN)),
    "IsInf": _forms(Form((10, NEWEST), {"detect_negative": _ZERO_ONE, "detect_positive": _ZERO_ONE},
                         translation=OWN)),
    "Xor": _forms(Form((7, NEWEST), translation=OWN)),
    # Caffe2's ReduceL1, ReduceSum of Mul (SumSquare; L2 its Sqrt), torch's prod and logsumexp (translation: `_reduce`)
    **{op: _forms(Form((1, NEWEST), _REDUCE, translation=OWN))
       for op in ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceProd", "ReduceLogSumExp")},
    "Sum": _forms(Form((8, NEWEST), translation=OWN)), "Mean": _forms(Form((8, NEWEST), translation=OWN)),
    "Size": _forms(Form((1, NEWEST), translation=OWN)),
    "Split": _forms(Form((2, 12), {"axis": _ANY, "split": _ANY}, translation=OWN),
                    Form((13, NEWEST), {"axis": _ANY}, constants=(1,), translation=OWN)),
    # Caffe2's NumpyTile (the stock converter's), after run-time checks of the output's size: repeats constant or fed
    # at run time (opset 1's tiles/axis differ)
    "Tile": _forms(Form((6, NEWEST), translation=OWN)),
    # where(indices == positions, on, off); opset 11 wraps negative indices by depth (translation: `_one_hot`)
    "OneHot": _forms(Form((9, 10), {"axis": _ANY}, translation=OWN), Form((11, NEWEST), {"axis": _ANY},
                                                                          translation=OWN)),
    # Caffe2's TopK (translation: `_top_k`); sorted=0 leaves the order to the runtime, so onnxruntime's is no oracle
    "TopK": _forms(Form((1, 9), {"axis": _ANY, "k": _ANY}, translation=OWN),
                   Form((10, 10), {"axis": _ANY}, translation=OWN),
                   Form((11, NEWEST), {"axis": _ANY, "largest": _ZERO_ONE, "sorted": frozenset([1])},
                        translation=OWN)),
    "GatherElements": _forms(Form((11, NEWEST), {"axis": _ANY}, translation=OWN)),  # torch's gather
    # Caffe2's GE and LE (its stock converter maps neither GreaterOrEqual nor LessOrEqual)
    "GreaterOrEqual": _forms(Form((12, NEWEST), translation=OWN)),
    "LessOrEqual": _forms(Form((12, NEWEST), translation=OWN)),
    # torch's triu / tril for a constant k, a mask by Caffe2's Range and torch's masked_fill for a k fed at run time
    "Trilu": _forms(Form((14, NEWEST), {"upper": _ZERO_ONE}, translation=OWN)),
}

#: ONNX op -> the element types its forms run right in Caffe2, measured by tests/onnx_form_types.py (each form on
#: every element type against onnxruntime: any other fails when the net runs, "Unsupported type of tensor", or
#: differs; a type onnxruntime has no kernel for is left out unless onnx's node tests check it). The
#: transcendental, activation, MatMul, Gemm, Softmax and ReduceMean kernels are float only.
TYPES: Dict[str, FrozenSet[int]] = {
    "Sqrt": frozenset([_F.FLOAT, _F.DOUBLE]), "Exp": _FLOAT, "Log": _FLOAT, "Erf": _FLOAT, "Tanh": _FLOAT,
    "Relu": _FLOAT, "Sigmoid": _FLOAT, "Not": _BOOL, "Reciprocal": _FLOAT, "Identity": _MOVED,
    "Add": _NUMBERS, "Sub": _NUMBERS, "Mul": _NUMBERS, "Div": _NUMBERS, "Or": _BOOL, "And": _BOOL,
    "Equal": _NUMBERS | _BOOL, "Less": _NUMBERS, "Greater": _NUMBERS,
    "MatMul": _FLOAT, "Einsum": _FLOAT, "Gemm": _FLOAT, "Transpose": _NUMBERS, "Concat": _MOVED,
    "Cast": _CASTS,
    "Constant": _NUMBERS | _BOOL, "Shape": _MOVED, "Range": _NUMBERS, "Softmax": _FLOAT,
    "CumSum": frozenset([_F.FLOAT, _F.DOUBLE, _F.FLOAT16, _F.INT32, _F.INT64]),
    "Slice": _MOVED, "Unsqueeze": _MOVED, "Squeeze": _MOVED, "ReduceSum": _NUMBERS, "ReduceMean": _FLOAT,
    "ReduceMax": _NUMBERS, "ReduceMin": _NUMBERS, "Pow": _FLOAT, "Reshape": _MOVED, "Gather": _MOVED,
    "Where": _NUMBERS | {_F.FLOAT16, _F.UINT8}, "Expand": _NUMBERS | _BOOL,
    "Abs": _MOVED - {_F.UINT16, _F.BOOL}, "Neg": _MOVED - {_F.INT16, _F.UINT8, _F.UINT16, _F.BOOL},  # no ATen uint16
    # Max/Min of int8, int16 and uint8: by onnx's node tests (onnxruntime has no such kernels); ATen has no uint16
    "Clip": _FLOAT, "Max": _NUMBERS | _SMALL_INTS | {_F.FLOAT16}, "Min": _NUMBERS | _SMALL_INTS | {_F.FLOAT16},
    "ConstantOfShape": _NUMBERS | _BOOL, "ScatterND": _MOVED - {_F.UINT16}, "LSTM": _FLOAT, "GRU": _FLOAT,
    "RNN": _FLOAT, "Conv": _FLOAT, "MaxPool": _FLOAT, "AveragePool": _FLOAT, "GlobalMaxPool": _FLOAT,
    "GlobalAveragePool": _FLOAT, "BatchNormalization": _FLOAT, "Flatten": _MOVED,
    "Dropout": frozenset([_F.FLOAT, _F.DOUBLE, _F.FLOAT16]),  # onnxruntime's kernels; Caffe2 copies any
    # LogSoftmax of double: onnxruntime's double kernel gives [-inf, NaN] for [0, inf], its float kernel and torch's
    # [NaN, NaN]; no oracle
    "HardSigmoid": _FLOAT, "LogSoftmax": _FLOAT, "ArgMax": frozenset([_F.FLOAT, _F.DOUBLE, _F.INT32]),
    "Pad": frozenset([_F.FLOAT, _F.DOUBLE, _F.FLOAT16, _F.INT8, _F.INT32, _F.INT64, _F.UINT8, _F.BOOL]),
    # torch's kernels have no float16 on CPU (Sign's NaN mask and Softsign's sum differ in it); double only where
    # onnxruntime has a double kernel to prove it
    "Sign": _NUMBERS | _SMALL_INTS, "IsNaN": frozenset([_F.FLOAT, _F.DOUBLE, _F.FLOAT16]), "Xor": _BOOL,
    **{op: frozenset([_F.FLOAT, _F.DOUBLE]) for op in ("Ceil", "Floor", "Round", "Sin", "IsInf")},
    **{op: _FLOAT for op in ("Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Elu",
                             "Selu", "Celu", "LeakyRelu", "ThresholdedRelu", "HardSwish", "Softplus", "Softsign")},
    # Caffe2's ReduceL1 is float only (ReduceL2: onnxruntime's); torch's prod of int32 gives int64; Mean's float16
    # sum rounds otherwise
    "ReduceL1": _FLOAT, "ReduceL2": _FLOAT, "ReduceSumSquare": _NUMBERS, "ReduceProd": frozenset([_F.FLOAT, _F.INT64]),
    "ReduceLogSumExp": frozenset([_F.FLOAT, _F.DOUBLE]), "Sum": frozenset([_F.FLOAT, _F.DOUBLE, _F.FLOAT16]),
    "Mean": _FLOAT, "Size": _MOVED, "Split": _MOVED, "Tile": _MOVED,
    "OneHot": frozenset([_F.FLOAT, _F.FLOAT16, _F.INT32, _F.INT64]),
    "TopK": _FLOAT, "GatherElements": _MOVED - {_F.UINT16},  # Caffe2's TopK is float only; ATen has no uint16
    "GreaterOrEqual": _NUMBERS, "LessOrEqual": _NUMBERS,
    # Trilu: the types onnxruntime has kernels for (no oracle for the others)
    "Trilu": frozenset([_F.FLOAT, _F.DOUBLE, _F.FLOAT16, _F.INT64, _F.BOOL]),
}
#: the blob whose type is checked, where it is not input 0 (Where's X; OneHot's values; what Constant and
#: ConstantOfShape make)
_TYPED = {"Where": ("input", 1), "OneHot": ("input", 2), "Constant": ("output", 0), "ConstantOfShape": ("output", 0)}
#: an op whose types were not measured accepts no type (tests/test_onnx_forms.py fails on it)
FORMS = {op: tuple(form._replace(types=form.types if form.types is not None else TYPES.get(op, frozenset()),
                                 typed=_TYPED.get(op, form.typed)) for form in forms)
         for op, forms in FORMS.items()}

#: Why a form that is not accepted would be wrong or fail in Caffe2's stock converter, where that is known.
WHY = {
    "Slice": "Caffe2's stock Slice converter returns its input unchanged for starts/ends given as inputs, and "
             "pycumsum_op translates only constant axes and steps",
    "Reshape": "Caffe2's Reshape copies a 0 in the shape from the input (allowzero=0); allowzero=1 has no form",
    "ReduceSum": "noop_with_empty_axes=1 has no Caffe2 form",
    "Cast": "Caffe2's Cast writes STRING wrong and has no CPU kernel for FLOAT16 (ONNX's numbers: 1 FLOAT, 2 UINT8, "
            "3 INT8, 4 UINT16, 5 INT16, 6 INT32, 7 INT64, 9 BOOL, 11 DOUBLE)",
}
_INPUT_NAMES = {"Slice": ("data", "starts", "ends", "axes", "steps"), "Unsqueeze": ("data", "axes"),
                "Dropout": ("data", "ratio", "training_mode"), "Pad": ("data", "pads", "constant_value"),
                "Squeeze": ("data", "axes"), "ReduceSum": ("data", "axes"), "Split": ("input", "split"),
                "Tile": ("input", "repeats"), "TopK": ("X", "K"), "GatherElements": ("data", "indices"),
                "Trilu": ("input", "k")}


def label(node, opset) -> str:
    """How refusals name a node: ``ONNX Slice node 'y' (opset 13)``."""
    return "ONNX {} node {!r} (opset {})".format(node.op_type, node.name or ",".join(node.output), opset)


def given(node, position: int) -> bool:
    """Whether the node has input ``position`` (ONNX leaves an optional input out, or names it "")."""
    return position < len(node.input) and bool(node.input[position])


def _refused(node, opset, why: str, explained: bool = True) -> FormRefused:
    extra = WHY.get(node.op_type) if explained else None
    return FormRefused("{}: {}{}".format(label(node, opset), why, "; " + extra if extra and extra not in why else ""))


def check_node(node, opset: Optional[int], is_constant=lambda name: False, elem_type=lambda name: None) -> Form:
    """The accepted `Form` of ONNX ``node`` (a NodeProto) in a model of ``opset``, else `FormRefused`.

    ``is_constant(name)`` says whether a blob is a constant of the model, ``elem_type(name)`` its ONNX element
    type (None: the graph does not state it)."""
    if node.domain not in ("", "ai.onnx"):
        raise _refused(node, opset, "domain {!r} has no accepted forms (only the default ONNX domain)".format(
            node.domain))
    forms = FORMS.get(node.op_type)
    if forms is None:
        raise _refused(node, opset, "the op has no form proven equal to onnxruntime")
    if opset is None:
        raise _refused(node, opset, "the model's opset is unknown")
    covering = [form for form in forms if form.opsets[0] <= opset <= form.opsets[1]]
    if not covering:
        raise _refused(node, opset, "accepted only at opsets {}".format(
            ", ".join("{}-{}".format(*form.opsets) for form in forms)))
    problems = []
    for form in covering:
        problem = _mismatch(node, form, is_constant)
        if problem is None:
            problem = _type_mismatch(node, form, elem_type)
            if problem is None:
                return form
            problems.append((problem, False))  # `WHY` speaks of the attributes and constants
        else:
            problems.append((problem, True))
    raise _refused(node, opset, *problems[0])


def _comparable(value):
    """An attribute's value as the forms list it: strings decoded, lists as tuples."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return tuple(_comparable(item) for item in value)
    return value


def type_name(elem_type: Optional[int]) -> str:
    """``FLOAT``, ``INT64``, ...: the ONNX name of an element type."""
    return TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else str(elem_type)


def _mismatch(node, form: Form, is_constant) -> Optional[str]:
    """Why ``node`` does not fit ``form``, or None."""
    for attr in node.attribute:
        if attr.name not in form.attributes:
            return "attribute {!r} is not accepted (accepted: {})".format(
                attr.name, ", ".join(sorted(form.attributes)) or "none")
        allowed = form.attributes[attr.name]
        if allowed is not None:
            value = _comparable(helper.get_attribute_value(attr))
            if value not in allowed:
                return "attribute {}={!r} is not accepted (accepted: {})".format(
                    attr.name, value, ", ".join(repr(v) for v in sorted(allowed)))
    names = _INPUT_NAMES.get(node.op_type, ())
    for position in form.constants:
        if given(node, position) and not is_constant(node.input[position]):
            return "input {}{} is not a constant".format(
                position, " ({})".format(names[position]) if position < len(names) else "")
    return None


def _type_mismatch(node, form: Form, elem_type) -> Optional[str]:
    """Why the element type of ``node``'s typed blob does not fit ``form``, or None."""
    if form.types is not None:
        where, position = form.typed
        blobs = node.input if where == "input" else node.output
        name = blobs[position] if position < len(blobs) else ""
        found = elem_type(name) if name else None
        if found not in form.types:
            return "{} {} {!r} is {}; Caffe2 runs {} right on {} only".format(
                where, position, name, "of a type the model does not state" if found is None else type_name(found),
                node.op_type, ", ".join(type_name(t) for t in sorted(form.types)))
    return None
