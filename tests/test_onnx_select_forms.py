"""The selecting forms at the edges: TopK (k a constant or read at run time, the largest or the smallest, ties,
±inf, -0.0, k = 0 and k = the axis' length, empty and size-1 dims, any axis), GatherElements (negative indices and
axes, int32 and int64 indices, empty dims, every element type it states) and Slice of an input whose rank the
model leaves unknown (each axis gathered by indices made at run time), static and dynamic shapes, each against
onnxruntime (graph optimizations off). onnxruntime's TopK orders a NaN inconsistently (it even drops +inf from the
top k when a NaN is in the row), so a NaN input fails the translated net; a k outside [0, the axis' length] is
refused at import when the model states both, and fails the net otherwise, as onnxruntime fails it.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import numpy as np
import onnx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import pycumsum_op.onnx
from pycumsum_op.onnx.facts import GraphFacts
from pycumsum_op.onnx.ops import FORMS
from pycumsum_op.onnx.ops.contract import FormRefused
from onnx_forms_support import EDGE_FLOATS, edge_arrays, edge_shapes, node_model, outcome

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: the edge values but NaN (a NaN fails TopK's net: `test_top_k_of_nan_and_k_out_of_range_fail_the_net`)
NUMBERS = tuple(value for value in EDGE_FLOATS if not np.isnan(value))
#: the element types GatherElements states, as numpy types
GATHER_DTYPES = sorted({onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t] for form in FORMS["GatherElements"]
                        for t in form.types}, key=str)
BOUND = st.integers(-5, 5) | st.sampled_from([2 ** 63 - 1, -2 ** 63, 2 ** 31, -2 ** 31 - 5])


def _unknown_rank(op, x, run_time, constants, attrs, opset, outputs, order, types):
    """``op`` applied to ``x`` expanded to a shape fed at run time, of a length the model leaves symbolic (its own
    shape), so that ONNX's shape inference leaves the rank of ``op``'s input unknown; ``run_time`` {name: array} are
    more graph inputs. Feeds: x, its shape as "s", and ``run_time``."""
    def info(name, value):
        return helper.make_tensor_value_info(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[value.dtype],
                                             ["{}{}".format(name, k) for k in range(value.ndim)])
    feeds = dict({"x": x, "s": np.array(x.shape, np.int64)}, **run_time)
    nodes = [helper.make_node("Expand", ["x", "s"], ["r"]),
             helper.make_node(op, ["r"] + list(order), ["out{}".format(k) for k in range(outputs)], **attrs)]
    graph = helper.make_graph(nodes, "unknown_rank_" + op, [info(name, value) for name, value in feeds.items()],
                              [helper.make_tensor_value_info("out{}".format(k), types[k],
                                                             ["o{}_{}".format(k, d) for d in range(x.ndim)])
                               for k in range(outputs)],
                              [numpy_helper.from_array(value, name) for name, value in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    assert GraphFacts(onnx.shape_inference.infer_shapes(model).graph).rank("r") is None
    return model, feeds


def top_k_reference(x, k, axis, largest):
    """ONNX's TopK by numpy (a stable sort: equal values keep the lower index first), for the inputs onnxruntime cannot
    run: it dies of SIGFPE on an input empty along another axis than the one taken from (k >= 1)."""
    order = np.argsort(-x if largest else x, axis=axis, kind="stable").take(range(k), axis=axis)
    return [np.take_along_axis(x, order, axis=axis), order.astype(np.int64)]


def _oracle(x, k, axis, largest):
    """None (onnxruntime) or the numpy reference where onnxruntime dies."""
    return top_k_reference(x, k, axis, largest) if x.size == 0 and k else None


@SETTINGS
@example(shape=(3, 4), axis=-1, k=4, largest=1, opset=11, run_time=True, dynamic=True, data=None)
@example(shape=(0, 2), axis=0, k=0, largest=0, opset=13, run_time=True, dynamic=False, data=None)
@given(shape=edge_shapes(min_rank=1), data=st.data(), largest=st.sampled_from([0, 1]),
       opset=st.sampled_from([9, 10, 11, 13, 15]), run_time=st.booleans(), dynamic=st.booleans(),
       axis=st.none(), k=st.none())
def test_top_k_matches_onnxruntime(shape, data, largest, opset, run_time, dynamic, axis, k):
    """Values from the edges but NaN (ties among them: the lower index first), k from 0 to the axis' length."""
    rank = len(shape)
    if data is None:  # an @example: arange values with ties
        x = (np.arange(int(np.prod(shape)), dtype=np.float32) % 3).reshape(shape)
    else:
        axis = data.draw(st.integers(-rank, rank - 1))
        k = data.draw(st.integers(0, shape[axis]))
        x = data.draw(edge_arrays(np.float32, shape, NUMBERS))
    if opset < 10 and k == 0:  # the attribute k is positive
        opset = 10
    attrs = {"axis": axis}
    if opset >= 11:
        attrs["largest"] = largest
    inputs, constants = {"x": x}, {}
    if opset < 10:
        attrs["k"] = k
    elif run_time:
        inputs["k"] = np.array([k], np.int64)
    else:
        constants["k"] = np.array([k], np.int64)
    model = node_model("TopK", inputs, constants, attrs, opset=opset, dynamic=dynamic, outputs=2)
    assert outcome(model, inputs, _oracle(x, k, axis, largest or opset < 11)) == ("match", None), (attrs, k)


@settings(SETTINGS, max_examples=10)
@given(shape=edge_shapes(min_rank=1), data=st.data(), run_time=st.booleans())
def test_top_k_of_unknown_rank_matches_onnxruntime(shape, data, run_time):
    """Over the last axis (Caffe2's TopK reads -1 as the last), its length and k's bound read at run time; any other
    axis counting from the end is refused."""
    x = data.draw(edge_arrays(np.float32, shape, NUMBERS))
    k = np.array([data.draw(st.integers(0, shape[-1]))], np.int64)
    run, constants = ({"k": k}, {}) if run_time else ({}, {"k": k})
    model, feeds = _unknown_rank("TopK", x, run, constants, {"axis": -1}, 13, 2, ["k"],
                                 [TensorProto.FLOAT, TensorProto.INT64])
    assert outcome(model, feeds, _oracle(x, int(k[0]), -1, True)) == ("match", None)
    if len(shape) > 1:
        model, feeds = _unknown_rank("TopK", x, run, constants, {"axis": -2}, 13, 2, ["k"],
                                     [TensorProto.FLOAT, TensorProto.INT64])
        assert outcome(model, feeds, expected=[]) == ("refused", "ONNX TopK node 'out0,out1' (opset 13): axis -2 counts from the "
                                                    "end, but the input's rank is unknown")


def test_top_k_of_nan_and_k_out_of_range_fail_the_net():
    """NaN: onnxruntime's TopK orders it inconsistently (below, 4 of 8 with a NaN in the row drop +inf and take the
    NaN), so the translated net fails on a NaN input rather than give its own order. A k past the axis' length or
    negative is refused where the model states both (ONNX's inference already refuses a negative one), and fails the
    net where one is known only at run time
    (onnxruntime fails it too); sorted=0 (any order) and a type other than float are refused."""
    x = np.array([3, 1, 3, np.nan, 2, np.nan, -np.inf, np.inf], np.float32)
    model = node_model("TopK", {"x": x}, {"k": np.array([4], np.int64)}, opset=11, outputs=2)
    rep = pycumsum_op.onnx.prepare(model)
    with pytest.raises(RuntimeError, match="holds a NaN"):
        rep.run({"x": x})
    assert rep.run({"x": np.nan_to_num(x)})[1].tolist() == [7, 0, 2, 4]
    model = node_model("TopK", {"x": x}, {"k": np.array([9], np.int64)}, opset=11, outputs=2)
    assert outcome(model, {"x": x}, expected=[]) == ("refused", "ONNX TopK node 'out0,out1' (opset 11): k = 9 is "
                                                                "outside [0, 8], the length of axis 0")
    model = node_model("TopK", {"x": x, "k": np.array([9], np.int64)}, opset=11, outputs=2)
    rep = pycumsum_op.onnx.prepare(model)
    for k in (9, -1):
        with pytest.raises(RuntimeError, match="k is outside"):
            rep.run({"x": np.nan_to_num(x), "k": np.array([k], np.int64)})
    model = node_model("TopK", {"x": x}, {"k": np.array([2], np.int64)}, {"sorted": 0}, opset=11, outputs=2)
    assert outcome(model, {"x": x}, expected=[]) == (
        "refused", "ONNX TopK node 'out0,out1' (opset 11): attribute sorted=0 is not accepted (accepted: 1)")
    model = node_model("TopK", {"x": x.astype(np.float64)}, {"k": np.array([2], np.int64)}, opset=11, outputs=2)
    assert outcome(model, {"x": x}, expected=[]) == (
        "refused", "ONNX TopK node 'out0,out1' (opset 11): input 0 'x' is DOUBLE; Caffe2 runs TopK right on FLOAT only")


@SETTINGS
@example(shape=(3, 0), dtype=np.float32, index_type=np.int32, dynamic=False, opset=11, data=None)
@given(shape=edge_shapes(min_rank=1), data=st.data(), dtype=st.sampled_from(GATHER_DTYPES),
       index_type=st.sampled_from([np.int32, np.int64]), dynamic=st.booleans(), opset=st.sampled_from([11, 13, 15]))
def test_gather_elements_matches_onnxruntime(shape, data, dtype, index_type, dynamic, opset):
    """Indices from -length to length - 1 along any axis, no longer than the data along the others."""
    rank = len(shape)
    if data is None:  # an @example: an empty axis gathered by empty indices
        axis, x, index = 1, np.zeros(shape, dtype), np.zeros((2, 0), index_type)
    else:
        axis = data.draw(st.integers(-rank, rank - 1))
        x = data.draw(edge_arrays(dtype, shape))
        index_shape = [data.draw(st.integers(0, 3) if k == axis % rank and shape[k] else st.integers(0, dim))
                       for k, dim in enumerate(shape)]
        count = int(np.prod(index_shape))
        dim = shape[axis]
        index = np.array(data.draw(st.lists(st.integers(-dim, max(dim - 1, 0)), min_size=count, max_size=count)),
                         index_type).reshape(index_shape)
    inputs = {"x": x, "i": index}
    model = node_model("GatherElements", inputs, attrs={"axis": axis}, opset=opset, dynamic=dynamic)
    assert outcome(model, inputs) == ("match", None), axis


def test_gather_elements_of_unknown_rank_and_bad_indices():
    """An axis counting from the end needs no rank (its length is read from the shape's end); an index outside
    [-length, length) fails the net, as onnxruntime fails it; uint16 and float indices are refused."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    index = np.array([[[-1, 0], [3, -4], [1, 2]]] * 2, np.int64)
    model, feeds = _unknown_rank("GatherElements", x, {"i": index}, {}, {"axis": -1}, 13, 1, ["i"],
                                 [TensorProto.FLOAT])
    assert outcome(model, feeds) == ("match", None)
    model = node_model("GatherElements", {"x": x, "i": index}, attrs={"axis": 2})
    rep = pycumsum_op.onnx.prepare(model)
    with pytest.raises(RuntimeError, match="out of bounds"):
        rep.run({"x": x, "i": index - 1})
    model = node_model("GatherElements", {"x": x.astype(np.uint16), "i": index}, attrs={"axis": 2})
    assert outcome(model, {}, expected=[]) == (
        "refused", "ONNX GatherElements node 'out0' (opset 13): input 0 'x' is UINT16; Caffe2 runs GatherElements "
                   "right on FLOAT, UINT8, INT8, INT16, INT32, INT64, BOOL, FLOAT16, DOUBLE only")


@settings(SETTINGS, max_examples=30)
@example(shape=(5,), axes=[0], starts=[-2 ** 63], ends=[2 ** 63 - 1], steps=[2 ** 63 - 1], run_time=False, data=None,
         dtype=np.float32)
@example(shape=(0, 3), axes=[-1, -2], starts=[-1, 0], ends=[-2 ** 63, 5], steps=[-2, 1], run_time=True, data=None,
         dtype=np.float32)
@given(shape=edge_shapes(min_rank=1), data=st.data(), run_time=st.booleans(),
       dtype=st.sampled_from([np.float32, np.int64, bool]), axes=st.none(), starts=st.none(),
       ends=st.none(), steps=st.none())
def test_slice_of_unknown_rank_matches_onnxruntime(shape, data, run_time, dtype, axes, starts, ends, steps):
    """Axes all from the start or all from the end, bounds past either end and past int64, steps of either sign and
    past the length; starts and ends constant or fed at run time."""
    rank = len(shape)
    if axes is None:
        count = data.draw(st.integers(1, rank))
        picked = data.draw(st.permutations(range(rank)))[:count]
        axes = [axis - rank for axis in picked] if data.draw(st.booleans()) else list(picked)
        starts = [data.draw(BOUND) for _ in axes]
        ends = [data.draw(BOUND) for _ in axes]
        steps = [data.draw(st.sampled_from([1, -1, 2, -2, 3, 2 ** 63 - 1, -2 ** 63])) for _ in axes]
    x = (np.arange(int(np.prod(shape))) % 5).astype(dtype).reshape(shape)
    bounds = {"starts": np.array(starts, np.int64), "ends": np.array(ends, np.int64)}
    rest = {"axes": np.array(axes, np.int64), "steps": np.array(steps, np.int64)}
    order = ["starts", "ends", "axes", "steps"]
    run, constants = (bounds, rest) if run_time else ({}, dict(bounds, **rest))
    model, feeds = _unknown_rank("Slice", x, run, constants, {}, 13, 1, order,
                                 [onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[x.dtype]])
    ambiguous = any(step < 0 and end >= shape[axis] for axis, end, step in zip(axes, ends, steps))
    if ambiguous:  # onnxruntime and the ONNX specification disagree on an end past the length with a negative step
        return
    assert outcome(model, feeds) == ("match", None), (axes, starts, ends, steps)


def test_slice_of_unknown_rank_refuses_axes_counting_both_ways():
    x = np.zeros((2, 3), np.float32)
    constants = {"starts": np.array([0, 0], np.int64), "ends": np.array([1, 1], np.int64),
                 "axes": np.array([0, -1], np.int64)}
    model, feeds = _unknown_rank("Slice", x, {}, constants, {}, 13, 1, ["starts", "ends", "axes"],
                                 [TensorProto.FLOAT])
    with pytest.raises(FormRefused, match=r"^ONNX Slice node 'out0' \(opset 13\): axes \[0, -1\] count from the start "
                                          r"and from the end \(or repeat\), and the rank of input 'r' is unknown$"):
        pycumsum_op.onnx.prepare(model)


#: transformers models (`transformer_models.WIDER`) whose exports need these forms: model -> (opset, dynamic axes, the
#: op the export must hold). LUKE's and ESM's slices are of tensors whose rank ONNX's shape inference leaves unknown
#: (`GraphFacts.rank` reads them off the ops that make them); MBart without decoder inputs shifts input_ids right by a
#: gather at each row's last non-pad token, then a Squeeze without axes, which needs the dims: static axes.
MODELS = {"esm-rotary": (13, True, "Slice"), "luke": (13, True, "Slice"),
          "mbart-generation": (13, False, "GatherElements")}


@pytest.mark.slow  # a torch.onnx.export of a transformer each
@pytest.mark.parametrize("name", sorted(MODELS))
def test_transformers_exports_that_need_the_forms_equal_onnxruntime(name):
    pytest.importorskip("transformers", reason="transformers==4.26.1 (requirements-dev.txt)")
    import torch
    import transformer_models
    from onnx_support import onnxruntime_outputs

    opset, dynamic, holds = MODELS[name]
    module, example = transformer_models.build_wider(name)
    with torch.no_grad():  # ESM's rotary tables are cached by a first call (cold, its export holds an Einsum)
        module(*example)
    model = transformer_models.export(module, example, opset, dynamic)
    assert holds in {node.op_type for node in model.graph.node}
    feeds = {"input_ids": example[0].numpy(), "attention_mask": example[1].numpy()}
    ours = pycumsum_op.onnx.prepare(model).run(feeds)[0]
    np.testing.assert_allclose(ours, onnxruntime_outputs(model, feeds)[0], rtol=1e-4, atol=1e-4)
