"""Caffe2 nets with PyCumSum -> ONNX: Caffe2's own frontend plus CumSum, at a chosen opset.

Caffe2's frontend (``caffe2.python.onnx.frontend``) writes opset-9 nodes and cannot read a
Python op. `export` verifies the nets (no foreign pickled code runs), runs them once on zeros of
the given shapes to learn every blob's type and shape, translates each PyCumSum op to CumSum
(a Cast in front when PyCumSum changes the type, as for int32 or ``dtype=``; the axis an int64
initializer, or the axis blob of the two-input form), and leaves every other op to the stock
frontend. A node that stock writes in its opset-9 form but whose meaning changed by the target
opset (Slice at 10, Clip and Pad at 11, Squeeze/Unsqueeze/Split/ReduceSum at 13, ...) is an
error naming the Caffe2 op: the model would be wrong, not just old.

float16: CumSum takes float16 from opset 14, so a float16 PyCumSum needs opset >= 14 (a
Cast(float64) -> CumSum -> Cast(float16) detour would not load back into Caffe2, whose Cast has
no float16 on CPU). onnxruntime, like PyCumSum, rounds each float16 output once from a wider sum.

>>> import numpy as np
>>> from caffe2.python import core
>>> from onnx import TensorProto
>>> import pycumsum_op
>>> net = core.Net("doc_export")
>>> _ = net.PyCumSum("doc_ex", "doc_ey", axis=-1, exclusive=True)
>>> net.AddExternalOutput(core.BlobReference("doc_ey"))
>>> model = export(net, value_info={"doc_ex": (TensorProto.INT32, (2, 3))})
>>> [node.op_type for node in model.graph.node]
['Cast', 'CumSum']
"""
import functools
import re

import numpy as np
import onnx
import onnx.defs
from caffe2.proto import caffe2_pb2
from caffe2.python.onnx.frontend import Caffe2Frontend
from caffe2.python.onnx.helper import c2_native_run_net
from onnx import TensorProto, helper, mapping, numpy_helper

from .._safe_unpickle import RefusedPickle, inspect_builder
from ..input_limits import check_tensor
from ..netdefs import as_netdef
from ..ops.builders import BUILDERS, builder_params, scan_forward
from ..scans import Refused
from ..scans import scan as registered_scan
from ..serialization import PYTHON_OP_TYPES, verify_net
from .ops import FORMS

#: The opset Caffe2's frontend writes its nodes for.
STOCK_OPSET = 9
#: The one ONNX operator this exporter writes for a scan (the entries whose ``onnx`` names it export).
WRITTEN = "CumSum"
#: The first opset with CumSum: the first of its proven form (`ops.FORMS`, which import reads too).
CUMSUM_OPSET = FORMS[WRITTEN][0].opsets[0]
_SCAN_FORWARD = "{}.{}".format(scan_forward.__module__, scan_forward.__qualname__)
#: Caffe2's constant ops (GivenTensorFill, GivenTensorIntFill, ...): exported as ONNX Constant nodes.
_GIVEN_TENSOR_FILL = re.compile(r"GivenTensor\w*Fill")
#: Changes after opset 9 that keep an opset-9 node's meaning (types added, negative axes
#: allowed, optional attributes or inputs whose defaults keep the old behaviour).
SAME_MEANING = {
    "Abs": (13,), "Add": (13, 14), "ArgMax": (11, 12, 13), "ArgMin": (11, 12, 13),
    "AveragePool": (10, 11), "BatchNormalization": (14, 15), "Cast": (13,), "Ceil": (13,),
    "Concat": (11, 13), "Constant": (11, 12, 13), "Conv": (11,), "ConvTranspose": (11,),
    "CumSum": (14,), "DepthToSpace": (11, 13), "Div": (13, 14), "Dropout": (10,), "Equal": (11, 13),
    "Erf": (13,), "Exp": (13,), "Expand": (13,), "Flatten": (11, 13), "Floor": (13,), "GRU": (14,),
    "Gather": (11, 13), "Gemm": (11, 13), "Greater": (13,), "Identity": (13, 14), "IsNaN": (13,),
    "LRN": (13,), "LSTM": (14,), "Less": (13,), "Log": (13,), "LogSoftmax": (11,), "LpPool": (11,),
    "MatMul": (13,), "Max": (12, 13), "MaxPool": (10, 11, 12), "Mean": (13,), "Min": (12, 13),
    "Mod": (13,), "Mul": (13, 14), "Neg": (13,), "OneHot": (11,), "Pow": (12, 13, 15), "RNN": (14,),
    "Reciprocal": (13,), "ReduceL1": (11, 13), "ReduceL2": (11, 13), "ReduceMax": (11, 12, 13), "ReduceMean": (11, 13),
    "ReduceMin": (11, 12, 13), "ReduceSum": (11,), "Relu": (13, 14), "Reshape": (13, 14),
    "Shape": (13, 15), "Sigmoid": (13,), "Sign": (13,), "Size": (13,), "Softmax": (11,),
    "SpaceToDepth": (13,), "Split": (11,), "Sqrt": (13,), "Squeeze": (11,), "Sub": (13, 14),
    "Sum": (13,), "Tanh": (13,), "ThresholdedRelu": (10,), "Tile": (13,), "Transpose": (13,),
    "Unsqueeze": (11,),
}
#: The first opset whose CumSum takes float16: its change after opset 11 (`SAME_MEANING`).
CUMSUM_FLOAT16_OPSET = SAME_MEANING[WRITTEN][0]
#: Changes after opset 9 that change what an opset-9 node means, and why.
CHANGED_MEANING = {
    "Slice": "takes starts/ends as inputs from opset 10",
    "TopK": "takes k as an input from opset 10",
    "Upsample": "is deprecated from opset 10 (Resize)",
    "Clip": "takes min/max as inputs from opset 11",
    "Pad": "takes pads as an input from opset 11",
    "Scatter": "is deprecated from opset 11 (ScatterElements)",
    "Dropout": "takes ratio as an input from opset 12",
    "Softmax": "normalises along one axis from opset 13 (not over the flattened trailing axes)",
    "LogSoftmax": "normalises along one axis from opset 13 (not over the flattened trailing axes)",
    "Split": "takes split as an input from opset 13",
    "Squeeze": "takes axes as an input from opset 13",
    "Unsqueeze": "takes axes as an input from opset 13",
    "ReduceSum": "takes axes as an input from opset 13",
}
#: Ops whose opset-13 change keeps the meaning when they normalise along the last axis.
_LAST_AXIS_SAME = frozenset(["Softmax", "LogSoftmax"])


@functools.lru_cache(maxsize=None)
def _versions(op_type: str) -> tuple:
    """Every opset at which the default-domain op ``op_type`` was (re)defined."""
    return tuple(sorted({schema.since_version for schema in onnx.defs.get_all_schemas_with_history()
                         if schema.name == op_type and schema.domain == ""}))


def _op_label(op) -> str:
    return "Caffe2 op {}{} ({} -> {})".format(op.type, " {!r}".format(op.name) if op.name else "",
                                              ", ".join(op.input), ", ".join(op.output))


def _softmax_on_last_axis(node, shapes) -> bool:
    axis = next((attr.i for attr in node.attribute if attr.name == "axis"), 1)
    rank = len(shapes.get(node.input[0], ()))
    return rank > 0 and axis % rank == rank - 1


def check_node_opset(node, opset: int, op, shapes) -> None:
    """Raise unless the opset-9 ``node`` (from Caffe2 ``op``) means the same at ``opset``."""
    versions = _versions(node.op_type)
    if not versions or versions[0] > opset:
        raise ValueError("{}: exports as {}, which is not an ONNX operator at opset {}".format(
            _op_label(op), node.op_type, opset))
    for version in versions:
        if STOCK_OPSET < version <= opset and version not in SAME_MEANING.get(node.op_type, ()):
            if node.op_type in _LAST_AXIS_SAME and version == 13 and _softmax_on_last_axis(node, shapes):
                continue
            reason = CHANGED_MEANING.get(node.op_type, "changed at opset {} in a way pycumsum_op has not "
                                                       "checked".format(version))
            raise ValueError("{}: Caffe2's exporter writes it as opset-9 {}, which {}; it cannot be exported "
                             "correctly at opset {} (use opset {} or rewrite the op)".format(
                                 _op_label(op), node.op_type, reason, opset, version - 1))


def cumsum_params(op, opset: int) -> dict:
    """PyCumSum's builder arguments (defaults filled in), or a ValueError saying why ``op`` has no ONNX form."""
    if op.type != "Python":
        raise ValueError("{}: a gradient op has no ONNX form; export the forward net".format(_op_label(op)))
    pickled = next((arg.s for arg in op.arg if arg.name == "pickled_builder"), b"")
    try:
        info = inspect_builder(pickled, frozenset(BUILDERS))
    except RefusedPickle as refused:
        raise ValueError("{}: not a PyCumSum op: its builder {}".format(_op_label(op), refused.reason))
    if info.builder != _SCAN_FORWARD:
        raise ValueError("{}: built by {}, which has no ONNX form".format(_op_label(op), info.builder))
    params = builder_params(info.args, info.kwargs)  # verify_net checked them against the builders
    defaults = builder_params((params["scan"],), {})
    known = {"scan", "axis", "exclusive", "reverse", "dtype", "axis_input"}
    other = {name: value for name, value in params.items() if name not in known and value != defaults[name]}
    entry = registered_scan(params["scan"], _op_label(op))
    if isinstance(entry.onnx, Refused) or entry.onnx != WRITTEN:
        raise ValueError("{}: scan {!r} ({}) has no ONNX form: {}".format(
            _op_label(op), entry.name, entry.op_name, entry.onnx.reason if isinstance(entry.onnx, Refused) else
            "it is ONNX {}, which this exporter does not write (it writes {})".format(entry.onnx, WRITTEN)))
    if other:
        raise ValueError("{}: builder argument(s) {} have no ONNX form".format(_op_label(op), other))
    if opset < CUMSUM_OPSET:
        raise ValueError("{}: PyCumSum exports as ONNX CumSum, which needs opset >= {}, not {}".format(
            _op_label(op), CUMSUM_OPSET, opset))
    return params


class PyCumSumFrontend(Caffe2Frontend):
    """Caffe2's frontend plus PyCumSum; `export` makes a subclass per call (opset, blob types)."""

    target_opset_version = CUMSUM_OPSET
    blob_types = {}        # SSA blob name -> ONNX element type, from running the net
    constants = {}         # SSA blob name -> the value a GivenTensor*Fill op of the predict net made
    axis_initializers = []  # int64 axis tensors of the CumSum nodes made so far

    @classmethod
    def caffe2_op_to_onnx_node(cls, op_def, shapes):
        if op_def.type in PYTHON_OP_TYPES:
            return cls._cumsum_nodes(op_def), []
        if op_def.type == "MatMul":
            return cls._matmul_nodes(op_def, shapes), []
        if not op_def.input and list(op_def.output) in ([name] for name in cls.constants):
            value = cls.constants[op_def.output[0]]
            return [helper.make_node("Constant", [], [op_def.output[0]],
                                     value=numpy_helper.from_array(value, op_def.output[0]))], []
        try:
            nodes, tensors = super(PyCumSumFrontend, cls).caffe2_op_to_onnx_node(op_def, shapes)
        except Exception as error:  # the stock frontend's own message, with the op named
            raise ValueError("{}: Caffe2's ONNX exporter failed: {}".format(_op_label(op_def), error)) from None
        for node in nodes:
            check_node_opset(node, cls.target_opset_version, op_def, shapes)
        return nodes, tensors

    @classmethod
    def _matmul_nodes(cls, op, shapes):
        """Caffe2's MatMul: each input flattened to 2-D at ``axis_a`` / ``axis_b`` (default 1), transposed
        where ``trans_a`` / ``trans_b``, multiplied; the stock frontend copies those arguments onto an ONNX
        MatMul, which has none."""
        args = {arg.name: arg.i for arg in op.arg}
        unknown = sorted(set(args) - {"axis_a", "axis_b", "trans_a", "trans_b"})
        if len(op.input) != 2 or len(op.output) != 1 or unknown:
            raise ValueError("{}: a MatMul with inputs (A, B), one output and arguments axis_a, axis_b, trans_a, "
                             "trans_b has an ONNX form; this one has {}".format(
                                 _op_label(op), "argument(s) {}".format(", ".join(unknown)) if unknown else
                                 "{} input(s) and {} output(s)".format(len(op.input), len(op.output))))
        nodes, operands = [], []
        for name, axis, trans in ((op.input[0], "axis_a", "trans_a"), (op.input[1], "axis_b", "trans_b")):
            if len(shapes.get(name, ())) != 2 or args.get(axis, 1) != 1:
                flat = cls.dummy_name()
                nodes.append(helper.make_node("Flatten", [name], [flat], axis=args.get(axis, 1)))
                name = flat
            if args.get(trans, 0):
                turned = cls.dummy_name()
                nodes.append(helper.make_node("Transpose", [name], [turned], perm=[1, 0]))
                name = turned
            operands.append(name)
        nodes.append(helper.make_node("MatMul", operands, [op.output[0]]))
        return nodes

    @classmethod
    def _cumsum_nodes(cls, op):
        opset = cls.target_opset_version
        params = cumsum_params(op, opset)
        x, y = op.input[0], op.output[0]
        x_type, y_type = cls.blob_types[x], cls.blob_types[y]
        if y_type == TensorProto.FLOAT16 and opset < CUMSUM_FLOAT16_OPSET:
            raise ValueError("{}: a float16 PyCumSum exports as float16 CumSum, which needs opset >= {}, "
                             "not {}".format(_op_label(op), CUMSUM_FLOAT16_OPSET, opset))
        nodes = []
        if x_type != y_type:  # PyCumSum casts first (int32 -> int64, dtype=), then sums
            x = cls.dummy_name()
            nodes.append(helper.make_node("Cast", [op.input[0]], [x], to=y_type))
        if params["axis_input"]:
            axis = op.input[1]
        else:
            axis = cls.dummy_name()
            cls.axis_initializers.append(numpy_helper.from_array(np.array(params["axis"], np.int64), axis))
        flags = {name: 1 for name in ("exclusive", "reverse") if params[name]}
        nodes.append(helper.make_node(WRITTEN, [x, axis], [y], **flags))
        return nodes


def _without_checks(net) -> None:
    """Drop ``net``'s Caffe2 Asserts and the ops that only they read (in place): the run-time checks an ONNX import
    adds guard Caffe2's own kernels (fed shapes, sizes computed from values, empty operands); ONNX has no such op,
    and an ONNX runtime checks what it is fed against the model's declarations itself."""
    read, kept = set(net.external_output), []
    for op in reversed(net.op):
        if op.type != "Assert" and (set(op.output) & read or not op.output):
            kept.append(op)
            read.update(op.input)
    if len(kept) != len(net.op):
        del net.op[:]
        net.op.extend(reversed(kept))


def _netdef(net, what: str) -> caffe2_pb2.NetDef:
    """A copy of ``net`` (NetDef or core.Net): the frontend rewrites the nets it gets."""
    copy = caffe2_pb2.NetDef()
    copy.CopyFrom(as_netdef(net, "export", what))
    return copy


def _elem_type(name: str, given) -> int:
    """An ONNX element type from an ONNX enum value or anything numpy reads as a dtype."""
    if isinstance(given, (int, np.integer)) and not isinstance(given, bool) and given in mapping.TENSOR_TYPE_TO_NP_TYPE:
        return int(given)
    try:
        return mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(given)]
    except (TypeError, KeyError):
        raise ValueError("export: value_info[{!r}]: unknown element type {!r} (an onnx.TensorProto type such as "
                         "TensorProto.FLOAT, or a numpy dtype)".format(name, given)) from None


def _checked_value_info(value_info) -> dict:
    if not isinstance(value_info, dict):
        raise TypeError("export: value_info must be a dict {{blob: (element type, shape)}}, got {}".format(
            type(value_info).__name__))
    checked = {}
    for name, entry in value_info.items():
        try:
            given_type, shape = entry
            shape = tuple(int(extent) for extent in shape)
        except (TypeError, ValueError):
            raise ValueError("export: value_info[{!r}] must be (element type, shape), got {!r}".format(
                name, entry)) from None
        if any(extent < 0 for extent in shape):
            raise ValueError("export: value_info[{!r}] has a negative extent in shape {}".format(name, shape))
        elem_type = _elem_type(name, given_type)
        check_tensor(shape, mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type].itemsize,  # before np.zeros(shape)
                     "export: value_info[{!r}]".format(name))
        checked[name] = (elem_type, shape)
    return checked


def _run_for_types(init_net, predict_net, value_info):
    """({blob: (ONNX element type, shape)} for every tensor blob of ``predict_net``, run once on zeros;
    {blob: value} for the blobs its GivenTensor*Fill ops make: the stock frontend writes those ops as they
    are, which is no ONNX operator, so they become Constant nodes of the values Caffe2 made)."""
    inputs = {name: np.zeros(shape, mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type])
              for name, (elem_type, shape) in value_info.items()}
    try:
        workspace, _ = c2_native_run_net(init_net, predict_net, inputs)
    except Exception as error:
        raise ValueError("export: running net {!r} on zeros of the given shapes failed: {}".format(
            predict_net.name, str(error).strip().splitlines()[-1])) from None
    found = {}
    for op in predict_net.op:
        for name in list(op.input) + list(op.output):
            try:
                value = workspace.FetchBlob(name)
            except (RuntimeError, TypeError):  # absent, or not a tensor (a mutex, a DB, ...)
                continue
            if isinstance(value, np.ndarray) and value.dtype in mapping.NP_TYPE_TO_TENSOR_TYPE:
                found[name] = (mapping.NP_TYPE_TO_TENSOR_TYPE[value.dtype], value.shape)
    constants = {op.output[0]: workspace.FetchBlob(op.output[0]) for op in predict_net.op
                 if _GIVEN_TENSOR_FILL.fullmatch(op.type) and not op.input and len(op.output) == 1
                 and op.output[0] in found}
    return found, constants


def export(predict_net, init_net=None, value_info=None, opset=CUMSUM_OPSET) -> onnx.ModelProto:
    """An ONNX model of ``predict_net`` (and ``init_net``'s GivenTensorFill parameters), checked.

    ``value_info`` gives the net's inputs as in Caffe2's frontend: ``{blob: (element type, shape)}``,
    element types as ``onnx.TensorProto`` values (or numpy dtypes). ``opset`` from 9 (no PyCumSum) or
    11 up to onnx's newest. Raises ValueError naming the Caffe2 op that cannot be exported correctly.
    """
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, int) or not STOCK_OPSET <= opset <= newest:
        raise ValueError("export: opset must be an integer from {} to {} (this onnx), got {!r}".format(
            STOCK_OPSET, newest, opset))
    predict = _netdef(predict_net, "predict_net")
    init = _netdef(init_net, "init_net") if init_net is not None else None
    verify_net(predict)  # nothing runs below unless every Python op is pycumsum_op's
    if init is not None:
        verify_net(init)
    if not predict.op:
        raise ValueError("export: net {!r} has no ops".format(predict.name))
    if not predict.external_output:
        raise ValueError("export: net {!r} declares no outputs, so the model would have none; declare them "
                         "(net.AddExternalOutput(blob), or external_output: \"BLOB\" in a .pbtxt)".format(
                             predict.name))
    _without_checks(predict)
    value_info = _checked_value_info({} if value_info is None else value_info)
    for op in predict.op:  # refused before the net runs: ops that could never export
        if op.type in PYTHON_OP_TYPES:
            cumsum_params(op, opset)
    Caffe2Frontend._filter_fake_init(init, value_info)
    if init is not None:
        for index, op in enumerate(init.op):
            if not op.type.startswith("GivenTensor") or not op.type.endswith("Fill") or len(op.output) != 1:
                raise ValueError("export: init_net op {} ({}) is not a GivenTensor*Fill; Caffe2's exporter reads "
                                 "parameters only from those".format(index, op.type))
    produced = {name for op in init.op for name in op.output} if init is not None else set()
    missing = [name for name in predict.external_input if name not in value_info and name not in produced]
    if missing:
        raise ValueError("export: value_info has no (type, shape) for input(s) {} of net {!r}".format(
            ", ".join(missing), predict.name))
    Caffe2Frontend.ssa_rewrite(predict, init, value_info)
    blobs, constants = _run_for_types(init, predict, value_info)
    frontend = type("PyCumSumFrontendAt{}".format(opset), (PyCumSumFrontend,), {
        "target_opset_version": opset, "axis_initializers": [], "constants": constants,
        "blob_types": {name: elem_type for name, (elem_type, _) in blobs.items()}})
    known = dict(value_info)
    known.update((name, info) for name, info in blobs.items() if name not in produced)
    graph = frontend.caffe2_net_to_onnx_graph(predict, init, known)
    graph.initializer.extend(frontend.axis_initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pycumsum_op")
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as error:
        raise ValueError("export: the model made from net {!r} is not valid ONNX: {}".format(
            predict.name, str(error).strip().splitlines()[0])) from None
    return model
