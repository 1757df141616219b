"""The elementwise forms translated by torch's kernels (`ops.unary._ELEMENTWISE`, IsInf, HardSwish, Softsign), the
reductions ReduceL1, ReduceL2, ReduceSumSquare, ReduceProd and ReduceLogSumExp, variadic Sum and Mean, Size, Split,
GreaterOrEqual, LessOrEqual, Trilu and Shape's start/end (opset 15) at the edges: ±inf, NaN, -0.0, values whose
results overflow, half-way values, rank 0, empty and size-1 dims, static and dynamic shapes, every element type each
form states. Each matches onnxruntime (graph optimizations off). Where torch differs from ONNX's definition the
translation follows ONNX and onnxruntime: Sign of NaN is NaN (torch's sign gives 0), ThresholdedRelu of NaN is 0
(``x > alpha`` is false; torch's threshold keeps NaN), HardSwish of a huge x is x (torch's hardswish overflows
x * (x + 3)). The reductions' reference is numpy (ONNX's definition), since onnxruntime is wrong on two edges
(`REFERENCES`), and so is Trilu's, since onnxruntime wraps k around near ±2**63 (`ORACLE_K`).
"""
import pytest
from onnx_support import onnx_backend_refusal, oracle_outputs, skip_where_the_oracle_is_wrong

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import pycumsum_op.onnx
from pycumsum_op.onnx.ops import FORMS
from pycumsum_op.onnx.ops.contract import FormRefused
from pycumsum_op.onnx.ops import DECLARATIONS
from onnx_forms_support import EDGE_FLOATS, edge_arrays, edge_shapes, node_model, outcome, unranked_model

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: the edge values, half-way values (Round: to even) and values near the domains' bounds (Asin, Acosh, Atanh)
FLOATS = EDGE_FLOATS + (0.5, -1.5, 2.5, -1.0, 0.999, 90.0, -90.0, 21.0)
#: each op's attributes and the values drawn for them (besides leaving them out)
ATTRIBUTES = {"Elu": {"alpha": [0.0, 0.5, 2.0]}, "Selu": {"alpha": [0.5, 2.0], "gamma": [0.5, 3.0]},
              "Celu": {"alpha": [0.5, 2.0]}, "LeakyRelu": {"alpha": [0.0, 0.3, -1.0]},
              "ThresholdedRelu": {"alpha": [0.0, -0.5, 2.0]}, "IsInf": {"detect_negative": [0, 1],
                                                                         "detect_positive": [1]}}
UNARY = ("Sign", "Ceil", "Floor", "Round", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
         "Acosh", "Atanh", "IsNaN", "IsInf", "Elu", "Selu", "Celu", "LeakyRelu", "ThresholdedRelu", "HardSwish",
         "Softplus", "Softsign")


def _dtypes(op):
    return sorted({onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t] for form in FORMS[op] for t in form.types}, key=str)


@pytest.mark.parametrize("op", UNARY)
@SETTINGS
@given(data=st.data(), shape=edge_shapes(), dynamic=st.booleans())
def test_unary_matches_onnxruntime(op, data, shape, dynamic):
    skip_where_the_oracle_is_wrong(op)
    form = data.draw(st.sampled_from(FORMS[op]))
    opset = data.draw(st.integers(max(form.opsets[0], 9), form.opsets[1]))
    dtype = data.draw(st.sampled_from(_dtypes(op)))
    attrs = {name: data.draw(st.sampled_from(values)) for name, values in ATTRIBUTES.get(op, {}).items()
             if data.draw(st.booleans())}
    x = data.draw(edge_arrays(dtype, shape, FLOATS))
    model = node_model(op, {"x": x}, {}, attrs, opset=opset, dynamic=dynamic)
    assert outcome(model, {"x": x}) == ("match", None), (op, opset, attrs, x)


def test_is_inf_detecting_neither_is_refused_in_one_line():
    x = np.array([np.inf, 1.0], np.float32)
    model = node_model("IsInf", {"x": x}, {}, {"detect_negative": 0, "detect_positive": 0}, opset=10)
    assert outcome(model, {"x": x}) == ("refused", "ONNX IsInf node 'out0' (opset 10): detect_negative=0 with "
                                                   "detect_positive=0 has no translation")


@SETTINGS
@given(data=st.data(), a=edge_shapes(max_rank=3), dynamic=st.booleans())
def test_xor_broadcasts_as_onnxruntime(data, a, dynamic):
    b = tuple(1 if data.draw(st.booleans()) else dim for dim in a)[data.draw(st.integers(0, len(a))):]
    if data.draw(st.booleans()):
        a, b = b, a
    feeds = {"a": data.draw(edge_arrays(bool, a)), "b": data.draw(edge_arrays(bool, b))}
    model = node_model("Xor", feeds, opset=data.draw(st.sampled_from([7, 15])), dynamic=dynamic)
    assert outcome(model, feeds) == ("match", None)


@SETTINGS
@given(shape=edge_shapes(max_rank=4), start=st.none() | st.integers(-6, 6), end=st.none() | st.integers(-6, 6),
       dynamic=st.booleans())
def test_shape_start_end_matches_onnxruntime(shape, start, end, dynamic):
    x = np.zeros(shape, np.float32)
    attrs = {name: value for name, value in (("start", start), ("end", end)) if value is not None}
    model = node_model("Shape", {"x": x}, {}, attrs, opset=15, dynamic=dynamic)
    assert outcome(model, {"x": x}) == ("match", None), attrs


def test_shape_start_end_of_an_unknown_rank_is_refused_in_one_line():
    class Unranked:  # the facts of a graph that states no rank for x
        def rank(self, name):
            return None

    with pytest.raises(FormRefused, match=r"^ONNX Shape node 'y' \(opset 15\): start/end need the input's rank, which "
                                          r"the model does not state$"):
        DECLARATIONS["Shape"].translate(helper.make_node("Shape", ["x"], ["y"], start=1), Unranked(), 15, lambda: "fresh")


REDUCTIONS = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceProd", "ReduceLogSumExp")
#: a reduction runs in each kernel's own order: values whose sums overflow would differ by order alone; 1e20's
#: square and product overflow in any order
REDUCED_FLOATS = tuple(value for value in EDGE_FLOATS if abs(value) != 3e38) + (1e20, 0.5)


def _log_sum_exp(x, axis, keepdims):
    """log(sum(exp(x))) as its exact value (in float64, shifted by the finite maximum)."""
    wide = x.astype(np.float64)
    top = np.max(wide, axis=axis, keepdims=True, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(all="ignore"):
        return np.log(np.sum(np.exp(wide - top), axis=axis, keepdims=keepdims)) + (
            top if keepdims else np.squeeze(top, axis))


#: ONNX's reductions as numpy computes them: the reference, since onnxruntime reduces a 1-D empty input to an empty
#: vector (not a scalar) and gives NaN for the log-sum-exp of +inf (ONNX's log(sum(exp(x))) is inf)
REFERENCES = {
    "ReduceL1": lambda x, axis, keepdims: np.sum(np.abs(x), axis=axis, keepdims=keepdims, dtype=x.dtype),
    "ReduceL2": lambda x, axis, keepdims: np.sqrt(np.sum(np.square(x), axis=axis, keepdims=keepdims, dtype=x.dtype)),
    "ReduceSumSquare": lambda x, axis, keepdims: np.sum(np.square(x), axis=axis, keepdims=keepdims, dtype=x.dtype),
    "ReduceProd": lambda x, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype),
    "ReduceLogSumExp": _log_sum_exp,
}


@pytest.mark.parametrize("op", REDUCTIONS)
@SETTINGS
@given(data=st.data(), shape=edge_shapes(min_rank=1), dynamic=st.booleans(), keepdims=st.sampled_from([0, 1, None]))
def test_reductions_match_onnxruntime(op, data, shape, dynamic, keepdims):
    rank = len(shape)
    axes = data.draw(st.none() | st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                                          unique_by=lambda axis: axis % rank))
    attrs = {name: value for name, value in (("axes", axes), ("keepdims", keepdims)) if value is not None}
    x = data.draw(edge_arrays(data.draw(st.sampled_from(_dtypes(op))), shape, REDUCED_FLOATS))
    model = node_model(op, {"x": x}, {}, attrs, opset=data.draw(st.sampled_from([9, 11, 13, 15])), dynamic=dynamic)
    axis = None if axes is None else tuple(axis % rank for axis in axes)
    with np.errstate(all="ignore"):
        expected = np.asarray(REFERENCES[op](x, axis, bool(1 if keepdims is None else keepdims))).astype(x.dtype)
    assert outcome(model, {"x": x}, [expected]) == ("match", None), (attrs, x)


@pytest.mark.parametrize("op", ["Sum", "Mean"])
@SETTINGS
@given(data=st.data(), shape=edge_shapes(), count=st.integers(1, 3), dynamic=st.booleans())
def test_sum_and_mean_broadcast_as_onnxruntime(op, data, shape, count, dynamic):
    dtype = data.draw(st.sampled_from(_dtypes(op)))
    feeds = {}
    for k in range(count):  # each a broadcastable shape: dims made 1, leading dims dropped
        dims = tuple(1 if data.draw(st.booleans()) else dim for dim in shape)[data.draw(st.integers(0, len(shape))):]
        feeds["x{}".format(k)] = data.draw(edge_arrays(dtype, dims, REDUCED_FLOATS))
    model = node_model(op, feeds, opset=data.draw(st.sampled_from([8, 13, 15])), dynamic=dynamic)
    assert outcome(model, feeds) == ("match", None), feeds


@pytest.mark.parametrize("axes, keepdims", [(None, 0), ([0, 1], 1), ([-1, 0], 0)])
def test_reduce_prod_of_several_axes_multiplies_in_one_pass(axes, keepdims):
    """1 * inf * 1e-45 * 1e-45 is inf in row-major order (onnxruntime's, numpy's); axis by axis the tiny row underflows
    to 0 first, and 0 * inf is NaN."""
    x = np.array([[1.0, np.inf], [1e-45, 1e-45]], np.float32)
    attrs = {"keepdims": keepdims} if axes is None else {"axes": axes, "keepdims": keepdims}
    assert outcome(node_model("ReduceProd", {"x": x}, {}, attrs, opset=13), {"x": x}) == ("match", None)


@SETTINGS
@given(shape=edge_shapes(), dynamic=st.booleans(), opset=st.sampled_from([9, 13, 15]))
def test_size_matches_onnxruntime(shape, dynamic, opset):
    x = np.zeros(shape, np.float32)
    assert outcome(node_model("Size", {"x": x}, opset=opset, dynamic=dynamic), {"x": x}) == ("match", None)


@SETTINGS
@given(data=st.data(), shape=edge_shapes(min_rank=1), dynamic=st.booleans(), opset=st.sampled_from([11, 13, 15]),
       given_parts=st.booleans())
def test_split_matches_onnxruntime(data, shape, dynamic, opset, given_parts):
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    dim = shape[axis]
    if given_parts:  # lengths summing to the axis' length, zeros among them
        cuts = sorted(data.draw(st.lists(st.integers(0, dim), max_size=2)))
        split = [high - low for low, high in zip([0] + cuts, cuts + [dim])]
        count = len(split)
    else:  # equal parts: a count that divides the axis' length
        count = data.draw(st.sampled_from([k for k in (1, 2, 3) if dim % k == 0]))
    x = data.draw(edge_arrays(np.float32, shape))
    constants, attrs = {}, {"axis": axis}
    if given_parts and opset >= 13:
        constants["split"] = np.array(split, np.int64)
    elif given_parts:
        attrs["split"] = split
    model = node_model("Split", {"x": x}, constants, attrs, opset=opset, dynamic=dynamic, outputs=count)
    assert outcome(model, {"x": x}) == ("match", None), (attrs, constants)


#: Trilu's k: around the small dims, and far past any (torch's triu adds k to a row index in int64)
TRILU_K = st.integers(-5, 5) | st.sampled_from([2 ** 63 - 1, -2 ** 63, 2 ** 62 + 1, -2 ** 62 - 1, 2 ** 40])
#: past this k onnxruntime's Trilu adds k to a row index and wraps around: for (3, 4) inputs upper with k = 2**63 - 1
#: keeps rows 1 and 2, lower with k = -2**63 keeps every entry, and upper with k = -2**63 kills the process (SIGSEGV)
ORACLE_K = 2 ** 62 + 1


def trilu_reference(x, k, upper):
    """ONNX's Trilu: an entry is kept where column - row >= k (upper) or <= k (lower), in exact integers (numpy's
    triu computes k - 1 in a C long, which fails at k = -2**63)."""
    rows, columns = x.shape[-2:]
    offsets = np.arange(columns)[None, :] - np.arange(rows)[:, None]
    kept = offsets >= k if upper else offsets <= k
    return np.where(kept, x, np.zeros((), x.dtype))


@SETTINGS
@given(data=st.data(), shape=edge_shapes(min_rank=2, max_rank=4), dynamic=st.booleans(), k=st.none() | TRILU_K,
       fed=st.booleans(), upper=st.sampled_from([None, 0, 1]))
def test_trilu_matches_onnxruntime(data, shape, dynamic, k, fed, upper):
    """Batch dims, empty and size-1 dims, k absent, constant or fed at run time (0-D or of shape (1,)), negative and
    far past the matrix; NaN and ±inf off the band become 0. The reference is ONNX's definition, checked against
    onnxruntime wherever onnxruntime's k does not wrap around."""
    x = data.draw(edge_arrays(data.draw(st.sampled_from(_dtypes("Trilu"))), shape))
    inputs, constants = {"x": x}, {}
    if k is not None:  # a scalar, or a vector of one where the model states its length
        shape_of_k = data.draw(st.sampled_from([()] if fed and dynamic else [(), (1,)]))
        (inputs if fed else constants)["k"] = np.array(k, np.int64).reshape(shape_of_k)
    attrs = {} if upper is None else {"upper": upper}
    model = node_model("Trilu", inputs, constants, attrs, opset=data.draw(st.sampled_from([14, 15])), dynamic=dynamic)
    expected = trilu_reference(x, k or 0, upper != 0)
    if abs(k or 0) <= ORACLE_K:
        np.testing.assert_array_equal(oracle_outputs(model, inputs)[0], expected)
    assert outcome(model, inputs, [expected]) == ("match", None), (shape, k, fed, upper)


@SETTINGS
@given(data=st.data(), a=edge_shapes(max_rank=3), dynamic=st.booleans(),
       op=st.sampled_from(["GreaterOrEqual", "LessOrEqual"]))
def test_greater_or_less_or_equal_match_onnxruntime(data, a, dynamic, op):
    """Broadcast as numpy (rank 0, empty and size-1 dims on either side), NaN (never equal), ±inf, -0.0 == 0.0."""
    b = tuple(1 if data.draw(st.booleans()) else dim for dim in a)[data.draw(st.integers(0, len(a))):]
    if data.draw(st.booleans()):
        a, b = b, a
    dtype = data.draw(st.sampled_from(_dtypes(op)))
    feeds = {"a": data.draw(edge_arrays(dtype, a)), "b": data.draw(edge_arrays(dtype, b))}
    model = node_model(op, feeds, opset=data.draw(st.sampled_from([12, 15])), dynamic=dynamic)
    expected = (np.greater_equal if op == "GreaterOrEqual" else np.less_equal)(feeds["a"], feeds["b"])
    np.testing.assert_array_equal(oracle_outputs(model, feeds)[0], expected)
    assert outcome(model, feeds, [expected]) == ("match", None)


def test_trilu_at_the_k_onnxruntime_wraps_around():
    """ONNX's definition where onnxruntime adds k to a row index in int64 and wraps around (`ORACLE_K`)."""
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    for k, upper in [(2 ** 63 - 1, 1), (-2 ** 63, 0), (-2 ** 63, 1), (2 ** 63 - 1, 0)]:
        for fed in (False, True):
            inputs, constants = ({"x": x, "k": np.array(k)}, {}) if fed else ({"x": x}, {"k": np.array(k)})
            model = node_model("Trilu", inputs, constants, {"upper": upper}, opset=14)
            expected = x if (k > 0) != bool(upper) else np.zeros_like(x)
            assert outcome(model, inputs, [expected]) == ("match", None), (k, upper, fed)


@pytest.mark.parametrize("inputs, constants, message", [
    ({"x": np.zeros(3, np.float32)}, {}, r"input 0 'x' has rank 1; Trilu takes rank 2 or more"),
    ({"x": np.zeros((2, 2), np.float32), "k": np.zeros(2, np.int64)}, {},
     r"input 1 \(k\) 'k' is declared with dims \(2,\); a k fed at run time must be declared a scalar"),
    ({"x": np.zeros((2, 2), np.float32)}, {"k": np.zeros(2, np.int64)}, r"input 1 \(k\) must be an integer scalar"),
    ({"x": np.zeros((2, 2), np.float32), "k": np.zeros((), np.int32)}, {}, r"input 1 \(k\) 'k' is not int64"),
])
def test_other_trilu_forms_are_refused_in_one_line(inputs, constants, message):
    model = node_model("Trilu", inputs, constants, opset=14)
    with pytest.raises(FormRefused, match=r"^ONNX Trilu node 'out0' \(opset 14\): {}$".format(message)):
        pycumsum_op.onnx.prepare(model)


def test_trilu_of_a_rank_the_model_does_not_state_is_refused():
    with pytest.raises(FormRefused, match=r"^ONNX Trilu node 'y' \(opset 14\): input 0 'r' has rank unknown; Trilu "
                                          r"takes rank 2 or more$"):
        pycumsum_op.onnx.prepare(unranked_model("Trilu", {}))
