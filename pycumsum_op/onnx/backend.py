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
- Every net a translation produces is verified (`pycumsum_op.verify_net`, nested nets included)
  before anything creates it, in `prepare`, `to_caffe2`, `run_node` and, after `install`, the stock
  backend: a refused net raises `pycumsum_op.UnsafeNetError` naming the op, the argument and why.
  Nodes that would become Caffe2 ``Python`` ops (whatever their domain: Caffe2's translator ignores
  it, keeps the type and copies the attributes, ``pickled_builder`` included) are refused before
  translation.
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
from caffe2.python import core, workspace
from caffe2.python.onnx.backend import Caffe2Backend, get_device_option  # torch >= 1.10: checked by __init__
from caffe2.python.onnx.workspace import Workspace
from onnx import TensorProto, helper
from onnx.backend.base import Backend, Device, namedtupledict

from ..lowering import TARGETS, LoweringError, lower as _lower
from ..ops.net_ops import cumsum as _net_cumsum
from ..serialization import BUILDER_ARGS, PYTHON_OP_TYPES, NetProblem, UnsafeNetError, verify_net
from .model_input import check_model, check_tensors, load_zip_archive

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


def _subgraphs(node):
    """The graphs held in ``node``'s attributes (If branches, Loop and Scan bodies)."""
    for attr in node.attribute:
        yield from ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)


def _python_node_problems(nodes, where: str) -> list:
    """A `NetProblem` for each node (in ``nodes`` and their subgraphs) that Caffe2 would translate to a Python op."""
    problems = []
    for index, node in enumerate(nodes):
        label = "{}ONNX node {!r} (domain {!r}, op_type {!r})".format(where, node.name or ",".join(node.output),
                                                                      node.domain, node.op_type)
        op_type = Caffe2Backend._renamed_operators.get(node.op_type, node.op_type)
        if op_type in PYTHON_OP_TYPES:
            pickled = [attr.name for attr in node.attribute if attr.name in BUILDER_ARGS]
            problems.append(NetProblem(
                label, index, op_type, pickled[0] if pickled else None, None,
                "Caffe2's ONNX backend would translate it into a Caffe2 {} op (it keeps the type and copies every "
                "attribute, whatever the domain), which unpickles and calls its builder as soon as the net is "
                "created; ONNX import makes no Python op but PyCumSum, from CumSum".format(op_type)))
        for graph in _subgraphs(node):
            problems += _python_node_problems(graph.node, "{} > graph {!r} ".format(label, graph.name))
    return problems


def refuse_python_nodes(graph) -> None:
    """Raise `UnsafeNetError` for any node of ``graph`` (subgraphs included) that would become a Python op."""
    problems = _python_node_problems(graph.node, "")
    if problems:
        raise UnsafeNetError(graph.name, problems)


def verify_translation(*netdefs) -> None:
    """`verify_net` each NetDef a translation produced (init and predict nets): `UnsafeNetError` if refused."""
    for netdef in netdefs:
        verify_net(netdef)


def _checked_conversion(convert):
    """``_onnx_model_to_caffe2_net`` (a classmethod's function) that refuses Python-op nodes and tensors over
    the size caps (`check_model`) before the translation, and verifies both nets after it. Caffe2's
    ``prepare`` translates before it allocates the model's inputs, so the caps hold for every backend
    that translates through it."""
    def checked(cls, onnx_model, device, opset_version, include_initializers):
        refuse_python_nodes(onnx_model.graph)
        check_model(onnx_model)
        init_net, predict_net = convert(cls, onnx_model, device, opset_version, include_initializers)
        verify_translation(init_net, predict_net)
        return init_net, predict_net
    checked.verifies = True
    return checked


def _checked_prepare(prepare):
    """The stock ``prepare`` (a classmethod's function), with Python-op nodes and the model's declared tensors
    refused (`check_tensors`) before onnx's checker and shape inference see the model."""
    def checked(cls, model, device="CPU", raw_values_dict=None, **kwargs):
        refuse_python_nodes(model.graph)
        check_tensors(model)
        return prepare(cls, model, device, raw_values_dict, **kwargs)
    checked.verifies = True
    return checked


def _nested_cumsum(graph):
    """Names of CumSum nodes inside the subgraphs (If/Loop/Scan bodies) of ``graph``."""
    found = []
    for node in graph.node:
        for sub in _subgraphs(node):
            found += ["{} > {}".format(node.op_type, n.name or n.output[0]) for n in sub.node if n.op_type == "CumSum"]
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


_STOCK_MODEL_TO_NETS = Caffe2Backend.__dict__["_onnx_model_to_caffe2_net"].__func__


def _converted_nets(cls, onnx_model, device, opset_version, include_initializers):
    """The stock conversion; initializers that are not graph inputs (torch.onnx.export's parameters by
    default) become external inputs of both nets too, so that Caffe2 can create the nets; the ops made
    from CumSum's constant axes, which PyCumSum holds as ``axis=``, are left out where nothing else reads
    them (``mobile_exporter`` would make them predictor outputs)."""
    init_net, predict_net = _STOCK_MODEL_TO_NETS(cls, onnx_model, device, opset_version, include_initializers)
    nodes = onnx_model.graph.node
    constants = {node.output[0] for node in nodes if node.op_type == "Constant" and len(node.output) == 1}
    axes = {node.input[1] for node in nodes if node.op_type == "CumSum" and len(node.input) == 2} & constants
    for net in (init_net, predict_net):
        declared = set(net.external_input)
        net.external_input.extend(tensor.name for tensor in onnx_model.graph.initializer
                                  if tensor.name not in declared)
        read = {blob for op in net.op for blob in op.input} | set(net.external_output)
        kept = [op for op in net.op if op.input or not set(op.output) <= axes or set(op.output) & read]
        del net.op[:]
        net.op.extend(kept)
    return init_net, predict_net


class CumSumBackend(Caffe2Backend):
    """Caffe2's ONNX backend (``prepare``, ``run_model``, ``run_node``, ``supports_device``) plus CumSum."""

    _special_operators = dict(Caffe2Backend._special_operators, CumSum=_TRANSLATOR)

    @classmethod
    def _create_cumsum(cls, init_model, pred_model, node, opset_version):
        return cumsum_operator(node, pred_model)

    #: Stock conversion (`_converted_nets`), checked: Python-op nodes refused, both nets verified.
    _onnx_model_to_caffe2_net = classmethod(_checked_conversion(_converted_nets))

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
        refuse_python_nodes(model.graph)  # before onnx's checker and shape inference see the model
        check_tensors(model)  # external data refused before onnx's checker opens it; sizes: the translation
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
    def prepare_zip_archive(cls, file, device="CPU", **kwargs):
        """The stock zip-archive reader, with sizes capped and no external-data files (`load_zip_archive`)."""
        model, raw_values = load_zip_archive(file)
        return cls.prepare(model, device, raw_values_dict=raw_values, **kwargs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", opset_version=Caffe2Backend._known_opset_version,
                 outputs_info=None):
        """Run one node on ``inputs`` (a list in node input order, or a dict); CumSum at its latest opset.
        Other nodes translate as the stock ``run_node`` translates them, and the ops are verified first."""
        if node.op_type != "CumSum":
            return cls._run_translated_node(node, inputs, device, opset_version)
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

    @classmethod
    def _run_translated_node(cls, node, inputs, device, opset_version):
        """The stock ``run_node``'s translation (Caffe2's C++ converter, which keeps unknown types and
        copies attributes), with the ops refused or verified before they are created."""
        refuse_python_nodes(helper.make_graph([node], "run_node_" + node.op_type, [], []))
        Backend.run_node(node, inputs, device=device, opset_version=opset_version)  # onnx's checks of the node
        if not isinstance(inputs, dict):
            if len(node.input) != len(inputs):
                raise ValueError("{}: expected {} inputs, got {}".format(node.op_type, len(node.input), len(inputs)))
            inputs = dict(zip(node.input, inputs))
        inputs = {name: np.asarray(value) for name, value in inputs.items()}
        value_infos = [helper.make_tensor_value_info(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[value.dtype],
                                                     value.shape).SerializeToString() for name, value in inputs.items()]
        init_ops, ops = workspace.C.Caffe2Backend(cls._dummy_name).convert_node(
            node.SerializeToString(), value_infos, opset_version)
        net = caffe2_pb2.NetDef(name="run_node_" + node.op_type)
        for serialized in list(init_ops) + list(ops):
            net.op.add().ParseFromString(serialized)
            net.op[-1].device_option.CopyFrom(get_device_option(Device(device)))
        verify_translation(net)
        ws = Workspace()
        with core.DeviceScope(get_device_option(Device(device))):
            for name, value in inputs.items():
                ws.FeedBlob(name, value)
            ws.RunOperatorsOnce(net.op)
            return namedtupledict("Outputs", node.output)(*[ws.FetchBlob(name) for name in node.output])


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
    verify_translation(init_net, prepared.predict_net)  # the nets returned, as they are returned
    return init_net, prepared.predict_net


def install() -> None:
    """Make ``caffe2.python.onnx.backend.prepare`` (and ``run_model``) translate CumSum; idempotent.

    Nothing is changed until this is called: it adds CumSum to Caffe2Backend's table of
    special operators, and makes its model translation (``prepare``, ``run_model``,
    ``onnx_graph_to_caffe2_net``) declare initializers that are not graph inputs (what
    ``torch.onnx.export`` writes by default), refuse nodes that would become Python ops and verify
    both nets, as `prepare` does; its ``prepare`` refuses a model's declared tensors over the caps
    before onnx's checker and shape inference run, and ``prepare_zip_archive`` reads the archive as
    `CumSumBackend.prepare_zip_archive` does (sizes capped, no external-data files). (``run_node`` of
    the stock module uses only the C++ converters and is not changed: use `backend`'s ``run_node``,
    which verifies.)
    """
    current = Caffe2Backend._special_operators.get("CumSum")
    if current not in (None, _TRANSLATOR):
        raise RuntimeError("pycumsum_op.onnx.install: Caffe2Backend already translates CumSum with {!r}".format(
            current))
    Caffe2Backend._create_cumsum = classmethod(CumSumBackend._create_cumsum.__func__)
    Caffe2Backend._special_operators["CumSum"] = _TRANSLATOR
    if not getattr(Caffe2Backend._onnx_model_to_caffe2_net.__func__, "verifies", False):
        Caffe2Backend._onnx_model_to_caffe2_net = classmethod(_checked_conversion(_converted_nets))
    if not getattr(Caffe2Backend.prepare.__func__, "verifies", False):
        Caffe2Backend.prepare = classmethod(_checked_prepare(Caffe2Backend.prepare.__func__))
    Caffe2Backend.prepare_zip_archive = classmethod(CumSumBackend.prepare_zip_archive.__func__)


backend = CumSumBackend
prepare = CumSumBackend.prepare
