"""ONNX shape inference, once per import, on the model's structure.

onnx's inference serializes the model it is given: for a model of BERT-base's size, each call cost over a second
for the weights alone. `inferred` runs it once, on a copy that holds the model's structure (nodes, declared
values) and only the initializers whose values inference reads (a shape, axes, pads, a Range's bounds: at most
2 * ``MAX_RANK`` entries); every other initializer is declared as a graph input of its type and dims, so the copy
is itself a valid model (onnx's C++ inference crashed on a copy with a node input that nothing made).

One op turns a length inference knows into a rank (declared ``length_is_rank``: ConstantOfShape of a computed
shape), which
inference would build before anything could check it. Where the length of every such input is bounded by
``MAX_RANK`` from the graph alone (`_element_bounds`: what torch's exports write, Shape -> Gather -> Unsqueeze ->
Concat), nothing more is inferred; otherwise a probe, the copy with each such node written as the Expand of its
value to its shape (a valid model too, whose inference makes no rank of a length), is inferred first and the
lengths it finds are checked; a probe inference cannot read leaves the model uninferred.
"""
from typing import Dict, Optional

import onnx
import onnx.shape_inference

from ..input_limits import MAX_RANK, InputTooLarge, TensorBudget
from .model_input import charge_inferred, graphs, value_dims, value_infos
from .ops import DECLARATIONS
from .ops.contract import AT_MOST_FIRST, BROADCAST



def _length_read_as_rank(op_type: str) -> Optional[int]:
    """The input of ``op_type`` whose length ONNX shape inference makes the rank of its output when it knows that
    length but not the values (ConstantOfShape of a computed shape: a length it inferred itself, from a Range of
    constants or through Identity, which it would turn into that many dimensions before anything could check
    them), or None."""
    declaration = DECLARATIONS.get(op_type)
    return declaration.shape_input if declaration is not None and declaration.length_is_rank else None


def _elements_rule(op_type: str) -> Optional[str]:
    """The declared bound of ``op_type``'s element count (`AT_MOST_FIRST`, `BROADCAST`) or None."""
    declaration = DECLARATIONS.get(op_type)
    return declaration.elements if declaration is not None else None


def _elements(dims) -> Optional[int]:
    """The element count of fixed ``dims`` (None when one is open)."""
    count = 1
    for dim in dims:
        if dim is None or dim < 0:
            return None
        count *= dim
    return count


#: a Constant node's attributes of rank 0 or 1 -> their element count
_CONSTANT_COUNTS = {"value_int": lambda attr: 1, "value_float": lambda attr: 1,
                    "value_ints": lambda attr: len(attr.ints), "value_floats": lambda attr: len(attr.floats)}


def _element_bounds(graph) -> Dict[str, Optional[int]]:
    """An upper bound of the element count of each blob of ``graph`` (None: no bound known), in one pass over
    its nodes in graph order; inference knows no length that this does not bound."""
    inputs = {info.name for info in graph.input}
    bounds: Dict[str, Optional[int]] = {}
    flat = set()  # blobs of rank 0 or 1: a Gather from one has as many elements as its indices
    for info in graph.input:
        dims = value_dims(info, open_dim=None)
        bounds[info.name] = None if dims is None else _elements(dims)
    for tensor in graph.initializer:
        if tensor.name not in inputs:
            bounds[tensor.name] = _elements(tensor.dims)
            if len(tensor.dims) <= 1:
                flat.add(tensor.name)

    def bound(name: str) -> Optional[int]:
        return bounds.get(name) if name else 1

    for node in graph.node:
        op, given = node.op_type, list(node.input)
        if node.domain not in ("", "ai.onnx") or not node.output:
            continue
        is_flat = False
        if op == "Constant":
            made = next((_constant_elements(attr) for attr in node.attribute), None)
            is_flat = any(attr.name in _CONSTANT_COUNTS or attr.name == "value" and len(attr.t.dims) <= 1
                          for attr in node.attribute)
        elif op in ("Shape", "Size"):
            made, is_flat = (MAX_RANK if op == "Shape" else 1), True
        elif op == "Gather" and len(given) == 2 and given[0] in flat:
            made, is_flat = bound(given[1]), given[1] in flat
        elif _elements_rule(op) == AT_MOST_FIRST and given:
            made, is_flat = bound(given[0]), given[0] in flat and op not in ("Unsqueeze", "Reshape", "Flatten")
        elif op == "Concat" or _elements_rule(op) == BROADCAST or op == "Gather":
            parts = [bound(name) for name in given]
            made = None if None in parts else (sum(parts) if op == "Concat" else _product(parts))
            is_flat = all(name in flat for name in given) and op != "Gather"
        else:
            made = None
        bounds.update((output, made) for output in node.output)
        if is_flat:
            flat.update(node.output)
    return bounds


def _constant_elements(attr) -> Optional[int]:
    """The element count of a Constant node's value attribute (None for a form not counted here)."""
    if attr.name == "value":
        return _elements(attr.t.dims)
    return _CONSTANT_COUNTS[attr.name](attr) if attr.name in _CONSTANT_COUNTS else None


def _product(counts) -> int:
    total = 1
    for count in counts:
        total *= count
    return total


def _structure(model) -> onnx.ModelProto:
    """The valid copy of ``model`` that inference reads (see the module)."""
    copy = onnx.ModelProto(ir_version=model.ir_version)
    copy.opset_import.extend(model.opset_import)
    copy.functions.extend(getattr(model, "functions", []))
    graph = copy.graph
    graph.name = model.graph.name
    for field in ("node", "input", "output", "value_info", "sparse_initializer"):
        getattr(graph, field).extend(getattr(model.graph, field))
    declared = {info.name for info in graph.input}
    for tensor in model.graph.initializer:
        if (_elements(tensor.dims) or 0) <= 2 * MAX_RANK:
            graph.initializer.add().CopyFrom(tensor)
        elif tensor.name not in declared:
            declared.add(tensor.name)
            graph.input.add().CopyFrom(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type,
                                                                          list(tensor.dims)))
    return copy


def _unbounded_lengths(structure) -> list:
    """The (node, input) pairs of `_length_read_as_rank` whose length no bound keeps within ``MAX_RANK``."""
    found = []
    for graph in graphs(structure.graph):
        bounds = None
        for node in graph.node:
            position = _length_read_as_rank(node.op_type)
            if position is None or len(node.input) <= position:
                continue
            bounds = _element_bounds(graph) if bounds is None else bounds
            made = bounds.get(node.input[position])
            if made is None or made > MAX_RANK:
                found.append((node, node.input[position]))
    return found


def _probe(structure, read) -> onnx.ModelProto:
    """``structure`` with each node of ``read`` (ConstantOfShape) written as the Expand of its value to the same
    shape: the same values, every node input still made by something (a valid model), and an Expand to a
    computed shape gets no rank from inference."""
    probe = onnx.ModelProto()
    probe.CopyFrom(structure)
    cut = {(node.name, tuple(node.input), tuple(node.output)) for node, _ in read}
    taken = {name for graph in graphs(probe.graph) for node in graph.node for name in node.output}
    for graph in graphs(probe.graph):  # each graph's nodes rewritten before its subgraphs are reached
        nodes = []
        for node in graph.node:
            if (node.name, tuple(node.input), tuple(node.output)) not in cut:
                nodes.append(node)
                continue
            value = next((attr.t for attr in node.attribute if attr.name == "value"),
                         onnx.helper.make_tensor("value", onnx.TensorProto.FLOAT, [1], [0.0]))
            name = next("{}_probe_value_{}".format(node.output[0], index) for index in range(len(taken) + 1)
                        if "{}_probe_value_{}".format(node.output[0], index) not in taken)
            taken.add(name)
            nodes.append(onnx.helper.make_node("Constant", [], [name], value=_scalar(value)))
            nodes.append(onnx.helper.make_node("Expand", [name, node.input[0]], list(node.output)))
        if len(nodes) != len(graph.node):
            del graph.node[:]
            graph.node.extend(nodes)
    return probe


def _scalar(tensor) -> onnx.TensorProto:
    """``tensor`` (ConstantOfShape's one-element value) as a rank-0 tensor of its type."""
    scalar = onnx.TensorProto()
    scalar.CopyFrom(tensor)
    del scalar.dims[:]
    return scalar


def _inferable(structure) -> bool:
    """Whether ``structure`` may be inferred: `InputTooLarge` for an input of `_length_read_as_rank` whose length
    inference finds over ``MAX_RANK`` (see the module); False when the probe itself cannot be inferred, so that
    no length goes unchecked."""
    read = _unbounded_lengths(structure)
    if not read:
        return True
    try:
        probed = onnx.shape_inference.infer_shapes(_probe(structure, read))
    except Exception:
        return False
    lengths = {}
    for info in value_infos(probed.graph):
        dims = value_dims(info)
        if dims:
            lengths.setdefault(info.name, dims)
    for node, name in read:
        dims = lengths.get(name)
        if dims and dims[0] > MAX_RANK:
            raise InputTooLarge("ONNX {} node {!r}: input {!r} has {} entries, more than the {} dimensions a shape may "
                                "have (MAX_RANK)".format(node.op_type[:100], (node.name or next(iter(node.output), ""))[
                                    :200], name[:200], dims[0], MAX_RANK))
    return True


def inferred(model, budget: TensorBudget) -> onnx.ModelProto:
    """``model``'s structure with the shapes ONNX inference finds (see the module), each value it finds charged to
    ``budget`` (`model_input.check_tensors`: `InputTooLarge` for one over ``PYCUMSUM_OP_MAX_TENSOR_BYTES`` or all
    over ``PYCUMSUM_OP_MAX_DECLARED_BYTES``); the copy as declared when inference fails, as Caffe2's backend goes
    on with the shapes a model declares. Its initializers hold only the small values inference reads: read
    weights from ``model``."""
    structure = _structure(model)
    if _inferable(structure):
        try:
            structure = onnx.shape_inference.infer_shapes(structure)
        except Exception:
            pass
    charge_inferred(structure, budget)
    return structure
