"""The import's work is linear in the model: onnx's shape inference runs once per prepare, and the calls an import
makes grow with the number of nodes, never with the number of paths through them (counted, not timed)."""
import sys

import numpy as np
import onnx
import onnx.shape_inference
import pytest
from onnx import TensorProto, helper

from onnx_support import onnx_backend_refusal, onnxruntime_outputs
from transformer_models import deep_encoder, export

pytestmark = pytest.mark.skipif(onnx_backend_refusal() is not None, reason=onnx_backend_refusal() or "")


@pytest.fixture
def inferences(monkeypatch):
    """The models onnx's shape inference is handed during the test, in order."""
    handed, infer = [], onnx.shape_inference.infer_shapes

    def counted(model, *args, **kwargs):
        handed.append(model)
        return infer(model, *args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counted)
    return handed


def _calls(action) -> int:
    """How many Python and C functions ``action()`` calls (Python's profiler events)."""
    count = [0]

    def profile(frame, event, arg):
        if event in ("call", "c_call"):
            count[0] += 1

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return count[0]


def _doubling_chain(length: int) -> onnx.ModelProto:
    """An Expand to a shape of unknown length (no rank is inferred after it), ``length`` nodes e(i+1) = e(i) + e(i),
    then a ReduceSum over the last axis: each Add's rank is asked of both its inputs."""
    nodes = [helper.make_node("Expand", ["x", "shape"], ["e0"])]
    nodes += [helper.make_node("Add", ["e%d" % i, "e%d" % i], ["e%d" % (i + 1)]) for i in range(length)]
    nodes.append(helper.make_node("ReduceSum", ["e%d" % length], ["y"], axes=[-1]))
    graph = helper.make_graph(nodes, "doubling", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
                                                  helper.make_tensor_value_info("shape", TensorProto.INT64, [None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def test_a_chain_of_unknown_rank_imports_in_linear_work_and_runs(inferences):
    from pycumsum_op.onnx import prepare
    small, large = (_calls(lambda: prepare(_doubling_chain(length))) for length in (40, 320))
    assert large < 8 * small * 1.1, (small, large)
    # a rank asked of both inputs of every Add, with no answer kept, costs 2**length calls
    assert len(inferences) == 2
    rep = prepare(_doubling_chain(40))
    feeds = {"x": np.array([1.5], np.float32), "shape": np.array([2, 3], np.int64)}
    expected = onnxruntime_outputs(_doubling_chain(40), feeds)[0]
    np.testing.assert_array_equal(rep.run(feeds)[0], expected)


@pytest.fixture(scope="module")
def encoders():
    """Exports of one narrow encoder at 6, 12 and 24 layers (dynamic batch and sequence)."""
    return {layers: export(*deep_encoder(layers, hidden=32, heads=2), opset=13, dynamic=True)
            for layers in (6, 12, 24)}


@pytest.mark.slow
def test_prepare_work_is_linear_in_depth(encoders):
    from pycumsum_op.onnx import prepare
    calls = {layers: _calls(lambda: prepare(model)) for layers, model in encoders.items()}
    nodes = {layers: len(model.graph.node) for layers, model in encoders.items()}
    for shallow, deep in ((6, 12), (12, 24)):
        # the work per node stays what it is: at most 10 % more per node at twice the depth
        assert calls[deep] / nodes[deep] <= 1.1 * calls[shallow] / nodes[shallow], (calls, nodes)


@pytest.mark.slow
@pytest.mark.parametrize("lower", [None, "aten"])
def test_shape_inference_runs_once_per_prepare(encoders, inferences, lower):
    from pycumsum_op.onnx import prepare
    prepare(encoders[12], lower=lower)
    assert len(inferences) == 1
    # on the model's structure: no weight is serialized for inference
    weights = [tensor.name for tensor in encoders[12].graph.initializer if np.prod(tensor.dims) > 64]
    assert weights and not {tensor.name for tensor in inferences[0].graph.initializer} & set(weights)


@pytest.mark.slow
def test_the_stock_backend_and_to_caffe2_infer_once(encoders, inferences):
    from caffe2.python.onnx import backend as stock
    import pycumsum_op.onnx
    pycumsum_op.onnx.install()
    stock.prepare(encoders[6])
    pycumsum_op.onnx.to_caffe2(encoders[6])
    assert len(inferences) == 2


@pytest.mark.slow
def test_bert_base_shape_imports_and_matches_onnxruntime(inferences):
    """12 layers of width 768 with 12 heads (BERT-base's encoder), sequence 128: prepared with one shape inference,
    run, equal to onnxruntime."""
    from pycumsum_op.onnx import prepare
    module, (ids, mask) = deep_encoder(12, hidden=768, heads=12, sequence=128)
    model = export(module, (ids, mask), opset=13, dynamic=True)
    rep = prepare(model)
    assert len(inferences) == 1
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    got, (expected,) = rep.run(feeds)[0], onnxruntime_outputs(model, feeds)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def _zeros_read_by(consumer: str) -> onnx.ModelProto:
    """y = consumer(ConstantOfShape(Tile(Shape(x), [1])), ...): a shape made by an op that bounds no length from the
    graph alone (Tile), so the lengths are checked on an inference of a probe first. A ScatterElements reading the
    ConstantOfShape's output is what onnx's inference crashed on (SIGSEGV) when the probe left that input made by
    nothing (torchvision's Faster R-CNN export)."""
    reads = ["zeros", "indices", "x"] if consumer == "ScatterElements" else ["zeros", "x"]
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Tile", ["s", "once"], ["shape"]),
             helper.make_node("ConstantOfShape", ["shape"], ["zeros"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
             helper.make_node(consumer, reads, ["y"], **({"axis": 1} if consumer == "ScatterElements" else {}))]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    inputs += [helper.make_tensor_value_info("indices", TensorProto.INT64, [2, 3])] if len(reads) == 3 else []
    graph = helper.make_graph(nodes, "zeros", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor("once", TensorProto.INT64, [1], [1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_a_length_no_bound_holds_is_checked_on_a_valid_probe(inferences):
    from pycumsum_op.onnx import prepare
    from pycumsum_op.onnx.ops.contract import FormRefused
    model = _zeros_read_by("Add")
    rep = prepare(model)
    assert len(inferences) == 2  # the probe, then the model's structure
    for probe in inferences:
        onnx.checker.check_model(probe)  # each a valid model: every node input made by something
    feeds = {"x": np.array([[1, 2, 3], [4, -np.inf, np.nan]], np.float32)}
    np.testing.assert_array_equal(rep.run(feeds)[0], onnxruntime_outputs(model, feeds)[0])
    with pytest.raises(FormRefused, match="^ONNX ScatterElements node 'y' [^\n]*$"):
        prepare(_zeros_read_by("ScatterElements"))  # inferred whole, then refused in one line
    assert len(inferences) == 4


@pytest.mark.slow
def test_bert_base_shape_imports_portable_and_matches_onnxruntime():
    """The same encoder exported with static axes, through the portable target: no ATen op in 12 layers of width 768,
    equal to onnxruntime."""
    from pycumsum_op.onnx import prepare
    module, (ids, mask) = deep_encoder(12, hidden=768, heads=12, sequence=128)
    model = export(module, (ids, mask), opset=13, dynamic=False)
    rep = prepare(model, lower="portable")
    assert [op.type for net in (rep.init_net, rep.predict_net) for op in net.op if op.type in ("ATen", "Python")] == []
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    got, (expected,) = rep.run(feeds)[0], onnxruntime_outputs(model, feeds)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
