"""Tile, Clip (opset 11 on: every type, bounds constant, fed or absent) and OneHot at the edges: ±inf, NaN, -0.0,
empty and size-1 dims, rank 0 where the op admits it, zero repeats, a min above the max, NaN bounds, indices out of
range and negative, static and dynamic shapes, every element type each form states. Each matches onnxruntime (graph
optimizations off), except where onnxruntime departs from ONNX's definition: a rank-0 Tile (onnxruntime fails the
run; numpy's tile returns the input), OneHot before opset 11 (ONNX's OneHot-9 gives an index outside [0, depth)
all off; onnxruntime wraps a negative one as opset 11 does) and OneHot of empty indices (onnxruntime's process dies
of SIGFPE along the last axis), checked against numpy.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from pycumsum_op.input_limits import InputTooLarge
from pycumsum_op.onnx.forms import check_node
from pycumsum_op.onnx.ops import FORMS
from pycumsum_op.onnx.ops.contract import FormRefused
import pycumsum_op.onnx
from onnx_forms_support import EDGE_FLOATS, edge_arrays, edge_shapes, node_model, outcome

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _dtypes(op, opset):
    form = next(form for form in FORMS[op] if form.opsets[0] <= opset <= form.opsets[1])
    return sorted({onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t] for t in form.types}, key=str)


@SETTINGS
@given(data=st.data(), shape=edge_shapes(min_rank=1, max_rank=5), dynamic=st.booleans(), fed=st.booleans(),
       opset=st.sampled_from([6, 9, 13, 15]))
def test_tile_matches_onnxruntime(data, shape, dynamic, fed, opset):
    dtype = data.draw(st.sampled_from(_dtypes("Tile", opset)))
    x = data.draw(edge_arrays(dtype, shape))
    repeats = np.array(data.draw(st.lists(st.sampled_from([0, 1, 2, 3]), min_size=len(shape),
                                          max_size=len(shape))), np.int64)
    if fed:
        feeds = {"x": x, "repeats": repeats}
        model = node_model("Tile", feeds, opset=opset, dynamic=dynamic)
    else:
        feeds = {"x": x}
        model = node_model("Tile", feeds, {"repeats": repeats}, opset=opset, dynamic=dynamic)
    assert outcome(model, feeds) == ("match", None), (shape, repeats)


@pytest.mark.parametrize("fed", [False, True])
def test_tile_of_rank_0_is_numpys_tile(fed):
    """onnxruntime fails a rank-0 Tile ("must be atleast 1 dimensional"); ONNX's definition is numpy's tile, which
    returns the input for no repeats."""
    x, repeats = np.array(2.5, np.float32), np.zeros(0, np.int64)
    feeds = {"x": x, "repeats": repeats} if fed else {"x": x}
    model = node_model("Tile", feeds, {} if fed else {"repeats": repeats}, opset=13)
    assert outcome(model, feeds, expected=[np.tile(x, ())]) == ("match", None)


def _bound(data, dtype, nan_free=False):
    if np.dtype(dtype).kind == "f":
        floats = [v for v in EDGE_FLOATS if not np.isnan(v)] if nan_free else EDGE_FLOATS
        return np.array(data.draw(st.sampled_from(floats)), dtype)
    return np.array(data.draw(st.integers(-4, 4)), dtype)


@SETTINGS
@given(data=st.data(), shape=edge_shapes(), dynamic=st.booleans(), opset=st.sampled_from([11, 12, 13, 15]),
       how=st.tuples(*[st.sampled_from(["absent", "constant", "fed"])] * 2))
def test_clip_matches_onnxruntime(data, shape, dynamic, opset, how):
    """Bounds absent (left out, or named ""), constant or fed, in any order of size (a min above the max gives the
    max), NaN ones no bound; NaN, the infinities and -0.0 in x."""
    dtype = data.draw(st.sampled_from(_dtypes("Clip", opset)))
    x = data.draw(edge_arrays(dtype, shape))
    feeds, constants, order = {"x": x}, {}, ["x"]
    for name, given_as in zip(("lo", "hi"), how):
        if given_as == "absent":
            order.append("")
            continue
        (feeds if given_as == "fed" else constants)[name] = _bound(data, dtype)
        order.append(name)
    while order[-1] == "":
        order.pop()
    model = node_model("Clip", feeds, constants, opset=opset, dynamic=dynamic, order=order)
    if dtype == np.float16 and "absent" in how:
        result, detail = outcome(model, feeds)
        assert result == "refused" and "a float16 input with a bound absent" in detail, detail
    else:
        assert outcome(model, feeds) == ("match", None), (how, feeds, constants)


def test_clip_of_int64_position_ids_as_transformers_exports_it():
    """``position_ids.clamp(min=1)`` on int64: a constant min, no max."""
    ids = np.array([[-3, 0, 1, 2 ** 62]], np.int64)
    model = node_model("Clip", {"x": ids}, {"lo": np.array(1, np.int64)}, opset=13, dynamic=True)
    assert outcome(model, {"x": ids}) == ("match", None)


def one_hot_reference(indices, depth, values, axis, opset):
    """ONNX's OneHot: an index outside [0, depth) all off, before opset 11 a negative one too."""
    wrapped = np.where(indices < 0, indices + depth, indices) if opset >= 11 else indices
    hit = wrapped[..., None] == np.arange(depth)
    out = np.where(hit, values[1], values[0]).astype(values.dtype)
    return np.moveaxis(out, -1, axis)


#: onnxruntime's OneHot kernels as (indices, values, depth) types, of the index and value types translated
ONE_HOT_KERNELS = [(np.int32, np.float16, np.int32), (np.int32, np.float16, np.float32),
                   (np.int32, np.float32, np.int32), (np.int32, np.float32, np.float32),
                   (np.int64, np.int32, np.float32), (np.int64, np.int64, np.int64), (np.int64, np.float16, np.int64),
                   (np.int64, np.float32, np.int32), (np.int64, np.float32, np.int64), (np.int64, np.float32, np.float32)]


@SETTINGS
@given(data=st.data(), shape=edge_shapes(min_rank=1), dynamic=st.booleans(), opset=st.sampled_from([9, 10, 11, 13]),
       kernel=st.sampled_from(ONE_HOT_KERNELS), depth=st.integers(1, 4), fed_depth=st.booleans(),
       fed_values=st.booleans())
def test_one_hot_matches_onnxruntime(data, shape, dynamic, opset, kernel, depth, fed_depth, fed_values):
    index_type, value_type, depth_type = kernel
    count = int(np.prod(shape))
    indices = np.array(data.draw(st.lists(st.integers(-depth - 2, depth + 2), min_size=count, max_size=count)),
                       index_type).reshape(shape)
    values = np.stack([_bound(data, value_type), _bound(data, value_type)])
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    feeds, constants = {"i": indices}, {}
    (feeds if fed_depth else constants)["depth"] = np.array(depth, depth_type)
    (feeds if fed_values else constants)["values"] = values
    model = node_model("OneHot", feeds, constants, {"axis": axis}, opset=opset, dynamic=dynamic,
                       order=["i", "depth", "values"])
    expected = one_hot_reference(indices, depth, values, axis, opset)
    if dynamic and fed_values:
        result, detail = outcome(model, feeds, expected=[expected])
        assert result == "refused" and "(values) 'values' has dims [None]; [off, on] must be stated" in detail
        return
    # onnxruntime is ONNX's definition there, but dies of SIGFPE on empty indices one-hot along the last axis
    if (opset >= 11 or not (indices < 0).any()) and indices.size:
        assert outcome(model, feeds) == ("match", None), (indices, depth, axis)
    assert outcome(model, feeds, expected=[expected]) == ("match", None), (indices, depth, axis)


@pytest.mark.parametrize("node, types, constants, message", [
    (helper.make_node("Clip", ["x", "lo"], ["y"]), {"lo": [3]}, {}, r"^ONNX Clip node 'y' \(opset 13\): input 1 "
                                                                    r"\(min\) 'lo' has dims \[3\]; only a scalar"),
    (helper.make_node("Clip", ["x"], ["y"]), {"x": [2], "__type": onnx.TensorProto.INT16}, {},
     r"^ONNX Clip node 'y' \(opset 13\): input 0 'x' is INT16; Caffe2 runs Clip right on"),
    (helper.make_node("OneHot", ["x", "d", "v"], ["y"]), {"x": [2], "__type": onnx.TensorProto.FLOAT}, {},
     r"^ONNX OneHot node 'y' \(opset 11\): input 0 \(indices\) 'x' is FLOAT; only int32 and int64 indices"),
    (helper.make_node("OneHot", ["x", "d", "v"], ["y"]), {"x": [2]}, {"d": np.array(0, np.int64)},
     r"^ONNX OneHot node 'y' \(opset 11\): input 1 \(depth\) is 0; onnxruntime fails a depth below 1$"),
    (helper.make_node("OneHot", ["x", "d", "v"], ["y"], axis=2), {"x": [2]}, {"d": np.array(2, np.int64)},
     r"^ONNX OneHot node 'y' \(opset 11\): axis 2 is out of range for indices of rank 1$"),
    (helper.make_node("OneHot", ["x", "d", "v"], ["y"]), {"x": [2], "v": [3]}, {"d": np.array(2, np.int64)},
     r"^ONNX OneHot node 'y' \(opset 11\): input 2 \(values\) 'v' has dims \[3\]; \[off, on\] must be stated"),
])
def test_other_forms_are_refused_in_one_line(node, types, constants, message):
    opset = 11 if node.op_type == "OneHot" else 13
    elem_type = types.pop("__type", onnx.TensorProto.INT64 if node.op_type == "OneHot" else onnx.TensorProto.FLOAT)
    value_type = {"v": onnx.TensorProto.FLOAT, "lo": onnx.TensorProto.FLOAT}
    inputs = [helper.make_tensor_value_info(name, value_type.get(name, elem_type), types.get(name, [2] if name in "xv"
                                                                                              else []))
              for name in node.input if name not in constants]
    out_dims = ["n", "m"] if node.op_type == "OneHot" else ["n"]
    graph = helper.make_graph([node], "refused", inputs, [helper.make_tensor_value_info(
        "y", elem_type if node.op_type == "Clip" else onnx.TensorProto.FLOAT, out_dims)],
                              [onnx.numpy_helper.from_array(value, name) for name, value in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with pytest.raises(FormRefused, match=message) as caught:
        pycumsum_op.onnx.prepare(model)
    assert len(str(caught.value).splitlines()) == 1


def test_tile_before_opset_6_is_refused_in_one_line():
    """Tile-1 took tiles and axis as inputs: no form."""
    with pytest.raises(FormRefused, match=r"^ONNX Tile node 'y' \(opset 5\): accepted only at opsets 6-15$"):
        check_node(helper.make_node("Tile", ["x", "t", "a"], ["y"]), 5)


@pytest.mark.parametrize("depth, indices", [(2 ** 40, (2,)), (2 ** 28, (3, 2))])
def test_a_constant_depth_past_the_tensor_cap_is_refused_before_anything_is_built(depth, indices):
    """The positions (int64) and the output, of the dims the model states, are charged as declared tensors are."""
    model = node_model("OneHot", {"i": np.ones(indices, np.int64)},
                       {"d": np.array(depth, np.int64), "v": np.array([0, 1], np.float32)}, opset=13)
    with pytest.raises(InputTooLarge, match=r"^ONNX OneHot node 'out0' \(opset 13\): its (positions|output) of shape "
                                            r"\(.*\) takes more than the 1073741824 bytes allowed"):
        pycumsum_op.onnx.prepare(model)
