"""The caps on what pycumsum_op reads from outside, checked before anything is parsed or allocated.

Each cap has a default and an environment variable that overrides it (a whole number of bytes, read
on every check, so a running program can change it):

- ``PYCUMSUM_OP_MAX_INPUT_BYTES`` (default 1 GiB): a binary net file or bytes (`load_net`), an
  ONNX model file and all its external data together (`pycumsum_op.onnx.load_model`);
- ``PYCUMSUM_OP_MAX_PARSE_BYTES`` (default 2 GiB): the memory such a binary net or ONNX model would take
  once parsed, counted from its bytes before parsing (`pycumsum_op.wire_census`): protobuf holds a
  message made of empty ops in about 100 bytes of memory per byte of input, weights in about one;
- ``PYCUMSUM_OP_MAX_TEXT_BYTES`` (default 1 MiB): one text net: a .pbtxt file; and the text step nets
  inside one net's arguments, all together (`verify_net`); text is parsed in Python at a few
  microseconds per byte;
- ``PYCUMSUM_OP_MAX_TENSOR_BYTES`` (default 1 GiB): one tensor whose size an input declares: an ONNX
  model's inputs, outputs, initializers and inferred shapes (Caffe2's backend allocates its inputs
  when preparing), a Caffe2 fill op's ``shape``, the shapes given to `pycumsum_op.onnx.export`;
- ``PYCUMSUM_OP_MAX_DECLARED_BYTES`` (default 1 GiB): all the tensors one ONNX model, or one net with the
  nets nested in it, declares, together (`TensorBudget`): many tensors, each under the cap above, would
  be allocated all the same.

A declared shape also has at most `MAX_RANK` dimensions: shape inference (onnx's, Caffe2's) copies a
shape into every value computed from it, so a shape of a million ones costs megabytes per op that reads it.

A value over its cap raises `InputTooLarge` (a ValueError) naming what, its size, the cap and the
variable; an unreadable variable raises ValueError: nothing falls back to "no limit".

>>> check_size(2 ** 31, "net 'big.pb'")
Traceback (most recent call last):
...
pycumsum_op.input_limits.InputTooLarge: net 'big.pb' is 2147483648 bytes, more than the 1073741824 allowed (PYCUMSUM_OP_MAX_INPUT_BYTES)
"""
import os

from .wire_census import TooManyFields, census

#: environment variable -> default cap in bytes
DEFAULTS = {
    "PYCUMSUM_OP_MAX_INPUT_BYTES": 2 ** 30,
    "PYCUMSUM_OP_MAX_PARSE_BYTES": 2 ** 31,
    "PYCUMSUM_OP_MAX_TEXT_BYTES": 2 ** 20,
    "PYCUMSUM_OP_MAX_TENSOR_BYTES": 2 ** 30,
    "PYCUMSUM_OP_MAX_DECLARED_BYTES": 2 ** 30,
}
#: The most dimensions a declared shape may have: numpy's own maximum (NPY_MAXDIMS), so no tensor that
#: Python can feed or fetch has more.
MAX_RANK = 32


class InputTooLarge(ValueError):
    """An input over one of the caps (`DEFAULTS`); the message names the variable that raises it."""


def limit(variable: str) -> int:
    """The cap in bytes: the environment variable if set, else its default."""
    text = os.environ.get(variable)
    if text is None:
        return DEFAULTS[variable]
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError("{}={!r} is not a whole number of bytes".format(variable, text))
    return value


def check_size(size: int, what: str, variable: str = "PYCUMSUM_OP_MAX_INPUT_BYTES") -> None:
    """`InputTooLarge` when ``size`` bytes of ``what`` pass the cap ``variable``."""
    cap = limit(variable)
    if size > cap:
        raise InputTooLarge("{} is {} bytes, more than the {} allowed ({})".format(what, size, cap, variable))


def check_parse(data: bytes, message_class, what: str) -> None:
    """Before ``message_class().ParseFromString(data)``: `InputTooLarge` when the parsed message would take
    more than ``PYCUMSUM_OP_MAX_PARSE_BYTES`` of memory, ValueError for bytes that cannot be such a
    message (`pycumsum_op.wire_census.census`)."""
    try:
        found = census(data, message_class.DESCRIPTOR, what)
    except TooManyFields as error:
        raise InputTooLarge(str(error)) from None
    cap = limit("PYCUMSUM_OP_MAX_PARSE_BYTES")
    if found.memory > cap:
        raise InputTooLarge("{} ({} bytes, {} fields) would take about {} bytes of memory once parsed, more than "
                            "the {} allowed (PYCUMSUM_OP_MAX_PARSE_BYTES)".format(
                                what, len(data), found.fields, found.memory, cap))


def check_tensor(dims, itemsize: int, what: str) -> int:
    """The bytes of a tensor of ``dims`` (ints >= 0) and ``itemsize``: `InputTooLarge` when it has more than
    `MAX_RANK` dimensions or passes ``PYCUMSUM_OP_MAX_TENSOR_BYTES``; a ValueError for a negative dim. Never
    multiplies past the cap, nor reads a shape past `MAX_RANK` dimensions."""
    if len(dims) > MAX_RANK:
        raise InputTooLarge("{} has {} dimensions, more than the {} allowed (MAX_RANK)".format(
            what, len(dims), MAX_RANK))
    cap = limit("PYCUMSUM_OP_MAX_TENSOR_BYTES")
    dims = [int(dim) for dim in dims]
    if any(dim < 0 for dim in dims):
        raise ValueError("{} has a negative dimension in shape {}".format(what, shape_text(dims)))
    if 0 in dims:
        return 0
    size = itemsize
    for dim in dims:
        size *= dim
        if size > cap:
            raise InputTooLarge("{} of shape {} takes more than the {} bytes allowed "
                                "(PYCUMSUM_OP_MAX_TENSOR_BYTES)".format(what, shape_text(dims), cap))
    return size


class TensorBudget(object):
    """The tensors one model or net declares, charged by what creating them allocates (`check_tensor`: each
    within ``PYCUMSUM_OP_MAX_TENSOR_BYTES`` and `MAX_RANK`), and together within
    ``PYCUMSUM_OP_MAX_DECLARED_BYTES``; a name declared twice (an input and its initializer) counts once,
    at its largest.

    >>> budget = TensorBudget("model 'm'")
    >>> budget.charge([4, 6], 4, "x", name="x"), budget.charge([4, 6], 4, "x again", name="x"), budget.total
    (96, 96, 96)
    """

    def __init__(self, what: str):
        self.what = what
        self.total = 0
        self._cap = limit("PYCUMSUM_OP_MAX_DECLARED_BYTES")
        self._charged = {}

    def charge(self, dims, itemsize: int, what: str, name=None) -> int:
        """Charge a tensor of ``dims`` and ``itemsize`` (``what`` names it in a refusal); its bytes."""
        size = added = check_tensor(dims, itemsize, what)
        if name is not None:
            earlier = self._charged.get(name, 0)
            self._charged[name] = max(earlier, size)
            added = max(size - earlier, 0)
        self.total += added
        if self.total > self._cap:
            raise InputTooLarge("{}: its declared tensors take more than the {} bytes allowed together, {} "
                                "included (PYCUMSUM_OP_MAX_DECLARED_BYTES)".format(self.what, self._cap, what))
        return size


def shape_text(dims, most: int = 8) -> str:
    """``dims`` for a message, at most ``most`` of them: ``(4, 6)``, ``(1, 1, ... 1000 dims)``."""
    dims = list(dims)
    if len(dims) <= most:
        return str(tuple(dims))
    return "({}, ... {} dims)".format(", ".join(str(dim) for dim in dims[:most]), len(dims))
