"""The measurement behind `pycumsum_op.onnx.stock_forms.STOCK_FORMS`: the node forms Caffe2's stock ONNX backend
is proven right on, derived from onnx's node tests run through it (`onnx_node_suite.py --stock`, whose outcomes
tests/data/onnx_node_stock.txt keeps).

A node's *form* is its op, the ONNX definition of the op its model's opset selects (opsets from the definition's
``since_version`` to the opset before the next definition, at most `forms.NEWEST`) and the names of the attributes
it carries. Every node of every node test the stock backend passes gives its form the attribute values and the
element types of its inputs (in order, None for an input left out; output 0's for a node without inputs) that it
covers. A form is dropped when a node test the stock backend gets wrong holds a node of that form (Softmax without
axis, Shape with start or end, pools with ceil_mode or auto_pad, TopK with largest=0, ...), or when it holds a
subgraph or a tensor attribute (If, Loop, Scan, Constant: translated with models the import does not give the
stock converter). What remains is the table, each form accepting exactly the values and type signatures covered.

    PYTHONPATH=. python tests/onnx_stock_forms.py            # the table, as stock_forms.py declares it
    PYTHONPATH=. python tests/onnx_stock_forms.py --measure  # first tests/data/onnx_node_stock.txt from a new run
"""
import os
import sys

import onnx
import onnx.defs
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import onnx_node_suite  # noqa: E402

#: every node test's outcome through Caffe2's own backend ("name kind" lines)
STOCK_OUTCOMES = os.path.join(HERE, "data", "onnx_node_stock.txt")
_UNFIT = (onnx.AttributeProto.TENSOR, onnx.AttributeProto.GRAPH, onnx.AttributeProto.TENSORS,
          onnx.AttributeProto.GRAPHS, onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.SPARSE_TENSORS)


def read_outcomes(path=STOCK_OUTCOMES):
    """{name: kind} of the stock backend's node test outcomes."""
    outcomes = {}
    with open(path) as listing:
        for line in listing:
            if line.startswith("test_"):
                name, kind = line.split()[:2]
                outcomes[name] = kind
    return outcomes


def write_outcomes(results, path=STOCK_OUTCOMES):
    with open(path, "w") as listing:
        listing.write("# onnx {}'s node tests through Caffe2's own ONNX backend (tests/onnx_node_suite.py --stock), "
                      "written by tests/onnx_stock_forms.py --measure\n".format(onnx.__version__))
        listing.writelines("{} {}\n".format(name, results[name][0]) for name in sorted(results))


def _model(case):
    return onnx.load(os.path.join(case.model_dir, "model.onnx"), load_external_data=False)


def _opset(model):
    return next((imp.version for imp in model.opset_import if imp.domain in ("", "ai.onnx")), None)


def _value(attr):
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return tuple(item.decode() if isinstance(item, bytes) else item for item in value)
    return value


def _nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _nodes(sub)


def _key(node, opset, newest):
    """(op, (first, last) opsets of its definition, attribute names) of ``node``, or None for a node without one."""
    if node.domain not in ("", "ai.onnx") or opset is None or opset > newest:
        return None
    try:
        since = onnx.defs.get_schema(node.op_type, opset).since_version
    except onnx.defs.SchemaError:
        return None
    later = [s for s in range(since + 1, newest + 1) if onnx.defs.get_schema(node.op_type, s).since_version != since]
    return node.op_type, (since, later[0] - 1 if later else newest), tuple(sorted(a.name for a in node.attribute))


def derive(outcomes, newest):
    """{op: [(opsets, {attribute: values}, signatures)]} (see the module's docstring)."""
    cases = onnx_node_suite.node_tests()
    covered, dropped = {}, set()
    for name in sorted(outcomes):
        if name not in cases or outcomes[name] not in ("pass", "wrong"):
            continue
        model = onnx.shape_inference.infer_shapes(_model(cases[name]))
        types = {info.name: info.type.tensor_type.elem_type
                 for info in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info)}
        for node in _nodes(model.graph):
            key = _key(node, _opset(model), newest)
            if key is None:
                continue
            if outcomes[name] == "wrong" or any(attr.type in _UNFIT for attr in node.attribute):
                dropped.add(key)
                continue
            form = covered.setdefault(key, ({}, set()))
            for attr in node.attribute:
                form[0].setdefault(attr.name, set()).add(_value(attr))
            blobs = list(node.input) or list(node.output[:1])
            form[1].add(tuple(types.get(blob) if blob else None for blob in blobs))
    table = {}
    for key in sorted(set(covered) - dropped):
        op, opsets, _ = key
        attributes, signatures = covered[key]
        table.setdefault(op, []).append((opsets, attributes, signatures))
    return table


def _values(values):
    return "frozenset([{}])".format(", ".join(repr(value) for value in sorted(values, key=repr)))


def _type(elem_type):
    return "None" if elem_type is None else "_F." + onnx.TensorProto.DataType.Name(elem_type)


def _signatures(signatures):
    return "frozenset([{}])".format(", ".join("({}{})".format(", ".join(_type(t) for t in signature),
                                                              "," if len(signature) == 1 else "")
                                              for signature in sorted(signatures, key=repr)))


def render(table):
    lines = []
    for op, forms in table.items():
        rendered = ["StockForm({!r}, {{{}}},\n                  {})".format(
            opsets, ",\n                   ".join("{!r}: {}".format(name, _values(values))
                                               for name, values in sorted(attributes.items())),
            _signatures(signatures)) for opsets, attributes, signatures in forms]
        lines.append("    {!r}: (\n        {},\n    ),".format(op, ",\n        ".join(rendered)))
    return "\n".join(lines)


def main(arguments):
    from pycumsum_op.onnx.ops.contract import NEWEST

    if "--measure" in arguments:
        write_outcomes(onnx_node_suite.outcomes(sorted(onnx_node_suite.node_tests()), stock=True))
    print(render(derive(read_outcomes(), NEWEST)))


if __name__ == "__main__":
    main(sys.argv[1:])
