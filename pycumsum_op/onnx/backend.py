"""ONNX models with CumSum, run on Caffe2: Caffe2's own ONNX backend plus a CumSum translation.

Caffe2's backend (``caffe2.python.onnx.backend``) translates a node with its C++ converter, else
with a method named in ``Caffe2Backend._special_operators``, else fails with "Don't know how to
translate op CumSum". `CumSumBackend` is that backend with one more entry: CumSum becomes a
PyCumSum op. Every other node translates exactly as the stock backend does.

- A constant axis (an initializer that is not a graph input, or a ``Constant`` node: what
  ``torch.onnx.export`` writes) becomes PyCumSum's ``axis=`` argument; any other axis is read
  from its blob on every run (PyCumSum's two-input form ``[x, axis]``).
- CumSum's result keeps its input's type (int32 stays int32, where torch would give int64),
  so the translation needs the input's element type from the model (ONNX shape inference
  finds it for every well-formed model). uint32 / uint64 / bfloat16 have no Caffe2 tensor type
  and are refused by name.
- Caffe2's backend also runs the translated ops once in its init net (onnx >= 1.9 has no
  ``onnx.optimizer`` to split the graph); PyCumSum gives the same result there.
- ``prepare(model, lower="aten" | "portable")`` (and ``to_caffe2``) then lowers both nets with
  `pycumsum_op.lower`: no Python op remains. Lowering fixes the axis (and, for "portable", the
  rank and the scan length, taken from the model's shapes), so a run-time axis, a scan length the
  model leaves open (for "portable") and float16 (no CPU kernel in either target) are refused by
  node name.

>>> import numpy as np
>>> from onnx import TensorProto, helper
>>> node = helper.make_node("CumSum", ["x", "axis"], ["y"], reverse=1)
>>> graph = helper.make_graph([node], "doc_cumsum",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
...     [helper.make_tensor("axis", TensorProto.INT64, [], [1])])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
>>> CumSumBackend.prepare(model).run([np.arange(6, dtype=np.float32).reshape(2, 3)]).y
array([[ 3.,  3.,  2.],
       [12.,  9.,  5.]], dtype=float32)
"""
import itertools

import numpy as np
import onnx
import onnx.defs
import onnx.numpy_helper
from caffe2.proto import caffe2_pb2
from caffe2.python import core
from onnx import TensorProto, helper

from ..converters import TARGETS, LoweringError, lower as _lower
from ..torch_versions import has, needs

try:
    from caffe2.python.onnx.backend import Caffe2Backend
except ImportError as error:  # torch <= 1.9's backend imports onnx.optimizer, which onnx 1.9 removed
    if has("caffe2 onnx backend without onnx.optimizer") or "onnx.optimizer" not in str(error):
        raise
    raise ImportError(needs("caffe2 onnx backend without onnx.optimizer", "pycumsum_op.onnx with onnx {} (Caffe2's "
                            "ONNX backend of older torch imports onnx.optimizer, which onnx 1.9 removed)".format(
                                onnx.__version__))) from None
from ..ops.net_ops import cumsum as _net_cumsum

#: ONNX element types CumSum may get -> PyCumSum's dtype= that keeps the result in that type.
CUMSUM_DTYPES = {
    TensorProto.FLOAT16: None,
    TensorProto.FLOAT: None,
    TensorProto.DOUBLE: None,
    TensorProto.INT32: "int32",  # PyCumSum (like torch) would give int64
    TensorProto.INT64: None,
}
_TRANSLATOR = "_create_cumsum"


def _node_label(name: str, outputs) -> str:
    return "ONNX CumSum node {!r}".format(name or ",".join(outputs))


def _type_name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type)


def _tensor_info(model, name: str):
    """(element type, dims) the model declares or infers for blob ``name``; None for what it does not say
    (dims: None when the rank is unknown, a dim None when it is open, e.g. a symbolic batch size)."""
    for tensor in model.graph.initializer:
        if tensor.name == name:
            return tensor.data_type, list(tensor.dims)
    for info in itertools.chain(model.graph.input, model.graph.value_info, model.graph.output):
        if info.name == name and info.type.HasField("tensor_type"):
            tensor_type = info.type.tensor_type
            dims = ([dim.dim_value if dim.HasField("dim_value") else None for dim in tensor_type.shape.dim]
                    if tensor_type.HasField("shape") else None)
            return tensor_type.elem_type or None, dims
    return None, None


def _constant_axis(model, name: str, node_label: str):
    """The axis if blob ``name`` is a constant of ``model`` (a Constant node or a non-input initializer)."""
    if model is None:
        return None
    graph = model.graph
    value = None
    if name not in {info.name for info in graph.input}:
        value = next((tensor for tensor in graph.initializer if tensor.name == name), None)
    for node in graph.node:
        if node.op_type == "Constant" and list(node.output) == [name]:
            value = next((attr.t for attr in node.attribute if attr.name == "value"), None)
    if value is None:
        return None
    array = onnx.numpy_helper.to_array(value)
    if array.dtype not in (np.int32, np.int64) or array.size != 1 or array.ndim > 1:
        raise ValueError("{}: the axis {!r} must be a 0-d int32 or int64 tensor, got shape {} dtype {}".format(
            node_label, name, tuple(array.shape), array.dtype))
    return int(array.reshape(()))


def cumsum_operator(node, model) -> caffe2_pb2.OperatorDef:
    """The PyCumSum OperatorDef for an ONNX CumSum ``node`` (Caffe2's OnnxNode) of ``model``."""
    label = _node_label(node.name, node.outputs)
    if len(node.inputs) != 2 or len(node.outputs) != 1:
        raise ValueError("{}: takes inputs (x, axis) and one output, got inputs {} and outputs {}".format(
            label, node.inputs, node.outputs))
    unknown = sorted(set(node.attrs) - {"exclusive", "reverse"})
    if unknown:
        raise ValueError("{}: unknown attribute(s) {}".format(label, ", ".join(unknown)))
    x, axis = node.inputs
    elem_type = _tensor_info(model, x)[0]
    if elem_type is None:
        raise ValueError("{}: the element type of input {!r} is unknown (ONNX shape inference did not find "
                         "it); CumSum keeps its input's type, so it is needed".format(label, x))
    if elem_type not in CUMSUM_DTYPES:
        why = ("Caffe2 has no tensor type for" if elem_type in (TensorProto.UINT32, TensorProto.UINT64,
                                                               TensorProto.BFLOAT16) else "ONNX CumSum does not take")
        raise ValueError("{}: input {!r} has type {}, which {}; supported: {}".format(
            label, x, _type_name(elem_type), why, ", ".join(_type_name(t) for t in CUMSUM_DTYPES)))
    constant = _constant_axis(model, axis, label)
    net = core.Net("onnx_cumsum")
    with core.NameScope("", reset=True):
        _net_cumsum(net, x if constant is not None else [x, axis], node.outputs[0], axis=constant,
                    exclusive=node.attrs.get("exclusive", 0), reverse=node.attrs.get("reverse", 0),
                    dtype=CUMSUM_DTYPES[elem_type])
    return net.Proto().op[0]


def _nested_cumsum(graph):
    """Names of CumSum nodes inside the subgraphs (If/Loop/Scan bodies) of ``graph``."""
    found = []
    for node in graph.node:
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                found += ["{} > {}".format(node.op_type, n.name or n.output[0])
                          for n in sub.node if n.op_type == "CumSum"]
                found += _nested_cumsum(sub)
    return found


def _runtime_axis_source(graph, name: str) -> str:
    """Where a CumSum axis that is not a constant comes from, in words."""
    if name in {info.name for info in graph.input}:
        if any(tensor.name == name for tensor in graph.initializer):
            return "a graph input (its initializer is only a default that a caller may override)"
        return "a graph input"
    producer = next((node for node in graph.node if name in node.output), None)
    return "not made by any node" if producer is None else "computed by {} node {!r}".format(
        producer.op_type, producer.name or name)


def _lowering_facts(model, target: str):
    """``({x: shape}, {x: dtype})`` of every CumSum input of ``model`` (shapes inferred), for `lower`;
    a ValueError naming the node for what cannot be lowered."""
    shapes, dtypes = {}, {}
    for node in model.graph.node:
        if node.op_type != "CumSum" or len(node.input) != 2:
            continue  # the translator refuses a malformed node
        where = "pycumsum_op.onnx.prepare(lower={!r}): {}".format(target, _node_label(node.name, node.output))
        x, axis_name = node.input
        axis = _constant_axis(model, axis_name, where)
        if axis is None:
            raise ValueError(
                "{}: its axis {!r} is {}, known only at run time, but the lowered C++ operators fix the axis when "
                "lowering; make the axis a constant (a Constant node, or an initializer that is not a graph "
                "input), or use lower=None (PyCumSum reads the axis on every run)".format(
                    where, axis_name, _runtime_axis_source(model.graph, axis_name)))
        elem_type, dims = _tensor_info(model, x)
        if elem_type == TensorProto.FLOAT16:
            raise ValueError("{}: input {!r} is FLOAT16, which no lowering target computes on CPU (torch 1.10's "
                             "cumsum has no Half kernel, Caffe2's CPU fill operators no float16); use lower=None "
                             "(PyCumSum)".format(where, x))
        if elem_type in CUMSUM_DTYPES:
            dtypes[x] = onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type]
        open_axis = dims is None or (bool(dims) and -len(dims) <= axis < len(dims) and dims[axis] is None)
        if open_axis and target == "portable":
            raise ValueError("{}: target 'portable' fixes the scan length when lowering, but the model leaves "
                             "the length of axis {} of input {!r} open (its dims: {}); export the model with that "
                             "length fixed, or use lower='aten'".format(
                                 where, axis, x, "unknown" if dims is None else [d or "?" for d in dims]))
        if dims is not None:  # lowering fixes only the rank and the scan length: other open dims stay free
            shapes[x] = tuple(1 if dim is None else dim for dim in dims)
    return shapes, dtypes


def _lowered(netdef, target: str, shapes, dtypes):
    try:
        return _lower(netdef, target, shapes=shapes, dtypes=dtypes)
    except LoweringError as error:
        raise LoweringError("pycumsum_op.onnx.prepare(lower={!r}): {}".format(target, error)) from None


class CumSumBackend(Caffe2Backend):
    """Caffe2's ONNX backend (``prepare``, ``run_model``, ``run_node``, ``supports_device``) plus CumSum."""

    _special_operators = dict(Caffe2Backend._special_operators, CumSum=_TRANSLATOR)

    @classmethod
    def _create_cumsum(cls, init_model, pred_model, node, opset_version):
        return cumsum_operator(node, pred_model)

    @classmethod
    def _onnx_model_to_caffe2_net(cls, onnx_model, device, opset_version, include_initializers):
        """Stock conversion; initializers that are not graph inputs (torch.onnx.export's parameters)
        become external inputs of both nets too, so that Caffe2 can create the nets."""
        init_net, predict_net = super(CumSumBackend, cls)._onnx_model_to_caffe2_net(
            onnx_model, device, opset_version, include_initializers)
        for net in (init_net, predict_net):
            declared = set(net.external_input)
            net.external_input.extend(tensor.name for tensor in onnx_model.graph.initializer
                                      if tensor.name not in declared)
        return init_net, predict_net

    @classmethod
    def prepare(cls, model, device="CPU", lower=None, **kwargs):
        """The Caffe2 rep of ``model`` (``.run(inputs)``, ``.predict_net``, ``.init_net``).

        ``lower``: None (CumSum runs as PyCumSum), or a `pycumsum_op.lower` target, "aten" or
        "portable": both nets then hold only C++ operators (each CumSum needs a constant axis;
        "portable" also a scan length the model fixes).
        """
        if lower is not None and lower not in TARGETS:
            raise ValueError("pycumsum_op.onnx.prepare: unknown lower={!r}; use None (PyCumSum) or a lowering "
                             "target: {}".format(lower, ", ".join(repr(name) for name in sorted(TARGETS))))
        nested = _nested_cumsum(model.graph)
        if nested:
            raise ValueError("pycumsum_op.onnx.prepare: CumSum inside subgraphs ({}) is not supported: "
                             "Caffe2's backend converts subgraphs without their types".format(", ".join(nested)))
        rep = super(CumSumBackend, cls).prepare(model, device, **kwargs)
        if lower is not None:
            try:
                inferred = onnx.shape_inference.infer_shapes(model)
            except RuntimeError:  # as the stock backend: go on with the shapes the model declares
                inferred = model
            shapes, dtypes = _lowering_facts(inferred, lower)
            rep.init_net = _lowered(rep.init_net, lower, shapes, dtypes)
            rep.predict_net = _lowered(rep.predict_net, lower, shapes, dtypes)
        return rep

    @classmethod
    def run_node(cls, node, inputs, device="CPU", opset_version=Caffe2Backend._known_opset_version,
                 outputs_info=None):
        """Run one node on ``inputs`` (a list in node input order, or a dict); CumSum at its latest opset."""
        if node.op_type != "CumSum":
            return super(CumSumBackend, cls).run_node(node, inputs, device, opset_version, outputs_info)
        if isinstance(inputs, dict):
            inputs = [inputs[name] for name in node.input]
        inputs = [np.asarray(value) for value in inputs]
        if len(inputs) != len(node.input):
            raise ValueError("CumSum: expected {} inputs, got {}".format(len(node.input), len(inputs)))
        infos = [helper.make_tensor_value_info(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[value.dtype], value.shape)
                 for name, value in zip(node.input, inputs)]
        output = helper.make_tensor_value_info(node.output[0], infos[0].type.tensor_type.elem_type, inputs[0].shape)
        graph = helper.make_graph([node], "run_node_" + node.op_type, infos, [output])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", onnx.defs.onnx_opset_version())])
        return cls.prepare(model, device).run(inputs)


def to_caffe2(model, device="CPU", lower=None):
    """``(init_net, predict_net)`` NetDefs for ``model``, to save and deploy without ONNX.

    The init net fills the model's initializers; the predict net holds the translated graph
    (``lower`` as in `prepare`: "aten" or "portable" leave no Python op).
    """
    prepared = CumSumBackend.prepare(model, device, lower=lower)
    init_net = caffe2_pb2.NetDef()
    init_net.name = prepared.init_net.name
    init_net.device_option.CopyFrom(prepared.predict_net.device_option)
    for tensor in model.graph.initializer:
        init_net.op.extend([Caffe2Backend._create_tensor_filling_op(tensor)])
        init_net.external_output.append(tensor.name)
    return init_net, prepared.predict_net


def install() -> None:
    """Make ``caffe2.python.onnx.backend.prepare`` (and ``run_model``) translate CumSum; idempotent.

    Nothing is changed until this is called: it adds CumSum to Caffe2Backend's table of
    special operators. (``run_node`` of the stock module uses only the C++ converters.)
    """
    current = Caffe2Backend._special_operators.get("CumSum")
    if current not in (None, _TRANSLATOR):
        raise RuntimeError("pycumsum_op.onnx.install: Caffe2Backend already translates CumSum with {!r}".format(
            current))
    Caffe2Backend._create_cumsum = classmethod(CumSumBackend._create_cumsum.__func__)
    Caffe2Backend._special_operators["CumSum"] = _TRANSLATOR


backend = CumSumBackend
prepare = CumSumBackend.prepare
