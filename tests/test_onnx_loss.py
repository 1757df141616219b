"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss at the edges, against onnxruntime (graph optimizations off):
inputs of rank 2 to 5 with empty and size-1 dims, static and symbolic; every reduction; ignore_index absent, in
range, negative or past int32; weights absent, constant or fed, negative and zero among them; int64 and int32
targets; float, and double for NegativeLogLikelihoodLoss; NaN and the infinities; log_prob read. Where the loss is taken over no entry at all (an
empty batch or an empty spatial dim), onnxruntime's own answer depends on how its function body reduces (its
ReduceMean of nothing gives 0 where no weights and no ignore_index are given, its Reshape refuses an empty
SoftmaxCrossEntropyLoss), so ONNX's definition is the reference there: the sum of nothing is 0, the mean 0 / 0 is
NaN, as every mean whose entries are all ignored (which onnxruntime gives too). A target neither in [0, C) nor
ignore_index (ONNX leaves its loss undefined: onnxruntime fails on one past C and counts a negative one from the
end) stops the net with one line naming the node; so do a target and weights whose dims do not fit the input's.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import pycumsum_op.onnx
from pycumsum_op.onnx.ops.contract import FormRefused
from pycumsum_op.onnx.run_checks import RunRefused
from onnx_forms_support import EDGE_DIMS, EDGE_FLOATS, edge_arrays, node_model, outcome
from onnx_support import onnxruntime_outputs

LOSSES = ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: the edge values but those whose sums overflow float32: torch and onnxruntime add in other orders (inf against
#: 3e38)
VALUES = tuple(value for value in EDGE_FLOATS if np.isnan(value) or abs(value) < 1e38)
WEIGHTS = (0.0, 1.0, -2.5, 0.5, 3.0)
#: the element types each loss states (SoftmaxCrossEntropyLoss float only: onnxruntime's double log_softmax is no
#: oracle)
DTYPES = {"NegativeLogLikelihoodLoss": [np.float32, np.float64], "SoftmaxCrossEntropyLoss": [np.float32]}


def _of_no_entries(op, x, target, reduction, log_prob):
    """ONNX's outputs of a loss over no entry: the per-entry losses (none), 0 (sum), 0 / 0 (mean); log_prob."""
    loss = {"none": np.zeros(target.shape, x.dtype), "sum": np.array(0, x.dtype),
            "mean": np.array(np.nan, x.dtype)}[reduction]
    return [loss] + ([x.copy()] if log_prob else [])


@st.composite
def loss_cases(draw):
    op = draw(st.sampled_from(LOSSES))
    rank = draw(st.integers(2, 5))
    dims = (draw(EDGE_DIMS), draw(st.integers(1, 4))) + tuple(draw(EDGE_DIMS) for _ in range(rank - 2))
    x = draw(edge_arrays(draw(st.sampled_from(DTYPES[op])), dims, VALUES))
    index_type = draw(st.sampled_from([np.int64, np.int32]))
    ignore_index = draw(st.sampled_from([None, 0, -1, -100] + ([2 ** 40] if index_type == np.int64 else [])))
    labels = list(range(dims[1])) + ([] if ignore_index is None else [ignore_index])
    count = int(np.prod((dims[0],) + dims[2:]))
    target = np.array(draw(st.lists(st.sampled_from(labels), min_size=count, max_size=count)),
                      index_type).reshape((dims[0],) + dims[2:])
    inputs, constants = {"x": x, "t": target}, {}
    weighting = draw(st.sampled_from(["absent", "fed", "constant"]))
    if weighting != "absent":
        weights = np.array(draw(st.lists(st.sampled_from(WEIGHTS), min_size=dims[1], max_size=dims[1])), x.dtype)
        (inputs if weighting == "fed" else constants)["w"] = weights
    attrs = {"reduction": draw(st.sampled_from(["none", "sum", "mean"]))}
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index
    log_prob = op == "SoftmaxCrossEntropyLoss" and draw(st.booleans())
    return op, inputs, constants, attrs, log_prob


@SETTINGS
@given(case=loss_cases(), dynamic=st.booleans(), opset=st.sampled_from([12, 13, 15]))
@example(case=("NegativeLogLikelihoodLoss", {"x": np.ones((2, 3), np.float32), "t": np.array([1, 1])}, {},
               {"reduction": "mean", "ignore_index": 1}, False), dynamic=False, opset=13)  # every entry ignored
@example(case=("SoftmaxCrossEntropyLoss", {"x": np.ones((0, 3, 2), np.float32), "t": np.zeros((0, 2), np.int64)},
               {}, {"reduction": "mean"}, True), dynamic=True, opset=13)  # an empty batch
def test_losses_equal_onnxruntime(case, dynamic, opset):
    op, inputs, constants, attrs, log_prob = case
    model = node_model(op, inputs, constants, attrs, opset, dynamic=dynamic, outputs=2 if log_prob else 1)
    expected = None
    if inputs["t"].size == 0:
        expected = _of_no_entries(op, inputs["x"], inputs["t"], attrs["reduction"], log_prob)
    assert outcome(model, inputs, expected) == ("match", None)


@pytest.mark.parametrize("op", LOSSES)
@pytest.mark.parametrize("ignore_index", [None, -1, 1])
@pytest.mark.parametrize("target", [[3, 0], [0, -2], [1, 2 ** 40]])
def test_a_target_outside_the_classes_stops_the_net_in_one_line(op, ignore_index, target):
    x = np.zeros((2, 3), np.float32)
    attrs = {"reduction": "sum"} if ignore_index is None else {"reduction": "sum", "ignore_index": ignore_index}
    model = node_model(op, {"x": x, "t": np.array(target)}, {}, attrs, 13, dynamic=True)
    rep = pycumsum_op.onnx.prepare(model)
    with pytest.raises(RunRefused) as raised:
        rep.run({"x": x, "t": np.array(target)})
    message = str(raised.value)
    assert "\n" not in message
    assert message == ("ONNX {} node 'out0' (opset 13): a target of input 1 't' is outside [0, C) (C: dim 1 of input 0 "
                       "'x'){}; the value checked: [{}]".format(
                           op, "" if ignore_index is None else " and not ignore_index {}".format(ignore_index),
                           ", ".join(str(label) for label in target)))
    fitting = {"x": x, "t": np.array([label % 3 for label in target])}  # the same net runs targets in range
    assert np.allclose(rep.run(fitting)[0], onnxruntime_outputs(model, fitting)[0], rtol=1e-6)


@pytest.mark.parametrize("op", LOSSES)
def test_a_target_or_weights_of_other_dims_stop_the_net(op):
    x, t, w = np.zeros((2, 3, 4), np.float32), np.zeros((2, 4), np.int64), np.ones(3, np.float32)
    rep = pycumsum_op.onnx.prepare(node_model(op, {"x": x, "t": t, "w": w}, {}, {}, 13, dynamic=True))
    rep.run({"x": x, "t": t, "w": w})
    for feeds, wrong in [({"t": np.zeros((2, 5), np.int64)}, "input 1 ({}) 't' does not have the dims of input 0 'x' "
                                                             "at axes [0, 2]; the value checked: [2, 5]"),
                         ({"w": np.ones(4, np.float32)}, "input 2 ({}) 'w' does not have the dims of input 0 'x' at "
                                                         "axes [1]; the value checked: [4]")]:
        names = ("target", "weight") if op == "NegativeLogLikelihoodLoss" else ("labels", "weights")
        with pytest.raises(RunRefused, match=r"^ONNX {} node 'out0' \(opset 13\): ".format(op)) as raised:
            rep.run(dict({"x": x, "t": t, "w": w}, **feeds))
        assert wrong.format(names[0] if "input 1" in wrong else names[1]) in str(raised.value)


@pytest.mark.parametrize("op", LOSSES)
def test_forms_without_a_faithful_translation_are_refused_at_prepare(op):
    x, t = np.zeros((2, 3), np.float32), np.zeros(2, np.int64)
    stated = "FLOAT, DOUBLE" if np.float64 in DTYPES[op] else "FLOAT"
    for dtype in {np.float16, np.float64} - set(DTYPES[op]):
        model = node_model(op, {"x": x.astype(dtype), "t": t}, {}, {}, 13)
        assert outcome(model, {}, expected=[]) == (
            "refused", "ONNX {} node 'out0' (opset 13): input 0 'x' is {}; Caffe2 runs {} right on {} only".format(
                op, "FLOAT16" if dtype == np.float16 else "DOUBLE", op, stated))
    model = node_model(op, {"x": x, "t": t}, {}, {"reduction": "max"}, 13)
    with pytest.raises(FormRefused, match=r"^ONNX {} node 'out0' \(opset 13\): attribute reduction='max' is not "
                                          r"accepted \(accepted: 'mean', 'none', 'sum'\)$".format(op)):
        pycumsum_op.onnx.prepare(model)
    with pytest.raises(FormRefused, match=r"ONNX {} node 'out0' \(opset 13\): the portable target runs no torch "
                                          r"kernel".format(op)):
        pycumsum_op.onnx.prepare(node_model(op, {"x": x, "t": t}, {}, {}, 13), lower="portable")
    graph = helper.make_graph([helper.make_node("Expand", ["a", "shape"], ["x"]),  # a shape of symbolic length
                               helper.make_node(op, ["x", "t"], ["y"])], "unranked",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3]),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, ["n"]),
                               helper.make_tensor_value_info("t", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    with pytest.raises(FormRefused, match=r"^ONNX {} node 'y' \(opset 13\): the rank of input 0 \(\w+\) 'x' is "
                                          r"unknown$".format(op)):
        pycumsum_op.onnx.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
