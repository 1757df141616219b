"""Load saved Caffe2 nets without letting their Python ops run code you did not approve.

A Caffe2 ``Python`` op saved with a builder carries ``pickled_builder`` (and
``pickled_grad_builder``): ``pickle.dumps((func, args, kwargs))``. Caffe2 unpickles it with
plain pickle and calls ``func(*args, **kwargs)`` as soon as the net is *created*
(``workspace.CreateNet``, ``RunNetOnce``, ``Predictor``), so a NetDef from an untrusted source
can run any code. `verify_net` reads those pickles with a restricted unpickler that imports
and calls nothing (`MAX_PICKLE_BYTES`, 64 KiB, per pickle), and raises `UnsafeNetError` unless
every callable is one of pycumsum_op's builders, called with arguments those builders accept, or
listed in ``allow``. It follows every net Caffe2 would create from an op argument (`NET_ARGUMENTS`,
NetDef fields ``n`` / ``nets`` anywhere, text in any ``*_net`` argument, forward and gradient ops alike),
reading text nets byte for byte as Caffe2's C++ does;
a net it cannot read is a problem, never "safe". `load_net` parses a .pb / .pbtxt and verifies it
(input over the caps of `pycumsum_op.input_limits` is refused before parsing); `save_net` writes one
atomically.

>>> from caffe2.python import core
>>> import pycumsum_op
>>> net = core.Net("doc_serialization")
>>> _ = net.PyCumSum("doc_sx", "doc_sy", axis=0)
>>> [op.builders for op in verify_net(net)]
[('pycumsum_op.ops.builders.scan_forward', 'pycumsum_op.ops.builders.scan_backward')]
>>> netdef = load_net(net.Proto().SerializeToString())
>>> netdef.op[0].name
'PyCumSum'
"""
import errno
import os
import re
from typing import List, NamedTuple, Optional, Tuple

from caffe2.proto import caffe2_pb2
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from ._atomic_files import write_atomically
from ._safe_unpickle import MAX_PICKLE_BYTES, RefusedPickle, inspect_builder  # noqa: F401 (public here)
from ._text_format import TextNetError, parse_text_netdef
from .input_limits import MAX_RANK, InputTooLarge, TensorBudget, check_parse, check_size, limit
from .wire_census import UnreadableMessage

#: Op types whose constructor unpickles ``pickled_builder`` / ``pickled_grad_builder``.
PYTHON_OP_TYPES = frozenset(["Python", "PythonGradient", "PythonDLPack", "PythonDLPackGradient"])
BUILDER_ARGS = ("pickled_builder", "pickled_grad_builder")
#: Where Caffe2 (torch 1.10.2's C++) reads a net out of an op argument: op type -> {argument: form}.
#: "netdef": the argument's NetDef field ``n`` (``nets`` for Switch). "netdef_or_text": ``n``, else the
#: bytes of ``s`` parsed as a text NetDef (RecurrentNetwork's ``detail::extractNetDef``). "backend":
#: a serialized net handed to an ONNXIFI backend, which cannot be followed: always a problem.
#: RecurrentNetwork's gradient maker copies every forward argument to RecurrentNetworkGradient, which
#: parses ``backward_step_net``: both ops carry both step nets, and both are read in both.
#: Independently of this table, ``n`` / ``nets`` are verified in every argument of every op, and a
#: string in any argument named ``net`` or ``*_net`` (`TEXT_NET_SUFFIX`) is read as a text NetDef.
#: (AsyncIf and Switch are not registered in this Caffe2 build.)
_STEP_NETS = {"step_net": "netdef_or_text", "backward_step_net": "netdef_or_text"}
NET_ARGUMENTS = {
    "If": {"then_net": "netdef", "else_net": "netdef"},
    "While": {"loop_net": "netdef", "cond_net": "netdef"},
    "Do": {"net": "netdef"},
    "ONNXWhile": {"body": "netdef"},
    "RecurrentNetwork": _STEP_NETS,
    "RecurrentNetworkGradient": _STEP_NETS,
    "Onnxifi": {"onnx_model": "backend", "netdef_str": "backend"},
}
#: An argument named ``net`` or ending in this, holding a string, is read as a text NetDef in any op.
TEXT_NET_SUFFIX = "_net"
#: How deep nets may nest in one another before the net is refused.
MAX_NET_DEPTH = 32
#: The most problems `verify_net` keeps (the others are counted): a net's cost stays linear in its size.
MAX_PROBLEMS = 100
#: The most ops, nested nets' included, `verify_net` reads in one call; a net with more is refused. Every
#: door reads nets through `verify_net`, so this also caps what the doctor and lowering walk: the doctor's
#: backward pass (Caffe2's ``GetBackwardPass``) takes about a tenth of a millisecond per op.
MAX_NET_OPS = 20000
#: Arguments that Caffe2's shape inference reads as a shape (or as axes to add): at most `MAX_RANK` ints each.
SHAPE_ARGUMENTS = frozenset(["shape", "dims", "extra_shape"])
#: Bytes per element of Caffe2's TensorProto data types (a string: the std::string that holds it).
_ITEMSIZES = {caffe2_pb2.TensorProto.FLOAT: 4, caffe2_pb2.TensorProto.INT32: 4, caffe2_pb2.TensorProto.BYTE: 1,
              caffe2_pb2.TensorProto.STRING: 32, caffe2_pb2.TensorProto.BOOL: 1, caffe2_pb2.TensorProto.UINT8: 1,
              caffe2_pb2.TensorProto.INT8: 1, caffe2_pb2.TensorProto.UINT16: 2, caffe2_pb2.TensorProto.INT16: 2,
              caffe2_pb2.TensorProto.INT64: 8, caffe2_pb2.TensorProto.FLOAT16: 2, caffe2_pb2.TensorProto.DOUBLE: 8}
#: Fill ops whose element type is their own, not a ``dtype`` argument.
_FILL_TYPES = {"GivenTensorFill": caffe2_pb2.TensorProto.FLOAT, "GivenTensorDoubleFill": caffe2_pb2.TensorProto.DOUBLE,
               "GivenTensorBoolFill": caffe2_pb2.TensorProto.BOOL, "GivenTensorInt16Fill": caffe2_pb2.TensorProto.INT16,
               "GivenTensorIntFill": caffe2_pb2.TensorProto.INT32, "GivenTensorInt64Fill": caffe2_pb2.TensorProto.INT64,
               "GivenTensorStringFill": caffe2_pb2.TensorProto.STRING,
               "GivenTensorByteStringToUInt8Fill": caffe2_pb2.TensorProto.UINT8}
#: The most builder-pickle bytes `verify_net` reads in one call (its static pass takes a few microseconds
#: per byte; pycumsum_op's pickles are ~150 bytes, so ~28,000 Python ops); the rest are refused unread.
MAX_PICKLE_BYTES_TOTAL = 4 * 2 ** 20
#: Names (of nets, ops, arguments) longer than this are cut in labels and messages.
MAX_LABEL_NAME = 80
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # what str.splitlines splits on, and the like
_TEXT_SUFFIXES = (".pbtxt", ".prototxt", ".pbtext", ".txt")
_BINARY_SUFFIXES = (".pb", ".bin", ".netdef")


class NetProblem(NamedTuple):
    """One reason a net was refused."""
    where: str              # e.g. "net 'm' op 3 (Python 'PyCumSum')"; nested nets are chained with " > "
    op_index: int           # index of the op in the net that holds it
    op_type: str
    arg: Optional[str]      # the op's argument: "pickled_builder", "token", "step_net", ... or None
    callable: Optional[str]  # dotted name of the referenced callable, when there is one
    reason: str

    def __str__(self):
        return "{}{}: {}".format(self.where, " " + self.arg if self.arg else "", self.reason)


class VerifiedOp(NamedTuple):
    """A Python op that passed verification, and the builders Caffe2 will call for it."""
    where: str
    op_index: int
    op_type: str
    builders: Tuple[str, ...]


class UnsafeNetError(ValueError):
    """A net's Python ops reference callables that are not allowed, cannot be loaded elsewhere, or
    could not be checked (a pickle or a nested net that cannot be read exactly as Caffe2 reads it).

    ``problems`` lists each `NetProblem` (op index, op type, argument, callable, reason).
    """

    def __init__(self, net_name: str, problems: List[NetProblem], total: Optional[int] = None):
        self.net_name = net_name
        self.problems = list(problems)
        total = len(self.problems) if total is None else total
        lines = ["refusing net '{}': {} problem(s) with its Python ops or the nets it holds (Caffe2 unpickles "
                 "and calls pickled builders as soon as it creates a net):".format(net_name, total)]
        lines += ["  " + str(problem) for problem in self.problems]
        if total > len(self.problems):
            lines.append("  ... and {} more (only the first {} are kept: MAX_PROBLEMS)".format(
                total - len(self.problems), len(self.problems)))
        named = sorted({p.callable for p in self.problems if p.callable})
        if named:
            lines.append("Pass allow=[{}] only if you trust where this net came from.".format(
                ", ".join(repr(name) for name in named)))
        super().__init__("\n".join(lines))


class NetOverBudget(UnsafeNetError, InputTooLarge):
    """A net `verify_net` did not read to its end: past `MAX_NET_OPS`, `MAX_PICKLE_BYTES_TOTAL` or
    ``PYCUMSUM_OP_MAX_TEXT_BYTES`` (``problems`` say where). No door reads further in it."""


def _allow_names(allow) -> frozenset:
    """``allow`` as dotted names: strings as given, callables as module.qualname."""
    if isinstance(allow, str) or callable(allow):
        allow = (allow,)
    names = set()
    for entry in allow or ():
        if isinstance(entry, str):
            names.add(entry)
        elif callable(entry) and hasattr(entry, "__module__") and hasattr(entry, "__qualname__"):
            names.add("{}.{}".format(entry.__module__, entry.__qualname__))
        else:
            raise TypeError("allow= takes 'module.qualname' strings or functions, got {!r}".format(entry))
    return frozenset(names)


def _nets_of(net) -> List[Tuple[str, caffe2_pb2.NetDef]]:
    """(label, NetDef) for a NetDef, core.Net, PlanDef, core.Plan or MetaNetDef."""
    if hasattr(net, "Proto") and not isinstance(net, caffe2_pb2.NetDef):
        net = net.Proto()
    if isinstance(net, caffe2_pb2.NetDef):
        return [("net '{}'".format(_label(net.name)), net)]
    if isinstance(net, caffe2_pb2.PlanDef):
        return [("plan '{}' net '{}'".format(_label(net.name), _label(n.name)), n) for n in net.network]
    descriptor = getattr(net, "DESCRIPTOR", None)
    if descriptor is not None and descriptor.full_name.endswith("MetaNetDef"):
        found = [("meta net {!r}".format(kv.key), kv.value) for kv in net.nets]
        for kv in net.plans:
            found += [("meta plan {!r} net '{}'".format(kv.key, _label(n.name)), n) for n in kv.value.network]
        return found
    raise TypeError("verify_net takes a NetDef, core.Net, PlanDef or MetaNetDef, got {}".format(
        type(net).__name__))


class _Problems(list):
    """Keeps the first `MAX_PROBLEMS` problems appended and counts them all (``total``); counts the ops
    read (``ops``) against `MAX_NET_OPS`, the builder pickles' bytes (``pickled``) against
    `MAX_PICKLE_BYTES_TOTAL` and the bytes of text nets parsed (``text``) against
    ``PYCUMSUM_OP_MAX_TEXT_BYTES``: one net's text step nets together cost what one text net may; charges
    the tensors the nets' fill ops declare to ``tensors`` (`charge_declared_tensors`). ``over_budget``: the
    problems of budgets passed (`append_over_budget`: what is past a budget was not read)."""
    total = ops = text = pickled = 0

    def __init__(self, what: str):
        super().__init__()
        self.tensors = TensorBudget(what)
        self.over_budget = []

    def too_many_ops(self, count: int) -> bool:
        self.ops += count
        return self.ops > MAX_NET_OPS

    def too_many_pickle_bytes(self, count: int) -> bool:
        self.pickled += count
        return self.pickled > MAX_PICKLE_BYTES_TOTAL

    def too_much_text(self, count: int) -> bool:
        self.text += count
        return self.text > limit("PYCUMSUM_OP_MAX_TEXT_BYTES")

    def append_over_budget(self, problem) -> None:
        if len(self.over_budget) < MAX_PROBLEMS:
            self.over_budget.append(problem)
        self.append(problem)

    def append(self, problem) -> None:
        self.total += 1
        if len(self) < MAX_PROBLEMS:
            super().append(problem)


def _label(value) -> str:
    """A name for a label: `_text` with line breaks and other control characters escaped (a message's first line
    is what the command line prints), then cut to `MAX_LABEL_NAME` characters (and how many more there were): an
    escape takes up to 6 characters, so cutting first would not bound the label."""
    text = _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), _text(value))
    if len(text) > MAX_LABEL_NAME:
        text = "{}...(+{} chars)".format(text[:MAX_LABEL_NAME], len(text) - MAX_LABEL_NAME)
    return text


def _text(value) -> str:
    """A proto string field as str: Caffe2 does not check UTF-8, and protobuf hands back bytes then."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _op_label(index: int, op) -> str:
    return "op {} ({}{})".format(index, _label(op.type), " '{}'".format(_label(op.name)) if op.name else "")


class NestedNet(NamedTuple):
    """A net Caffe2 may create from an op argument: ``arg.n``, ``arg.nets[position]`` or ``arg.s`` as text."""
    arg: caffe2_pb2.Argument
    field: str              # "n", "nets" or "s"
    position: int           # the index in ``nets`` (0 otherwise)
    netdef: caffe2_pb2.NetDef


def argument_form(op_type: str, name: str) -> Optional[str]:
    """How Caffe2 may read argument ``name`` of an ``op_type`` op as a net: a `NET_ARGUMENTS` form, or
    "netdef_or_text" for any argument named ``net`` / ``*_net``; None for other arguments (whose
    ``n`` / ``nets`` fields are still nets).

    >>> argument_form("RecurrentNetwork", "backward_step_net"), argument_form("Relu", "my_net")
    ('netdef_or_text', 'netdef_or_text')
    """
    form = NET_ARGUMENTS.get(op_type, {}).get(name)
    if form is None and (name == "net" or name.endswith(TEXT_NET_SUFFIX)):
        return "netdef_or_text"
    return form


def nested_nets(op, where: str, index: int, problems: List[NetProblem]) -> List[NestedNet]:
    """Every net Caffe2 may create from an argument of ``op`` (its ``n`` and ``nets`` in any argument,
    text in the arguments `argument_form` names); what cannot be read exactly as Caffe2's C++ reads it
    is appended to ``problems`` (labelled ``where``, op ``index``), never skipped. `verify_net`'s walk
    (``problems`` a `_Problems`) parses text nets only while all it parsed stays within
    ``PYCUMSUM_OP_MAX_TEXT_BYTES``; `lower` walks nets as given."""
    op_type, found = _text(op.type), []
    for arg in op.arg:
        name = _text(arg.name)
        if arg.HasField("n"):
            found.append(NestedNet(arg, "n", 0, arg.n))
        found += [NestedNet(arg, "nets", position, inner) for position, inner in enumerate(arg.nets)]
        form = argument_form(op_type, name)
        if form == "netdef_or_text" and not arg.HasField("n") and arg.s:
            if isinstance(problems, _Problems) and problems.too_much_text(len(arg.s)):
                problems.append_over_budget(NetProblem(where, index, op_type, name, None,
                                           "Caffe2 may read this argument as a text NetDef, and it cannot be "
                                           "checked: with it the net's text nets pass {} bytes in all "
                                           "(PYCUMSUM_OP_MAX_TEXT_BYTES)".format(limit("PYCUMSUM_OP_MAX_TEXT_BYTES"))))
                continue
            try:
                found.append(NestedNet(arg, "s", 0, parse_text_netdef(arg.s)))
            except TextNetError as error:
                problems.append(NetProblem(where, index, op_type, name, None,
                                           "Caffe2 may read this argument as a text NetDef, and it cannot be "
                                           "checked: {}".format(error)))
        elif form == "backend":
            problems.append(NetProblem(where, index, op_type, name, None,
                                       "{} hands this net to an ONNXIFI backend, which verify_net cannot "
                                       "follow".format(op_type)))
    return found


def _check_builders(where, index, op_type, pickled, callable_at_load, problems, verified):
    from .ops.builders import BUILDERS, check_builder_call  # imported on use: a net without pickles needs no kernels

    allowed = frozenset(BUILDERS) | callable_at_load
    builders = []
    for name, data in pickled:
        if problems.too_many_pickle_bytes(len(data)):
            problems.append_over_budget(NetProblem(where, index, op_type, name, None,
                                       "not read: with it the net's builder pickles pass {} bytes in all "
                                       "(MAX_PICKLE_BYTES_TOTAL)".format(MAX_PICKLE_BYTES_TOTAL)))
            continue
        try:
            info = inspect_builder(data, allowed, callable_at_load)
        except RefusedPickle as refused:
            reason = refused.reason
            if refused.callable and refused.callable not in allowed:
                reason += " (neither a pycumsum_op builder nor listed in allow=)"
            problems.append(NetProblem(where, index, op_type, name, refused.callable, "the pickle " + reason))
            continue
        if info.builder in BUILDERS:
            try:
                check_builder_call(info.builder, info.args, info.kwargs)
            except Exception as error:  # the builder's own refusal: what CreateNet would raise
                problems.append(NetProblem(where, index, op_type, name, None,
                                           "the pickle calls {} with arguments it refuses (CreateNet would "
                                           "fail): {}".format(info.builder, error)))
                continue
        builders.append(info.builder)
    if len(builders) == len(pickled):
        verified.append(VerifiedOp(where, index, op_type, tuple(builders)))


def charge_declared_tensors(op, where: str, budget: TensorBudget) -> None:
    """Before Caffe2's shape inference or a workspace sees ``op``: `InputTooLarge` for a shape argument
    (`SHAPE_ARGUMENTS`) of more than `MAX_RANK` ints, and for a fill op's tensor (``shape`` and
    ``extra_shape``, element type from its type or ``dtype``, else 8 bytes) that ``budget`` refuses. A
    shape read from an input at run time (``input_as_shape``) is the run's to bound."""
    for arg in op.arg:
        name = _text(arg.name)
        if name in SHAPE_ARGUMENTS and len(arg.ints) > MAX_RANK:
            raise InputTooLarge("{} argument {!r} has {} entries, more than the {} dimensions a shape may have "
                                "(MAX_RANK)".format(where, name, len(arg.ints), MAX_RANK))
    op_type = _text(op.type)
    if not op_type.endswith("Fill"):
        return
    args = {_text(arg.name): arg for arg in op.arg}
    if "input_as_shape" in args and args["input_as_shape"].i:
        return
    shape = list(args["shape"].ints) if "shape" in args else []
    shape += list(args["extra_shape"].ints) if "extra_shape" in args else []
    dtype = _FILL_TYPES.get(op_type, args["dtype"].i if "dtype" in args else caffe2_pb2.TensorProto.FLOAT)
    budget.charge(shape, _ITEMSIZES.get(dtype, 8), "{} output".format(where))


def nested_label(where: str, nested: NestedNet) -> str:
    """The label of a nested net: its holder's label, the argument and the net's name."""
    return "{} arg {} > net '{}'".format(where, _label(nested.arg.name), _label(nested.netdef.name))


def _check_net(label, net, callable_at_load, problems, verified, python_ops, depth=0):
    if depth > MAX_NET_DEPTH:
        problems.append(NetProblem(label, -1, "", None, None,
                                   "nets nested more than {} levels deep".format(MAX_NET_DEPTH)))
        return
    if problems.too_many_ops(len(net.op)):
        problems.append_over_budget(NetProblem(label, -1, "", None, None, "more than {} ops in all nets (MAX_NET_OPS): "
                                                                          "not read".format(MAX_NET_OPS)))
        return
    for index, op in enumerate(net.op):
        where = "{} {}".format(label, _op_label(index, op))
        op_type = _text(op.type)
        charge_declared_tensors(op, where, problems.tensors)
        for nested in nested_nets(op, where, index, problems):
            _check_net(nested_label(where, nested), nested.netdef, callable_at_load, problems, verified, python_ops,
                       depth + 1)
        if not python_ops and op_type in PYTHON_OP_TYPES:
            problems.append(NetProblem(where, index, op_type, None, None,
                                       "a Python op, and this net must hold none (a lowered net runs without "
                                       "Python)"))
            continue
        names = [_text(arg.name) for arg in op.arg]
        for name in BUILDER_ARGS + ("token",):
            if names.count(name) > 1:
                problems.append(NetProblem(where, index, op_type, name, None,
                                           "the argument appears {} times".format(names.count(name))))
        pickled = [(name, arg.s) for name, arg in zip(names, op.arg) if name in BUILDER_ARGS and arg.s]
        if pickled:
            _check_builders(where, index, op_type, pickled, callable_at_load, problems, verified)
        elif "token" in names and op_type in PYTHON_OP_TYPES:
            token = _label(op.arg[names.index("token")].s)
            problems.append(NetProblem(
                where, index, op_type, "token", None,
                "token-form Python op (token {!r}): its function exists only in the process that "
                "built the net, so the net is not portable; build the op from a builder tuple "
                "net.Python((func, args, kwargs))".format(token)))
        elif op_type in PYTHON_OP_TYPES:
            problems.append(NetProblem(where, index, op_type, None, None,
                                       "Python op with neither pickled_builder nor token"))


def verify_net(net, allow=(), python_ops=True) -> List[VerifiedOp]:
    """Check every Python op's pickled builders without unpickling them for real.

    ``net`` is a NetDef, core.Net, PlanDef or MetaNetDef; every net Caffe2 would create from an op
    argument is checked too (`NET_ARGUMENTS`: If/While/Do/ONNXWhile nets, RecurrentNetwork step
    nets in NetDef or text form in forward and gradient ops; ``n`` / ``nets`` in any argument, text in
    any ``*_net`` argument), and one it cannot read is a problem. pycumsum_op's builders are always allowed, with the arguments they accept (a known
    scan, no unknown keywords, plain values, ints within int64). ``allow`` lists extra trusted
    callables as "module.qualname" strings or functions: allowing one grants code execution, as
    Caffe2 will call it with whatever arguments the pickle holds, at CreateNet or, if the pickle
    calls it, while unpickling. ``python_ops=False`` refuses every Python op, wherever it is nested
    (what a lowered net must pass). Returns the verified Python ops; raises `UnsafeNetError` naming
    every op index, op type and argument that is refused, and every token-form (non-portable) op
    (`NetOverBudget` when the net passes a budget: `MAX_NET_OPS`, `MAX_PICKLE_BYTES_TOTAL`,
    ``PYCUMSUM_OP_MAX_TEXT_BYTES``), and `InputTooLarge` as soon as the tensors its ops declare pass a
    cap (`charge_declared_tensors`: all nets of one call share one `TensorBudget`).
    """
    extra = _allow_names(allow)
    nets = _nets_of(net)
    name = _label(nets[0][1].name) if len(nets) == 1 else "<{} nets>".format(len(nets))
    problems, verified = _Problems("net '{}'".format(name)), []
    for label, netdef in nets:
        _check_net(label, netdef, extra, problems, verified, python_ops)
    if problems:
        if problems.over_budget:  # the budget first: a first line that says why the rest was not read
            others = [problem for problem in problems if problem not in problems.over_budget]
            raise NetOverBudget(name, (problems.over_budget + others)[:MAX_PROBLEMS], problems.total)
        raise UnsafeNetError(name, problems, problems.total)
    return verified


def is_text_path(path) -> bool:
    """Whether a net file name means text format (.pbtxt, .prototxt, .pbtext, .txt); the one list
    `load_net` and `save_net` share."""
    return os.fspath(path).lower().endswith(_TEXT_SUFFIXES)


def _parse_binary(data: bytes, netdef: caffe2_pb2.NetDef, origin: str) -> None:
    """``ParseFromString`` that fails unless all of ``data`` is a NetDef: `InputTooLarge` before parsing
    when the NetDef would pass ``PYCUMSUM_OP_MAX_PARSE_BYTES`` of memory or `wire_census`'s field limits,
    DecodeError for bytes that are no NetDef (the census refuses group tags, at which protobuf would stop
    early with a warning) and for fields a NetDef does not define.
    """
    try:
        check_parse(data, caffe2_pb2.NetDef, origin)
    except UnreadableMessage as error:
        raise DecodeError(error.reason) from None
    netdef.ParseFromString(data)
    if len(netdef.UnknownFields()):
        raise DecodeError("it has fields that a NetDef does not define")


def _parse(data: bytes, kind: Optional[str], origin: str) -> caffe2_pb2.NetDef:
    """Text is read as Caffe2's C++ reads it (`parse_text_netdef`: byte for byte), so the net verified is
    the net a C++ predictor reads from the same file; text with ``cuda_gpu_id`` is refused, as Caffe2's
    two C++ readers disagree on it (ParseFromString renames it, ReadProtoFromTextFile does not)."""
    if not data or data.isspace():
        raise ValueError("could not parse {} as a Caffe2 NetDef: it is empty".format(origin))
    errors = []
    if kind in (None, "text"):
        try:
            if b"cuda_gpu_id" in data:
                raise TextNetError("it holds 'cuda_gpu_id', which Caffe2's C++ text readers read differently")
            return parse_text_netdef(data)
        except TextNetError as error:
            errors.append("as text: {}".format(error))
    netdef = caffe2_pb2.NetDef()
    if kind in (None, "binary"):
        try:
            _parse_binary(data, netdef, origin)
            return netdef
        except InputTooLarge:
            raise
        except (DecodeError, RuntimeError, ValueError) as error:
            errors.append("as binary: {}".format(error))
    raise ValueError("could not parse {} as a Caffe2 NetDef ({})".format(origin, "; ".join(errors)))


def _read_capped(path: str, kind: Optional[str]) -> bytes:
    """The file's bytes, refused (`InputTooLarge`) before reading when it passes its cap: text files
    ``PYCUMSUM_OP_MAX_TEXT_BYTES``, others ``PYCUMSUM_OP_MAX_INPUT_BYTES`` (`parse_text_netdef` applies
    the text cap when it tries one of those as text)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        variable = "PYCUMSUM_OP_MAX_TEXT_BYTES" if kind == "text" else "PYCUMSUM_OP_MAX_INPUT_BYTES"
        check_size(size, "net file {!r}".format(path), variable)
        data = handle.read(size + 1)
    check_size(len(data), "net file {!r}".format(path), variable)  # it grew while being read
    return data


def load_net(source, allow=(), verify=True) -> caffe2_pb2.NetDef:
    """Parse a NetDef and `verify_net` it (unless ``verify=False``); returns the NetDef.

    ``source``: bytes of a binary NetDef (``SerializeToString()``), a path to a .pb file or a
    .pbtxt / .prototxt text file (other names: text if it parses, else binary), or the text form
    itself as a str. Raises `UnsafeNetError` for refused nets; ValueError unless all of it parses
    (empty, cut short, or not a NetDef), `pycumsum_op.input_limits.InputTooLarge` (a ValueError) for input
    over its size cap, checked before parsing; FileNotFoundError / IsADirectoryError / PermissionError.
    """
    if isinstance(source, caffe2_pb2.NetDef):
        netdef = source
    elif isinstance(source, (bytes, bytearray, memoryview)):
        check_size(len(source), "the net given as bytes")
        netdef = _parse(bytes(source), "binary", "the given bytes")
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "load_net: is a directory, not a net file", path)
        if os.path.isfile(path):
            kind = ("text" if is_text_path(path) else
                    "binary" if path.lower().endswith(_BINARY_SUFFIXES) else None)
            netdef = _parse(_read_capped(path, kind), kind, repr(path))
        elif isinstance(source, str) and any(mark in source for mark in "{:\n"):
            netdef = _parse(source.encode("utf-8"), "text", "the given text (it is not a file path)")
        else:
            raise FileNotFoundError(errno.ENOENT, "load_net: no such file", path)
    else:
        raise TypeError("load_net takes bytes, a path or NetDef text, got {}".format(type(source).__name__))
    if verify:
        verify_net(netdef, allow=allow)
    return netdef


def serialized_net(netdef, path) -> bytes:
    """The bytes `save_net` writes to ``path``: text format for the text suffixes `load_net` reads as
    text (.pbtxt, .prototxt, .pbtext, .txt), binary otherwise. Raises `UnsafeNetError` (with `load_net`'s
    message) for token-form Python ops, which no process but the one that built the net can run."""
    if hasattr(netdef, "Proto"):
        netdef = netdef.Proto()
    try:
        verify_net(netdef)
    except UnsafeNetError as error:  # other problems are load_net's to judge (allow=)
        tokens = [problem for problem in error.problems if problem.arg == "token"]
        if tokens:
            raise UnsafeNetError(error.net_name, tokens) from None
    return text_format.MessageToString(netdef).encode("utf-8") if is_text_path(path) else netdef.SerializeToString()


def save_net(netdef, path) -> None:
    """Write a NetDef (or core.Net) to ``path`` as `serialized_net` says, whole or not at all and never
    through a symlink (a temporary file renamed into place). Raises OSError and `UnsafeNetError`."""
    data = serialized_net(netdef, path)
    write_atomically(path, lambda handle: handle.write(data))
