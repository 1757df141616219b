"""Load saved Caffe2 nets without letting their Python ops run code you did not approve.

A Caffe2 ``Python`` op saved with a builder carries ``pickled_builder`` (and
``pickled_grad_builder``): ``pickle.dumps((func, args, kwargs))``. Caffe2 unpickles it with
plain pickle and calls ``func(*args, **kwargs)`` as soon as the net is *created*
(``workspace.CreateNet``, ``RunNetOnce``, ``Predictor``), so a NetDef from an untrusted source
can run any code. `verify_net` reads those pickles with a restricted unpickler that imports
and calls nothing, and raises `UnsafeNetError` unless every callable is one of pycumsum_op's
builders or listed in ``allow``. `load_net` parses a .pb / .pbtxt and verifies it; `save_net` writes one.

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
import warnings
from typing import List, NamedTuple, Optional, Tuple

from caffe2.proto import caffe2_pb2
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from ._safe_unpickle import RefusedPickle, inspect_builder

#: The builders pycumsum_op writes into nets (stable import paths, always allowed).
PYCUMSUM_BUILDERS = frozenset([
    "pycumsum_op.ops.builders.scan_forward",
    "pycumsum_op.ops.builders.scan_backward",
])
#: Op types whose constructor unpickles ``pickled_builder`` / ``pickled_grad_builder``.
PYTHON_OP_TYPES = frozenset(["Python", "PythonGradient", "PythonDLPack", "PythonDLPackGradient"])
BUILDER_ARGS = ("pickled_builder", "pickled_grad_builder")
_TEXT_SUFFIXES = (".pbtxt", ".prototxt", ".pbtext", ".txt")
_BINARY_SUFFIXES = (".pb", ".bin", ".netdef")


class NetProblem(NamedTuple):
    """One reason a net was refused."""
    where: str              # e.g. "net 'm' op 3 (Python 'PyCumSum')"; nested nets are chained with " > "
    op_index: int           # index of the op in the net that holds it
    op_type: str
    arg: Optional[str]      # "pickled_builder", "pickled_grad_builder", "token" or None
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
    """A net's Python ops reference callables that are not allowed, or cannot be loaded elsewhere.

    ``problems`` lists each `NetProblem` (op index, op type, argument, callable, reason).
    """

    def __init__(self, net_name: str, problems: List[NetProblem]):
        self.net_name = net_name
        self.problems = list(problems)
        lines = ["refusing net '{}': {} problem(s) with its Python ops (Caffe2 unpickles and calls "
                 "their pickled builders as soon as the net is created):".format(net_name, len(self.problems))]
        lines += ["  " + str(problem) for problem in self.problems]
        named = sorted({p.callable for p in self.problems if p.callable})
        if named:
            lines.append("Pass allow=[{}] only if you trust where this net came from.".format(
                ", ".join(repr(name) for name in named)))
        super().__init__("\n".join(lines))


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
        return [("net '{}'".format(net.name), net)]
    if isinstance(net, caffe2_pb2.PlanDef):
        return [("plan '{}' net '{}'".format(net.name, n.name), n) for n in net.network]
    descriptor = getattr(net, "DESCRIPTOR", None)
    if descriptor is not None and descriptor.full_name.endswith("MetaNetDef"):
        found = [("meta net {!r}".format(kv.key), kv.value) for kv in net.nets]
        for kv in net.plans:
            found += [("meta plan {!r} net '{}'".format(kv.key, n.name), n) for n in kv.value.network]
        return found
    raise TypeError("verify_net takes a NetDef, core.Net, PlanDef or MetaNetDef, got {}".format(
        type(net).__name__))


def _nested_nets(arg) -> List[caffe2_pb2.NetDef]:
    """NetDefs carried by an op argument (If/While/Do/RecurrentNetwork), in proto or text form."""
    nested = []
    if arg.HasField("n"):
        nested.append(arg.n)
    nested.extend(arg.nets)
    if not arg.name.endswith(("net", "nets")):  # e.g. RecurrentNetwork's step_net as text
        return nested
    for text in ([arg.s] if arg.HasField("s") else []) + list(arg.strings):
        if not text:
            continue
        parsed = caffe2_pb2.NetDef()
        try:
            text_format.Parse(text.decode("utf-8"), parsed)
        except Exception:  # not a text NetDef: an ordinary string argument
            continue
        if len(parsed.op):
            nested.append(parsed)
    return nested


def _op_label(index: int, op) -> str:
    return "op {} ({}{})".format(index, op.type, " '{}'".format(op.name) if op.name else "")


def _check_net(label, net, allowed, callable_at_load, problems, verified, depth=0):
    if depth > 32:
        problems.append(NetProblem(label, -1, "", None, None, "nets nested more than 32 levels deep"))
        return
    for index, op in enumerate(net.op):
        where = "{} {}".format(label, _op_label(index, op))
        for arg in op.arg:
            for inner in _nested_nets(arg):
                _check_net("{} arg {} > net '{}'".format(where, arg.name, inner.name), inner, allowed,
                           callable_at_load, problems, verified, depth + 1)
        names = [arg.name for arg in op.arg]
        for name in BUILDER_ARGS + ("token",):
            if names.count(name) > 1:
                problems.append(NetProblem(where, index, op.type, name, None,
                                           "the argument appears {} times".format(names.count(name))))
        args = {arg.name: arg for arg in op.arg}
        pickled = [(arg.name, arg.s) for arg in op.arg if arg.name in BUILDER_ARGS and arg.s]
        if not pickled and op.type not in PYTHON_OP_TYPES:
            continue
        if not pickled:
            if "token" in args:
                token = args["token"].s.decode("utf-8", "replace")
                problems.append(NetProblem(
                    where, index, op.type, "token", None,
                    "token-form Python op (token {!r}): its function exists only in the process that "
                    "built the net, so the net is not portable; build the op from a builder tuple "
                    "net.Python((func, args, kwargs))".format(token)))
            else:
                problems.append(NetProblem(where, index, op.type, None, None,
                                           "Python op with neither pickled_builder nor token"))
            continue
        builders = []
        for name, data in pickled:
            try:
                builders.append(inspect_builder(data, allowed, callable_at_load).builder)
            except RefusedPickle as refused:
                reason = refused.reason
                if refused.callable and refused.callable not in allowed:
                    reason += " (neither a pycumsum_op builder nor listed in allow=)"
                problems.append(NetProblem(where, index, op.type, name, refused.callable,
                                           "the pickle " + reason))
        if len(builders) == len(pickled):
            verified.append(VerifiedOp(where, index, op.type, tuple(builders)))


def verify_net(net, allow=()) -> List[VerifiedOp]:
    """Check every Python op's pickled builders without unpickling them for real.

    ``net`` is a NetDef, core.Net, PlanDef or MetaNetDef (nested If/While/RecurrentNetwork nets
    are checked too). ``allow`` lists extra trusted callables as "module.qualname" strings or
    functions; they may be builders and may be called while unpickling (e.g.
    ``numpy.core.multiarray._reconstruct`` for array arguments). pycumsum_op's builders are
    always allowed. Returns the verified Python ops; raises `UnsafeNetError` naming every op
    index, op type and callable that is refused, and every token-form (non-portable) op.
    """
    extra = _allow_names(allow)
    allowed = PYCUMSUM_BUILDERS | extra
    problems, verified = [], []
    nets = _nets_of(net)
    for label, netdef in nets:
        _check_net(label, netdef, allowed, extra, problems, verified)
    if problems:
        raise UnsafeNetError(nets[0][1].name if len(nets) == 1 else "<{} nets>".format(len(nets)), problems)
    return verified


def is_text_path(path) -> bool:
    """Whether a net file name means text format (.pbtxt, .prototxt, .pbtext, .txt); the one list
    `load_net` and `save_net` share."""
    return os.fspath(path).lower().endswith(_TEXT_SUFFIXES)


def _parse_binary(data: bytes, netdef: caffe2_pb2.NetDef) -> None:
    """``ParseFromString`` that fails, quietly, unless all of ``data`` is a NetDef.

    protobuf stops early at a stray end-group tag and only warns ("Unexpected end-group tag:
    Not all data was converted"); a NetDef never has fields NetDef does not define.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # reported below, as an error
        consumed = netdef.ParseFromString(data)
    if consumed != len(data):
        raise DecodeError("only its first {} of {} bytes parse (then an unexpected end-group tag)".format(
            consumed, len(data)))
    if len(netdef.UnknownFields()):
        raise DecodeError("it has fields that a NetDef does not define")


def _parse(data: bytes, kind: Optional[str], origin: str) -> caffe2_pb2.NetDef:
    if not data.strip():
        raise ValueError("could not parse {} as a Caffe2 NetDef: it is empty".format(origin))
    netdef = caffe2_pb2.NetDef()
    errors = []
    if kind in (None, "text"):
        try:
            text_format.Parse(data.decode("utf-8"), netdef)
            return netdef
        except Exception as error:
            errors.append("as text: {}".format(error))
            netdef.Clear()
    if kind in (None, "binary"):
        try:
            _parse_binary(data, netdef)
            return netdef
        except (DecodeError, RuntimeError, ValueError) as error:
            errors.append("as binary: {}".format(error))
    raise ValueError("could not parse {} as a Caffe2 NetDef ({})".format(origin, "; ".join(errors)))


def load_net(source, allow=(), verify=True) -> caffe2_pb2.NetDef:
    """Parse a NetDef and `verify_net` it (unless ``verify=False``); returns the NetDef.

    ``source``: bytes of a binary NetDef (``SerializeToString()``), a path to a .pb file or a
    .pbtxt / .prototxt text file (other names: text if it parses, else binary), or the text form
    itself as a str. Raises `UnsafeNetError` for refused nets; ValueError unless all of it parses
    (empty, cut short, or not a NetDef); FileNotFoundError / IsADirectoryError / PermissionError.
    """
    if isinstance(source, caffe2_pb2.NetDef):
        netdef = source
    elif isinstance(source, (bytes, bytearray, memoryview)):
        netdef = _parse(bytes(source), "binary", "the given bytes")
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "load_net: is a directory, not a net file", path)
        if os.path.isfile(path):
            with open(path, "rb") as handle:
                data = handle.read()
            kind = ("text" if is_text_path(path) else
                    "binary" if path.lower().endswith(_BINARY_SUFFIXES) else None)
            netdef = _parse(data, kind, repr(path))
        elif isinstance(source, str) and any(mark in source for mark in "{:\n"):
            netdef = _parse(source.encode("utf-8"), "text", "the given text (it is not a file path)")
        else:
            raise FileNotFoundError(errno.ENOENT, "load_net: no such file", path)
    else:
        raise TypeError("load_net takes bytes, a path or NetDef text, got {}".format(type(source).__name__))
    if verify:
        verify_net(netdef, allow=allow)
    return netdef


def save_net(netdef, path) -> None:
    """Write a NetDef (or core.Net) to ``path``: text format for the text suffixes `load_net`
    reads as text (.pbtxt, .prototxt, .pbtext, .txt), binary otherwise. Raises OSError."""
    if hasattr(netdef, "Proto"):
        netdef = netdef.Proto()
    if is_text_path(path):
        with open(path, "w") as handle:
            handle.write(text_format.MessageToString(netdef))
    else:
        with open(path, "wb") as handle:
            handle.write(netdef.SerializeToString())
