"""CumSum: the registered scan whose entry names the ONNX op (`pycumsum_op.scans`, ``onnx=``) becomes its Caffe2
op (PyCumSum), with a constant axis as its argument or the axis read from its blob on every run."""
from typing import Dict

import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import core
from onnx import TensorProto

from ...ops.net_ops import add_scan_op
from ...scans import SCANS, Refused
from .contract import ANY, NEWEST, Form, FormRefused, declare, label, same_rank
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


def scan_operator(node, facts, opset, fresh=None) -> caffe2_pb2.OperatorDef:
    """The Caffe2 op of registered scan imported from ONNX ``node`` (CumSum -> PyCumSum): its inputs (x, axis);
    a constant axis becomes ``axis=``, any other is read from its blob on every run."""
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
                          TensorProto.INT64]), rank=same_rank)
def _scan(node, facts, opset, fresh):
    """`scan_operator` as a translation: its one op in a list."""
    return [scan_operator(node, facts, opset, fresh)]
