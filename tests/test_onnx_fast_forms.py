"""The faster forms the import chooses, each held to onnxruntime at the values that break kernels (±inf, NaN,
-0.0, negative values, float64)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_forms_support import edge_arrays, node_model, outcome
from onnx_support import onnx_backend_refusal, onnxruntime_outputs
from test_onnx_cnn_forms import ORDERLESS_FLOATS

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


@pytest.mark.parametrize("first, second", [((2, 3, 4), (4,)), ((2, 3, 4), (2, 3, 4)), ((2, 3, 4), ()),
                                           ((2, 3, 4), (1, 3, 4)), ((4,), (2, 3, 4)), ((1, 2, 3, 4), (3, 4))])
def test_broadcasts_caffe2_runs_fast_keep_its_kernel(first, second):
    """Caffe2's own kernel where the broadcast is of trailing dims, or none (the ATen op allocates its output on
    every run), and a Div's dividend has the result's shape; for the portable target, everywhere."""
    a = np.linspace(-3, 3, int(np.prod(first)), dtype=np.float32).reshape(first)
    b = np.linspace(1, 2, int(np.prod(second)), dtype=np.float32).reshape(second)
    assert _operators(node_model("Add", {"a": a, "b": b})) == [("Add", None)]
    if a.shape == np.broadcast(a, b).shape:  # a Div whose dividend is the result's shape
        assert _operators(node_model("Div", {"a": a, "b": b})) == [("Div", None)]
    strided = node_model("Add", {"a": np.ones((2, 3, 4), np.float32), "b": np.ones((2, 1, 4), np.float32)})
    assert _operators(strided, "portable") == [("Add", None)]
    assert outcome(strided, {"a": np.ones((2, 3, 4), np.float32), "b": np.ones((2, 1, 4), np.float32)},
                   lower="portable") == ("match", None)
