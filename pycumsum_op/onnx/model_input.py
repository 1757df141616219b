"""ONNX models from outside: external data read from the model's folder only, sizes capped first.

onnx 1.10's ``onnx.load`` follows a tensor's external-data ``location`` wherever it points
(``../``, an absolute path, a symlink), so a model could copy any readable file into the nets it
becomes. `load_model` opens the model's folder once and reads the model file and each tensor's
external data through that descriptor: a relative location resolved by the kernel beneath the folder
(``openat2`` with ``RESOLVE_BENEATH``: a symlink is followed only while it stays inside, checked in the
same call that opens the file, so no path can be swapped between the check and the read; where Linux
has no ``openat2``, before 5.6, every component is opened with ``O_NOFOLLOW`` and symlinks are refused),
naming a regular file, with ``offset`` / ``length`` inside that file. The
model file and all its external data together are capped by ``PYCUMSUM_OP_MAX_INPUT_BYTES``, and
the memory the model would take once parsed by ``PYCUMSUM_OP_MAX_PARSE_BYTES``, counted from its bytes
first (`pycumsum_op.input_limits`). Anything else raises `ExternalDataError` (a ValueError) naming the
tensor, the location and why.

`load_zip_archive` reads Caffe2's zip format (``CumSumBackend.prepare_zip_archive``) within the same cap.

`check_tensors` is the cost model of a model, checked before onnx's checker or shape inference sees it:
every tensor the model declares (its inputs, which the backend fills with ones, outputs, value infos,
initializers, constants in attributes, sparse tensors at their dense shape, subgraphs' too) charged by
element count times element size to one `pycumsum_op.input_limits.TensorBudget` (each within
``PYCUMSUM_OP_MAX_TENSOR_BYTES``, all within ``PYCUMSUM_OP_MAX_DECLARED_BYTES``, at most ``MAX_RANK``
dimensions), no constant read as a shape (its op's declared ``shape_input``) with more entries than ``MAX_RANK``
(shape inference would make a value of that rank for every node after it), no dim that a translation makes one
entry or op per (its op's declared ``counted``) over ``MAX_RANK``, taken alone (a shape holding a 0 is charged 0
bytes, whatever its other dims), and no tensor left pointing at external data (onnx would read it from wherever it
points).
`charge_inferred` adds the values ONNX shape inference finds (`pycumsum_op.onnx.inference`) to the same budget,
before Caffe2's backend allocates anything.
"""
import ctypes
import errno
import os
import stat
import zipfile

import onnx
from onnx import TensorProto, mapping

from ..input_limits import MAX_RANK, InputTooLarge, TensorBudget, check_parse, check_size, shape_text
from .ops import DECLARATIONS


class ExternalDataError(ValueError):
    """A tensor's external data that is not read: outside the model's folder, or not inside its file."""


def _graph_tensors(graph):
    """Every TensorProto of ``graph``: initializers, sparse initializers, node attributes, subgraphs."""
    for tensor in graph.initializer:
        yield tensor
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("sparse_tensor"):
                yield attribute.sparse_tensor.values
                yield attribute.sparse_tensor.indices
            for sparse in attribute.sparse_tensors:
                yield sparse.values
                yield sparse.indices
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                yield from _graph_tensors(sub)


def _external(tensor) -> bool:
    return tensor.data_location == TensorProto.EXTERNAL


def _whole_number(text: str, key: str, where: str) -> int:
    try:
        value = int(text) if len(text) <= 20 else -1  # (int() of a long decimal string is quadratic)
    except ValueError:
        value = -1
    if value < 0:
        raise ExternalDataError("{}: external data {} {!r} is not a whole number".format(where, key, text))
    return value


def _parts(location: str, where: str) -> list:
    """The components of ``location`` if it is a relative path that does not climb out with '..'."""
    parts = location.replace("\\", "/").split("/")
    if not location or "\0" in location:
        raise ExternalDataError("{}: external data location {!r} is empty or holds a NUL byte".format(where, location))
    if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in parts[0]:
        raise ExternalDataError("{}: external data location {!r} is an absolute path; only paths relative to "
                                "the model's folder are read".format(where, location))
    if ".." in parts:
        raise ExternalDataError("{}: external data location {!r} climbs out with '..'; only files inside the "
                                "model's folder are read".format(where, location))
    parts = [part for part in parts if part not in ("", ".")]
    if not parts:
        raise ExternalDataError("{}: external data location {!r} names the model's folder, not a file in it".format(
            where, location))
    return parts


class _OpenHow(ctypes.Structure):
    """Linux's ``struct open_how`` (openat2(2))."""
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_SYS_OPENAT2 = 437  # the same number on every Linux architecture
_RESOLVE_NO_MAGICLINKS, _RESOLVE_BENEATH = 0x02, 0x08
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long


def _open_beneath(folder: int, parts: list, flags: int) -> int:
    """A descriptor of ``parts`` opened beneath the directory descriptor ``folder`` (see the module); OSError
    with errno EXDEV for a path that leads out of it."""
    how = _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    descriptor = _LIBC.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(folder),
                               ctypes.c_char_p(os.fsencode("/".join(parts))), ctypes.byref(how),
                               ctypes.c_size_t(ctypes.sizeof(how)))
    if descriptor >= 0:
        return descriptor
    number = ctypes.get_errno()
    if number not in (errno.ENOSYS, errno.EPERM):  # EPERM: a seccomp filter that does not know openat2
        raise OSError(number, os.strerror(number))
    current = os.dup(folder)
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            os.close(current)
            current = inner
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
    finally:
        os.close(current)


def _regular(descriptor: int, what: str):
    """``descriptor`` as a binary file object if it is a regular file, else `ExternalDataError` (closed)."""
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise ExternalDataError("{} is not a regular file".format(what))
    return os.fdopen(descriptor, "rb")


def _read_external(tensor, folder: int, where: str, used: int, model_name: str) -> int:
    """Put ``tensor``'s external bytes, read beneath the folder descriptor ``folder``, into ``raw_data`` unless
    the model's ``used`` bytes and these pass the cap; returns how many bytes were read."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    unknown = sorted(set(entries) - {"location", "offset", "length", "checksum", "basepath"})
    if unknown:
        raise ExternalDataError("{}: unknown external data key(s) {}".format(where, ", ".join(unknown)))
    location = entries.get("location", "")
    parts = _parts(location, where)
    offset = _whole_number(entries.get("offset", "0"), "offset", where)
    try:
        descriptor = _open_beneath(folder, parts, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.EXDEV:
            raise ExternalDataError("{}: external data location {!r} is a symlink leading out of the model's "
                                    "folder; only files inside it are read".format(where, location)) from None
        raise ExternalDataError("{}: cannot open external data {!r}: {}".format(
            where, location, error.strerror or error)) from None
    handle = _regular(descriptor, "{}: external data {!r}".format(where, location))
    with handle:
        status = os.fstat(handle.fileno())
        length = (_whole_number(entries["length"], "length", where) if "length" in entries
                  else max(status.st_size - offset, 0))
        if offset + length > status.st_size:
            raise ExternalDataError("{}: external data {!r} offset {} + length {} passes the end of the {}-byte "
                                    "file".format(where, location, offset, length, status.st_size))
        check_size(used + length, "{} with its external data (up to {})".format(model_name, where))
        handle.seek(offset)
        data = handle.read(length)
    if len(data) != length:
        raise ExternalDataError("{}: external data {!r} changed while it was read".format(where, location))
    tensor.raw_data = data
    del tensor.external_data[:]
    tensor.data_location = TensorProto.DEFAULT
    return length


def load_model(path) -> onnx.ModelProto:
    """An ONNX model file with its external data read from the model's folder only (see the module).

    Raises FileNotFoundError / PermissionError / IsADirectoryError, `ExternalDataError`,
    `pycumsum_op.input_limits.InputTooLarge`, `pycumsum_op.wire_census.UnreadableMessage` (a ValueError)
    for bytes that are no ModelProto, or ``google.protobuf.message.DecodeError``."""
    path = os.fspath(path)
    folder = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        descriptor = os.open(os.path.basename(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        with _regular(descriptor, "ONNX model {!r}".format(path)) as handle:
            status = os.fstat(handle.fileno())
            check_size(status.st_size, "ONNX model {!r}".format(path))
            data = handle.read(status.st_size + 1)
        check_size(len(data), "ONNX model {!r}".format(path))
        check_parse(data, onnx.ModelProto, "ONNX model {!r}".format(path))
        model = onnx.load_model_from_string(data)
        used = len(data)
        for tensor in _graph_tensors(model.graph):
            if _external(tensor):
                where = "tensor {!r}".format(tensor.name[:200])
                used += _read_external(tensor, folder, where, used, "ONNX model {!r}".format(path))
    finally:
        os.close(folder)
    return model


def load_zip_archive(file):
    """``(model, {name: bytes})`` from Caffe2's zip format (``__MODEL_PROTO`` and one member per tensor whose
    ``raw_data`` is ``b"__EXTERNAL"``), what ``Caffe2Backend.prepare_zip_archive`` reads; the members' declared
    sizes together within ``PYCUMSUM_OP_MAX_INPUT_BYTES`` before any is read, and no external-data files
    (stock onnx.load would resolve them against the current folder)."""
    with zipfile.ZipFile(file, mode="r") as archive:
        members = archive.infolist()
        check_size(sum(member.file_size for member in members), "ONNX zip archive {!r}".format(str(file)[:200]))
        if "__MODEL_PROTO" not in archive.namelist():
            raise ValueError("ONNX zip archive {!r} has no __MODEL_PROTO member".format(str(file)[:200]))
        data = archive.read("__MODEL_PROTO")
        check_parse(data, onnx.ModelProto, "ONNX zip archive {!r}".format(str(file)[:200]))
        model = onnx.load_model_from_string(data)
        raw_values = {member.filename: archive.read(member) for member in members
                      if member.filename != "__MODEL_PROTO"}
    return model, raw_values


def value_infos(graph):
    for info in list(graph.input) + list(graph.output) + list(graph.value_info):
        yield info
    for node in graph.node:
        for attribute in node.attribute:
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                yield from value_infos(sub)


def _itemsize(elem_type: int) -> int:
    dtype = mapping.TENSOR_TYPE_TO_NP_TYPE.get(elem_type)
    return 8 if dtype is None or dtype.kind == "O" else dtype.itemsize


#: Node attributes that shape inference reads as one entry per dimension.
SHAPE_ATTRIBUTES = frozenset(["axes", "perm"])


def graphs(graph):
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                yield from graphs(sub)


def _sparse_tensors(graph):
    """The SparseTensorProtos of ``graph`` itself (initializers, node attributes), not of its subgraphs."""
    yield from graph.sparse_initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("sparse_tensor"):
                yield attribute.sparse_tensor
            yield from attribute.sparse_tensors


def _check_shape_sources(graph) -> None:
    """`InputTooLarge` for a constant read as a shape (a declaration's ``shape_input``) or an attribute read as one
    entry per dimension (`SHAPE_ATTRIBUTES`) with more than ``MAX_RANK`` entries: the rank of every value inferred
    after it."""
    constants = {tensor.name: tensor for tensor in graph.initializer}
    for node in graph.node:
        label = "ONNX {} node {!r}".format(node.op_type[:100], (node.name or next(iter(node.output), ""))[:200])
        for attribute in node.attribute:
            if attribute.name in SHAPE_ATTRIBUTES and len(attribute.ints) > MAX_RANK:
                raise InputTooLarge("{} attribute {!r} has {} entries, more than the {} dimensions a shape may have "
                                    "(MAX_RANK)".format(label, attribute.name, len(attribute.ints), MAX_RANK))
            if node.op_type == "Constant" and attribute.HasField("t") and node.output:
                constants[node.output[0]] = attribute.t
        declaration = DECLARATIONS.get(node.op_type)
        position = declaration.shape_input if declaration is not None else None
        if position is None or len(node.input) <= position or node.input[position] not in constants:
            continue
        entries = 1
        for dim in constants[node.input[position]].dims:
            entries *= max(int(dim), 0)
            if entries > MAX_RANK:
                raise InputTooLarge("{} reads constant {!r} as a shape, and it has more than the {} dimensions a "
                                    "shape may have (MAX_RANK)".format(label, node.input[position][:200], MAX_RANK))


def _counted_dims(op_type: str) -> tuple:
    """The node inputs of ``op_type`` whose dims count what shape inference or the translation makes one entry,
    argument or op per (a shape's dimensions, a Slice's axes, ScatterND's index columns), constants or not: its
    declaration's ``counted`` and its ``shape_input`` (input, dim, what it names, what it counts), each dim at most
    ``MAX_RANK``."""
    declaration = DECLARATIONS.get(op_type)
    if declaration is None:
        return ()
    shape = () if declaration.shape_input is None else ((declaration.shape_input, 0, "read as a shape", "entries"),)
    return declaration.counted + shape


def _check_counted_dims(graph) -> None:
    """`InputTooLarge` for a node input of `_counted_dims` declared with that dim over ``MAX_RANK``: each dim taken
    alone, so that a 0 elsewhere in the shape (an empty tensor, charged 0 bytes) leaves none of them free."""
    declared = {tensor.name: list(tensor.dims) for tensor in graph.initializer}
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        dims = value_dims(info)
        if dims is not None:
            declared.setdefault(info.name, dims)
    for node in graph.node:
        for position, dim, what, counted in _counted_dims(node.op_type):
            dims = declared.get(node.input[position]) if position < len(node.input) else None
            if dims and int(dims[dim]) > MAX_RANK:
                raise InputTooLarge("ONNX {} node {!r}: input {} ({}) {!r} is declared with dims {}: {} {}, more than "
                                    "the {} dimensions a shape may have (MAX_RANK)".format(
                                        node.op_type[:100], (node.name or next(iter(node.output), ""))[:200],
                                        position, what, node.input[position][:200], shape_text(dims), dims[dim],
                                        counted, MAX_RANK))


def value_dims(info, open_dim=0):
    """The dims an ONNX value info declares (open ones as ``open_dim``: 0, as Caffe2's backend allocates them), or
    None."""
    if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
        return [dim.dim_value if dim.HasField("dim_value") else open_dim for dim in info.type.tensor_type.shape.dim]
    return None


def _charge_values(graph, budget: TensorBudget) -> None:
    for info in value_infos(graph):
        dims = value_dims(info)
        if dims is not None:
            budget.charge(dims, _itemsize(info.type.tensor_type.elem_type), "ONNX value {!r}".format(info.name[:200]),
                          name=info.name)


def _model_budget(model) -> TensorBudget:
    """The `TensorBudget` of ``model``'s declared tensors (see the module)."""
    budget = TensorBudget("ONNX model {!r}".format(model.graph.name[:200]))
    for graph in graphs(model.graph):
        _check_shape_sources(graph)
        _check_counted_dims(graph)
        for sparse in _sparse_tensors(graph):  # its dense shape: what densifying it allocates
            budget.charge(sparse.dims, _itemsize(sparse.values.data_type),
                          "ONNX sparse tensor {!r}".format(sparse.values.name[:200]), name=sparse.values.name or None)
    for tensor in _graph_tensors(model.graph):
        where = "ONNX tensor {!r}".format(tensor.name[:200])
        if _external(tensor):
            raise ExternalDataError("{} keeps its data in an external file, which is read only by "
                                    "pycumsum_op.onnx.load_model(path) (from the model's folder)".format(where))
        budget.charge(tensor.dims, _itemsize(tensor.data_type), where, name=tensor.name or None)
    _charge_values(model.graph, budget)
    return budget


def check_tensors(model) -> TensorBudget:
    """`ExternalDataError` for a tensor still pointing at external data; `InputTooLarge` for the model's
    declared tensors over the caps (see the module). Reads no file and infers no shape (cheap enough to run
    before onnx's checker, which would try to open the external file, and shape inference). Returns the budget,
    which `charge_inferred` goes on charging."""
    return _model_budget(model)


def charge_inferred(inferred, budget: TensorBudget) -> None:
    """The values ONNX shape inference found (``inferred``: the model's inferred structure) charged to ``budget``,
    and their dims counted (`_counted_dims`)."""
    for graph in graphs(inferred.graph):
        _check_counted_dims(graph)
    _charge_values(inferred.graph, budget)
