"""Every ONNX node form on `pycumsum_op.onnx.ops.FORMS` against onnxruntime, and property tests of the forms
torch writes around CumSum (Slice, Gather, Expand, Reshape, the reductions) over negative indices, steps,
empty ranges and dynamic shapes: each result equals onnxruntime's, or the form is refused in one line naming
the ONNX op and the opset. Never a wrong result.
"""
import pytest
from onnx_support import onnx_backend_refusal, skip_where_the_oracle_is_wrong

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import os
import re

import numpy as np
import onnx
import onnxruntime
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import pycumsum_op.onnx
from pycumsum_op.input_limits import InputTooLarge
from pycumsum_op.onnx.facts import GraphFacts
from pycumsum_op.onnx.forms import check_node
from pycumsum_op.onnx.ops import FORMS
from pycumsum_op.onnx.ops.contract import OWN, FormRefused, type_name
from onnx_forms_support import node_model, outcome

RNG = np.random.default_rng(0)
F = RNG.standard_normal((3, 4)).astype(np.float32)
POSITIVE = (np.abs(RNG.standard_normal((3, 4))) + 0.5).astype(np.float32)
ROW = RNG.standard_normal((1, 4)).astype(np.float32)
COLUMN = RNG.standard_normal((3, 1)).astype(np.float32)
I64 = RNG.integers(-5, 5, (3, 4)).astype(np.int64)
MASK = RNG.integers(0, 2, (3, 4)).astype(bool)
#: ordinary values with the infinities, NaN and the values half-way between integers
EDGES = np.concatenate([F.ravel() * 2, [np.inf, -np.inf, np.nan, 0.5, -1.5, 2.5, 0.0, -0.0]]).astype(np.float32)
#: the elementwise ops translated by torch's kernels -> their cases' other attributes (besides the defaults)
ELEMENTWISE_ATTRIBUTES = {
    **{op: [] for op in ("Sign", "Ceil", "Floor", "Round", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh",
                         "Cosh", "Asinh", "Acosh", "Atanh", "IsNaN", "HardSwish", "Softplus", "Softsign")},
    "Elu": [{"alpha": 0.5}], "Selu": [{"alpha": 2.0, "gamma": 3.0}], "Celu": [{"alpha": 0.5}],
    "LeakyRelu": [{"alpha": 0.3}], "ThresholdedRelu": [{"alpha": -0.5}],
    "IsInf": [{"detect_negative": 0}, {"detect_positive": 0}],
}


def i64(*values):
    return np.array(values, np.int64)


def _axes_case(op, opset, axes, data, **attrs):
    """(inputs, constants, attrs) of an op whose axes are an attribute before opset 13 and an input after."""
    if opset >= 13 and op in ("Unsqueeze", "Squeeze", "ReduceSum"):
        return {"x": data}, {"axes": i64(*axes)}, attrs
    return {"x": data}, {}, dict(attrs, axes=axes)


def form_cases(op, opset):
    """(inputs, constants, attrs) cases of ``op`` at ``opset`` that its accepted forms must get right."""
    unary_inputs = {"Sqrt": POSITIVE, "Log": POSITIVE, "Reciprocal": POSITIVE, "Not": MASK}
    if op in ("Abs", "Neg", "Sqrt", "Exp", "Log", "Erf", "Tanh", "Relu", "Sigmoid", "Not", "Reciprocal", "Identity"):
        return [({"x": unary_inputs.get(op, F)}, {}, {})] + ([({"x": I64}, {}, {})] if op in ("Abs", "Neg") else [])
    if op in ("Add", "Sub", "Mul", "Div"):
        return [({"a": F, "b": ROW}, {}, {}), ({"a": COLUMN, "b": ROW}, {}, {}),
                ({"a": I64, "b": np.array(3, np.int64)}, {}, {})]
    if op in ("Or", "And"):
        return [({"a": MASK, "b": MASK[:1]}, {}, {})]
    if op in ("Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual"):
        floats = [({"a": F, "b": np.array(0.1, np.float32)}, {}, {})] if op != "Equal" or opset >= 11 else []
        return [({"a": I64, "b": I64[:1]}, {}, {})] + floats
    if op in ("Sum", "Mean"):
        return [({"a": F}, {}, {}), ({"a": F, "b": ROW}, {}, {}),
                ({"a": COLUMN, "b": np.array(0.5, np.float32), "c": ROW}, {}, {})]
    if op == "Split":
        parts = ({}, {"split": i64(1, 2)}, {}) if opset >= 13 else ({}, {}, {"split": [1, 2]})
        return [({"x": F}, {}, {"axis": 1}, {"outputs": 2}), ({"x": F}, parts[1], dict(parts[2], axis=0),
                                                              {"outputs": 2}),
                ({"x": F}, {}, {"axis": -1}, {"outputs": 4})]
    if op == "Tile":  # repeats constant, fed at run time, with a 0
        return [({"x": F}, {"repeats": i64(2, 1)}, {}), ({"x": F, "repeats": i64(0, 3)}, {}, {}),
                ({"x": np.stack([F, F])}, {"repeats": i64(1, 2, 2)}, {})]
    if op == "OneHot":  # depth constant or fed, axis last, first or negative, indices out of range
        values, depth = np.array([-1.0, 2.0], np.float32), np.array(3, np.int64)
        indices = i64(0, 2, 3, 1, -1, 7).reshape(2, 3) if opset >= 11 else i64(0, 2, 3, 1, 9, 7).reshape(2, 3)
        # onnxruntime's kernels: (indices, depth) int64 and int64, int64 and float, int32 and int32
        return [({"i": indices}, {"depth": depth, "values": values}, {}),
                ({"i": indices, "depth": depth.astype(np.float32)}, {"values": values}, {"axis": 0}),
                ({"i": indices.astype(np.int32), "values": values}, {"depth": depth.astype(np.int32)},
                 {"axis": -2}, {"order": ["i", "depth", "values"]})]
    if op == "Size":
        return [({"x": F}, {}, {}), ({"x": np.zeros((2, 0), np.float32)}, {}, {})]
    if op in ("Max", "Min"):
        return [({"a": F, "b": ROW}, {}, {}), ({"a": COLUMN, "b": np.array(0.0, np.float32), "c": ROW}, {}, {}),
                ({"a": I64, "b": np.array(0, np.int64)}, {}, {})][:3 if opset >= 12 else 2]
    if op == "MatMul":
        return [({"a": F, "b": F.T.copy()}, {}, {}), ({"a": np.stack([F, F]), "b": F.T.copy()}, {}, {})]
    if op == "Einsum":
        return [({"a": F, "b": F.T.copy()}, {}, {"equation": "ij,jk->ik"}),
                ({"a": np.stack([F, F]), "b": np.stack([F, F])}, {}, {"equation": "bij,bkj->bki"})]
    if op == "Gemm":
        return [({"a": F, "b": F}, {"c": COLUMN[:, 0]}, {"transB": 1, "alpha": 0.5})]
    if op == "Transpose":
        return [({"x": np.stack([F, F])}, {}, {"perm": [2, 0, 1]}), ({"x": F}, {}, {})]
    if op == "Concat":
        return [({"a": F, "b": ROW}, {}, {"axis": 0}),
                ({"a": F, "b": COLUMN.repeat(4, 1)}, {}, {"axis": -1 if opset >= 11 else 1})]
    if op == "Cast":
        return [({"x": F * 3}, {}, {"to": 7}), ({"x": MASK}, {}, {"to": 1}), ({"x": I64}, {}, {"to": 9})]
    if op == "Constant":
        return [({}, {}, {"value": helper.make_tensor("v", 1, [2], [1.5, -2.0])})]
    if op == "ConstantOfShape":
        return [({}, {"shape": i64(2, 3)}, {"value": helper.make_tensor("v", 9, [1], [1])}),
                ({}, {"shape": i64(2)}, {"value": helper.make_tensor("v", 7, [1], [-4])}), ({}, {"shape": i64(3)}, {})]
    if op == "Shape":
        return [({"x": F}, {}, {})] + ([({"x": np.stack([F, F])}, {}, {"start": 1, "end": -1}),
                                        ({"x": F}, {}, {"start": -1}), ({"x": F}, {}, {"start": 2, "end": 9})]
                                       if opset >= 15 else [])
    if op in ELEMENTWISE_ATTRIBUTES:
        return [({"x": EDGES}, {}, {})] + [({"x": EDGES}, {}, attrs) for attrs in ELEMENTWISE_ATTRIBUTES[op]]
    if op == "Xor":
        return [({"a": MASK, "b": MASK[:1]}, {}, {})]
    if op == "Expand":
        return [({"x": ROW}, {"shape": i64(3, 1)}, {}), ({"x": MASK[:, :1]}, {"shape": i64(2, 1, 4)}, {}),
                ({"x": I64}, {"shape": i64(1)}, {})]
    if op == "Range":
        return [({}, {"start": np.array(-3, np.int64), "limit": np.array(9, np.int64),
                      "delta": np.array(2, np.int64)}, {}),
                ({}, {"start": np.array(1.0, np.float32), "limit": np.array(-2.0, np.float32),
                      "delta": np.array(-0.5, np.float32)}, {})]
    if op == "Clip":
        if opset < 11:
            return [({"x": F}, {}, {"min": -0.5, "max": 0.25}), ({"x": F}, {}, {"min": 0.0})]
        lo, hi = np.array(-0.5, np.float32), np.array(0.25, np.float32)
        return [({"x": F}, {"lo": lo, "hi": hi}, {}), ({"x": F, "lo": lo, "hi": hi}, {}, {}),  # constant, fed
                ({"x": F}, {"lo": lo}, {}), ({"x": F}, {"hi": hi}, {}, {"order": ["x", "", "hi"]}),
                ({"x": F * 4, "hi": np.array(-1.0, np.float32)}, {"lo": np.array(1.0, np.float32)}, {},
                 {"order": ["x", "lo", "hi"]})]  # min above max: the max
    if op == "Softmax":
        return [({"x": F}, {}, {"axis": 1}), ({"x": np.stack([F, F])}, {}, {"axis": -1})] + (
            [({"x": np.stack([F, F])}, {}, {"axis": 0}), ({"x": np.stack([F, F])}, {}, {"axis": -2})]
            if opset >= 13 else [])
    if op == "Trilu":
        return [({"x": F}, {}, {}), ({"x": np.stack([F, F])}, {"k": np.array(-1, np.int64)}, {"upper": 0}),
                ({"x": np.stack([F, F]), "k": np.array(2, np.int64)}, {}, {"upper": 1})]
    if op == "CumSum":
        return [({"x": F}, {"axis": np.array(-1, np.int64)}, {"reverse": 1})]
    if op == "Slice":
        return [({"x": F}, {"starts": i64(1, -1), "ends": i64(-1, -4), "axes": i64(0, 1), "steps": i64(1, -1)}, {})]
    if op in ("Unsqueeze", "Squeeze"):
        data = F if op == "Unsqueeze" else F[:, None, :, None]
        return [_axes_case(op, opset, [-1, 1], data)]
    if op.startswith("Reduce"):
        return [_axes_case(op, opset, [-1], F, keepdims=0), _axes_case(op, opset, [0, 1], F)]
    if op == "Pow":
        return [({"x": POSITIVE}, {"e": np.array(2.0, np.float32)}, {}),
                ({"x": POSITIVE, "e": ROW}, {}, {}), ({"x": POSITIVE}, {"e": np.array([0.5], np.float32)}, {})]
    if op == "Reshape":
        return [({"x": F}, {"shape": i64(0, 2, -1)}, {}), ({"x": F, "shape": i64(-1)}, {}, {})]
    if op == "Gather":
        return [({"x": F, "i": i64(-1, 0)}, {}, {"axis": 1}), ({"x": F, "i": np.array(-3, np.int64)}, {}, {})]
    if op == "Where":
        return [({"c": MASK[:1], "a": F, "b": np.array(-1.0, np.float32)}, {}, {})]
    if op == "ScatterND":
        return [({"x": F, "i": i64(2, 0, 0, 3).reshape(2, 2), "u": i64(7, 8).astype(np.float32)}, {}, {})]
    if op in ("LSTM", "GRU", "RNN"):
        return recurrent_cases(op, opset)
    if op == "HardSigmoid":
        return [({"x": F * 4}, {}, {}), ({"x": F * 4}, {}, {"alpha": 1 / 6, "beta": 0.5})]
    if op == "LogSoftmax":
        return [({"x": F}, {}, {"axis": 1}), ({"x": np.stack([F, F])}, {}, {"axis": -1 if opset >= 11 else 2})] + (
            [({"x": np.stack([F, F])}, {}, {"axis": 0})] if opset >= 13 else [])
    if op == "TopK":
        ties = np.round(F * 2) / 2  # equal values: the lower index first
        if opset < 10:
            return [({"x": ties}, {}, {"k": 2}, {"outputs": 2}), ({"x": ties}, {}, {"k": 3, "axis": 0}, {"outputs": 2})]
        smallest = {"largest": 0} if opset >= 11 else {}
        return [({"x": ties}, {"k": i64(2)}, {}, {"outputs": 2}),
                ({"x": ties}, {"k": i64(3)}, dict(smallest, axis=-2 if opset >= 11 else 0), {"outputs": 2}),
                ({"x": ties, "k": i64(4)}, {}, {"axis": 1}, {"outputs": 2})]
    if op == "GatherElements":
        return [({"x": F, "i": i64(-1, 0, 3, 1, 2, -4).reshape(3, 2)}, {}, {"axis": 1}),
                ({"x": F, "i": i64(2, -3, 0, 1).reshape(1, 4)}, {}, {"axis": -2})]
    if op in ("ArgMax", "ArgMin"):
        ties = np.array([[1.0, 3.0, 3.0, -1.0], [-1.0, 2.0, -1.0, 0.0], [0.0, 0.0, 0.0, 0.0]], np.float32)
        return [({"x": F}, {}, {"axis": 1}), ({"x": np.stack([F, F])}, {}, {"axis": 0, "keepdims": 0}),
                ({"x": ties}, {}, {"axis": -1})]
    if op == "EyeLike":  # k above, below and past the diagonal; dtype absent (the input's) or another type
        return [({"x": F}, {}, {}), ({"x": F}, {}, {"k": 1, "dtype": TensorProto.INT64}),
                ({"x": F.T.copy()}, {}, {"k": -2, "dtype": TensorProto.DOUBLE}), ({"x": F}, {}, {"k": 9}),
                ({"x": F[:0]}, {}, {"dtype": TensorProto.INT32})]
    if op in CNN_OPS:
        return cnn_cases(op, opset)
    if op == "Resize":
        return resize_cases(opset)
    if op == "InstanceNormalization":
        scale, bias = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
        return [({"x": IMAGES}, {"scale": scale, "bias": bias}, {}),
                ({"x": IMAGES[:, :, 0], "scale": scale, "bias": bias}, {}, {"epsilon": 1e-2})]
    if op in ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"):
        return loss_cases(op)
    raise AssertionError("no cases for ONNX {}".format(op))


def recurrent_cases(op, opset):
    """LSTM / GRU / RNN cases (sequence 5, batch 2, input 3, hidden 4): weights constant or fed, bias, sequence
    lengths and initial states given or absent, one direction or both, every output read."""
    gates, states = {"LSTM": (4, 2), "GRU": (3, 1), "RNN": (1, 1)}[op]
    rng = np.random.default_rng(gates)

    def weights(directions):
        return {"w": rng.standard_normal((directions, gates * 4, 3)).astype(np.float32),
                "r": rng.standard_normal((directions, gates * 4, 4)).astype(np.float32),
                "b": rng.standard_normal((directions, 2 * gates * 4)).astype(np.float32)}

    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    outputs = {"outputs": states + 1}
    second = {"LSTM": {"input_forget": 0}, "GRU": {"linear_before_reset": 1}, "RNN": {"activations": ["Relu"]}}
    variants = [{}, second[op]] + ([{"layout": 0}] if opset >= 14 else [])
    cases = [({"x": x}, weights(1), dict(attrs, hidden_size=4), outputs) for attrs in variants]
    cases.append(({"x": x, "lengths": np.array([5, 2], np.int32)}, weights(1), {"hidden_size": 4},
                  dict(outputs, order=["x", "w", "r", "b", "lengths"])))
    both = weights(2)
    initial = {"h{}".format(k): rng.standard_normal((2, 2, 4)).astype(np.float32) for k in range(states)}
    cases.append((dict({"x": x, "w": both["w"], "r": both["r"], "lengths": np.array([3, 5], np.int32)}, **initial),
                  {}, dict({"hidden_size": 4, "direction": "bidirectional"},
                           **({"activations": ["Relu", "Relu"]} if op == "RNN" else {})),
                  dict(outputs, order=["x", "w", "r", "", "lengths"] + sorted(initial))))
    return cases


CNN_OPS = ("Conv", "MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool", "BatchNormalization",
           "Flatten", "Dropout", "Pad")
IMAGES = RNG.standard_normal((2, 4, 5, 6)).astype(np.float32)


def cnn_cases(op, opset):
    """Cases of the CNN core over (2, 4, 5, 6) images: grouped, dilated, strided and padded windows, SAME padding,
    ceil_mode, count_include_pad, 1-D and 3-D inputs (tests/test_onnx_cnn_forms.py: their edges)."""
    if op == "Conv":
        return [({"x": IMAGES}, {"w": RNG.standard_normal((6, 2, 3, 2)).astype(np.float32),
                                 "b": RNG.standard_normal(6).astype(np.float32)},
                 {"group": 2, "dilations": [1, 2], "strides": [2, 1], "pads": [1, 0, 2, 1]}),
                ({"x": IMAGES}, {"w": RNG.standard_normal((3, 4, 3, 3)).astype(np.float32)},
                 {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
                ({"x": IMAGES[:, :, 0]}, {"w": RNG.standard_normal((2, 4, 2)).astype(np.float32)}, {})]
    if op in ("MaxPool", "AveragePool"):
        ceil = {"ceil_mode": 1} if opset >= 10 else {}
        average = {"count_include_pad": 1} if op == "AveragePool" else {}
        return [({"x": IMAGES}, {}, dict(average, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], **ceil)),
                ({"x": IMAGES}, {}, {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER"}),
                ({"x": IMAGES[:, :, 0]}, {}, {"kernel_shape": [2]})] + (
                    [({"x": IMAGES[..., None]}, {}, {"kernel_shape": [2, 2, 1], "strides": [1, 2, 1]})])
    if op.startswith("Global"):
        return [({"x": IMAGES}, {}, {}), ({"x": IMAGES[:, :, 0]}, {}, {})]
    if op == "BatchNormalization":
        stats = {name: (RNG.standard_normal(4) if name != "var" else RNG.random(4) + 0.5).astype(np.float32)
                 for name in ("scale", "bias", "mean", "var")}
        return [({"x": IMAGES}, stats, {"epsilon": 1e-3}), ({"x": IMAGES[:, :, 0, 0]}, stats, {})]
    if op == "Pad":  # constant, reflect and edge modes; pads constant or (from opset 11) fed
        if opset < 11:
            return [({"x": IMAGES}, {}, {"pads": [0, 1, -1, 2, 1, 0, 2, -3], "value": 1.5}),
                    ({"x": F}, {}, {"pads": [0] * 4}),
                    ({"x": IMAGES}, {}, {"pads": [0, 0, 1, 2, 0, 0, 2, 1], "mode": "reflect"}),
                    ({"x": IMAGES}, {}, {"pads": [1, 0, 0, 3, 0, 2, 4, 0], "mode": "edge"})]
        return [({"x": IMAGES}, {"pads": i64(0, 1, -1, 2, 1, 0, 2, -3), "value": np.array(1.5, np.float32)}, {}),
                ({"x": F}, {"pads": i64(1, 0, 0, 2)}, {}),
                ({"x": IMAGES, "pads": i64(0, 1, 0, 2, 1, 0, 2, 0)}, {"value": np.array(1.5, np.float32)}, {}),
                ({"x": IMAGES}, {"pads": i64(0, 0, 1, 2, 0, 0, 2, 1)}, {"mode": "reflect"}),
                ({"x": IMAGES, "pads": i64(1, 0, 0, 3, 0, 2, 4, 0)}, {}, {"mode": "edge"}),
                ({"x": F, "value": np.array(-2.5, np.float32)}, {"pads": i64(1, 0, 0, 2)}, {},
                 {"order": ["x", "pads", "value"]})]
    if op == "Flatten":
        return [({"x": IMAGES}, {}, {"axis": 2}), ({"x": IMAGES}, {}, {"axis": -1 if opset >= 11 else 3}),
                ({"x": IMAGES}, {}, {"axis": 0})]
    if opset < 12:
        return [({"x": IMAGES}, {}, {"ratio": 0.5})]
    return [({"x": IMAGES}, {"ratio": np.array(0.3, np.float32), "training": np.array(False)}, {}, {"outputs": 2}),
            ({"x": IMAGES}, {}, {})]


def resize_cases(opset):
    """Resize as torch writes it (nearest with floor, linear with each coordinate mode torch uses) over (2, 4, 5, 6)
    images: scales constant or fed, sizes constant or fed, up and down (tests/test_onnx_resize_norm.py: the edges)."""
    torch_attrs = {"cubic_coeff_a": -0.75, "nearest_mode": "floor"}
    nearest = dict(torch_attrs, mode="nearest", coordinate_transformation_mode="asymmetric")
    linear = {mode: dict(torch_attrs, mode="linear", coordinate_transformation_mode=mode)
              for mode in ("pytorch_half_pixel", "half_pixel", "align_corners")}
    roi, scales, sizes = np.zeros(0, np.float32), np.array([1, 1, 2, 1.5], np.float32), i64(2, 4, 7, 3)
    sized = ["x", "roi", "scales", "sizes"] if opset < 13 else ["x", "", "", "sizes"]
    unscaled = {"roi": roi, "scales": roi} if opset < 13 else {}
    return [({"x": IMAGES}, {"roi": roi, "scales": scales}, nearest),
            ({"x": IMAGES, "scales": np.array([1, 1, 0.6, 2.5], np.float32)}, {"roi": roi}, linear["half_pixel"],
             {"order": ["x", "roi", "scales"]}),
            ({"x": IMAGES, "sizes": sizes}, unscaled, linear["pytorch_half_pixel"], {"order": sized}),
            ({"x": IMAGES}, dict(unscaled, sizes=i64(2, 4, 3, 8)), linear["align_corners"], {"order": sized})]


def loss_cases(op):
    """Loss cases (C = 4): rank 2, 4 (torch's 2-D kernel) and 3; weights constant, fed or absent; every reduction;
    ignore_index in range, negative or absent; int64 and int32 targets; SoftmaxCrossEntropyLoss's log_prob read
    (tests/test_onnx_loss.py: their edges)."""
    log_prob = {"outputs": 2} if op == "SoftmaxCrossEntropyLoss" else {}
    weights = np.array([0.5, 2.0, 1.0, 3.0], np.float32)
    image_targets = (np.arange(60) % 4).reshape(2, 5, 6)
    return [({"x": F, "t": i64(1, 0, 3)}, {}, {}, log_prob),
            ({"x": IMAGES, "t": image_targets}, {"w": weights}, {"reduction": "sum", "ignore_index": 1}, log_prob),
            ({"x": IMAGES[..., 0], "t": i64(-1, 2, 3, 0, 1, -1, 3, 3, 2, 0).reshape(2, 5), "w": weights}, {},
             {"reduction": "none", "ignore_index": -1}, log_prob),
            ({"x": F, "t": np.array([2, 2, 1], np.int32)}, {"w": weights}, {"reduction": "mean", "ignore_index": 2},
             log_prob)]


def _form_params():
    for op, forms in sorted(FORMS.items()):
        for form in forms:
            for opset in sorted({max(form.opsets[0], 9), form.opsets[1]}):
                if opset >= 9:
                    yield pytest.param(op, opset, id="{}-{}".format(op, opset))


@pytest.mark.parametrize("op, opset", list(_form_params()))
def test_every_accepted_form_equals_onnxruntime(op, opset):
    skip_where_the_oracle_is_wrong(op)
    for inputs, constants, attrs, *options in form_cases(op, opset):
        model = node_model(op, inputs, constants, attrs, opset, out_rank=1, **dict(*options))
        types = GraphFacts(onnx.shape_inference.infer_shapes(model).graph).elem_type
        assert check_node(model.graph.node[0], opset, lambda name: name in constants, types).translation  # accepted
        assert outcome(model, inputs) == ("match", None), (op, opset, attrs)


@pytest.mark.parametrize("node, opset, message", [
    (helper.make_node("Slice", ["x", "s", "e", "a"], ["y"]), 13, r"ONNX Slice node 'y' \(opset 13\): input 3 \(axes\) "
                                                                  r"is not a constant; Caffe2's stock Slice converter"),
    (helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=2, clip=1.0), 14,
     r"ONNX LSTM node 'y' \(opset 14\): attribute 'clip' is not accepted \(accepted: direction, hidden_size, "
     r"input_forget, layout\)"),
    (helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=2, layout=1), 14,
     r"ONNX LSTM node 'y' \(opset 14\): attribute layout=1 is not accepted \(accepted: 0\)"),
    (helper.make_node("GRU", ["x", "w", "r"], ["y"], hidden_size=2, activations=["Relu", "Tanh"]), 13,
     r"ONNX GRU node 'y' \(opset 13\): attribute 'activations' is not accepted"),
    (helper.make_node("GRU", ["x", "w", "r"], ["y"], hidden_size=2, direction="reverse"), 11,
     r"ONNX GRU node 'y' \(opset 11\): attribute direction='reverse' is not accepted \(accepted: 'bidirectional', "
     r"'forward'\)"),
    (helper.make_node("RNN", ["x", "w", "r"], ["y"], hidden_size=2, activations=["Tanh", "Relu"],
                      direction="bidirectional"), 13,
     r"ONNX RNN node 'y' \(opset 13\): attribute activations=\('Tanh', 'Relu'\) is not accepted \(accepted: "
     r"\('Relu',\), \('Relu', 'Relu'\), \('Tanh',\), \('Tanh', 'Tanh'\)\)"),
    (helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1), 14,
     r"ONNX Reshape node 'y' \(opset 14\): attribute allowzero=1 is not accepted \(accepted: 0\)"),
    (helper.make_node("Relu", ["x"], ["y"]), 16, r"ONNX Relu node 'y' \(opset 16\): accepted only at opsets 7-15"),
    (helper.make_node("Relu", ["x"], ["y"], domain="com.example"), 13, r"domain 'com.example' has no accepted forms"),
    (helper.make_node("Softmax", ["x"], ["y"], axis=1, foo=2), 13, r"attribute 'foo' is not accepted"),
])
def test_other_forms_are_refused_in_one_line(node, opset, message):
    with pytest.raises(FormRefused, match=message) as caught:
        check_node(node, opset)
    assert len(str(caught.value).splitlines()) == 1


def test_recurrent_values_without_a_translation_are_refused_or_fail_the_run():
    """A double LSTM is refused by node; sequence lengths outside [0, sequence length], which onnxruntime refuses
    and Caffe2's recurrent ops do not check (one past the end is read as the end, a negative one corrupts the
    process' memory), fail the run."""
    inputs, constants, attrs, options = recurrent_cases("GRU", 13)[-2]
    assert options["order"][-1] == "lengths"
    model = node_model("GRU", {"x": inputs["x"].astype(np.float64)},
                       {name: value.astype(np.float64) for name, value in constants.items()}, attrs, 13, outputs=2)
    with pytest.raises(FormRefused, match=r"^ONNX GRU node 'out0,out1' \(opset 13\): input 0 'x' is DOUBLE; Caffe2 "
                                          r"runs GRU right on FLOAT only$"):
        pycumsum_op.onnx.prepare(model)
    rnn = node_model("RNN", {"x": inputs["x"]}, {"w": constants["w"][:, :4], "r": constants["r"][:, :4]},
                     {"hidden_size": 4, "activations": ["Relu", "Relu"]}, 13, outputs=2)
    with pytest.raises(FormRefused, match=r"^ONNX RNN node 'out0,out1' \(opset 13\): 2 activations for 1 direction"):
        pycumsum_op.onnx.prepare(rnn)
    model = node_model("GRU", inputs, constants, dict(attrs, hidden_size=3), 13, **options)
    with pytest.raises(FormRefused, match=r"W 'w' has dims \[1, 12, 3\], but hidden_size=3 and 1 direction\(s\) "
                                          r"make them \[1, 9, input size\]$"):
        pycumsum_op.onnx.prepare(model)
    # W and R fed at run time, of unknown dims: what the translated net allocates from hidden_size alone is bounded
    # (the produced net's fills are charged to its budget before it is created)
    def fed(hidden_size):
        return helper.make_model(helper.make_graph(
            [helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=hidden_size)], "fed",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["s", "b", 3])] + [
                helper.make_tensor_value_info(name, TensorProto.FLOAT, ["d", "g", "i"]) for name in ("w", "r")],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s", "d", "b", "h"])]),
            opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(InputTooLarge, match=r"\(ConstantFill\) output of shape \(1, 8796093022208\) takes more "):
        pycumsum_op.onnx.prepare(fed(2 ** 40))
    with pytest.raises(FormRefused, match=r"^ONNX LSTM node 'y' \(opset 13\): hidden_size 0 is not positive$"):
        pycumsum_op.onnx.prepare(fed(0))
    rep = pycumsum_op.onnx.prepare(node_model("GRU", inputs, constants, attrs, 13, **options))
    for lengths in ([6, 2], [-1, 2]):
        with pytest.raises(RuntimeError, match=r"input 4 \(sequence_lens\) 'lengths' holds a length outside"):
            rep.run(dict(inputs, lengths=np.array(lengths, np.int32)))


def test_the_stock_slice_of_inputs_is_refused_not_silently_wrong():
    """Caffe2's converter returns x for Slice(x, starts, ends) with starts/ends as graph inputs."""
    x = F
    model = node_model("Slice", {"x": x, "s": i64(1), "e": i64(3), "a": i64(1)}, opset=13)
    assert outcome(model, {"x": x, "s": i64(1), "e": i64(3), "a": i64(1)})[0] == "refused"
    # with run-time starts and ends but constant axes, pycumsum_op translates it
    model = node_model("Slice", {"x": x, "s": i64(1), "e": i64(-1)}, {"a": i64(1)}, opset=13)
    assert outcome(model, {"x": x, "s": i64(1), "e": i64(-1)}) == ("match", None)


def _run(model, feeds, static, ambiguous=False):
    """The outcome; with static shapes every form must be translated (no refusal), but for ``ambiguous`` ones."""
    result, detail = outcome(model, feeds)
    assert result != "mismatch", detail
    if static and not ambiguous:
        assert result == "match", detail
    return result


BOUND = st.integers(-7, 7) | st.sampled_from([2 ** 63 - 1, -2 ** 63, 2 ** 31, -2 ** 31 - 5])
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(SETTINGS, max_examples=80)
@given(dims=st.lists(st.integers(0, 5), min_size=1, max_size=3), data=st.data(), dynamic=st.booleans(),
       opset=st.sampled_from([11, 13]), runtime=st.booleans())
def test_slice_property(dims, data, dynamic, opset, runtime):
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    count = data.draw(st.integers(1, len(dims)))
    axes = data.draw(st.lists(st.integers(-len(dims), len(dims) - 1), min_size=count, max_size=count,
                              unique_by=lambda a: a % len(dims)))
    starts = [data.draw(BOUND) for _ in axes]
    ends = [data.draw(BOUND) for _ in axes]
    steps = [1] * count if runtime else [data.draw(st.sampled_from([1, 1, -1, 2, -2, 3])) for _ in axes]
    bounds = {"starts": i64(*starts), "ends": i64(*ends)}
    rest = {"axes": i64(*axes), "steps": i64(*steps)}
    order = ["x", "starts", "ends", "axes", "steps"]
    if runtime:  # bounds known only at run time, clamped there as ONNX clamps them
        model = node_model("Slice", dict({"x": x}, **bounds), rest, opset=opset, dynamic=dynamic, order=order)
        _run(model, dict({"x": x}, **bounds), static=True)
    else:
        model = node_model("Slice", {"x": x}, dict(bounds, **rest), opset=opset, dynamic=dynamic, order=order)
        ambiguous = any(step < 0 and end >= x.shape[axis] for axis, end, step in zip(axes, ends, steps))
        # steps of 1 are translated whatever the lengths (clamped at run time where a bound needs it)
        _run(model, {"x": x}, static=not dynamic or set(steps) == {1}, ambiguous=ambiguous)


#: Bounds and steps past the 32 bits in which Caffe2's Range counts, and past int64 once added together.
FAR = st.sampled_from([2 ** 31 - 1, 2 ** 31, 2 ** 32 + 3, 2 ** 62, 2 ** 63 - 1])
STRIDES = st.sampled_from([2, 3, 5, 50, 2 ** 31, 2 ** 32 + 1, 2 ** 62, 2 ** 63 - 1])


@settings(SETTINGS, max_examples=50)
@example(length=5, start=2 ** 63 - 1, end=2 ** 63 - 1, step=50, symbolic=True)  # 171,798,692 indices unclamped
@example(length=5, start=4, end=-2 ** 63, step=-2 ** 63 + 1, symbolic=False)  # one index: the step past the length
@example(length=7, start=6, end=-8, step=-3, symbolic=False)  # Range rounds a negative step's length toward zero
@example(length=0, start=0, end=2 ** 63 - 1, step=2, symbolic=False)  # no index
@given(length=st.integers(0, 7), start=st.integers(-8, 8) | FAR | FAR.map(lambda v: -v - 1),
       end=st.integers(-8, 8) | FAR | FAR.map(lambda v: -v - 1), step=STRIDES | STRIDES.map(lambda v: -v),
       symbolic=st.booleans())
def test_strided_slice_bounds_reach_caffe2_clamped(length, start, end, step, symbolic):
    """A Slice with a step other than 1 or -1 gathers the indices Caffe2's Range makes at run time, and Range
    computes its length in 32-bit arithmetic (unclamped, a start of 2**63 - 1 by 50 on 5 rows asked for 171,798,692
    indices): every bound it is given is clamped first, so the result is onnxruntime's whatever the bounds. On a
    length the model leaves symbolic only every step-th element from a start to the end is translated."""
    x = np.arange(length * 4, dtype=np.float32).reshape(length, 4)
    constants = {"starts": i64(start), "ends": i64(end), "axes": i64(0), "steps": i64(step)}
    model = node_model("Slice", {"x": x}, constants, opset=13, dynamic=symbolic,
                       order=["x", "starts", "ends", "axes", "steps"])
    result, detail = outcome(model, {"x": x})
    if symbolic:
        translated = step > 1 and start >= 0 and end >= 2 ** 31 - 1
    else:  # the end past the length with a negative step: onnxruntime and ONNX's specification disagree
        translated = not (step < 0 and end >= length)
    assert result == ("match" if translated else "refused"), detail


@SETTINGS
@given(dims=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(), dynamic=st.booleans(),
       opset=st.sampled_from([11, 13]))
def test_gather_property(dims, data, dynamic, opset):
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    axis = data.draw(st.integers(-len(dims), len(dims) - 1))
    size = dims[axis]
    index_shape = data.draw(st.lists(st.integers(0, 3), max_size=2))
    indices = np.array(data.draw(st.lists(st.integers(-size, size - 1), min_size=int(np.prod(index_shape)),
                                          max_size=int(np.prod(index_shape)))), np.int64).reshape(index_shape)
    model = node_model("Gather", {"x": x, "i": indices}, attrs={"axis": axis}, opset=opset, dynamic=dynamic)
    _run(model, {"x": x, "i": indices}, static=True)


@SETTINGS
@given(dims=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data(), dynamic=st.booleans(),
       kind=st.sampled_from([np.float32, np.int64, bool]))
def test_expand_property(dims, data, dynamic, kind):
    x = (np.arange(int(np.prod(dims))) % 3).astype(kind).reshape(dims)
    extra = data.draw(st.lists(st.integers(1, 3), max_size=2))
    shape = extra + [data.draw(st.sampled_from([1, dim] if dim == 1 else [1, dim])) if dim > 1 else
                     data.draw(st.integers(1, 3)) for dim in dims]
    shape = shape[data.draw(st.integers(0, len(shape) - 1)):]  # a shorter shape broadcasts too
    model = node_model("Expand", {"x": x}, {"shape": i64(*shape)}, opset=13, dynamic=dynamic)
    _run(model, {"x": x}, static=True)


@SETTINGS
@given(dims=st.lists(st.integers(0, 4), min_size=1, max_size=3), data=st.data(), dynamic=st.booleans(),
       opset=st.sampled_from([11, 13, 14]), runtime=st.booleans())
def test_reshape_property(dims, data, dynamic, opset, runtime):
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    total = x.size
    rank = data.draw(st.integers(1, 3))
    shape = [data.draw(st.sampled_from([0, -1, 1, 2]) if k < len(dims) else st.sampled_from([-1, 1, 2]))
             for k in range(rank)]
    shape = [dims[k] if v == 0 else v for k, v in enumerate(shape)]  # what 0 copies
    if shape.count(-1) > 1 or (-1 in shape and (total == 0 or total % max(1, int(np.prod([v for v in shape if v > 0])))))\
            or (-1 not in shape and int(np.prod(shape)) != total):
        shape = [total] if total else list(dims)
    zeros = [k for k in range(min(len(shape), len(dims))) if shape[k] == dims[k] and data.draw(st.booleans())]
    written = [0 if k in zeros and dims[k] else v for k, v in enumerate(shape)]
    feeds = {"x": x}
    if runtime:
        feeds["shape"] = i64(*written)
        model = node_model("Reshape", feeds, opset=opset, dynamic=dynamic)
    else:
        model = node_model("Reshape", feeds, {"shape": i64(*written)}, opset=opset, dynamic=dynamic)
    _run(model, feeds, static=True)


@SETTINGS
@given(dims=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(), dynamic=st.booleans(),
       op=st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"]), opset=st.sampled_from([11, 13]),
       keepdims=st.sampled_from([0, 1]))
def test_reduce_property(dims, data, dynamic, op, opset, keepdims):
    x = np.random.default_rng(len(dims)).standard_normal(dims).astype(np.float32)
    axes = data.draw(st.lists(st.integers(-len(dims), len(dims) - 1), max_size=len(dims),
                              unique_by=lambda a: a % len(dims)))
    if axes:
        inputs, constants, attrs = _axes_case(op, opset, axes, x, keepdims=keepdims)
    else:
        inputs, constants, attrs = {"x": x}, {}, {"keepdims": keepdims}
    model = node_model(op, inputs, constants, attrs, opset=opset, dynamic=dynamic)
    _run(model, inputs, static=True)


def docs_table() -> str:
    """The accepted forms as a Markdown table."""
    rows = ["| ONNX op | opsets | attributes (accepted values) | constant inputs | element types | translated by |",
            "| --- | --- | --- | --- | --- | --- |"]
    for op in sorted(FORMS):
        for form in FORMS[op]:
            attributes = ", ".join(name if values is None else "{} ({})".format(
                name, "/".join("[{}]".format(",".join(v)) if isinstance(v, tuple) else
                               type_name(v).lower() if name == "to" else str(v) for v in sorted(values)))
                for name, values in sorted(form.attributes.items()))
            types = "any" if form.types is None else ", ".join(type_name(t).lower() for t in sorted(form.types))
            if form.typed != ("input", 0):
                types += " ({} {})".format(*form.typed)
            rows.append("| {} | {}-{} | {} | {} | {} | {} |".format(
                op, form.opsets[0], form.opsets[1], attributes or "-",
                ", ".join(str(position) for position in form.constants) or "-", types,
                "pycumsum_op" if form.translation == OWN else "Caffe2's converter"))
    return "\n".join(rows)


def test_docs_list_every_accepted_form():
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "onnx.md")) as docs:
        assert docs_table() in docs.read()


#: every ONNX element type numpy can hold (complex and bfloat16 aside), each tried on every form
ELEMENT_TYPES = [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.INT16,
                 TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32,
                 TensorProto.UINT64, TensorProto.BOOL, TensorProto.STRING]
#: the inputs of `form_cases` that hold indices, axes or shapes: their type is not the form's
_INDEX_INPUTS = frozenset(["axes", "axis", "shape", "starts", "ends", "steps", "i", "lengths", "pads", "split", "repeats",
                           "depth", "k", "roi", "scales", "sizes"])


def form_opsets(op):
    """The opsets each form of ``op`` is tried at: its first (from 9) and its last."""
    return sorted({opset for form in FORMS[op] for opset in (max(form.opsets[0], 9), form.opsets[1])
                   if opset >= 9})


def _retyped(value, elem_type):
    """``value`` as an array of ONNX ``elem_type``: floats as integers are 3 x value truncated, never 0 (a divisor),
    unsigned ones their absolute value; as bool, whether positive; as strings, their text."""
    value = np.asarray(value)
    if elem_type == TensorProto.STRING:
        return value.astype(str).astype(object)
    if elem_type == TensorProto.BOOL:
        return np.asarray(value > 0 if value.dtype.kind == "f" else value.astype(bool))
    dtype = np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type])
    if dtype.kind == "f":
        return value.astype(dtype)
    if value.dtype.kind == "f":
        value = np.trunc(value * 3)
        value = np.where(value == 0, 1, value)
    return np.asarray(np.abs(value) if dtype.kind == "u" else value).astype(dtype)


def typed_cases(op, opset, elem_type):
    """`form_cases` of ``op`` with the blob its forms type (``Form.typed``) and every input of that blob's type
    (not indices, axes or shapes) made ``elem_type``; Cast to every element type."""
    where, position = FORMS[op][0].typed
    cases = []
    for inputs, constants, attrs, *options in form_cases(op, opset):
        options = dict(*options)
        if where == "output":  # Constant and ConstantOfShape: the type of their value
            if "value" not in attrs:
                continue
            value = _retyped(numpy_helper.to_array(attrs["value"]), elem_type)
            cases.append((inputs, constants, dict(attrs, value=numpy_helper.from_array(value, "v")), options))
            continue
        arrays = dict(inputs, **constants)
        order = options.get("order") or list(inputs) + list(constants)
        kind = arrays[order[position]].dtype
        inputs, constants = ({name: _retyped(value, elem_type) if value.dtype == kind and name not in _INDEX_INPUTS
                              else value for name, value in group.items()} for group in (inputs, constants))
        for to in ELEMENT_TYPES if op == "Cast" else [None]:
            cases.append((inputs, constants, attrs if to is None else dict(attrs, to=to), options))
    return cases


def _onnxruntime_unoptimized(model, feeds):
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


#: onnxruntime 1.10.0 (the oracle on CPython 3.6 and 3.7) aborts the process running a Constant whose value is
#: strings ("free(): double free detected"); 1.19.2 runs it.
ORACLE_RUNS_STRING_CONSTANTS = tuple(int(part) for part in onnxruntime.__version__.split(".")[:2]) >= (1, 19)


def typed_outcomes(op, opset, elem_type):
    """[kind, detail] of each of ``typed_cases``: "match", "refused" (at prepare), "mismatch", "error" (the
    translated net failed) or "unsupported" (onnxruntime does not run it: no case of the type)."""
    results = []
    for inputs, constants, attrs, options in typed_cases(op, opset, elem_type):
        if op == "Constant" and elem_type == TensorProto.STRING and not ORACLE_RUNS_STRING_CONSTANTS:
            results.append(["unsupported", "onnxruntime {} aborts on a Constant of strings".format(
                onnxruntime.__version__)])
            continue
        try:
            model = node_model(op, inputs, constants, attrs, opset, out_rank=1, **options)
            expected = _onnxruntime_unoptimized(model, inputs)
        except Exception as error:  # onnx or onnxruntime has no such model: not a case of the type
            results.append(["unsupported", str(error).splitlines()[0][:200] if str(error) else type(error).__name__])
            continue
        try:
            results.append(list(outcome(model, inputs, expected)))
        except Exception as error:
            results.append(["error", (str(error).strip().splitlines() or [type(error).__name__])[0][:200]])
    return results


def _covering(op, opset):
    return next(form for form in FORMS[op] if form.opsets[0] <= opset <= form.opsets[1])


@pytest.mark.parametrize("op, opset", [pytest.param(op, opset, id="{}-{}".format(op, opset),
                                                    marks=[pytest.mark.slow] if op == "Cast" else [])  # 13 x 13 casts
                                       for op in sorted(FORMS) for opset in form_opsets(op)])
def test_every_element_type_equals_onnxruntime_or_is_refused(op, opset):
    """Each form's cases in every element type onnxruntime runs: a type the form states matches onnxruntime
    (a Cast to a type its `to` does not accept is refused), any other is refused at prepare naming the op and the
    type; none imports and then fails or differs."""
    skip_where_the_oracle_is_wrong(op)
    form = _covering(op, opset)
    for elem_type in ELEMENT_TYPES:
        outcomes = [(kind, detail) for kind, detail in typed_outcomes(op, opset, elem_type) if kind != "unsupported"]
        where = (op, opset, type_name(elem_type))
        assert all(kind in ("match", "refused") for kind, _ in outcomes), (where, outcomes)
        if form.types is not None and elem_type not in form.types:
            refusal = " is {}; Caffe2 runs {} right on ".format(type_name(elem_type), op)
            assert all(kind == "refused" and (refusal in detail or re.search(r": attribute \w+=\S+ is not accepted",
                                                                            detail))
                       for kind, detail in outcomes), (where, outcomes)
        elif outcomes:
            assert ("match", None) in outcomes, (where, outcomes)


@pytest.mark.parametrize("op", sorted(FORMS))
def test_every_form_states_its_element_types_and_refuses_an_unstated_one(op):
    """A blob whose element type the graph does not state (a sequence, a graph without types) is refused."""
    for opset in form_opsets(op):
        form = _covering(op, opset)
        assert form.types, (op, opset)  # measured, never "any"
        node = helper.make_node(op, ["in{}".format(k) for k in range(3)], ["out0"])
        with pytest.raises(FormRefused, match=r"^ONNX {} node 'out0' \(opset {}\): {} {} '\w+' is of a type the "
                                              r"model does not state; Caffe2 runs {} right on [A-Z0-9, ]+ only$".format(
                                                  op, opset, *form.typed, op)):
            check_node(node, opset, lambda name: True)


def test_a_graph_that_does_not_state_a_type_is_refused_at_prepare():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "untyped",
                              [helper.make_tensor_value_info("x", TensorProto.UNDEFINED, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(FormRefused, match=r"^ONNX Relu node 'y' \(opset 13\): input 0 'x' is of a type the model does "
                                          r"not state; Caffe2 runs Relu right on FLOAT only$"):
        pycumsum_op.onnx.prepare(model)
