"""The forms widened past what the exports of the first families needed, each against onnxruntime (graph
optimizations off) at its edges: Reshape to a shape whose length is known only when the net runs, Pad with pads
fed or computed and in modes reflect and edge, EyeLike, BatchNormalization of an input of unknown rank; static and
symbolic dims, empty and size-1 dims, NaN and the infinities. A form either matches onnxruntime or is refused in
one line naming the op; where onnxruntime fails a run, the net's checks stop it too.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from pycumsum_op.onnx.run_checks import RunRefused
from onnx_forms_support import EDGE_FLOATS, edge_arrays, edge_shapes, node_model, outcome, pad_reference
from onnx_support import onnxruntime_outputs

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: ordinary values with NaN, the infinities and signed zeros
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 3.0], np.float32)


def i64(*values):
    return np.array(values, np.int64)


def _special(shape):
    """A float32 array of ``shape`` cycling through `SPECIAL`."""
    count = int(np.prod(shape, dtype=np.int64))
    return np.resize(SPECIAL, count).reshape(shape)


def _agrees(model, feeds):
    """The model's outputs equal onnxruntime's; where onnxruntime fails the run, the net fails it too (refused when
    it runs), never returning a value."""
    try:
        expected = onnxruntime_outputs(model, feeds)
    except Exception:  # onnxruntime refuses these values
        rep = pycumsum_op.onnx.prepare(model)
        with pytest.raises((RunRefused, RuntimeError)):
            rep.run(feeds)
        return
    assert outcome(model, feeds, expected) == ("match", None)


# Reshape to a shape whose length is unknown at import

@pytest.mark.parametrize("dims, shape", [
    ((3, 4), (0, 2, -1)), ((3, 4), (12,)), ((3, 4), (-1,)), ((2, 3, 4), (0, 0, 2, 2)), ((1,), ()), ((1, 1), ()),
    ((0, 4), (0, -1)), ((0, 4), (0, 2, 2)), ((0,), (3,)), ((0, 3), (2, 3)), ((0,), ()), ((2, 0), (-1,)),
    ((2, 0), (0, 3, 0)), ((3, 4), (1, 1, 1, 12)), ((3, 4), (0, 5)),
    ((3, 4), (7, -1)), ((4,), (0, 0)),
])
def test_reshape_to_a_shape_of_unknown_length(dims, shape):
    x = _special(dims)
    model = node_model("Reshape", {"x": x, "shape": i64(*shape)}, dynamic=True, opset=13)
    assert model.graph.input[1].type.tensor_type.shape.dim[0].dim_param  # its length is symbolic
    _agrees(model, {"x": x, "shape": i64(*shape)})


def _computed_shape_model(downstream=None):
    """x (float, (n,)) expanded to the fed ``dims`` (a rank the model leaves unknown) -> Reshape to its own shape
    with the last dim split in 2 (torch's ``view(*x.shape[:-1], 2, -1)``: Concat of a Slice of Shape and a
    constant), a shape whose length inference cannot follow -> ``downstream`` (an op name) or nothing."""
    nodes = [helper.make_node("Expand", ["x", "dims"], ["e"]),
             helper.make_node("Shape", ["e"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "minus_one"], ["head"]),
             helper.make_node("Concat", ["head", "tail"], ["shape"], axis=0),
             helper.make_node("Reshape", ["e", "shape"], ["r"])]
    out = "r"
    if downstream:
        nodes.append(helper.make_node(downstream, ["r"], ["y"]))
        out = "y"
    constants = [onnx.numpy_helper.from_array(value, name) for name, value in
                 [("zero", i64(0)), ("minus_one", i64(-1)), ("tail", i64(2, -1))]]
    graph = helper.make_graph(nodes, "computed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                                                  helper.make_tensor_value_info("dims", TensorProto.INT64, ["k"])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["a", "b"])], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("dims", [(4,), (3, 4), (2, 3, 6), (1, 0, 4), (0, 2), (1, 1, 1, 2)])
@pytest.mark.parametrize("downstream", [None, "Relu"])
def test_reshape_to_a_computed_shape_runs_whatever_the_rank(dims, downstream):
    model = _computed_shape_model(downstream)
    _agrees(model, {"x": _special(dims[-1:]), "dims": i64(*dims)})


def test_reshape_of_unknown_rank_then_an_op_needing_the_rank_is_refused_in_one_line():
    model = _computed_shape_model("Squeeze")  # no axes: the dims of size 1, which needs them at import
    with pytest.raises(FormRefused, match=r"^ONNX Squeeze node 'y' \(opset 13\): no axes, and the dims of input "
                                          r"'r' are not all known"):
        pycumsum_op.onnx.prepare(model)


def test_reshape_to_a_fed_shape_longer_than_a_shape_may_be_stops_the_net():
    model = node_model("Reshape", {"x": np.ones(1, np.float32), "shape": np.ones(40, np.int64)}, dynamic=True)
    with pytest.raises(RunRefused, match=r"ONNX Reshape node 'out0' \(opset 13\): the shape 'shape' has more than "
                                         r"the 32 dimensions"):
        pycumsum_op.onnx.prepare(model).run({"x": np.ones(1, np.float32), "shape": np.ones(40, np.int64)})


@SETTINGS
@given(st.data(), edge_shapes(1, 3), st.booleans())
def test_reshape_fed_shape_property(data, dims, dynamic):
    x = data.draw(edge_arrays(np.float32, dims))
    rank = data.draw(st.integers(0, 4))
    shape = i64(*data.draw(st.lists(st.sampled_from([-1, 0, 1, 2, 3, 4]), min_size=rank, max_size=rank)))
    model = node_model("Reshape", {"x": x, "shape": shape}, dynamic=dynamic)
    _agrees(model, {"x": x, "shape": shape})


@pytest.mark.parametrize("dims, shape", [((0,), (3,)), ((0, 3), (2, 3)), ((0, 2), (0, 5)), ((2, 0), (0, -1)),
                                         ((0,), (0,)), ((0, 4), (-1, 2)), ((3, 4), (0, -1)), ((3, 4), (2, 6))])
@pytest.mark.parametrize("dynamic", [False, True])
def test_reshape_to_a_constant_shape_holds_the_count_of_an_empty_input(dims, shape, dynamic):
    """Caffe2's Reshape takes any shape for an empty input (its elements read from memory it does not own): the
    count is checked, at import or when the net runs."""
    x = _special(dims)
    model = node_model("Reshape", {"x": x}, {"shape": i64(*shape)}, dynamic=dynamic)
    try:
        expected = onnxruntime_outputs(model, {"x": x})
    except Exception:  # onnxruntime refuses these values: so does the import, or the net's checks
        with pytest.raises((FormRefused, RunRefused)):
            pycumsum_op.onnx.prepare(model).run({"x": x})
        return
    assert outcome(model, {"x": x}, expected) == ("match", None)


# BatchNormalization of an input of unknown rank

def _unranked_batch_norm(epsilon, opset=14):
    """x (float, (n,)) expanded to the fed ``dims`` (a rank the model leaves unknown) -> BatchNormalization over 3
    channels, statistics constant."""
    statistics = {"scale": np.array([1.0, -2.0, 0.5], np.float32), "bias": np.array([0.0, 1.0, np.inf], np.float32),
                  "mean": np.array([0.0, 0.5, -1.0], np.float32), "var": np.array([0.0, 1.0, 2.0], np.float32)}
    nodes = [helper.make_node("Expand", ["x", "dims"], ["e"]),
             helper.make_node("BatchNormalization", ["e"] + list(statistics), ["y"], epsilon=epsilon)]
    graph = helper.make_graph(nodes, "unranked_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                                                     helper.make_tensor_value_info("dims", TensorProto.INT64, ["k"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
                              [onnx.numpy_helper.from_array(value, name) for name, value in statistics.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("dims", [(2, 3), (1, 3), (0, 3), (2, 3, 4), (2, 3, 1, 5), (1, 3, 2, 2, 2), (2, 3, 0, 4),
                                  (1, 3, 1, 1, 1, 1, 2)])
@pytest.mark.parametrize("epsilon, opset", [(1e-5, 14), (1e-3, 9), (0.0, 14)])
def test_batch_norm_of_unknown_rank(dims, epsilon, opset):
    model = _unranked_batch_norm(epsilon, opset)
    _agrees(model, {"x": _special(dims[-1:]), "dims": i64(*dims)})


@pytest.mark.parametrize("dims", [(3,), ()])
def test_batch_norm_of_unknown_rank_stops_the_net_below_rank_2(dims):
    rep = pycumsum_op.onnx.prepare(_unranked_batch_norm(1e-5))
    with pytest.raises(RunRefused, match=r"ONNX BatchNormalization node 'y' \(opset 14\): input 0 'e' does not have "
                                         r"rank at least 2, as ONNX's BatchNormalization needs \(N, C, \.\.\.\)"):
        rep.run({"x": _special(dims[-1:] or (1,)), "dims": i64(*dims)})


# EyeLike

@pytest.mark.parametrize("dims", [(3, 4), (4, 3), (1, 1), (0, 0), (0, 3), (3, 0), (1, 5), (6, 1)])
@pytest.mark.parametrize("k", [0, 1, -1, 3, -4, 2 ** 62, -2 ** 63, 2 ** 63 - 1])
@pytest.mark.parametrize("dynamic", [False, True])
def test_eye_like_at_its_edges(dims, k, dynamic):
    x = _special(dims)
    model = node_model("EyeLike", {"x": x}, attrs={"k": k}, dynamic=dynamic, opset=9 if dynamic else 15)
    _agrees(model, {"x": x})


@pytest.mark.parametrize("dtype, source", [(TensorProto.FLOAT, np.int64), (TensorProto.INT32, np.float64),
                                           (TensorProto.DOUBLE, np.int32), (TensorProto.INT64, np.float32)])
def test_eye_like_of_another_type(dtype, source):
    x = np.arange(12).reshape(3, 4).astype(source)
    _agrees(node_model("EyeLike", {"x": x}, attrs={"k": -1, "dtype": dtype}, dynamic=True), {"x": x})


def test_eye_like_of_an_input_of_another_rank_is_refused():
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(FormRefused, match=r"^ONNX EyeLike node 'out0' \(opset 13\): input 0 'x' has rank 3; EyeLike "
                                          r"takes rank 2"):
        pycumsum_op.onnx.prepare(node_model("EyeLike", {"x": x}))


def test_eye_like_of_a_computed_input_of_another_rank_stops_the_net():
    """The rank ONNX infers from a value info is no proof: EyeLike of an Expand to a fed shape."""
    graph = helper.make_graph([helper.make_node("Expand", ["x", "dims"], ["e"]),
                               helper.make_node("EyeLike", ["e"], ["y"])], "eye",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                               helper.make_tensor_value_info("dims", TensorProto.INT64, ["k"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
    graph_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rep = pycumsum_op.onnx.prepare(graph_model)
    feeds = {"x": np.ones(3, np.float32), "dims": i64(2, 3)}
    np.testing.assert_array_equal(rep.run(feeds)[0], onnxruntime_outputs(graph_model, feeds)[0])
    with pytest.raises(RunRefused, match=r"ONNX EyeLike node 'y' \(opset 13\): input 0 'e' does not have rank 2"):
        rep.run({"x": np.ones(3, np.float32), "dims": i64(2, 2, 3)})


# Pad with pads fed or computed, and in modes reflect and edge

def _pads_allowed(shape, pads, mode):
    """Whether each axis, cropped by its negative pads, allows its positive ones: reflect needs them shorter than
    it, edge needs it not empty (onnxruntime reads memory it does not own otherwise)."""
    rank = len(shape)
    for axis, dim in enumerate(shape):
        begin, end = pads[axis], pads[axis + rank]
        kept = dim - max(-begin, 0) - max(-end, 0)
        widest = max(begin, end, 0)
        if widest and (mode == "reflect" and widest >= kept or mode == "edge" and kept == 0):
            return False
    return True


def _pad_model(x, pads, mode, value, opset, fed, dynamic, fed_value=False):
    """(model, feeds) of a Pad of ``x``: pads an attribute (before opset 11), a constant, or fed (``fed``); the
    value a constant or fed (``fed_value``)."""
    attrs = {} if mode == "constant" and opset >= 11 else {"mode": mode}
    if opset < 11:
        attrs.update(pads=list(pads), **({"value": float(value)} if mode == "constant" else {}))
        return node_model("Pad", {"x": x}, {}, attrs, opset=opset, dynamic=dynamic), {"x": x}
    feeds, constants = {"x": x}, {}
    (feeds if fed else constants)["pads"] = i64(*pads)
    if mode == "constant":
        (feeds if fed_value else constants)["value"] = np.array(value, x.dtype)
    return node_model("Pad", feeds, constants, attrs, opset=opset, dynamic=dynamic,
                      order=["x", "pads"] + (["value"] if mode == "constant" else [])), feeds


@SETTINGS
@given(data=st.data(), shape=st.lists(st.integers(0, 3), min_size=1, max_size=3), dynamic=st.booleans(),
       fed=st.booleans(), fed_value=st.booleans(), mode=st.sampled_from(["constant", "reflect", "edge"]),
       opset=st.sampled_from([10, 11, 13, 15]), kind=st.sampled_from([np.float32, np.float64, np.int64]))
def test_pad_property(data, shape, dynamic, fed, fed_value, mode, opset, kind):
    """Pads of every sign (a negative one crops first) and the value, fed or constant, in every mode, over empty and
    size-1 dims and NaN, the infinities and -0.0: held to ONNX's definition (numpy), itself checked against
    onnxruntime where no pad is negative (onnxruntime's Pad with a negative pad next to a positive one may return
    uninitialized memory). Pads a mode cannot take stop the net."""
    if opset < 11:  # Pad-2 takes floats, and its pads are an attribute
        kind, fed = np.float32, False
    x = data.draw(edge_arrays(kind, tuple(shape), EDGE_FLOATS))
    rank = len(shape)
    pads = [0] * 2 * rank
    for axis, dim in enumerate(shape):
        pads[axis] = data.draw(st.integers(-dim, 3))
        pads[axis + rank] = data.draw(st.integers(-(dim + min(pads[axis], 0)), 3))
    value = data.draw(st.sampled_from([0.0, -0.0, 1.5, np.inf, np.nan] if kind != np.int64 else [0, -3, 7]))
    model, feeds = _pad_model(x, pads, mode, value, opset, fed, dynamic, fed_value)
    if not _pads_allowed(shape, pads, mode):
        with pytest.raises(RunRefused, match=r"ONNX Pad node 'out0' \(opset {}\): a pad of axis \d of input 0 'x' is "
                                             r"".format(opset)):
            pycumsum_op.onnx.prepare(model).run(feeds)
        return
    expected = pad_reference(x, pads, value, mode)
    if min(pads) >= 0:
        np.testing.assert_array_equal(onnxruntime_outputs(model, feeds)[0], expected)
    assert outcome(model, feeds, [expected]) == ("match", None)


def test_pad_fed_in_every_mode_against_onnxruntime():
    """Images (N, C, H, W) padded on H and W as Swin and Funnel pad them, pads computed from the input's dims."""
    x = _special((2, 3, 5, 6))
    for mode in ("constant", "reflect", "edge"):
        for pads in ([0, 0, 1, 2, 0, 0, 3, 1], [0, 0, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 1, 2, 5]):
            model, feeds = _pad_model(x, pads, mode, -1.5, 13, fed=True, dynamic=True)
            assert outcome(model, feeds) == ("match", None), (mode, pads)


@pytest.mark.parametrize("pads, message", [
    ([1, 1], r"the pads 'pads' do not hold 2 entries per dim of input 0 'x' \(rank 2\)"),
    ([0, 0, 2 ** 27, 0], r"asks for a tensor of more than"),
    ([0, 0, 2 ** 62, -2 ** 62], r"the pads 'pads' reach outside"),
    ([0, 0, -5, 0], r"holds a dim outside \[0, "),
])
def test_pad_fed_pads_out_of_their_range_stop_the_net(pads, message):
    x = np.ones((2, 3), np.float32)
    model, feeds = _pad_model(x, [0, 0, 0, 0], "constant", 0.0, 13, fed=True, dynamic=True)
    feeds["pads"] = i64(*pads)
    with pytest.raises(RunRefused, match=r"ONNX Pad node 'out0' \(opset 13\): .*" + message):
        pycumsum_op.onnx.prepare(model).run(feeds)


def test_pad_fed_value_of_more_than_one_element_stops_the_net():
    x = np.ones((2, 3), np.float32)
    model, feeds = _pad_model(x, [0, 1, 0, 0], "constant", np.ones(2), 13, fed=False, dynamic=True, fed_value=True)
    with pytest.raises(RunRefused, match=r"ONNX Pad node 'out0' \(opset 13\): input 2 \(constant_value\) 'value' does "
                                         r"not hold one element"):
        pycumsum_op.onnx.prepare(model).run(feeds)


def test_pad_reflect_past_the_axis_stops_the_net_where_onnxruntime_reads_past_it():
    x = np.arange(4, dtype=np.float32)
    model, feeds = _pad_model(x, [4, 0], "reflect", 0.0, 13, fed=False, dynamic=False)
    with pytest.raises(RunRefused, match=r"ONNX Pad node 'out0' \(opset 13\): a pad of axis 0 of input 0 'x' is not "
                                         r"shorter than the axis \(after its crops\), which mode reflect needs"):
        pycumsum_op.onnx.prepare(model).run(feeds)


def test_pad_of_unknown_rank_is_refused_in_one_line():
    graph = helper.make_graph([helper.make_node("Expand", ["x", "dims"], ["e"]),
                               helper.make_node("Pad", ["e", "pads"], ["y"], mode="reflect")], "pad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                               helper.make_tensor_value_info("dims", TensorProto.INT64, ["k"]),
                               helper.make_tensor_value_info("pads", TensorProto.INT64, ["p"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
    with pytest.raises(FormRefused, match=r"^ONNX Pad node 'y' \(opset 13\): pads fed at run time do not fit input 0 "
                                          r"'e' of rank unknown$"):
        pycumsum_op.onnx.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
