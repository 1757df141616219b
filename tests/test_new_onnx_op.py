"""A new ONNX op is one declaration: declared here, in the test, ONNX Shrink (by torch's kernels) gets the import
against onnxruntime, the element-type check, its rank in the facts, its element bound in shape inference's census,
its row in docs/onnx.md's table and the refusal messages — from the declaration alone — and withdrawn, it is refused
again.
"""
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import pycumsum_op.onnx
from onnx_forms_support import EDGE_FLOATS, edge_arrays, edge_shapes, node_model, outcome
from test_onnx_forms import docs_table
from pycumsum_op.onnx.facts import GraphFacts
from pycumsum_op.onnx.forms import check_node
from pycumsum_op.onnx.inference import _element_bounds
from pycumsum_op.onnx.ops.contract import (ANY, AT_MOST_FIRST, FLOAT, NEWEST, Form, FormRefused, declare, same_rank,
                                           withdraw)
from pycumsum_op.onnx.ops.helpers import attribute
from pycumsum_op.onnx.run_checks import make_op


def _shrink(node, facts, opset, fresh):
    """x - bias above lambd, x + bias below -lambd, 0 between them and for NaN: torch's comparisons, then where and
    masked_fill."""
    x, lambd, bias = node.input[0], float(attribute(node, "lambd", 0.5)), float(attribute(node, "bias", 0.0))
    above, below, lowered, raised, low, picked, outside, between = (fresh() for _ in range(8))
    return [make_op("ATen", [x], [above], node.name, operator="gt", other=lambd),
            make_op("ATen", [x], [below], node.name, operator="lt", other=-lambd),
            make_op("ATen", [x], [lowered], node.name, operator="sub", other=bias),
            make_op("ATen", [x], [raised], node.name, operator="add", other=bias),
            make_op("ATen", [below, raised, x], [low], node.name, operator="where"),
            make_op("ATen", [above, lowered, low], [picked], node.name, operator="where"),
            make_op("ATen", [above, below], [outside], node.name, operator="logical_or"),
            make_op("ATen", [outside], [between], node.name, operator="logical_not"),
            make_op("ATen", [picked, between], [node.output[0]], node.name, operator="masked_fill", value=0.0)]


@pytest.fixture
def declared_shrink():
    declare("Shrink", Form((9, NEWEST), {"lambd": ANY, "bias": ANY}), types=FLOAT, rank=same_rank,
            elements=AT_MOST_FIRST, inputs=("input",), why="opsets before 9 have no Shrink")(_shrink)
    yield
    withdraw("Shrink")


def _refusal(model) -> str:
    with pytest.raises(FormRefused) as refused:
        pycumsum_op.onnx.prepare(model)
    return str(refused.value)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=edge_shapes(0, 3), data=st.data(), dynamic=st.booleans(),
       lambd=st.sampled_from([0.5, 0.0, 1.0, 2.5, 3e38]), bias=st.sampled_from([0.0, 0.5, -1.0, 1e-45]))
def test_the_declared_op_equals_onnxruntime_at_the_edges(declared_shrink, shape, data, dynamic, lambd, bias):
    x = data.draw(edge_arrays(np.float32, shape, floats=EDGE_FLOATS + (-1e-45, 1.0, -1.0, 2.5, -2.5)))
    model = node_model("Shrink", {"x": x}, attrs={"lambd": lambd, "bias": bias}, opset=13, dynamic=dynamic)
    result, detail = outcome(model, {"x": x})
    assert result == "match", detail


def test_the_declared_types_attributes_and_opsets_are_checked(declared_shrink):
    x = np.ones((2, 3))
    assert _refusal(node_model("Shrink", {"x": x})) == (
        "ONNX Shrink node 'out0' (opset 13): input 0 'x' is DOUBLE; Caffe2 runs Shrink right on FLOAT only")
    with pytest.raises(FormRefused, match=r"^ONNX Shrink node 'y' \(opset 13\): attribute 'alpha' is not accepted "
                                          r"\(accepted: bias, lambd\); opsets before 9 have no Shrink$"):
        check_node(helper.make_node("Shrink", ["x"], ["y"], alpha=0.5), 13, elem_type=lambda name: 1)
    with pytest.raises(FormRefused, match=r"^ONNX Shrink node 'y' \(opset 16\): accepted only at opsets 9-15"):
        check_node(helper.make_node("Shrink", ["x"], ["y"]), 16, elem_type=lambda name: 1)


def _shrink_chain():
    """x (2, 3) -> Shrink -> p; no value infos: only the declaration's rules know p."""
    return helper.make_graph([helper.make_node("Shrink", ["x"], ["p"])], "chain",
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                             [helper.make_tensor_value_info("p", TensorProto.FLOAT, None)])


def test_the_facts_and_the_census_read_the_declaration(declared_shrink):
    graph = _shrink_chain()
    assert GraphFacts(graph).rank("p") == 2  # its input's rank
    assert _element_bounds(graph)["p"] == 6  # no more elements than its input
    withdraw("Shrink")
    assert GraphFacts(graph).rank("p") is None
    assert _element_bounds(graph)["p"] is None


def test_the_docs_table_has_the_declared_row(declared_shrink):
    assert "| Shrink | 9-15 | bias, lambd | - | float | pycumsum_op |" in docs_table().splitlines()


def test_a_withdrawn_op_is_refused(declared_shrink):
    withdraw("Shrink")
    assert _refusal(node_model("Shrink", {"x": np.ones(3, np.float32)})) == (
        "ONNX Shrink node 'out0' (opset 13): the op has no form proven equal to onnxruntime")
    assert "| Shrink |" not in docs_table()


def test_an_op_is_declared_once(declared_shrink):
    with pytest.raises(ValueError, match="ONNX Shrink is declared twice"):
        declare("Shrink", Form((9, NEWEST)), types=FLOAT)(_shrink)
    assert onnx.defs.has("Shrink")
