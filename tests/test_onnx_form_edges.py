"""The accepted ONNX forms at the values that break translations, against onnxruntime with its graph optimizations
off: Range with negative and non-dividing deltas, Expand and ConstantOfShape with zero-size dims at every position
(an empty batch, an empty shape), MatMul of rank 0-3 operands, Cast's refused types, an exclusive CumSum over an
empty axis lowered to ATen, torch.onnx.export's forms of them (static and dynamic), and the recurrent import's
mis-shaped inputs in a child process (the process must not die). Each case matches onnxruntime or is refused at
import in one line naming the op; a net that imports and then fails at run time is a failure.
"""
import pytest
from onnx_support import onnx_backend_refusal, onnxruntime_outputs

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import io
import json
import os

import numpy as np
import onnx
import onnxruntime
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from onnx_forms_support import (EDGE_BOUNDS, EDGE_DIMS, EDGE_FLOATS, EDGE_STEPS, edge_arrays, edge_shapes, in_child,
                                node_model, outcome)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: MatMul sums in its own order: values whose sums overflow would differ by order, not by translation
ORDERLESS_FLOATS = tuple(value for value in EDGE_FLOATS if abs(value) != 3e38)


def matches(model, feeds, lower=None):
    result, detail = outcome(model, feeds, lower=lower)
    assert (result, detail) == ("match", None)


@SETTINGS
@given(start=EDGE_BOUNDS, limit=EDGE_BOUNDS, delta=EDGE_STEPS | st.sampled_from([0.5, -0.5, -1.5]),
       dtype=st.sampled_from([np.int32, np.int64, np.float32, np.float64]),
       fed=st.sampled_from(["none", "delta", "bounds", "all"]))
def test_range_property(start, limit, delta, dtype, fed):
    """Caffe2's Range truncates the count of an integer range with a negative delta that does not divide the span."""
    if np.dtype(dtype).kind == "i" and delta != int(delta):
        delta = int(delta * 2)
    values = {"start": np.array(start, dtype), "limit": np.array(limit, dtype), "delta": np.array(delta, dtype)}
    inputs = {name: value for name, value in values.items() if fed == "all" or (fed == "delta") == (name == "delta")
              and fed != "none"}
    constants = {name: value for name, value in values.items() if name not in inputs}
    model = node_model("Range", inputs, constants, opset=11, out_rank=1, order=["start", "limit", "delta"])
    matches(model, inputs)


def test_range_of_a_constant_zero_delta_is_refused():
    zero = {"start": np.array(0, np.int64), "limit": np.array(3, np.int64), "delta": np.array(0, np.int64)}
    with pytest.raises(FormRefused, match=r"^ONNX Range node 'out0' \(opset 11\): delta 'delta' is 0$"):
        pycumsum_op.onnx.prepare(node_model("Range", {}, zero, opset=11, out_rank=1))


@st.composite
def expand_cases(draw):
    """(x, shape): shape broadcasts with x's dims as ONNX's Expand takes it, zeros and ones at any position."""
    dims = draw(edge_shapes(0, 3))
    kind = draw(st.sampled_from([np.float32, np.int64, bool]))
    x = draw(edge_arrays(kind, dims))
    shape = [draw(EDGE_DIMS) if dim == 1 else draw(st.sampled_from([1, dim])) for dim in dims]
    cut = draw(st.integers(0, len(shape)))  # a shorter shape broadcasts against x's last dims; a longer one adds
    shape = shape[cut:] if cut else draw(st.lists(EDGE_DIMS, max_size=2)) + shape  # leading dims
    return x, np.array(shape, np.int64)


@SETTINGS
@given(case=expand_cases(), dynamic=st.booleans(), fed=st.booleans())
def test_expand_property(case, dynamic, fed):
    """Caffe2's Expand reads a 0 in the shape as 1 and enforces on an empty dim of x that the shape broadcasts."""
    x, shape = case
    if fed:
        model = node_model("Expand", {"x": x, "shape": shape}, opset=13, dynamic=dynamic,
                           out_rank=max(x.ndim, shape.size))
        matches(model, {"x": x, "shape": shape})
    else:
        matches(node_model("Expand", {"x": x}, {"shape": shape}, opset=13, dynamic=dynamic), {"x": x})


@SETTINGS
@given(shape=edge_shapes(0, 3), value=st.sampled_from(EDGE_FLOATS) | st.integers(-3, 3) | st.booleans(),
       fed=st.booleans(), dynamic=st.booleans())
def test_constant_of_shape_property(shape, value, fed, dynamic):
    """Caffe2's ConstantFill refuses an empty shape (ONNX: a scalar)."""
    elem_type = {bool: 9, int: 7, float: 1}[type(value)]
    attrs = {"value": helper.make_tensor("v", elem_type, [1], [value])}
    shape = np.array(shape, np.int64)
    if fed:
        model = node_model("ConstantOfShape", {"shape": shape}, {}, attrs, opset=13, dynamic=dynamic,
                           out_rank=shape.size)
        model.graph.output[0].type.tensor_type.elem_type = elem_type  # where ONNX infers no shape, none is given
        matches(model, {"shape": shape})
    else:
        matches(node_model("ConstantOfShape", {}, {"shape": shape}, attrs, opset=13), {})


@st.composite
def matmul_cases(draw):
    """(a, b) of ranks 1-3 that ONNX's MatMul multiplies, empty and size-1 dims included, float or double."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    inner = draw(EDGE_DIMS)
    a_rank, b_rank = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    batch = draw(edge_shapes(0, 1))
    a_dims = (batch + (draw(EDGE_DIMS), inner))[-a_rank:] if a_rank > 1 else (inner,)
    b_dims = (batch + (inner, draw(EDGE_DIMS)))[-b_rank:] if b_rank > 1 else (inner,)
    return (draw(edge_arrays(dtype, a_dims, ORDERLESS_FLOATS)),
            draw(edge_arrays(dtype, b_dims, ORDERLESS_FLOATS)))


def matmul_oracle(model, feeds):
    """onnxruntime's MatMul, or numpy's (ONNX's definition) where onnxruntime 1.19.2 is wrong: over an empty summed
    dim it may leave its output unwritten ((0,) x (0, 3): NaN in 28 of 300 runs, measured), and it refuses an
    empty dim it should broadcast ((2, 0, 3) x (3,), (0, 0) x (0, 0, 0): "left operand cannot broadcast")."""
    if feeds["a"].shape[-1] == 0:
        return [np.matmul(feeds["a"], feeds["b"])]
    try:
        return onnxruntime_outputs(model, feeds)
    except onnxruntime.capi.onnxruntime_pybind11_state.Fail:
        assert 0 in feeds["a"].shape + feeds["b"].shape
        return [np.matmul(feeds["a"], feeds["b"])]


@settings(SETTINGS, max_examples=80)
@given(case=matmul_cases(), dynamic=st.booleans())
def test_matmul_property(case, dynamic):
    """Caffe2's BatchMatMul gives two 1-D operands a (1,) result (ONNX: a scalar) and dies of SIGFPE on a 1-D
    operand against an empty dim."""
    a, b = case
    model = node_model("MatMul", {"a": a, "b": b}, opset=13, dynamic=dynamic)
    assert outcome(model, {"a": a, "b": b}, matmul_oracle(model, {"a": a, "b": b})) == ("match", None)


@pytest.mark.parametrize("to, name", [(8, "STRING"), (10, "FLOAT16"), (12, "UINT32"), (13, "UINT64")])
def test_cast_to_a_type_caffe2_gets_wrong_is_refused(to, name):
    model = node_model("Cast", {"x": np.ones((2, 3), np.float32)}, {}, {"to": to}, opset=13)
    with pytest.raises(FormRefused) as refused:
        pycumsum_op.onnx.prepare(model)
    message = str(refused.value)
    assert message.startswith("ONNX Cast node 'out0' (opset 13): attribute to={} is not accepted".format(to))
    assert "STRING wrong" in message and "FLOAT16" in message and len(message.splitlines()) == 1


def test_onnx_node_test_cast_float_to_string_is_refused():
    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node", "test_cast_FLOAT_to_STRING")
    with pytest.raises(FormRefused, match=r"^ONNX Cast node .*attribute to=8 is not accepted"):
        pycumsum_op.onnx.prepare(onnx.load(os.path.join(folder, "model.onnx")))


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("shape, axis", [((2, 0), 1), ((2, 0), -1), ((0, 3), 0), ((0, 3), 1), ((0,), 0),
                                         ((2, 0, 3), 1), ((2, 3), 1)])
def test_exclusive_cumsum_over_an_empty_axis_lowered_to_aten(shape, axis, dynamic):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    for reverse in (0, 1):
        model = node_model("CumSum", {"x": x}, {"axis": np.array(axis, np.int64)}, {"exclusive": 1,
                           "reverse": reverse}, opset=13, dynamic=dynamic)
        matches(model, {"x": x}, lower="aten")


def exported(module, args, names, dynamic_axes, opset=13):
    buffer = io.BytesIO()
    torch.onnx.export(module, args, buffer, opset_version=opset, input_names=names, output_names=["y"],
                      dynamic_axes=dynamic_axes)
    return onnx.load_from_string(buffer.getvalue())


class EveryOtherFromTheEnd(torch.nn.Module):
    def forward(self, x):
        n = x.shape[1]
        return x[:, torch.arange(n - 1, -1, -2)]


class ExpandAs(torch.nn.Module):
    def forward(self, x, y):
        return x.expand_as(y) * 2


class Expand(torch.nn.Module):
    def forward(self, x, y):
        return x.expand(y.shape[0], -1, -1)


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_arange_with_a_negative_step(dynamic):
    """torch.arange(n - 1, -1, -2) over a length torch exports as a computed scalar: an int64 Range with delta -2."""
    model = exported(EveryOtherFromTheEnd(), (torch.zeros(2, 7),), ["x"], {"x": {1: "n"}} if dynamic else None)
    assert "Range" in {node.op_type for node in model.graph.node} or not dynamic
    for n in ((7,) if not dynamic else (7, 8, 1, 2)):
        x = np.arange(2 * n, dtype=np.float32).reshape(2, n)
        matches(model, {"x": x})


@pytest.mark.parametrize("module", [ExpandAs(), Expand()], ids=["expand_as", "expand"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_expand_with_an_empty_batch(module, dynamic):
    x, y = torch.zeros(1, 4, 3), torch.zeros(2, 4, 3)
    model = exported(module, (x, y), ["x", "like"], {"like": {0: "batch"}} if dynamic else None)
    for batch in ((2,) if not dynamic else (2, 0, 1)):
        feeds = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(1, 4, 3),
                 "like": np.zeros((batch, 4, 3), np.float32)}
        matches(model, {info.name: feeds[info.name] for info in model.graph.input})  # static: x only, maybe


#: (input, dims) mis-shapings for hidden size 4, input size 3, sequence 5, batch 2, D directions (-1: D - 1 ...)
RANKS = {"x": 3, "w": 3, "r": 3, "b": 2, "lengths": 1, "h0": 3, "c0": 3}
MISSHAPEN = [("h0", ("D-1", 2, 4)), ("h0", (0, 2, 4)), ("h0", ("D+1", 2, 4)), ("h0", ("D", 3, 4)), ("h0", ("D", 2, 5)),
             ("h0", ("D", 2, 4, 1)), ("c0", ("D-1", 2, 4)), ("c0", ("D", 1, 4)), ("r", ("D-1", "G", 4)),
             ("r", ("D", "G", 3)), ("b", ("D-1", "2*G")), ("b", ("D", "G")), ("lengths", (3,)), ("x", (5, 2, 4)),
             ("w", ("D-1", "G", 3)), ("batch", 0)]

CHILD = r"""
import json, sys, numpy as np
from onnx import TensorProto, helper
import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from onnx_support import onnxruntime_outputs
cases = json.loads(sys.argv[1] if len(sys.argv) > 1 else %r)
for op, direction, dynamic, name, dims in cases:
    gates, states = {"LSTM": (4, 2), "GRU": (3, 1), "RNN": (1, 1)}[op]
    D = 2 if direction == "bidirectional" else 1
    shapes = {"x": [5, 2, 3], "w": [D, gates * 4, 3], "r": [D, gates * 4, 4], "b": [D, 8 * gates], "lengths": [2],
              "h0": [D, 2, 4], "c0": [D, 2, 4]}
    if name == "batch":  # an empty batch, every input agreeing
        for n, k in (("x", 1), ("lengths", 0), ("h0", 1), ("c0", 1)):
            shapes[n][k] = dims
    elif name:
        shapes[name] = [eval(str(d), {"D": D, "G": gates * 4}) for d in dims]
    names = ["x", "w", "r", "b", "lengths", "h0", "c0"][:5 + states]
    rng = np.random.default_rng(0)
    feeds = {n: np.full(shapes[n], min(shapes["x"][0], 3), np.int32) if n == "lengths" else
             rng.standard_normal(shapes[n]).astype(np.float32) for n in names}
    # "unranked": each input but W goes through an Expand to a shape fed at run time (torch's initial states are
    # made so), whose rank the model does not give
    unranked = [n for n in names if dynamic == "unranked" and n != "w"]
    infos = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "lengths" else TensorProto.FLOAT,
             [d if n == "w" or (n == "x" and k == 2) or not dynamic else "{}{}".format(n, k)
              for k, d in enumerate(shapes[n])]) for n in names]
    infos += [helper.make_tensor_value_info("dims_" + n, TensorProto.INT64, ["rank_" + n]) for n in unranked]
    for n in unranked:
        infos[names.index(n)].name = "raw_" + n
        feeds["raw_" + n], feeds["dims_" + n] = feeds.pop(n), np.array(shapes[n], np.int64)
    nodes = [helper.make_node("Expand", ["raw_" + n, "dims_" + n], [n]) for n in unranked]
    nodes.append(helper.make_node(op, names, ["y", "yh"], hidden_size=4, direction=direction))
    model = helper.make_model(helper.make_graph(nodes, "g", infos, [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, ["p", "q", "r", "s"]),
        helper.make_tensor_value_info("yh", TensorProto.FLOAT, ["p", "q", "r"])]),
        opset_imports=[helper.make_opsetid("", 13)])
    try:
        rep = pycumsum_op.onnx.prepare(model)
    except FormRefused as error:
        print(json.dumps(["refused", str(error)]), flush=True)
        continue
    try:
        ours = rep.run(feeds)
    except RuntimeError as error:
        print(json.dumps(["failed", [line for line in str(error).splitlines() if "ONNX" in line][:1]]), flush=True)
        continue
    expected = onnxruntime_outputs(model, feeds)
    same = all(a.shape == b.shape and np.allclose(a, b, atol=1e-5) for a, b in zip(ours, expected))
    print(json.dumps(["match" if same else "mismatch", None]), flush=True)
"""


@pytest.mark.slow  # a child process importing 282 models
def test_misshapen_recurrent_inputs_are_refused_or_stop_the_run_in_one_line():
    """Caffe2's RecurrentNetwork checks none of its inputs' dims: too few directions in an initial state or R wrote
    past its buffers ("double free or corruption", "munmap_chunk(): invalid pointer", SIGSEGV), an empty one gave
    a wrong sequence length. Each is now refused at import where the model states the dims, and stopped by an
    Assert naming the node where they are symbolic; the well-shaped model still equals onnxruntime."""
    cases = [(op, direction, dynamic, name, dims) for op in ("LSTM", "GRU", "RNN")
             for direction in ("forward", "bidirectional") for dynamic in (False, True, "unranked")
             for name, dims in [(None, None)] + MISSHAPEN if name != "c0" or op == "LSTM"]
    returncode, lines, stderr = in_child(CHILD % json.dumps(cases))
    assert returncode == 0 and len(lines) == len(cases), (returncode, cases[len(lines)], stderr[-2000:])
    for (op, direction, dynamic, name, dims), (result, detail) in zip(cases, lines):
        where = (op, direction, dynamic, name, dims)
        if name is None:
            assert result == "match", where
        elif name == "batch":  # refused where stated, else stopped by an Assert
            assert result == ("failed" if dynamic else "refused") and "'x' has batch size 0" in str(detail), where
        elif dynamic == "unranked" and name != "w" or (
                dynamic and name != "w" and len(dims) == RANKS[name] and (name != "x" or dims[2] == 3)):
            # symbolic dims or an unknown rank (W's dims, and X's last where X is ranked, stay stated: they give the
            # input size): an Assert stops the run
            assert result == "failed" and detail and detail[0].startswith(
                "ONNX {} node 'y,yh' (opset 13): input ".format(op)), (where, result, detail)
        else:
            assert result == "refused" and detail.startswith("ONNX {} node 'y,yh' (opset 13): ".format(op)), where
            assert len(detail.splitlines()) == 1 and "'{}'".format(name) in detail, (where, detail)


def test_matmul_of_doubles_is_refused_for_the_portable_target():
    """Caffe2's BatchMatMul is float only: double runs torch's matmul, which the portable target has not."""
    a = np.ones((2, 3), np.float64)
    with pytest.raises(FormRefused, match=r"^ONNX MatMul node 'out0' \(opset 13\): input 0 'a' is DOUBLE"):
        pycumsum_op.onnx.prepare(node_model("MatMul", {"a": a, "b": a.T.copy()}, opset=13), lower="portable")
