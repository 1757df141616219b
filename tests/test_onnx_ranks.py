"""`GraphFacts.rank` where ONNX's shape inference gives none: each rule (an op's output rank from its inputs'
ranks, by ONNX's definition of the op) against the outputs onnx's node tests expect, with every shape the graph
states taken away but the graph inputs' and initializers'; and through a whole transformers export with an Expand
to a computed shape (after which ONNX infers no rank), against the blobs onnxruntime computes."""
import os

import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import numpy as np
import onnx
from onnx import numpy_helper

from onnx_forms_support import node_model
from onnx_node_suite import node_tests
from onnx_support import onnxruntime_outputs
from pycumsum_op.onnx.facts import GraphFacts
from pycumsum_op.onnx.ops import DECLARATIONS

#: the ops `rank` follows (their declarations' rank rules), each of which must meet at least one node test whose
#: output rank it derives
RULES = frozenset(op for op, declaration in DECLARATIONS.items() if declaration.rank is not None)
#: ops of `RULES` that onnx 1.10's node tests never give an output rank to derive (every test of theirs is of
#: another op, or of a form whose rank needs what the rule does not know)
UNMET = frozenset()


def _shapeless(graph):
    """``graph`` without value infos and with its outputs' shapes taken away: only inputs and initializers say."""
    stripped = onnx.GraphProto()
    stripped.CopyFrom(graph)
    del stripped.value_info[:]
    for output in stripped.output:
        if output.type.HasField("tensor_type"):
            output.type.tensor_type.ClearField("shape")
    return stripped


def test_each_rule_gives_the_rank_onnx_node_tests_expect():
    derived, checked = {}, 0
    for case in node_tests().values():
        model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
        if len(model.graph.node) != 1 or model.graph.node[0].op_type not in RULES:
            continue
        node = model.graph.node[0]
        data_set = os.path.join(case.model_dir, "test_data_set_0")
        facts = GraphFacts(_shapeless(model.graph))
        for number, name in enumerate(node.output):
            if not name:
                continue
            path = os.path.join(data_set, "output_{}.pb".format(number))
            if not os.path.exists(path):
                continue
            tensor = onnx.TensorProto()
            with open(path, "rb") as stream:
                tensor.ParseFromString(stream.read())
            rank = facts.rank(name)
            if rank is not None:
                assert rank == numpy_helper.to_array(tensor).ndim, (case.name, name)
                derived.setdefault(node.op_type, []).append(case.name)
                checked += 1
    assert set(RULES) - set(derived) == UNMET, sorted(set(RULES) - set(derived) - UNMET)
    assert checked > 300


def test_each_dims_rule_gives_the_dims_onnx_node_tests_expect():
    """`GraphFacts.known_dims` where ONNX's inference gives no dims: every dim a declared dims rule derives
    (elementwise, broadcasting and Unsqueeze ops) is the output's dim in onnx's node tests."""
    derived, checked = set(), 0
    rules = {op for op, declaration in DECLARATIONS.items() if declaration.dims is not None}
    for case in node_tests().values():
        model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
        if len(model.graph.node) != 1 or model.graph.node[0].op_type not in rules:
            continue
        node = model.graph.node[0]
        path = os.path.join(case.model_dir, "test_data_set_0", "output_0.pb")
        dims = GraphFacts(_shapeless(model.graph)).known_dims(node.output[0])
        if dims is None or not os.path.exists(path):
            continue
        tensor = onnx.TensorProto()
        with open(path, "rb") as stream:
            tensor.ParseFromString(stream.read())
        shape = numpy_helper.to_array(tensor).shape
        assert len(dims) == len(shape) and all(dim in (None, size) for dim, size in zip(dims, shape)), case.name
        if any(dim is not None for dim in dims):
            derived.add(node.op_type)
            checked += 1
    assert {"Unsqueeze", "Add", "Mul", "Where", "Cast", "Relu"} <= derived and checked > 200, (sorted(derived), checked)


F = np.float32
I = np.int64


@pytest.mark.parametrize("op, inputs, constants, attrs, opset", [
    # the forms onnx's node tests leave out: 1-D MatMul operands, scalar Gather indices, reductions to rank 0 and of
    # rank 0, repeated reduction axes, an Expand to a shorter shape, Unsqueeze's axes as an input
    ("MatMul", {"a": np.ones(3, F), "b": np.ones(3, F)}, {}, {}, 13),
    ("MatMul", {"a": np.ones(3, F), "b": np.ones((2, 3, 4), F)}, {}, {}, 13),
    ("MatMul", {"a": np.ones((2, 4, 3), F), "b": np.ones(3, F)}, {}, {}, 13),
    ("MatMul", {"a": np.ones((5, 1, 2, 3), F), "b": np.ones((4, 3, 2), F)}, {}, {}, 13),
    ("Gather", {"x": np.ones((4, 5), F)}, {"i": np.array(1, I)}, {"axis": 1}, 13),
    ("Gather", {"x": np.ones(4, F)}, {"i": np.zeros((2, 3), I)}, {}, 13),
    ("ReduceMax", {"x": np.ones((2, 3), F)}, {}, {"keepdims": 0}, 13),
    ("ReduceMean", {"x": np.ones((2, 3, 4), F)}, {}, {"keepdims": 0, "axes": [-1, 2]}, 13),
    ("ReduceSum", {"x": np.ones((2, 3, 4), F)}, {"axes": np.array([0, -1], I)}, {"keepdims": 0}, 13),
    ("ReduceSum", {"x": np.ones((2, 3), F)}, {"axes": np.zeros(0, I)}, {"keepdims": 0}, 13),
    ("ReduceMin", {"x": np.array(2.0, F)}, {}, {"keepdims": 0}, 13),
    ("ArgMax", {"x": np.ones((2, 3), F)}, {}, {"keepdims": 0, "axis": -1}, 13),
    ("Expand", {"x": np.ones((2, 3), F)}, {"shape": np.array([3], I)}, {}, 13),
    ("Expand", {"x": np.ones(3, F)}, {"shape": np.array([2, 1, 1], I)}, {}, 13),
    ("Unsqueeze", {"x": np.ones((2, 3), F)}, {"axes": np.array([0, -1], I)}, {}, 13),
    ("Reshape", {"x": np.ones((2, 3), F)}, {"shape": np.array([-1], I)}, {}, 13),
    ("ConstantOfShape", {}, {"shape": np.array([2, 0, 3], I)}, {}, 13),
    ("Where", {"c": np.ones((1, 3), bool), "a": np.ones(3, F), "b": np.ones((2, 1, 1), F)}, {}, {}, 13),
    ("Concat", {"a": np.ones((2, 0), F), "b": np.ones((2, 3), F)}, {}, {"axis": 1}, 13),
    ("Size", {"x": np.ones((2, 3), F)}, {}, {}, 13),
])
def test_named_edge_forms_have_the_rank_onnxruntime_computes(op, inputs, constants, attrs, opset):
    model = node_model(op, inputs, constants, attrs, opset=opset)
    expected = onnxruntime_outputs(model, inputs)[0]
    assert GraphFacts(_shapeless(model.graph)).rank("out0") == np.ndim(expected)


@pytest.mark.slow  # a torch.onnx.export of a transformer
def test_ranks_through_a_transformer_export_are_the_ranks_onnxruntime_computes():
    pytest.importorskip("transformers", reason="transformers==4.26.1 (requirements-dev.txt)")
    import onnxruntime
    import transformer_models
    module, example = transformer_models.build_wider("roberta-question-answering")
    model = transformer_models.export(module, example, 13, dynamic=True)
    inferred = onnx.shape_inference.infer_shapes(model)
    facts = GraphFacts(inferred.graph)
    blobs = [name for node in model.graph.node for name in node.output if name]
    unknown = [name for name in blobs if facts.dims(name) is None]
    assert len(unknown) > 20  # the export's Expand to a computed shape leaves ONNX without ranks downstream
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in unknown)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    values = session.run(unknown, {"input_ids": example[0].numpy(), "attention_mask": example[1].numpy()})
    ranks = {name: facts.rank(name) for name in unknown}
    assert {name: np.ndim(value) for name, value in zip(unknown, values) if ranks[name] is not None} == \
        {name: rank for name, rank in ranks.items() if rank is not None}
    assert sum(rank is not None for rank in ranks.values()) == len(unknown)
    for name, value in zip(unknown, values):  # every dim derived is the dim onnxruntime computes
        assert all(dim in (None, size) for dim, size in zip(facts.known_dims(name), np.shape(value))), name
