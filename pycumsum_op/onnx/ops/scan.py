"""CumSum: the registered scan whose entry names the ONNX op (`pycumsum_op.scans`, ``onnx=``) becomes its Caffe2
op (PyCumSum), with a constant axis as its argument or the axis read from its blob on every run; imported with
``lower=`` a target, it becomes that target's C++ operators, emitted directly (`lowered_scan`)."""
from typing import Dict

import numpy as np
import onnx.mapping
from caffe2.proto import caffe2_pb2
from caffe2.python import core
from onnx import TensorProto

from ...kernels import ScanArgumentError, ScanSpec
from ...lowering import LoweringError, scan_forward
from ...ops.net_ops import add_scan_op
from ...scans import SCANS, Refused
from .contract import ANY, NEWEST, Form, FormRefused, declare, label, same_dims, same_rank
from .helpers import attribute

#: ONNX element types a scan's import may get -> the dtype= that keeps the result in that type (ONNX scans
#: keep their input's type; PyCumSum, like torch, would give int64 for int32).
SCAN_DTYPES = {
    TensorProto.FLOAT16: None,
    TensorProto.FLOAT: None,
    TensorProto.DOUBLE: None,
    TensorProto.INT32: "int32",
    TensorProto.INT64: None,
}


_PROTOTYPES: Dict[tuple, caffe2_pb2.OperatorDef] = {}


def scan_entry(op_type: str):
    """The registered scan that imports ONNX ``op_type`` (its entry's ``onnx`` names it), or None."""
    for entry in SCANS.values():
        if not isinstance(entry.onnx, Refused) and entry.onnx == op_type:
            return entry
    return None


def _scan_form(node, facts, opset):
    """(entry, where, x, axis name, element type, constant axis or None, flags, dtype=) of scan node ``node``, checked:
    what every form of it reads."""
    entry = scan_entry(node.op_type)
    where = label(node, opset)
    if entry is None:
        raise FormRefused("{}: no registered scan imports it".format(where))
    if len(node.input) != 2 or len(node.output) != 1:
        raise FormRefused("{}: takes inputs (x, axis) and one output, got inputs {} and outputs {}".format(
            where, list(node.input), list(node.output)))
    x, axis_name = node.input
    elem_type = facts.elem_type(x)
    if elem_type is None:
        raise FormRefused("{}: the element type of input {!r} is unknown (ONNX shape inference did not find "
                         "it); {} keeps its input's type, so it is needed".format(where, x, node.op_type))
    if elem_type not in SCAN_DTYPES:
        why = ("Caffe2 has no tensor type for" if elem_type in (TensorProto.UINT32, TensorProto.UINT64,
                                                               TensorProto.BFLOAT16)
               else "ONNX {} does not take".format(node.op_type))
        raise FormRefused("{}: input {!r} has type {}, which {}; supported: {}".format(
            where, x, TensorProto.DataType.Name(elem_type), why,
            ", ".join(TensorProto.DataType.Name(t) for t in SCAN_DTYPES)))
    axis = constant_axis(facts, axis_name, where)
    flags = {name: bool(attribute(node, name, 0)) for name in ("exclusive", "reverse")
             if name in entry.arguments}
    dtype = SCAN_DTYPES[elem_type] if "dtype" in entry.arguments else None
    return entry, where, x, axis_name, elem_type, axis, flags, dtype


def scan_operator(node, facts, opset) -> caffe2_pb2.OperatorDef:
    """The Caffe2 op of registered scan imported from ONNX ``node`` (CumSum -> PyCumSum): its inputs (x, axis);
    a constant axis becomes ``axis=``, any other is read from its blob on every run."""
    entry, where, x, axis_name, elem_type, axis, flags, dtype = _scan_form(node, facts, opset)
    key = (entry, axis, tuple(sorted(flags.items())), dtype)
    if key not in _PROTOTYPES:  # the op's pickled builders depend on these only: made once, copied per node
        net = core.Net("onnx_" + entry.name)
        with core.NameScope("", reset=True):
            add_scan_op(net, entry.name, "x" if axis is not None else ["x", "axis"], "y", axis=axis, dtype=dtype,
                        **flags)
        _PROTOTYPES[key] = net.Proto().op[0]
    op = caffe2_pb2.OperatorDef()
    op.CopyFrom(_PROTOTYPES[key])
    op.input[:] = [x] if axis is not None else [x, axis_name]
    op.output[:] = [node.output[0]]
    return op


def _axis_source(facts, name: str) -> str:
    """Where a scan axis that is not a constant comes from, in words."""
    if name in facts.graph_inputs:
        if name in facts.initialized:
            return "a graph input (its initializer is only a default that a caller may override)"
        return "a graph input"
    producer = facts.producer(name)
    return "not made by any node" if producer is None else "computed by {} node {!r}".format(
        producer.op_type, producer.name or name)


def lowered_scan(node, facts, opset, fresh) -> list:
    """The C++ operators of scan node ``node`` in the import's lowering target (``facts.lower``: `scan_forward`
    emits them, as `pycumsum_op.lower` would replace its PyCumSum op): the axis must be a constant, and "portable"
    fixes the scan length, so the model must too; lowering fixes the rank, the other dims stay free."""
    entry, where, x, axis_name, elem_type, axis, flags, dtype = _scan_form(node, facts, opset)
    target = facts.lower
    where = "pycumsum_op.onnx.prepare(lower={!r}): ONNX {} node {!r}".format(
        target, node.op_type, node.name or ",".join(node.output))
    if axis is None:
        raise FormRefused(
            "{}: its axis {!r} is {}, known only at run time, but the lowered C++ operators fix the axis when "
            "lowering; make the axis a constant (a Constant node, or an initializer that is not a graph "
            "input), or use lower=None (PyCumSum reads the axis on every run)".format(
                where, axis_name, _axis_source(facts, axis_name)))
    if elem_type == TensorProto.FLOAT16:
        raise FormRefused("{}: input {!r} is FLOAT16, which no lowering target computes on CPU (torch 1.10's cumsum "
                          "has no Half kernel, Caffe2's CPU fill operators no float16); use lower=None "
                          "(PyCumSum)".format(where, x))
    dims = facts.dims(x)
    open_axis = dims is None or (bool(dims) and -len(dims) <= axis < len(dims) and dims[axis] is None)
    if open_axis and target == "portable":
        raise FormRefused("{}: target 'portable' fixes the scan length when lowering, but the model leaves the "
                          "length of axis {} of input {!r} open (its dims: {}); export the model with that length "
                          "fixed, or use lower='aten'".format(
                              where, axis, x, "unknown" if dims is None else [d or "?" for d in dims]))
    shape = None if dims is None else tuple(1 if dim is None else dim for dim in dims)
    try:
        spec = ScanSpec.checked(entry.op_name, axis, dtype=dtype, **flags)
        return scan_forward(entry.name, spec, x, [node.output[0]], target, shape,
                            np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type]), fresh, where)
    except ScanArgumentError as error:
        raise FormRefused("{}: {}".format(where, error)) from None
    except LoweringError as error:  # the import's one refusal type; the message names the node already
        raise FormRefused(str(error)) from None


def constant_axis(facts, name: str, where: str):
    """The axis if blob ``name`` is a constant (a Constant node or a non-input initializer), else None."""
    array = facts.constant(name)
    if array is None:
        return None
    if array.dtype not in (np.int32, np.int64) or array.size != 1 or array.ndim > 1:
        raise FormRefused("{}: the axis {!r} must be a 0-d int32 or int64 tensor, got shape {} dtype {}".format(
            where, name, tuple(array.shape), array.dtype))
    return int(array.reshape(()))


@declare("CumSum", Form((11, NEWEST), {"exclusive": ANY, "reverse": ANY}),
         types=frozenset([TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT32,
                          TensorProto.INT64]), rank=same_rank, dims=same_dims)
def _scan(node, facts, opset, fresh):
    """`scan_operator`'s op, or the lowering target's operators (`lowered_scan`)."""
    return [scan_operator(node, facts, opset)] if facts.lower is None else lowered_scan(node, facts, opset, fresh)
