"""The ONNX node forms the translation accepts, each proven equal to onnxruntime by the tests; any other form
is refused with one line naming the ONNX op, the opset and why.

Caffe2's ONNX backend translates whatever it is given, and some of its translations are silently wrong:
Slice with starts and ends as inputs (how torch exports every slice from opset 10 on) comes back as its
input unchanged. So no node reaches a translation unless its *form* is on `FORMS`: the op, the model's
opset range, the attributes it may carry (and their accepted values), and which inputs must be constants
(initializers that are not graph inputs, or Constant nodes), as the op's one declaration states it
(`pycumsum_op.onnx.ops`). A form is translated by Caffe2's stock converter (`STOCK`) or by the declaration's
translation (`OWN`, which may still refuse a value it cannot express faithfully, e.g. a Slice step over a
dimension the model leaves symbolic). `tests/test_onnx_forms.py` runs every form against onnxruntime.

A form whose Caffe2 kernels exist for some element types only states them (`Form.types`, measured); the
type comes from the graph's inferred types (``elem_type``), and a blob whose type the graph does not state is
refused for such a form.

>>> from onnx import TensorProto, helper
>>> check_node(helper.make_node("Relu", ["x"], ["y"]), 13, elem_type={"x": TensorProto.FLOAT}.get).translation
'stock'
>>> check_node(helper.make_node("Relu", ["x"], ["y"]), 13, elem_type={"x": TensorProto.DOUBLE}.get)
Traceback (most recent call last):
...
pycumsum_op.onnx.ops.contract.FormRefused: ONNX Relu node 'y' (opset 13): input 0 'x' is DOUBLE; Caffe2 runs Relu right on FLOAT only
>>> check_node(helper.make_node("Slice", ["x", "s", "e", "a"], ["y"]), 13)
Traceback (most recent call last):
...
pycumsum_op.onnx.ops.contract.FormRefused: ONNX Slice node 'y' (opset 13): input 3 (axes) is not a constant; Caffe2's stock Slice converter returns its input unchanged for starts/ends given as inputs, and pycumsum_op translates only constant axes and steps
"""
from typing import Optional

from onnx import helper

from .ops import DECLARATIONS
from .ops.contract import Form, FormRefused, given, label, type_name


def _refused(node, opset, why: str, explained: bool = True) -> FormRefused:
    declaration = DECLARATIONS.get(node.op_type)
    extra = declaration.why if explained and declaration is not None else None
    return FormRefused("{}: {}{}".format(label(node, opset), why, "; " + extra if extra and extra not in why else ""))


def check_node(node, opset: Optional[int], is_constant=lambda name: False, elem_type=lambda name: None) -> Form:
    """The accepted `Form` of ONNX ``node`` (a NodeProto) in a model of ``opset``, else `FormRefused`.

    ``is_constant(name)`` says whether a blob is a constant of the model, ``elem_type(name)`` its ONNX element
    type (None: the graph does not state it)."""
    if node.domain not in ("", "ai.onnx"):
        raise _refused(node, opset, "domain {!r} has no accepted forms (only the default ONNX domain)".format(
            node.domain))
    declaration = DECLARATIONS.get(node.op_type)
    if declaration is None:
        raise _refused(node, opset, "the op has no form proven equal to onnxruntime")
    if opset is None:
        raise _refused(node, opset, "the model's opset is unknown")
    forms = declaration.forms
    covering = [form for form in forms if form.opsets[0] <= opset <= form.opsets[1]]
    if not covering:
        raise _refused(node, opset, "accepted only at opsets {}".format(
            ", ".join("{}-{}".format(*form.opsets) for form in forms)))
    problems = []
    for form in covering:
        problem = _mismatch(node, form, is_constant)
        if problem is None:
            problem = _type_mismatch(node, form, elem_type)
            if problem is None:
                return form
            problems.append((problem, False))  # the declaration's ``why`` speaks of the attributes and constants
        else:
            problems.append((problem, True))
    raise _refused(node, opset, *problems[0])


def _comparable(value):
    """An attribute's value as the forms list it: strings decoded, lists as tuples."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return tuple(_comparable(item) for item in value)
    return value


def _mismatch(node, form: Form, is_constant) -> Optional[str]:
    """Why ``node`` does not fit ``form``, or None."""
    for attr in node.attribute:
        if attr.name not in form.attributes:
            return "attribute {!r} is not accepted (accepted: {})".format(
                attr.name, ", ".join(sorted(form.attributes)) or "none")
        allowed = form.attributes[attr.name]
        if allowed is not None:
            value = _comparable(helper.get_attribute_value(attr))
            if value not in allowed:
                return "attribute {}={!r} is not accepted (accepted: {})".format(
                    attr.name, value, ", ".join(repr(v) for v in sorted(allowed)))
    names = DECLARATIONS[node.op_type].inputs
    for position in form.constants:
        if given(node, position) and not is_constant(node.input[position]):
            return "input {}{} is not a constant".format(
                position, " ({})".format(names[position]) if position < len(names) else "")
    return None


def _type_mismatch(node, form: Form, elem_type) -> Optional[str]:
    """Why the element type of ``node``'s typed blob does not fit ``form``, or None."""
    if form.types is not None:
        where, position = form.typed
        blobs = node.input if where == "input" else node.output
        name = blobs[position] if position < len(blobs) else ""
        found = elem_type(name) if name else None
        if found not in form.types:
            return "{} {} {!r} is {}; Caffe2 runs {} right on {} only".format(
                where, position, name, "of a type the model does not state" if found is None else type_name(found),
                node.op_type, ", ".join(type_name(t) for t in sorted(form.types)))
    return None
