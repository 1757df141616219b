"""ONNX models with CumSum, run on Caffe2: Caffe2's ONNX backend, translating only node forms proven right.

Caffe2's backend (``caffe2.python.onnx.backend``) translates whatever it is given, and some of it wrongly
(Slice with starts/ends as inputs comes back as its input), and knows no CumSum. `CumSumBackend` is that
backend with its model translation replaced by one pass over the nodes (`translated_nets`, the graph
indexed once by `GraphFacts`): each node's form must be on `pycumsum_op.onnx.ops.FORMS` (else a one-line
`FormRefused` naming the op, the opset and why), and is then translated by pycumsum_op
(the declarations of `pycumsum_op.onnx.ops`: Slice, Gather, Reshape, Unsqueeze/Squeeze/Reduce* with axes as inputs,
Pow, Where, Expand, ScatterND, ..., and every registered scan whose entry names an ONNX operator, CumSum
becoming PyCumSum) or by Caffe2's stock converter. The predict net holds every translated node; the init
net only fills initializers (`initializer_fill_op`, without Python lists).

- A constant axis (an initializer that is not a graph input, or a ``Constant`` node: what
  ``torch.onnx.export`` writes) becomes PyCumSum's ``axis=`` argument; any other axis is read
  from its blob on every run (PyCumSum's two-input form ``[x, axis]``).
- CumSum's result keeps its input's type (int32 stays int32, where torch would give int64),
  so the translation needs the input's element type from the model (ONNX shape inference
  finds it for every well-formed model). uint32 / uint64 / bfloat16 have no Caffe2 tensor type
  and are refused by name.
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
import copy
import itertools

import numpy as np
import onnx
import onnx.defs
import onnx.numpy_helper
from caffe2.proto import caffe2_pb2
from caffe2.python import workspace
import caffe2.python.onnx.backend as stock_backend
from caffe2.python.onnx.backend import (  # torch >= 1.10: checked by __init__
    Caffe2Backend, Caffe2Ops, OnnxNode, get_device_option)
from caffe2.python.onnx.backend_rep import Caffe2Rep
from caffe2.python.onnx.workspace import Workspace
from onnx import TensorProto, helper
from onnx.backend.base import Device

from ..input_limits import InputTooLarge
from ..lowering import TARGETS
from ..serialization import BUILDER_ARGS, MAX_NET_OPS, PYTHON_OP_TYPES, NetProblem, UnsafeNetError, verify_net
from .facts import GraphFacts
from .forms import check_node
from .inference import inferred
from .model_input import check_tensors, load_zip_archive
from .run_checks import checked_rep, input_checks
from .stock_forms import stock_form
from .ops import DECLARATIONS
from .ops.contract import OWN, FormRefused, label
from .ops.scan import scan_entry


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


def verify_translation(*netdefs, python_ops: bool = True) -> None:
    """`verify_net` each NetDef a translation produced (init and predict nets): `UnsafeNetError` if refused
    (``python_ops``: whether PyCumSum ops may stand in them; not when imported for a lowering target).

    What `verify_net` checks of an op is its type and arguments (pickles, nested nets), never its blob names,
    and a translation repeats the same few ops (one PyCumSum per CumSum form): each distinct op is checked
    once, so that verifying stays linear in the model; a refusal is reported on the whole net."""
    for netdef in netdefs:
        distinct, seen = caffe2_pb2.NetDef(name=netdef.name), set()
        for op in netdef.op:
            key = caffe2_pb2.OperatorDef(type=op.type, arg=op.arg, engine=op.engine).SerializeToString()
            if key not in seen:
                seen.add(key)
                distinct.op.add().CopyFrom(op)
        try:
            verify_net(distinct, python_ops=python_ops)
        except UnsafeNetError:
            verify_net(netdef, python_ops=python_ops)  # the same refusal, naming the ops where they are
            raise


def imported(model, target=None) -> GraphFacts:
    """The one import of ``model``: Python-op nodes refused, its declared tensors charged to the caps
    (`check_tensors`, before onnx's checker or inference reads anything), onnx's checker, then shape inference
    once (`inference.inferred`, the values it finds charged to the same budget) and the graph's facts indexed once.
    Every entry (``prepare``, ``to_caffe2``, the command line, the stock backend after `install`) translates from
    what it returns; ``target`` (``lower``'s) decides whether translations may run torch's kernels through the ATen
    operator: every target but "portable" (builds without ATen) may."""
    refuse_python_nodes(model.graph)
    budget = check_tensors(model)
    onnx.checker.check_model(model)
    return GraphFacts(model.graph, inferred(model, budget).graph, torch_kernels=target != "portable", lower=target)


def _checked_conversion(cls, onnx_model, device, opset_version, include_initializers):
    """``_onnx_model_to_caffe2_net``: the model imported (`imported`), translated (`translated_nets`) and both
    nets verified."""
    nets = translated_nets(cls, onnx_model, imported(onnx_model), device, opset_version, include_initializers)
    verify_translation(*nets)
    return nets


_checked_conversion.verifies = True


def _nested_scans(graph):
    """The registered scans' nodes (CumSum) inside the subgraphs (If/Loop/Scan bodies) of ``graph``, named."""
    found = []
    for node in graph.node:
        for sub in _subgraphs(node):
            found += ["{} > {} {}".format(node.op_type, n.op_type, n.name or n.output[0]) for n in sub.node
                      if scan_entry(n.op_type) is not None]
            found += _nested_scans(sub)
    return found


def _parsed(serialized_ops) -> list:
    ops = []
    for serialized in serialized_ops:
        ops.append(caffe2_pb2.OperatorDef())
        ops[-1].ParseFromString(serialized)
    return ops


def node_ops(cls, converter, node, facts: GraphFacts, opset: int) -> list:
    """The Caffe2 ops of ONNX ``node``: its form checked against its declaration (`forms.check_node`; else
    `FormRefused`), then translated by the declaration's translation or by Caffe2's stock converter
    (``converter``: Caffe2's C++ one, else the stock Python translation). The C++ converter's init ops come first:
    they are recomputed on every run, so the predict net alone is the model.

    After `install`, the stock backend (``cls.proven_stock_forms``) hands a node whose form `forms.check_node` refuses
    to the stock converter when it fits a form of `stock_forms.STOCK_FORMS` (proven right on onnx's node tests)."""
    try:
        form = check_node(node, opset, facts.is_constant, facts.elem_type)
    except FormRefused:
        if not getattr(cls, "proven_stock_forms", False) or stock_form(node, opset, facts.elem_type) is None:
            raise
        form = None
    if form is not None and form.translation == OWN:
        return DECLARATIONS[node.op_type].translate(node, facts, opset, cls._dummy_name.new_dummy_name)
    try:
        if converter.support_onnx_import(node.op_type):
            init_ops, ops = converter.convert_node(node.SerializeToString(), facts.value_infos(node.input), opset)
            return _parsed(list(init_ops) + list(ops))
        if node.op_type in cls._special_operators:  # a stock form only (Upsample): its translator reads no model
            made = getattr(cls, cls._special_operators[node.op_type])(None, None, OnnxNode(node), opset)
            return list(made.init_ops) + list(made.ops) if isinstance(made, Caffe2Ops) else (
                list(made) if isinstance(made, (list, tuple)) else [made])
        return [cls._common_onnx_node_to_caffe2_op(None, None, OnnxNode(node), opset)]
    except Exception as error:  # Caffe2's converters raise RuntimeError, ValueError, AssertionError, ...
        raise FormRefused("{}: Caffe2's converter failed: {}".format(
            label(node, opset), (str(error).strip().splitlines() or [type(error).__name__])[0])) from None


def _graph_names(graph) -> set:
    names = {info.name for info in itertools.chain(graph.input, graph.output)}
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
    return names


def _dead_constants_dropped(net) -> None:
    """Drop the ops without inputs whose outputs nothing reads (the Constant nodes pycumsum_op's translations
    read as arguments: ``mobile_exporter`` would make them predictor outputs)."""
    read = {blob for op in net.op for blob in op.input} | set(net.external_output)
    kept = [op for op in net.op if op.input or set(op.output) & read]
    if len(kept) != len(net.op):
        del net.op[:]
        net.op.extend(kept)


def _without_torch_kernels(node, opset, facts: GraphFacts, ops: list) -> list:
    """``ops``, unless the target has no torch kernels (``lower="portable"``: builds without ATen) and they hold the
    ATen operator: then `FormRefused` naming the node and torch's kernels. Every translation passes here, so a
    form that has no stock operators for some case is refused there, never handed to a build that lacks ATen."""
    if facts.torch_kernels:
        return ops
    kernels = sorted({arg.s.decode() for op in ops if op.type == "ATen" for arg in op.arg if arg.name == "operator"})
    if kernels:
        raise FormRefused("{}: this form runs torch's {} (Caffe2's ATen operator), which builds without ATen lack; "
                          "import with lower='aten' or lower=None".format(label(node, opset), ", ".join(kernels)))
    return ops


def translated_nets(cls, model, facts: GraphFacts, device, opset_version, include_initializers):
    """``(init_net, predict_net)`` of ``model`` (``facts``: `imported`) in one pass over its nodes (`node_ops`), so
    that the import takes time linear in the model. The init net fills the initializers (with
    ``include_initializers``), the predict net holds every translated node; initializers that are not graph
    inputs (torch.onnx.export's parameters by default) are external inputs of both nets, so that Caffe2 can
    create the nets."""
    graph = model.graph
    device_option = get_device_option(Device(device))
    init_net, predict_net = caffe2_pb2.NetDef(), caffe2_pb2.NetDef()
    init_net.name, predict_net.name = graph.name + "_init", graph.name + "_predict"
    if include_initializers:
        init_net.op.extend(initializer_fill_op(tensor) for tensor in graph.initializer)
    cls._dummy_name.reset(_graph_names(graph))
    converter = workspace.C.Caffe2Backend(cls._dummy_name)
    ops, counted = [], 0
    for node in graph.node:
        made = _without_torch_kernels(node, opset_version, facts, node_ops(cls, converter, node, facts, opset_version))
        # MAX_NET_OPS is verify_net's budget for the finished nets: counted here as they grow, so that no more
        # than one node's ops (a few dozen: each translation bounds its own) are made past it. Ops without inputs
        # are not counted: the constants among them that nothing reads are dropped before the nets are verified.
        counted += sum(1 for op in made if op.input)
        if counted > MAX_NET_OPS:
            raise InputTooLarge("ONNX model {!r}: with {} node {!r}, its translation passes {} ops "
                                "(MAX_NET_OPS)".format(graph.name[:200], node.op_type[:100],
                                                       (node.name or next(iter(node.output), ""))[:200], MAX_NET_OPS))
        ops += made
    predict_net.op.extend(input_checks(graph, cls._dummy_name.new_dummy_name) + ops)  # the fed inputs checked first
    inputs = [info.name for info in graph.input]
    inputs += [tensor.name for tensor in graph.initializer if tensor.name not in facts.graph_inputs]
    for net in (init_net, predict_net):
        net.device_option.CopyFrom(device_option)
        net.external_input.extend(inputs)
    predict_net.external_output.extend(info.name for info in graph.output)
    _dead_constants_dropped(predict_net)
    init_net.external_output.extend(op.output[0] for op in init_net.op)
    return init_net, predict_net


def _checked_node_translation(cls, init_model, pred_model, node_def, opset_version):
    """``_onnx_node_to_caffe2_op`` with the node's form checked (what Caffe2's subgraph translation calls)."""
    refuse_python_nodes(helper.make_graph([node_def], "node", [], []))
    facts = GraphFacts(None if pred_model is None else pred_model.graph, torch_kernels=True)  # no lowering target
    converter = workspace.C.Caffe2Backend(cls._dummy_name)
    return Caffe2Ops(node_ops(cls, converter, node_def, facts, opset_version), [], [])


_checked_node_translation.verifies = True


def initializer_fill_op(tensor, name=None) -> caffe2_pb2.OperatorDef:
    """The Caffe2 fill op of ONNX initializer ``tensor`` (types as Caffe2's backend gives them), its values
    passed from the decoded array (raw bytes or typed fields, as onnx decodes them) to protobuf without a
    Python list (a list of Python numbers costs about 60 bytes per element): what remains is the argument's
    own storage, 4 bytes per float and 8 per integer."""
    array = onnx.numpy_helper.to_array(tensor)
    if tensor.data_type == TensorProto.STRING:
        return Caffe2Backend._create_tensor_filling_op(tensor, name)
    op_type, field, dtype = _FILLS.get(tensor.data_type, (None, None, None))
    if op_type is None:
        raise ValueError("ONNX initializer {!r}: type {} has no Caffe2 fill op".format(
            tensor.name, TensorProto.DataType.Name(tensor.data_type)))
    op = caffe2_pb2.OperatorDef(type=op_type)
    op.output.append(name or tensor.name)
    values = op.arg.add()
    values.name = "values"
    flat, field_values = array.reshape(-1), getattr(values, field)
    for start in range(0, flat.size, _CHUNK):  # converted a chunk at a time: no whole widened copy
        field_values.extend(flat[start:start + _CHUNK].astype(dtype, copy=False))
    shape = op.arg.add()
    shape.name = "shape"
    shape.ints.extend(tensor.dims)
    return op


_CHUNK = 1 << 16
#: ONNX initializer type -> (Caffe2 fill op, argument field, numpy type handed to protobuf), as Caffe2's backend.
_FILLS = {
    TensorProto.FLOAT: ("GivenTensorFill", "floats", np.float32),
    TensorProto.DOUBLE: ("GivenTensorDoubleFill", "floats", np.float64),
    TensorProto.INT64: ("GivenTensorInt64Fill", "ints", np.int64),
    TensorProto.UINT32: ("GivenTensorInt64Fill", "ints", np.int64),
    TensorProto.UINT8: ("GivenTensorIntFill", "ints", np.int64),
    TensorProto.INT8: ("GivenTensorIntFill", "ints", np.int64),
    TensorProto.UINT16: ("GivenTensorIntFill", "ints", np.int64),
    TensorProto.INT16: ("GivenTensorIntFill", "ints", np.int64),
    TensorProto.INT32: ("GivenTensorIntFill", "ints", np.int64),
    TensorProto.BOOL: ("GivenTensorBoolFill", "ints", np.int64),
}


def _opset(model) -> int:
    """The default domain's opset of ``model``, as Caffe2's backend reads it. (Caffe2's warning that a model's
    opset is past the one it targets is not repeated: each node's form is checked at the model's opset.)"""
    opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), None)
    if opset is None:
        if model.ir_version >= 3:
            raise RuntimeError("Model with IR version >= 3 did not specify ONNX operator set version (onnx-caffe2 "
                               "requires it)")
        opset = 1
    return opset


def _nets(cls, model, device, lower):
    """``(init_net, predict_net)`` of one import of ``model`` (`imported`): translated and verified, lowered when
    ``lower`` names a target."""
    if lower is not None and lower not in TARGETS:
        raise ValueError("pycumsum_op.onnx.prepare: unknown lower={!r}; use None (PyCumSum) or a lowering "
                         "target: {}".format(lower, ", ".join(repr(name) for name in sorted(TARGETS))))
    nested = _nested_scans(model.graph)
    if nested:
        raise ValueError("pycumsum_op.onnx.prepare: scans inside subgraphs ({}) are not supported: "
                         "Caffe2's backend converts subgraphs without their types".format(", ".join(nested)))
    opset = _opset(model)
    facts = imported(model, lower)
    init_net, predict_net = translated_nets(cls, model, facts, device, opset, False)
    verify_translation(init_net, predict_net, python_ops=lower is None)
    return init_net, predict_net


def _prepared(cls, model, device, lower, raw_values_dict):
    """What ``prepare`` returns (Caffe2's ``Caffe2Rep``): the nets of `_nets`, then the initializers and inputs fed as
    Caffe2's backend feeds them."""
    init_net, predict_net = _nets(cls, model, device, lower)
    if raw_values_dict:  # on a copy: the caller's model keeps its markers
        model = copy.deepcopy(model)
        cls._external_value_resolution_pass(model, raw_values_dict)
    ws, device_option = Workspace(), get_device_option(Device(device))
    cls._direct_initialize_parameters(model.graph.initializer, ws, device_option)
    initialized = {tensor.name for tensor in model.graph.initializer}
    cls._direct_initialize_inputs(model.graph.input, initialized, ws, device_option)
    uninitialized = [info.name for info in model.graph.input if info.name not in initialized]
    return checked_rep(Caffe2Rep(init_net, predict_net, ws, uninitialized), model)  # what is fed checked first


class CumSumBackend(Caffe2Backend):
    """Caffe2's ONNX backend (``prepare``, ``run_model``, ``run_node``, ``supports_device``) translating only the
    forms `pycumsum_op.onnx.forms` accepts, registered scans (CumSum) included."""

    #: never the stock forms (`install` turns them on for the stock backend only)
    proven_stock_forms = False

    #: One pass over the nodes, each form checked (`translated_nets`); Python-op nodes refused, nets verified.
    _onnx_model_to_caffe2_net = classmethod(_checked_conversion)
    _onnx_node_to_caffe2_op = classmethod(_checked_node_translation)

    @classmethod
    def _create_tensor_filling_op(cls, onnx_tensor, name=None):
        return initializer_fill_op(onnx_tensor, name)

    @classmethod
    def prepare(cls, model, device="CPU", lower=None, raw_values_dict=None):
        """The Caffe2 rep of ``model`` (``.run(inputs)``, ``.predict_net``, ``.init_net``).

        ``lower``: None (CumSum runs as PyCumSum), or a `pycumsum_op.lower` target, "aten" or
        "portable": both nets then hold only C++ operators (each CumSum needs a constant axis;
        "portable" also a scan length the model fixes).
        """
        return _prepared(cls, model, device, lower, raw_values_dict)

    @classmethod
    def prepare_zip_archive(cls, file, device="CPU", **kwargs):
        """The stock zip-archive reader, with sizes capped and no external-data files (`load_zip_archive`)."""
        model, raw_values = load_zip_archive(file)
        return cls.prepare(model, device, raw_values_dict=raw_values, **kwargs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", opset_version=Caffe2Backend._known_opset_version,
                 outputs_info=None):
        """Run one node on ``inputs`` (a list in node input order, or a dict), translated as in a model of
        ``opset_version`` (scans such as CumSum at onnx's newest opset): its inputs are the graph's inputs,
        so a form that needs a constant input is refused."""
        if scan_entry(node.op_type) is not None:
            opset_version = onnx.defs.onnx_opset_version()
        if isinstance(inputs, dict):
            inputs = [inputs[name] for name in node.input]
        inputs = [np.asarray(value) for value in inputs]
        if len(inputs) != len(node.input):
            raise ValueError("{}: expected {} inputs, got {}".format(node.op_type, len(node.input), len(inputs)))
        infos = [helper.make_tensor_value_info(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[value.dtype], value.shape)
                 for name, value in zip(node.input, inputs)]
        opsets = [helper.make_opsetid("", opset_version)]
        graph = helper.make_graph([node], "run_node_" + node.op_type, infos, [])
        try:  # the outputs' types, as the model must declare them
            inferred = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=opsets)).graph
        except RuntimeError:
            inferred = graph
        typed = {info.name: info for info in inferred.value_info}
        fallback = infos[0].type.tensor_type.elem_type if infos else TensorProto.FLOAT
        graph.output.extend(typed.get(name) or helper.make_tensor_value_info(name, fallback, None)
                            for name in node.output)
        model = helper.make_model(graph, opset_imports=opsets)
        return cls.prepare(model, device).run(inputs)


def _stock_prepare(cls, model, device="CPU", raw_values_dict=None, **kwargs):
    """Caffe2Backend's ``prepare`` after `install`: `prepare`'s one import, the stock forms included. The stock
    ``no_check_UNSAFE`` is accepted and has no effect: onnx's checker always runs."""
    kwargs.pop("no_check_UNSAFE", None)
    if kwargs:
        raise TypeError("prepare: unexpected arguments {}".format(", ".join(sorted(kwargs))))
    return _prepared(cls, model, device, None, raw_values_dict)


_stock_prepare.verifies = True


def to_caffe2(model, device="CPU", lower=None):
    """``(init_net, predict_net)`` NetDefs for ``model``, to save and deploy without ONNX.

    The init net fills the model's initializers; the predict net holds the translated graph
    (``lower`` as in `prepare`: "aten" or "portable" leave no Python op).
    """
    translated, predict_net = _nets(CumSumBackend, model, device, lower)  # no workspace is fed: nets only
    init_net = caffe2_pb2.NetDef()
    init_net.name = translated.name
    init_net.device_option.CopyFrom(predict_net.device_option)
    for tensor in model.graph.initializer:
        init_net.op.extend([initializer_fill_op(tensor)])
        init_net.external_output.append(tensor.name)
    verify_translation(init_net, predict_net)  # the nets returned, as they are returned
    return init_net, predict_net


def install() -> None:
    """Make ``caffe2.python.onnx.backend.prepare`` (and ``run_model``) translate as `prepare` does; idempotent.

    Nothing is changed until this is called: it makes Caffe2Backend's model translation (``prepare``,
    ``run_model``, ``onnx_graph_to_caffe2_net``) and node translation (its If/Loop bodies) accept only the
    forms of `pycumsum_op.onnx.forms` (CumSum and the other registered scans' ONNX operators included),
    declare initializers that are not graph inputs (what ``torch.onnx.export`` writes by default), refuse
    nodes that would become Python ops and verify both nets; its ``prepare`` refuses a model's declared
    tensors over the caps before onnx's checker and shape inference run, and ``prepare_zip_archive`` reads
    the archive as `CumSumBackend.prepare_zip_archive` does (sizes capped, no external-data files).
    (``run_node`` of the stock module uses only the C++ converters and is not changed: use `backend`'s
    ``run_node``, which checks forms.)

    A node whose form `forms.check_node` refuses still goes to Caffe2's stock converter when the stock backend is proven
    right on its form (`stock_forms.STOCK_FORMS`, measured on onnx's node tests): so no model the stock backend
    imported right before is taken away, and a form it is wrong or untested on is refused in one line.
    """
    Caffe2Backend.proven_stock_forms = True
    if not getattr(Caffe2Backend._onnx_model_to_caffe2_net.__func__, "verifies", False):
        Caffe2Backend._onnx_model_to_caffe2_net = classmethod(_checked_conversion)
        Caffe2Backend._onnx_node_to_caffe2_op = classmethod(_checked_node_translation)
        Caffe2Backend._create_tensor_filling_op = classmethod(
            lambda cls, onnx_tensor, name=None: initializer_fill_op(onnx_tensor, name))
    if not getattr(Caffe2Backend.prepare.__func__, "verifies", False):
        Caffe2Backend.prepare = classmethod(_stock_prepare)
    Caffe2Backend.prepare_zip_archive = classmethod(CumSumBackend.prepare_zip_archive.__func__)
    # the stock module binds its functions when imported: rebound, so that its ``prepare`` is the one import too
    stock_backend.prepare, stock_backend.prepare_zip_archive = Caffe2Backend.prepare, Caffe2Backend.prepare_zip_archive


backend = CumSumBackend
prepare = CumSumBackend.prepare
