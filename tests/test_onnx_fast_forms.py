"""The faster forms the import chooses, each held to onnxruntime at the values that break kernels (±inf, NaN,
-0.0, negative values, float64)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import onnx
from onnx import TensorProto, helper

from onnx_forms_support import edge_arrays, node_model, outcome
from onnx_support import onnx_backend_refusal, onnxruntime_outputs
from pycumsum_op.onnx.facts import GraphFacts
from test_onnx_cnn_forms import EDGE_ROWS, ORDERLESS_FLOATS

pytestmark = pytest.mark.skipif(onnx_backend_refusal() is not None, reason=onnx_backend_refusal() or "")

def _operators(model, lower=None):
    """(type, ATen operator) of the ops that write the model's outputs (the run-time checks before them aside)."""
    from pycumsum_op.onnx import prepare
    rep = prepare(model, lower=lower)
    outputs = {info.name for info in model.graph.output}
    return [(op.type, next((arg.s.decode() for arg in op.arg if arg.name == "operator"), None))
            for op in rep.predict_net.op if set(op.output) & outputs]


EDGES = np.array([[0.0, -0.0, 1.5, -2.25, np.inf, -np.inf], [np.nan, 3e38, -3e38, 1e-45, -1e-30, 7.0]])


def test_pow_of_two_is_one_product():
    """(Pow takes float only: its declaration.)"""
    elem_type, dtype = TensorProto.FLOAT, np.float32
    from pycumsum_op.onnx import prepare
    graph = helper.make_graph([helper.make_node("Pow", ["x", "two"], ["y"])], "square",
                              [helper.make_tensor_value_info("x", elem_type, [2, 6])],
                              [helper.make_tensor_value_info("y", elem_type, [2, 6])],
                              [helper.make_tensor("two", elem_type, [], [2.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rep = prepare(model)
    assert _operators(model) == [("Mul", None)]
    feeds = {"x": EDGES.astype(dtype)}
    got, expected = rep.run(feeds)[0], onnxruntime_outputs(model, feeds)[0]
    np.testing.assert_array_equal(got, expected)
    assert not np.signbit(got[0, 1])  # (-0.0) ** 2 is +0.0


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), batch=st.sampled_from([0, 1, 2]), groups=st.sampled_from(["one", "two", "depthwise"]),
       dynamic=st.booleans())
def test_conv_runs_torchs_kernel_and_matches_onnxruntime(data, batch, groups, dynamic):
    """2-D convolutions with a bias and constant finite weights run torch's kernel (the ATen op) when grouped or
    wider than 1 x 1; weights holding ±inf or NaN (which ONNX multiplies by the padding) and pads that differ by
    side keep Caffe2's. Values at the edges (±inf, NaN, -0.0, subnormals), empty batches, strides and dilations as
    onnxruntime gives them."""
    depthwise = groups == "depthwise"
    rank, group = 2, {"one": 1, "two": 2, "depthwise": 3}[groups]
    channels = group * (1 if depthwise else data.draw(st.integers(1, 2)))
    spatial = [data.draw(st.integers(1, 5)) for _ in range(rank)]
    dilations = [data.draw(st.integers(1, 2)) for _ in range(rank)]
    kernel = [data.draw(st.integers(1, max(1, (size - 1) // dilation + 1))) for size, dilation in zip(spatial,
                                                                                                        dilations)]
    pads = [data.draw(st.integers(0, k - 1)) for k in kernel]
    pads += pads if data.draw(st.booleans()) else [data.draw(st.integers(0, k - 1)) for k in kernel]
    attrs = {"group": group, "kernel_shape": kernel, "pads": pads,
             "strides": [data.draw(st.integers(1, 3)) for _ in range(rank)], "dilations": dilations}
    outputs = channels if depthwise else group * data.draw(st.integers(1, 2))
    x = data.draw(edge_arrays(np.float32, (batch, channels) + tuple(spatial), ORDERLESS_FLOATS))
    weights = ORDERLESS_FLOATS if data.draw(st.booleans()) else [v for v in ORDERLESS_FLOATS if np.isfinite(v)]
    w = data.draw(edge_arrays(np.float32, (outputs, channels // group) + tuple(kernel), weights))
    b = data.draw(edge_arrays(np.float32, (outputs,), ORDERLESS_FLOATS))
    model = node_model("Conv", {"x": x}, {"w": w, "b": b}, attrs, dynamic=dynamic)
    torchs = np.isfinite(w).all() and pads[:rank] == pads[rank:] and (group > 1 or max(kernel) > 1)
    assert _operators(model) == [("ATen", "conv2d") if torchs else ("Conv", None)]
    assert outcome(model, {"x": x}) == ("match", None)


def test_conv_forms_without_torchs_kernel():
    """Caffe2's Conv where the ATen op has no form (no bias), where it is not faster (one group, a 1 x 1 window),
    for 1-D and 3-D windows and for the portable target (builds without the ATen op)."""
    x = np.arange(2 * 4 * 5 * 5, dtype=np.float32).reshape(2, 4, 5, 5) / 50 - 1
    w = np.linspace(-1, 1, 4 * 2 * 9, dtype=np.float32).reshape(4, 2, 3, 3)
    b = np.array([0.5, -0.0, np.inf, -1], np.float32)
    cases = [({"w": w}, {"group": 2, "pads": [1, 1, 1, 1]}, None),
             ({"w": w[..., 0], "b": b}, {"group": 2, "pads": [1, 1]}, None),
             ({"w": np.concatenate([w, w], 1)[..., :1, :1], "b": b}, {"group": 1}, None),
             ({"w": w, "b": b}, {"group": 2, "pads": [1, 1, 1, 1]}, "portable")]
    for constants, attrs, lower in cases:
        data = x[..., 0] if constants["w"].ndim == 3 else x
        model = node_model("Conv", {"x": data}, constants, attrs)
        assert [kind for kind, _ in _operators(model, lower)] == ["Conv"], (attrs, lower)
        assert outcome(model, {"x": data}, lower=lower) == ("match", None)


ARITHMETIC_VALUES = (0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, 3e38, 1e-45, 7.0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), op=st.sampled_from(["Add", "Sub", "Mul", "Div"]), dtype=st.sampled_from([np.float32,
                                                                                                   np.float64]),
       dynamic=st.booleans(), swapped=st.booleans())
def test_a_strided_broadcast_runs_torchs_kernel_and_matches_onnxruntime(data, op, dtype, dynamic, swapped):
    """An operand broadcast along an axis after one it is not broadcast along (an attention mask of (B, 1, 1, S)
    against scores of (B, h, S, S)) goes to torch's kernel; IEEE's results (inf - inf, 0 / 0, -0.0) as
    onnxruntime's, empty dims included."""
    # a batch other than 1 before the heads the mask is broadcast along: the strided case, empty dims included
    batch, heads, length = (data.draw(st.sampled_from(choices)) for choices in ([0, 2, 3], [2, 3], [0, 1, 2, 3]))
    scores = data.draw(edge_arrays(dtype, (batch, heads, length, length), ARITHMETIC_VALUES))
    mask = data.draw(edge_arrays(dtype, (batch, 1, 1, length), ARITHMETIC_VALUES))
    inputs = {"m": mask, "s": scores} if swapped else {"s": scores, "m": mask}
    model = node_model(op, inputs, dynamic=dynamic)
    # every dim symbolic (the mask's 1s too): nothing says which operand is broadcast, Caffe2's kernel stays, but
    # for a Div whose dividend may be the smaller (Caffe2 multiplies by the divisor's reciprocal)
    torchs = not dynamic or op == "Div"
    assert _operators(model) == [("ATen", op.lower()) if torchs else (op, None)]
    assert outcome(model, inputs) == ("match", None)
    assert outcome(model, inputs, lower="portable") == ("match", None)  # stock operators only


@pytest.mark.parametrize("dividend, divisor", [((3,), (2, 3)), ((), (2, 3)), ((2, 1), (2, 3)), ((1, 3), (2, 3))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_div_of_a_smaller_dividend_is_exact_for_subnormal_divisors(dividend, divisor, dtype):
    """Caffe2's Div multiplies by the divisor's reciprocal when the dividend is broadcast: 0 / 1e-45 gave NaN (the
    reciprocal overflows) and other quotients rounded twice. torch's kernel divides; the portable target widens the
    dividend to the result's shape first."""
    tiny = np.finfo(dtype).tiny * np.finfo(dtype).eps  # the smallest subnormal
    inputs = {"a": np.linspace(-2, 2, int(np.prod(dividend)), dtype=dtype).reshape(dividend),
              "b": np.resize(np.array([tiny, -tiny, 3.0, 7.0], dtype), divisor)}
    model = node_model("Div", inputs)
    assert _operators(model) == [("ATen", "div")]
    assert _operators(model, "portable") == [("Div", None)]  # after the dividend is widened by stock operators
    expected = onnxruntime_outputs(model, inputs)[0]
    from pycumsum_op.onnx import prepare
    for lower in (None, "portable"):
        np.testing.assert_array_equal(prepare(model, lower=lower).run(inputs)[0], expected)


#: operand dims with one broadcast: a scalar, a bias, a trailing or inner 1, each against empty dims too
BROADCAST_PAIRS = [((2, 3, 4), ()), ((2, 3, 4), (4,)), ((3, 4), (1, 4)), ((2, 3, 4), (1, 3, 1)), ((4,), (2, 3, 4)),
                   ((1, 2, 3, 4), (3, 4)), ((0, 4), (4,)), ((2, 0, 4), ()), ((3, 1), (3, 0))]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), op=st.sampled_from(["Add", "Sub", "Mul", "Div"]), dtype=st.sampled_from([np.float32,
                                                                                                   np.float64]),
       pair=st.sampled_from(BROADCAST_PAIRS), swapped=st.booleans())
def test_a_broadcast_operand_runs_torchs_kernel_and_matches_onnxruntime(data, op, dtype, pair, swapped):
    """Any broadcast operand (a scalar, a bias, a 1 against another dim) goes to torch's kernel: Caffe2's
    broadcasting kernels take several times its time. IEEE's results as onnxruntime's (inf - inf, 0 / 0, -0.0, a
    subnormal divisor: torch's kernel divides a tensor by a scalar, it does not multiply by its reciprocal), empty
    dims included; the portable target keeps Caffe2's kernels (a Div's broadcast dividend widened first)."""
    first, second = pair[::-1] if swapped else pair
    inputs = {"a": data.draw(edge_arrays(dtype, first, ARITHMETIC_VALUES)),
              "b": data.draw(edge_arrays(dtype, second, ARITHMETIC_VALUES))}
    model = node_model(op, inputs)
    assert _operators(model) == [("ATen", op.lower())]
    assert _operators(model, "portable") == [(op, None)]
    for lower in (None, "portable"):
        assert outcome(model, inputs, lower=lower) == ("match", None)


@pytest.mark.parametrize("first, second, ops", [((2, 3, 4), (2, 3, 4), ("Add", "Div")),
                                                ((1, 3), (1, 3), ("Sub", "Div")), (("n", 3), ("m", 3), ("Add", "Mul"))])
def test_operands_of_the_same_dims_keep_caffe2s_kernel(first, second, ops):
    """Caffe2's own kernel where no operand is known to be broadcast (as fast as torch's there, and the ATen op
    allocates its output on every run), symbolic dims included, and a Div whose dividend is known to have the
    result's dims."""
    from pycumsum_op.onnx import prepare
    graph = helper.make_graph([helper.make_node(op, ["a", "b"], [op]) for op in ops], "same",
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
                               for name, dims in (("a", first), ("b", second))],
                              [helper.make_tensor_value_info(op, TensorProto.FLOAT, first) for op in ops])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert [op.type for op in prepare(model).predict_net.op if op.type in ops + ("ATen",)] == list(ops)


def _mask_model(ranked):
    """scores (B, h, S, S) + an attention mask made as torch's export of GPT-NeoX makes it: the (B, S) mask reshaped
    to (its batch, -1) read off its own shape, unsqueezed twice, then (1 - mask) * float32's lowest. ONNX's inference
    gives the mask no dims after the Reshape; the ops' definitions give it (B, 1, 1, S). Scores of no stated rank
    (``ranked`` False) are expanded to their own shape, fed in a vector of a length the model leaves symbolic."""
    lowest = float(np.finfo(np.float32).min)

    def constant(name, elem_type, dims, values):
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, elem_type, dims, values))

    nodes = [constant("zero", TensorProto.INT64, [], [0]), constant("rest", TensorProto.INT64, [1], [-1])]
    nodes += [constant("axis{}".format(axis), TensorProto.INT64, [1], [axis]) for axis in range(3)]
    nodes += [constant("one", TensorProto.FLOAT, [], [1.0]), constant("lowest", TensorProto.FLOAT, [], [lowest]),
             helper.make_node("Shape", ["m"], ["shape"]), helper.make_node("Gather", ["shape", "zero"], ["batch"]),
             helper.make_node("Unsqueeze", ["batch", "axis0"], ["batch1"]),
             helper.make_node("Concat", ["batch1", "rest"], ["flat"], axis=0),
             helper.make_node("Reshape", ["m", "flat"], ["m2"]), helper.make_node("Unsqueeze", ["m2", "axis1"], ["m3"]),
             helper.make_node("Unsqueeze", ["m3", "axis2"], ["m4"]),
             helper.make_node("Cast", ["m4"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "mf"], ["inverted"]),
             helper.make_node("Mul", ["inverted", "lowest"], ["mask"]),
             helper.make_node("Add", ["s" if ranked else "unranked", "mask"], ["y"])]
    inputs = [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["B", "h", "S", "S"]),
              helper.make_tensor_value_info("m", TensorProto.INT64, ["B", "S"])]
    if not ranked:
        nodes.insert(-1, helper.make_node("Expand", ["s", "s_shape"], ["unranked"]))
        inputs.append(helper.make_tensor_value_info("s_shape", TensorProto.INT64, ["k"]))
    graph = helper.make_graph(nodes, "masked", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "h", "S", "T"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("ranked", [True, False])
@pytest.mark.parametrize("batch, heads, length", [(2, 3, 4), (3, 1, 2), (2, 2, 0), (1, 1, 1)])
def test_a_mask_whose_dims_onnx_does_not_infer_runs_torchs_kernel(ranked, batch, heads, length):
    """The mask's (B, 1, 1, S) is derived through Reshape, Unsqueeze, Cast, Sub and Mul by their definitions where
    ONNX's inference gives no dims, so its strided broadcast goes to torch's kernel (scores of a stated rank; of an
    unknown rank, Caffe2's Add stays); the sums as onnxruntime's, float32's lowest and ±inf included, an empty
    sequence included (onnxruntime refuses an empty batch: its Reshape of (0, S) to (0, -1)); the portable target
    keeps Caffe2's Add."""
    from pycumsum_op.onnx import prepare
    model = _mask_model(ranked)
    inferred = GraphFacts(model.graph, onnx.shape_inference.infer_shapes(model).graph)
    assert inferred.dims("mask") is None and inferred.known_dims("mask") == [None, 1, 1, None]
    scores = np.resize(np.array([0.5, -np.inf, np.inf, np.nan, -0.0, 3e38, np.finfo(np.float32).min], np.float32),
                       (batch, heads, length, length))
    feeds = {"s": scores, "m": np.resize(np.array([1, 0, 1], np.int64), (batch, length))}
    if not ranked:
        feeds["s_shape"] = np.array(scores.shape, np.int64)
    assert _operators(model) == [("ATen", "add") if ranked else ("Add", None)]
    assert _operators(model, "portable") == [("Add", None)]
    expected = onnxruntime_outputs(model, feeds)[0]
    for lower in (None, "portable"):
        np.testing.assert_array_equal(prepare(model, lower=lower).run(feeds)[0], expected)


@pytest.mark.parametrize("producer", ["Add", "Where", "Mul"])
def test_a_masked_softmax_on_the_last_axis_runs_torchs_kernel(producer):
    """Scores a mask of (B, 1, 1, S) is added to (or a Where fills) go to torch's softmax on the default target:
    Caffe2's exponential takes six times torch's time on rows of float32's lowest value. ±inf, NaN and overflowing
    rows as onnxruntime; Caffe2's Softmax on the portable target, and where the scores are not masked (a Mul by a
    trailing broadcast, which Caffe2's kernel runs: Caffe2's Softmax keeps its gradient)."""
    lowest = np.finfo(np.float32).min
    rows = np.concatenate([np.pad(EDGE_ROWS, ((0, 0), (0, 1)), constant_values=lowest),
                           [[0.5, lowest, lowest, lowest], [lowest] * 4, [-1e4, 2.0, lowest, 0.0]]]).astype(np.float32)
    scores = np.stack([rows.reshape(3, 4, 4), rows[::-1].reshape(3, 4, 4)])
    mask = np.array([[[[0.0, lowest, 0.0, -0.0]]], [[[lowest, 0.0, 0.0, 0.0]]]], np.float32)
    feeds = {"s": scores, "m": mask}
    node = {"Add": helper.make_node("Add", ["s", "m"], ["masked"]),
            "Where": helper.make_node("Where", ["keep", "s", "m"], ["masked"]),
            "Mul": helper.make_node("Mul", ["s", "m"], ["masked"])}[producer]
    if producer == "Where":
        feeds["keep"] = np.resize(np.array([True, False, True]), (4, 4))
    elif producer == "Mul":
        feeds["m"] = np.array([1.0, -0.0, 2.0, np.inf], np.float32)
    graph = helper.make_graph([node, helper.make_node("Softmax", ["masked"], ["y"], axis=-1)], "masked_softmax",
                              [helper.make_tensor_value_info(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[value.dtype],
                                                             value.shape) for name, value in feeds.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, scores.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert _operators(model) == [("ATen", "softmax") if producer != "Mul" else ("Softmax", None)]
    assert _operators(model, "portable") == [("Softmax", None)]
    for lower in (None, "portable"):
        assert outcome(model, feeds, lower=lower) == ("match", None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), rank=st.integers(1, 5), dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
       dynamic=st.booleans(), stated=st.booleans())
def test_a_transpose_caffe2_walks_by_element_runs_torchs_permute(data, rank, dtype, dynamic, stated):
    """A permutation moving the last axis, other than a swap of the last two, runs torch's permute; the rest (and
    ONNX's default, the axes reversed) Caffe2's Transpose, as does every one on the portable target. Elements moved
    as onnxruntime moves them, empty dims included."""
    shape = tuple(data.draw(st.integers(0, 3)) for _ in range(rank))
    perm = data.draw(st.permutations(range(rank)))
    x = data.draw(edge_arrays(dtype, shape, ARITHMETIC_VALUES)) if dtype in (np.float32, np.float64) else \
        np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) - 3
    model = node_model("Transpose", {"x": x}, {}, {"perm": list(perm)} if stated else {}, dynamic=dynamic)
    torchs = stated and perm[-1] != rank - 1 and list(perm[:-2]) + [perm[-1], perm[-2]] != list(range(rank))
    assert _operators(model) == [("ATen", "permute") if torchs else ("Transpose", None)], perm
    assert _operators(model, "portable") == [("Transpose", None)]
    for lower in (None, "portable"):
        assert outcome(model, {"x": x}, lower=lower) == ("match", None)


@pytest.mark.parametrize("attrs, bounded", [({}, False), ({"strides": [2, 2]}, True), ({"pads": [0, 1, 0, 1]}, True),
                                            ({"group": 2}, False)])
def test_a_pointwise_convolution_carries_no_im2col_bound(attrs, bounded):
    """Caffe2's Conv multiplies a 1 x 1 window at stride 1 without pads straight from its input (no im2col buffer):
    no run-time bound of one before it; a strided or padded one keeps the bound. Values as onnxruntime's, an empty
    batch included."""
    from pycumsum_op.onnx import prepare
    inputs = 2 // attrs.get("group", 1)
    w = np.linspace(-1, 1, 4 * inputs, dtype=np.float32).reshape(4, inputs, 1, 1)
    for batch in (2, 0):
        x = np.resize(np.array(ORDERLESS_FLOATS, np.float32), (batch, 2, 3, 5))
        model = node_model("Conv", {"x": x}, {"w": w, "b": np.array([0.5, -0.0, 1, -1], np.float32)}, attrs,
                           dynamic=True)
        messages = [arg.s.decode() for op in prepare(model, lower="portable").predict_net.op for arg in op.arg
                    if arg.name == "error_msg"]
        assert any("im2col" in message for message in messages) == bounded, messages
        assert outcome(model, {"x": x}, lower="portable") == ("match", None)
