"""A new ONNX op is one declaration: declared here, in the test, ONNX Mod (fmod=1, torch's fmod kernel) gets the
import against onnxruntime, the element-type check, its rank in the facts, its element bound in shape inference's
census, its row in docs/onnx.md's table and the refusal messages — from the declaration alone — and withdrawn, it is
refused again.
"""
import numpy as np
import onnx
import pytest
import pycumsum_op.onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnx_forms_support import EDGE_FLOATS, edge_arrays, edge_shapes, node_model, outcome
from test_onnx_forms import docs_table
from pycumsum_op.onnx.facts import GraphFacts
from pycumsum_op.onnx.forms import check_node
from pycumsum_op.onnx.inference import _element_bounds
from pycumsum_op.onnx.ops.contract import (BROADCAST, FLOAT, NEWEST, Form, FormRefused, broadcast_rank, declare,
                                           withdraw)
from pycumsum_op.onnx.run_checks import make_op

def _mod(node, facts, opset, fresh):
    """C's fmod, as ONNX's Mod with fmod=1: torch's fmod kernel (the ATen op) broadcasts as numpy."""
    return [make_op("ATen", list(node.input), [node.output[0]], node.name, operator="fmod")]


@pytest.fixture
def declared_mod():
    declare("Mod", Form((10, NEWEST), {"fmod": frozenset([1])}), types=FLOAT, rank=broadcast_rank,
            elements=BROADCAST, why="fmod=0 (Python's remainder) is not declared here")(_mod)
    yield
    withdraw("Mod")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes=st.tuples(edge_shapes(0, 3), edge_shapes(0, 3)), data=st.data(), dynamic=st.booleans())
def test_the_declared_op_equals_onnxruntime_at_the_edges(declared_mod, shapes, data, dynamic):
    first, second = shapes
    try:
        np.broadcast_shapes(first, second)
    except ValueError:
        return  # not a model: numpy's broadcasting refuses it, as ONNX's checker does
    x = data.draw(edge_arrays(np.float32, first))
    y = data.draw(edge_arrays(np.float32, second, floats=EDGE_FLOATS + (0.0, -3.0)))
    model = node_model("Mod", {"x": x, "y": y}, attrs={"fmod": 1}, opset=13, dynamic=dynamic)
    result, detail = outcome(model, {"x": x, "y": y})
    assert result == "match", detail


def _refusal(model) -> str:
    with pytest.raises(FormRefused) as refused:
        pycumsum_op.onnx.prepare(model)
    return str(refused.value)


def test_the_declared_types_and_attributes_are_checked(declared_mod):
    x = np.ones((2, 3))
    assert _refusal(node_model("Mod", {"x": x, "y": x}, attrs={"fmod": 1})) == (
        "ONNX Mod node 'out0' (opset 13): input 0 'x' is DOUBLE; Caffe2 runs Mod right on FLOAT only")
    x = np.ones((2, 3), np.float32)
    assert _refusal(node_model("Mod", {"x": x, "y": x}, attrs={"fmod": 0})) == (
        "ONNX Mod node 'out0' (opset 13): attribute fmod=0 is not accepted (accepted: 1); fmod=0 (Python's "
        "remainder) is not declared here")
    with pytest.raises(FormRefused, match=r"^ONNX Mod node 'z' \(opset 16\): accepted only at opsets 10-15"):
        check_node(helper.make_node("Mod", ["x", "y"], ["z"], fmod=1), 16, elem_type=lambda name: TensorProto.FLOAT)


def _mod_chain():
    """x (3,) and y (2, 1) -> Mod -> m; no value infos: only the declaration's rules know m."""
    graph = helper.make_graph([helper.make_node("Mod", ["x", "y"], ["m"], fmod=1)], "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])],
                              [helper.make_tensor_value_info("m", TensorProto.FLOAT, None)])
    return graph


def test_the_facts_and_the_census_read_the_declaration(declared_mod):
    graph = _mod_chain()
    assert GraphFacts(graph).rank("m") == 2  # numpy's broadcasting: the larger rank
    assert _element_bounds(graph)["m"] == 6  # at most the product of the inputs' counts
    withdraw("Mod")
    assert GraphFacts(graph).rank("m") is None
    assert _element_bounds(graph)["m"] is None


def test_the_docs_table_has_the_declared_row(declared_mod):
    assert "| Mod | 10-15 | fmod (1) | - | float | pycumsum_op |" in docs_table().splitlines()


def test_a_withdrawn_op_is_refused(declared_mod):
    withdraw("Mod")
    x = np.ones(3, np.float32)
    assert _refusal(node_model("Mod", {"x": x, "y": x}, attrs={"fmod": 1})) == (
        "ONNX Mod node 'out0' (opset 13): the op has no form proven equal to onnxruntime")
    assert "| Mod |" not in docs_table()


def test_an_op_is_declared_once(declared_mod):
    with pytest.raises(ValueError, match="ONNX Mod is declared twice"):
        declare("Mod", Form((10, NEWEST)), types=FLOAT)(_mod)
    assert onnx.defs.has("Mod")
