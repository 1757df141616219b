"""`lower(net, target)`: the same net with every scan op (and its gradient op) as C++ operators.

>>> import numpy as np
>>> from caffe2.python import core, workspace
>>> import pycumsum_op
>>> net = core.Net("doc_lower")
>>> _ = net.PyCumSum("doc_lx", "doc_ly", axis=1, reverse=True)
>>> workspace.FeedBlob("doc_lx", np.array([[1, 2, 3]], np.int32))  # lower reads its rank and dtype
True
>>> lowered = pycumsum_op.lower(net, target="aten")
>>> [(op.type, op.arg[0].s.decode()) for op in lowered.op]
[('ATen', 'flip'), ('ATen', 'cumsum'), ('ATen', 'flip')]
>>> workspace.RunNetOnce(lowered)
True
>>> workspace.FetchBlob("doc_ly")
array([[6, 5, 3]], dtype=int64)
"""
from typing import List

import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace
from google.protobuf import text_format

from .._safe_unpickle import RefusedPickle, inspect_builder
from ..kernels import ScanArgumentError, ScanSpec
from ..kernels.spec import CAFFE2_DTYPE_NAMES
from ..netdefs import as_netdef, blob_names
from ..ops.builders import BUILDERS, builder_params
from ..scans import SCANS, Refused
from ..scans import scan as registered_scan
from ..input_limits import InputTooLarge
from ..serialization import (BUILDER_ARGS, MAX_NET_DEPTH, PYTHON_OP_TYPES, UnsafeNetError, nested_label,
                             nested_nets, verify_net)
from . import aten, portable
from .emitter import NUMPY_TYPES, TENSOR_TYPES, FreshNames, OpEmitter
from .errors import LoweringError
from .input_facts import InputFacts, Site

#: target name -> the module whose ``emit_scan`` writes a scan in that target's operators.
TARGETS = {"aten": aten, "portable": portable}
#: Ops whose nested nets run on the holder's workspace, reading its blobs by the same names (a step net
#: or Do's net names its blobs itself).
SHARED_BLOB_NETS = frozenset(["If", "While", "AsyncIf"])
_FORWARD_BUILDER = "pycumsum_op.ops.builders.scan_forward"
_BACKWARD_BUILDER = "pycumsum_op.ops.builders.scan_backward"


def _check_target(target) -> None:
    if target not in TARGETS:
        raise LoweringError("lower: unknown target={!r}; use one of {}".format(target, ", ".join(sorted(TARGETS))))


def _label(index: int, op, prefix: str = "") -> str:
    """An op's label; ``prefix`` names the nested net holding it ("op 2 (If) arg then_net > net 'b' ")."""
    return "{}op {} ({} {!r}: {} -> {})".format(prefix, index, op.type, op.name, ", ".join(op.input),
                                              ", ".join(op.output))


def _scan_params(label: str, op):
    """(scan name, ScanSpec) of a PyCumSum forward or gradient op; LoweringError for any other Python op."""
    args = {arg.name: arg.s for arg in op.arg if arg.name in BUILDER_ARGS}
    if "pickled_builder" not in args:
        raise LoweringError("{}: a Python op without a pickled builder (token form) cannot be lowered: only "
                            "PyCumSum ops can, and no Python op may remain in a lowered net".format(label))
    try:
        info = inspect_builder(args["pickled_builder"], frozenset(BUILDERS))
    except RefusedPickle as refused:
        raise LoweringError("{}: not a PyCumSum op (its builder pickle {}); only PyCumSum ops can be lowered, and "
                            "no Python op may remain in a lowered net".format(label, refused.reason)) from None
    if info.builder != _FORWARD_BUILDER:
        raise LoweringError("{}: its builder is {}, not PyCumSum's; it cannot be lowered".format(label, info.builder))
    if op.type == "PythonGradient":  # the gradient op runs the grad builder: it must be PyCumSum's too
        try:
            grad_builder = inspect_builder(args.get("pickled_grad_builder", b""), frozenset(BUILDERS)).builder
        except RefusedPickle as refused:
            grad_builder = "refused ({})".format(refused.reason)
        if grad_builder != _BACKWARD_BUILDER:
            raise LoweringError("{}: its gradient builder is {}, not PyCumSum's; it cannot be lowered".format(
                label, grad_builder))
    try:
        params = builder_params(info.args, info.kwargs)
        scan = params.pop("scan")
        if params.pop("axis_input"):
            raise LoweringError("{}: ONNX CumSum's form reads its axis from input blob {!r} at run time; lowering "
                                "needs the axis when the net is built (build the op with axis=...)".format(
                                    label, op.input[1] if len(op.input) > 1 else ""))
        spec = ScanSpec.checked(registered_scan(scan, label).op_name, **params)
    except (TypeError, ScanArgumentError) as error:
        raise LoweringError("{}: its builder holds arguments PyCumSum does not take: {}".format(label, error)) from None
    return scan, spec


def _inferable(netdef, known: set) -> caffe2_pb2.NetDef:
    """A copy holding only the ops whose inputs are all ``known`` (extended by their outputs); Python ops
    are left out. Caffe2's shape inference warns on stderr for every op it cannot see through. A fill op's
    ``values`` are left empty: inference reads its ``shape``, and an init net's weights would be copied
    and serialized for nothing."""
    copy = caffe2_pb2.NetDef()
    _copy_fields(netdef, copy, "op")
    for op in netdef.op:
        if op.type not in PYTHON_OP_TYPES and all(blob in known for blob in op.input):
            inferred = copy.op.add()
            _copy_fields(op, inferred, "arg")
            for arg in op.arg:
                if arg.name == "values":  # the schema wants the argument: it stays, empty
                    inferred.arg.add(name="values")
                else:
                    inferred.arg.add().CopyFrom(arg)
            known.update(op.output)
    return copy


def _copy_fields(source, target, skipped: str) -> None:
    """Every field of protobuf message ``source`` but ``skipped`` into ``target``."""
    for field, value in source.ListFields():
        if field.name == skipped:
            continue
        if field.label == field.LABEL_REPEATED:
            getattr(target, field.name).extend(value)
        elif field.message_type is not None:
            getattr(target, field.name).CopyFrom(value)
        else:
            setattr(target, field.name, value)


def _checked_shape(blob, shape):
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        dims = None
    if dims is None or any(d < 0 for d in dims):
        raise LoweringError("lower: shapes[{!r}] = {!r} is not a shape (a sequence of sizes >= 0)".format(
            str(blob), shape))
    return dims


def _checked_dtype(blob, dtype):
    """A numpy dtype; Caffe2 names ("float" is float32, "double" float64) as PyCumSum's dtype= reads them."""
    try:
        resolved = np.dtype(CAFFE2_DTYPE_NAMES.get(dtype, dtype) if isinstance(dtype, str) else dtype)
    except TypeError:
        resolved = None
    if resolved is None or resolved not in TENSOR_TYPES:
        raise LoweringError("lower: dtypes[{!r}] = {!r} is not a tensor dtype Caffe2 has ({})".format(
            str(blob), dtype, ", ".join(sorted(t.name for t in TENSOR_TYPES))))
    return resolved


class _BlobFacts(object):
    """Shapes and dtypes of blobs: the user's ``shapes``/``dtypes``, then Caffe2's inference, then the workspace."""

    def __init__(self, netdef, init_netdef, shapes, dtypes, outer=None):
        self._netdef, self._init, self._outer = netdef, init_netdef, outer
        self._shapes = {str(blob): _checked_shape(blob, shape) for blob, shape in (shapes or {}).items()}
        self._dtypes = {str(blob): _checked_dtype(blob, dtype) for blob, dtype in (dtypes or {}).items()}
        self._inferred = None

    def nested(self, netdef, op_type: str) -> "_BlobFacts":
        """The facts of a net nested in an ``op_type`` op of this one: its own inference first, then, where
        the nested net reads this net's blobs by their names (`SHARED_BLOB_NETS`), what this net knows."""
        return _BlobFacts(netdef, None, self._shapes, self._dtypes,
                          outer=self if op_type in SHARED_BLOB_NETS else None)

    def _workspace(self, blob):
        if not workspace.HasBlob(blob):
            return None
        try:
            value = workspace.FetchBlob(blob)
        except (RuntimeError, TypeError):
            return None
        return value if isinstance(value, np.ndarray) else None

    def _infer(self):
        if self._inferred is None:
            hints_shape, hints_type = {}, {}
            for blob in self._netdef.external_input:
                value = self._workspace(blob)
                shape = self._shapes.get(blob, None if value is None else value.shape)
                dtype = self._dtypes.get(blob, None if value is None else value.dtype)
                if shape is not None and dtype in TENSOR_TYPES:
                    hints_shape[blob], hints_type[blob] = list(shape), TENSOR_TYPES[dtype]
            known = set(hints_shape)
            nets = [_inferable(net, known) for net in (self._init, self._netdef) if net is not None]
            try:
                shapes, types = workspace.InferShapesAndTypes(nets, hints_shape, nets_proto=True, blob_types=hints_type)
            except Exception:  # Caffe2's inference gives up on some nets; the other sources remain
                shapes, types = {}, {}
            self._inferred = shapes, types
        return self._inferred

    def of(self, blob: str) -> InputFacts:
        return InputFacts(lambda: self._find(blob))

    def _find(self, blob: str):
        if blob in self._shapes and blob in self._dtypes:  # given: Caffe2's inference (which may crash) not run
            return tuple(self._shapes[blob]), self._dtypes[blob]
        shapes, types = self._infer()
        value = self._workspace(blob)
        shape = self._shapes.get(blob)
        if shape is None and blob in shapes and blob in types and types[blob] in NUMPY_TYPES:
            shape = tuple(shapes[blob])
        if shape is None and value is not None:
            shape = value.shape
        dtype = self._dtypes.get(blob)
        if dtype is None and types.get(blob) in NUMPY_TYPES:
            dtype = NUMPY_TYPES[types[blob]]
        if dtype is None and value is not None:
            dtype = value.dtype
        if self._outer is not None and (shape is None or dtype is None):
            outer_shape, outer_dtype = self._outer._find(blob)
            shape, dtype = outer_shape if shape is None else shape, outer_dtype if dtype is None else dtype
        return shape, dtype


def _check_supported(scan, target, where) -> None:
    """The registry's refusal of ``scan`` for ``target``, with the scans that target does lower."""
    entry = registered_scan(scan, where)
    refused = entry.form(target)
    if isinstance(refused, Refused):
        lowered = sorted(name for name, known in SCANS.items() if not isinstance(known.form(target), Refused))
        raise LoweringError("{}: scan {!r} ({}) cannot be lowered to target {!r}: {}; lowered there: {}".format(
            where, scan, entry.op_name, target, refused.reason, ", ".join(lowered)))


def forward_ops(scan, spec, blob_in, blob_outs, target, facts, emitter, where) -> List[caffe2_pb2.OperatorDef]:
    """The ops computing ``blob_outs = scan(blob_in)`` (one blob per output) in ``target``'s operators."""
    _check_supported(scan, target, where)
    currents = TARGETS[target].emit_scan(emitter, scan, spec, blob_in, facts, where)
    return emitter.finish_outputs(currents, blob_in, blob_outs)


def gradient_ops(scan, spec, op, target, facts, emitter, where) -> List[caffe2_pb2.OperatorDef]:
    """The ops of a scan's gradient op (inputs x, the outputs, grad of the first; output grad_x)."""
    _check_supported(scan, target, where)
    if spec.dtype is not None and facts.dtype is None:
        raise LoweringError("{}: the gradient of a scan with dtype={} has its input's dtype; give dtypes={{{!r}: "
                            "...}} or feed the blob into the workspace".format(where, spec.dtype.name, op.input[0]))
    entry = registered_scan(scan, where)
    if not entry.self_adjoint:
        return _backward_pass_ops(scan, spec, op, target, facts, emitter, where)
    adjoint = spec._replace(reverse=not spec.reverse, dtype=None)
    grad_in, grad_out = op.input[-1], op.output[0]
    current, grad_dtype = grad_in, lambda: entry.result_dtype(spec, facts.dtype)
    if spec.dtype is not None and facts.dtype.kind == "f" and facts.dtype != spec.dtype:
        # PyCumSum (and torch): grad_x has x's dtype, and the scan runs in it
        current = emitter.step("Cast", [current], to=TENSOR_TYPES[facts.dtype])
        grad_dtype = lambda: facts.dtype  # noqa: E731
    grad_facts = InputFacts(lambda: (facts.shape, grad_dtype()))  # grad_y is shaped like x
    (current,) = TARGETS[target].emit_scan(emitter, scan, adjoint, current, grad_facts, Site(str(where), grad_in))
    return emitter.finish(current, grad_in, grad_out)


def _backward_pass_ops(scan, spec, op, target, facts, emitter, where) -> List[caffe2_pb2.OperatorDef]:
    """A scan's gradient op as the forward's emitted ops run again (into fresh blobs) followed by Caffe2's
    backward pass over them (`aten_gradient` for the ATen forms, Caffe2's own makers for the rest)."""
    x, grad_in, grad_out = op.input[0], op.input[-1], op.output[0]
    recomputed = [emitter.fresh() for _ in registered_scan(scan, where).outputs]
    forward = list(forward_ops(scan, spec, x, recomputed, target, facts, emitter, where))
    backward, grads = core.GradientRegistry.GetBackwardPass(forward, {recomputed[0]: grad_in})
    known = {grad_in} | {blob for forward_op in forward for blob in list(forward_op.input) + list(forward_op.output)}
    needed = {blob for gradient_op in backward for blob in gradient_op.input}
    for forward_op in reversed(forward):  # keep only the forward ops the gradient reads (transitively)
        if needed.intersection(forward_op.output):
            needed.update(forward_op.input)
        else:
            emitter.ops.remove(forward_op)
    renamed = {}
    for gradient_op in backward:  # the makers name blobs <input>_grad: give every new blob a fresh name
        for names in (gradient_op.input, gradient_op.output):
            for position, name in enumerate(names):
                if name not in known:
                    names[position] = renamed.setdefault(name, emitter.fresh())
        emitter.append(gradient_op)
    return emitter.finish(renamed[str(grads[x])], grad_in, grad_out)


class _CallersNames(object):
    """`FreshNames`' interface over a converter's own maker of fresh names (which knows what its net holds)."""

    def __init__(self, fresh):
        self._fresh = fresh

    def fresh(self, base: str) -> str:
        return self._fresh()


def scan_forward(scan: str, spec: ScanSpec, blob_in: str, blob_outs, target: str, shape, dtype, fresh,
                 where: str) -> List[caffe2_pb2.OperatorDef]:
    """The ops computing ``blob_outs = scan(blob_in)`` in ``target``'s operators, for a converter that emits them
    directly (ONNX import: no PyCumSum op to read back): it states the input's ``shape`` (None: unknown; lowering
    fixes the rank and, for "portable", the scan length) and ``dtype``, ``fresh()`` makes blob names its net does not
    hold, ``where`` names the node in errors (`LoweringError`)."""
    _check_target(target)
    emitter = OpEmitter(_CallersNames(fresh), blob_outs[0])
    return forward_ops(scan, spec, blob_in, list(blob_outs), target, InputFacts(lambda: (shape, dtype)), emitter,
                       Site(where, blob_in))


def _lower_python_op(index, op, target, facts, names, prefix="") -> List[caffe2_pb2.OperatorDef]:
    """The ops replacing Python op ``op`` (index ``index``); ``prefix`` names the nested net holding it, and
    there its outputs are copied into place (`OpEmitter`'s ``copy_outputs``: step nets alias blobs)."""
    label = _label(index, op, prefix)
    scan, spec = _scan_params(label, op)
    where = Site(label, op.input[0])
    emitter = OpEmitter(names, op.output[0], like=op, copy_outputs=bool(prefix))
    entry = registered_scan(scan, label)
    outputs = len(entry.outputs)
    if op.type == "Python" and len(op.input) == 1 and len(op.output) == outputs:
        return forward_ops(scan, spec, op.input[0], list(op.output), target, facts.of(op.input[0]), emitter, where)
    if op.type == "PythonGradient" and len(op.input) == 2 + outputs and len(op.output) == 1:
        return gradient_ops(scan, spec, op, target, facts.of(op.input[0]), emitter, where)
    raise LoweringError("{}: a {} op of a {} with {} input(s) and {} output(s) cannot be lowered (a scan "
                        "has 1 and {}; its gradient op {} and 1)".format(
                            where, op.type, entry.op_name, len(op.input), len(op.output), outputs,
                            2 + outputs))


def lower_op(op, netdef, target: str = "aten") -> List[caffe2_pb2.OperatorDef]:
    """The ops replacing one PyCumSum ``op`` that is to sit in ``netdef`` (fresh names avoid its blobs)."""
    _check_target(target)
    facts = _BlobFacts(netdef, None, None, None)
    names = FreshNames(blob_names(netdef) | set(op.input) | set(op.output))
    return _lower_python_op(len(netdef.op), op, target, facts, names)


def lower(net, target: str = "aten", shapes=None, init_net=None, dtypes=None) -> caffe2_pb2.NetDef:
    """A new NetDef in which every PyCumSum op, and PyCumSum gradient op, is C++ operators of ``target``.

    net: a core.Net or NetDef (not changed). target: "aten" (Caffe2's ATen operator: torch's kernels,
    O(n), bit-identical to torch, any shape at run time; not in mobile builds; also PyCumProd, PyCumMax,
    PyCumMin and PyLogCumSumExp, with their gradients) or "portable" (cumsum only;
    operators every Caffe2 build has; O(n log n); the scan length is fixed now and checked at run time).
    shapes / dtypes: {blob: shape} / {blob: dtype} of scan inputs; unknown ones come from Caffe2's shape
    inference over ``init_net`` and ``net``, then from the current workspace. Every other op, argument and
    external blob stays as it was. Nets nested in op arguments (If/While/Do branches and bodies,
    RecurrentNetwork step nets as NetDef or text) are lowered the same way, text staying text; the
    result holds no Python op anywhere (checked with ``verify_net(python_ops=False)``). Raises
    `LoweringError` naming the op (and the nested net holding it) for any Python op that is not a
    scan op, for a nested net it cannot read, for what a target cannot do (with the reason) and for
    what it cannot know (e.g. the scan length for "portable"). Before anything reads them or Caffe2 infers
    their shapes, ``net`` and ``init_net`` are held to `verify_net`'s budgets (ops, text and pickle bytes,
    declared tensors): `pycumsum_op.input_limits.InputTooLarge` over one.
    """
    _check_target(target)
    netdef = as_netdef(net, "lower")
    init_netdef = None if init_net is None else as_netdef(init_net, "lower", "init_net")
    for given in (netdef, init_netdef):
        _within_budgets(given)
    facts = _BlobFacts(netdef, init_netdef, shapes, dtypes)
    lowered = _lower_net(netdef, target, facts, FreshNames(_tree_blob_names(netdef)), "", 0)
    try:
        verify_net(lowered, python_ops=False)
    except UnsafeNetError as error:  # what the walk above missed: a defect, refused rather than returned
        raise LoweringError("lower: the lowered net is refused: {}".format(error.problems[0])) from None
    return lowered


def _within_budgets(netdef) -> None:
    """`verify_net`'s budgets before lowering reads ``netdef`` or Caffe2 infers its shapes: its ops, text nets,
    builder pickles and declared tensors (`InputTooLarge`, `NetOverBudget`); a net refused only for its Python
    ops goes on, as lowering names each one it cannot lower."""
    if netdef is None:
        return
    try:
        verify_net(netdef)
    except UnsafeNetError as error:
        if isinstance(error, InputTooLarge):
            raise


def _nested_or_refused(op, where, index) -> list:
    """`nested_nets` of ``op``; a LoweringError for a nested net lowering cannot read."""
    problems = []
    found = nested_nets(op, where, index, problems)
    if problems:
        raise LoweringError("{}: it cannot be lowered, as no Python op may remain in a lowered net and this "
                            "nested net cannot be read".format(problems[0]))
    return found


def _tree_blob_names(netdef, depth=0) -> set:
    """Every blob name in ``netdef`` and the nets nested in it (fresh names must avoid them all)."""
    names = blob_names(netdef)
    if depth <= MAX_NET_DEPTH:
        for op in netdef.op:
            for nested in nested_nets(op, "", 0, []):
                names |= _tree_blob_names(nested.netdef, depth + 1)
    return names


def _lower_net(netdef, target, facts, names, prefix, depth) -> caffe2_pb2.NetDef:
    """``netdef`` with its Python ops lowered, in it and in every net nested in its ops' arguments."""
    if depth > MAX_NET_DEPTH:
        raise LoweringError("{}: nets nested more than {} levels deep".format(prefix or "lower", MAX_NET_DEPTH))
    new_ops = []
    for index, op in enumerate(netdef.op):
        if op.type in PYTHON_OP_TYPES:
            new_ops.extend(_lower_python_op(index, op, target, facts, names, prefix))
            continue
        copied = caffe2_pb2.OperatorDef()
        copied.CopyFrom(op)
        where = "{}op {} ({}{})".format(prefix, index, op.type, " {!r}".format(op.name) if op.name else "")
        for nested in _nested_or_refused(copied, where, index):
            inner = _lower_net(nested.netdef, target, facts.nested(nested.netdef, op.type), names,
                               nested_label(where, nested) + " ", depth + 1)
            if inner == nested.netdef:
                continue  # nothing lowered: the argument stays byte for byte as it was
            if nested.field == "s":
                nested.arg.s = text_format.MessageToString(inner).encode("ascii")
            elif nested.field == "n":
                nested.arg.n.CopyFrom(inner)
            else:
                nested.arg.nets[nested.position].CopyFrom(inner)
        new_ops.append(copied)
    lowered = caffe2_pb2.NetDef()
    lowered.CopyFrom(netdef)
    del lowered.op[:]
    lowered.op.extend(new_ops)
    return lowered
