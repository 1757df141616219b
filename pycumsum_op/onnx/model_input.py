"""ONNX models from outside: external data read from the model's folder only, sizes capped first.

onnx 1.10's ``onnx.load`` follows a tensor's external-data ``location`` wherever it points
(``../``, an absolute path, a symlink), so a model could copy any readable file into the nets it
becomes. `load_model` reads the model without its external data and resolves each location
itself: a relative path inside the model's folder, naming a regular file there (a symlink is
followed only if it stays inside the folder), with ``offset`` / ``length`` inside that file. The
model file and all its external data together are capped by ``PYCUMSUM_OP_MAX_INPUT_BYTES``, and
the memory the model would take once parsed by ``PYCUMSUM_OP_MAX_PARSE_BYTES``, counted from its bytes
first (`pycumsum_op.input_limits`). Anything else raises `ExternalDataError` (a ValueError) naming the
tensor, the location and why.

`load_zip_archive` reads Caffe2's zip format (``CumSumBackend.prepare_zip_archive``) within the same cap.

`check_model` is what `prepare` / `to_caffe2` check before Caffe2's backend allocates anything:
every tensor size the model declares or ONNX shape inference finds (its inputs, which the backend
fills with ones, outputs, initializers and intermediate values) within
``PYCUMSUM_OP_MAX_TENSOR_BYTES``, and no tensor left pointing at external data (onnx would read it
from wherever it points).
"""
import os
import stat
import zipfile

import onnx
from onnx import TensorProto, mapping

from ..input_limits import check_parse, check_size, check_tensor


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


def _resolve(location: str, folder: str, where: str) -> str:
    """The real path of ``location`` if it names a file inside ``folder`` (a real path)."""
    parts = location.replace("\\", "/").split("/")
    if not location or "\0" in location:
        raise ExternalDataError("{}: external data location {!r} is empty or holds a NUL byte".format(where, location))
    if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in parts[0]:
        raise ExternalDataError("{}: external data location {!r} is an absolute path; only paths relative to "
                                "the model's folder are read".format(where, location))
    if ".." in parts:
        raise ExternalDataError("{}: external data location {!r} climbs out with '..'; only files inside the "
                                "model's folder are read".format(where, location))
    real = os.path.realpath(os.path.join(folder, *parts))
    if os.path.commonpath([real, folder]) != folder:
        raise ExternalDataError("{}: external data location {!r} is a symlink leading out of the model's folder "
                                "(to {!r}); only files inside it are read".format(where, location, real))
    return real


def _open_regular(path: str, what: str, flags: int = 0):
    """``path`` open for reading (binary) if it is a regular file, else `ExternalDataError`; never blocks
    on a FIFO."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | flags)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise ExternalDataError("{} is not a regular file".format(what))
    return os.fdopen(descriptor, "rb")


def _read_external(tensor, folder: str, where: str, used: int, model_name: str) -> int:
    """Put ``tensor``'s external bytes into ``raw_data`` unless the model's ``used`` bytes and these pass
    the cap; returns how many bytes were read."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    unknown = sorted(set(entries) - {"location", "offset", "length", "checksum", "basepath"})
    if unknown:
        raise ExternalDataError("{}: unknown external data key(s) {}".format(where, ", ".join(unknown)))
    location = entries.get("location", "")
    path = _resolve(location, folder, where)
    offset = _whole_number(entries.get("offset", "0"), "offset", where)
    try:
        handle = _open_regular(path, "{}: external data {!r}".format(where, location), os.O_NOFOLLOW)
    except OSError as error:
        raise ExternalDataError("{}: cannot open external data {!r}: {}".format(
            where, location, error.strerror or error)) from None
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
    with _open_regular(path, "ONNX model {!r}".format(path)) as handle:
        status = os.fstat(handle.fileno())
        check_size(status.st_size, "ONNX model {!r}".format(path))
        data = handle.read(status.st_size + 1)
    check_size(len(data), "ONNX model {!r}".format(path))
    check_parse(data, onnx.ModelProto, "ONNX model {!r}".format(path))
    model = onnx.load_model_from_string(data)
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    used = len(data)
    for tensor in _graph_tensors(model.graph):
        if _external(tensor):
            where = "tensor {!r}".format(tensor.name[:200])
            used += _read_external(tensor, folder, where, used, "ONNX model {!r}".format(path))
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


def _value_infos(graph):
    for info in list(graph.input) + list(graph.output) + list(graph.value_info):
        yield info
    for node in graph.node:
        for attribute in node.attribute:
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                yield from _value_infos(sub)


def _itemsize(elem_type: int) -> int:
    dtype = mapping.TENSOR_TYPE_TO_NP_TYPE.get(elem_type)
    return 8 if dtype is None or dtype.kind == "O" else dtype.itemsize


def check_tensors(model) -> None:
    """`ExternalDataError` for a tensor still pointing at external data; `InputTooLarge` for a tensor the
    model holds over ``PYCUMSUM_OP_MAX_TENSOR_BYTES``. Reads no file and infers no shape (cheap enough
    to run before onnx's checker, which would try to open the external file)."""
    for tensor in _graph_tensors(model.graph):
        where = "ONNX tensor {!r}".format(tensor.name[:200])
        if _external(tensor):
            raise ExternalDataError("{} keeps its data in an external file, which is read only by "
                                    "pycumsum_op.onnx.load_model(path) (from the model's folder)".format(where))
        check_tensor(tensor.dims, _itemsize(tensor.data_type), where)


def check_model(model) -> None:
    """`check_tensors`, then `InputTooLarge` for a declared or inferred value over
    ``PYCUMSUM_OP_MAX_TENSOR_BYTES`` (see the module)."""
    check_tensors(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # as Caffe2's backend: go on with the shapes the model declares
        inferred = model
    for graph in (model.graph, inferred.graph):
        for info in _value_infos(graph):
            if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
                dims = [dim.dim_value for dim in info.type.tensor_type.shape.dim]
                check_tensor(dims, _itemsize(info.type.tensor_type.elem_type),
                             "ONNX value {!r}".format(info.name[:200]))
