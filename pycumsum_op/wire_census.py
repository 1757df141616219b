"""What parsing protobuf bytes would cost, counted from the wire format before anything is parsed.

protobuf's C++ parser holds a message made of empty sub-messages in about 100 times the bytes it was
read from (an empty OperatorDef is 2 bytes on the wire and about 216 bytes in memory), and a string
element in about 20 times. `census` walks the bytes with the message's descriptor, never building a
message: it counts each sub-message, string, scalar and unknown field, and adds what each is measured to
take in memory (protobuf 3.20, C++ implementation; `COSTS` rounds the measurements up). A run of one
repeated scalar field (weights written unpacked: 5 bytes per float) is read as a whole by numpy, so the
walk visits each message and string once and each run of scalars once.

Its own cost is bounded for any input: at most `MAX_FIELDS` fields are visited (real nets and models
hold far fewer: a Caffe2 op has about six) and messages nest at most `MAX_DEPTH` deep (protobuf's own
limit); the walk keeps only a stack of that depth.

>>> from caffe2.proto import caffe2_pb2
>>> census(b"\\x12\\x00" * 1000, caffe2_pb2.NetDef.DESCRIPTOR, "net").memory  # 1000 empty ops
320000
>>> census(b"\\x12\\x05", caffe2_pb2.NetDef.DESCRIPTOR, "net")
Traceback (most recent call last):
...
pycumsum_op.wire_census.UnreadableMessage: net cannot be read as a caffe2.NetDef: field 2 at byte 0 runs past the end of its message (5 bytes declared, 0 left)
"""
import functools
from typing import NamedTuple

import numpy as np
from google.protobuf.descriptor import FieldDescriptor

#: Bytes of memory charged per element once parsed (measured on protobuf 3.20.3's C++ implementation:
#: sub-messages 168-296, an empty string element 40, an unknown field 16-48); a scalar is charged twice
#: its size plus 4 (a repeated field may hold twice its elements; measured 8.3-10.2 per float, 16.4 per
#: int64).
COSTS = {"message": 320, "string": 64, "unknown": 64}
#: The most fields `census` visits (a run of one repeated scalar counts once); more is refused.
MAX_FIELDS = 2000000
#: The deepest nesting of messages read (protobuf's parser refuses deeper ones too).
MAX_DEPTH = 100

_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5
_FIXED_SIZES = {_FIXED64: 8, _FIXED32: 4}
_MAX_FIELD_NUMBER = 2 ** 29 - 1
_GROUP_TAGS = {3: "a start-group tag", 4: "an end-group tag"}
#: scalar field type -> (its size on the wire when fixed, None for a varint; its size in memory)
_SCALARS = dict(
    [(kind, (None, 4)) for kind in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_SINT32,
                                    FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_ENUM)] +
    [(kind, (None, 8)) for kind in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64)] +
    [(kind, (4, 4)) for kind in (FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_FLOAT)] +
    [(kind, (8, 8)) for kind in (FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64, FieldDescriptor.TYPE_DOUBLE)])
# what a tag means in a message: (_MESSAGE, message descriptor), (_STRING, None), (_SCALAR, cost),
# (_RUN, cost: a repeated scalar), (_PACKED_VARINTS, cost), (_PACKED_FIXED, value size); other tags are unknown
_MESSAGE, _STRING, _SCALAR, _RUN, _PACKED_VARINTS, _PACKED_FIXED = range(6)


class UnreadableMessage(ValueError):
    """Bytes that cannot be the message (cut short, no field where one must start); ``reason`` says where."""

    def __init__(self, what: str, message_name: str, reason: str):
        super().__init__("{} cannot be read as a {}: {}".format(what, message_name, reason))
        self.reason = reason


class TooManyFields(ValueError):
    """More fields, or deeper nesting, than `census` reads (`MAX_FIELDS`, `MAX_DEPTH`)."""


class Census(NamedTuple):
    """``memory``: bytes the parsed message is estimated to take; ``fields``: fields visited."""
    memory: int
    fields: int


@functools.lru_cache(maxsize=None)
def _tags(descriptor) -> dict:
    """tag -> (what it holds, its argument) for each field of ``descriptor`` in each wire type it may take."""
    tags = {}
    for field in descriptor.fields:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            tags[field.number << 3 | _LENGTH_DELIMITED] = (_MESSAGE, field.message_type)
        elif field.type not in _SCALARS:  # string, bytes
            tags[field.number << 3 | _LENGTH_DELIMITED] = (_STRING, None)
        else:
            wire_size, memory_size = _SCALARS[field.type]
            wire_type = _VARINT if wire_size is None else _FIXED32 if wire_size == 4 else _FIXED64
            cost = 2 * memory_size + 4  # a repeated field may hold twice its elements' size
            repeated = field.label == FieldDescriptor.LABEL_REPEATED
            tags[field.number << 3 | wire_type] = (_RUN if repeated else _SCALAR, cost)
            if repeated:  # the parser takes the packed form of any repeated scalar
                tags[field.number << 3 | _LENGTH_DELIMITED] = (
                    (_PACKED_VARINTS, cost) if wire_size is None else (_PACKED_FIXED, wire_size))
    return tags


def _varint(data: bytes, position: int, end: int, fail):
    """(value, next position) of the varint at ``position``; ``fail`` for one cut short or over 10 bytes."""
    value = shift = 0
    start = position
    while position < end and shift < 70:
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if byte < 0x80:
            return value, position
        shift += 7
    raise fail("the varint at byte {} is cut short or longer than 10 bytes".format(start))


def _run(data: bytes, start: int, end: int, tag: bytes, wire_type: int):
    """(end, elements) of the run of fields with this ``tag`` (a scalar of ``wire_type``) from ``start``,
    read by numpy in windows of at most 4 MiB (so any run costs time and memory linear in its length)."""
    whole = np.frombuffer(data, np.uint8)
    pattern = np.frombuffer(tag, np.uint8)
    position, elements, window = start, 0, 4096
    while position < end:
        chunk = whole[position:min(end, position + window)]
        if wire_type == _VARINT:  # each element ends its tag and its value with a byte below 0x80
            low = np.flatnonzero(chunk < 0x80)
            pairs = len(low) // 2
            tag_ends, value_ends = low[0:2 * pairs:2], low[1:2 * pairs:2]
            starts = tag_ends - (len(tag) - 1)
            good = (starts == np.concatenate([[0], value_ends[:-1] + 1])) & (value_ends - tag_ends <= 10)
            for index, byte in enumerate(pattern):
                good &= chunk[np.clip(starts + index, 0, len(chunk) - 1)] == byte
            ends = value_ends + 1
        else:
            stride = len(tag) + _FIXED_SIZES[wire_type]
            pairs = len(chunk) // stride
            good = np.all(chunk[:pairs * stride].reshape(pairs, stride)[:, :len(tag)] == pattern, axis=1)
            ends = np.arange(1, pairs + 1) * stride
        taken = pairs if good.all() else int(np.argmin(good))
        if taken:
            elements += taken
            position += int(ends[taken - 1])
        if taken < pairs or position >= end or (taken == 0 and position + window >= end):
            break
        window = min(2 * window, 2 ** 22)
    return position, elements


def census(data: bytes, descriptor, what: str) -> Census:
    """The `Census` of ``data`` read as the message ``descriptor`` describes; `UnreadableMessage` (naming
    ``what``) for bytes that cannot be that message, `TooManyFields` for bytes that pass `MAX_FIELDS` or `MAX_DEPTH`."""
    def fail(reason):
        return UnreadableMessage(what, descriptor.full_name, reason)

    message_cost, string_cost, unknown_cost = COSTS["message"], COSTS["string"], COSTS["unknown"]
    memory = fields = 0
    stack = []
    position, end, message = 0, len(data), descriptor
    tags = _tags(message)
    while True:
        if position >= end:
            if not stack:
                return Census(memory, fields)
            position, end, message = stack.pop()
            tags = _tags(message)
            continue
        fields += 1
        if fields > MAX_FIELDS:
            raise TooManyFields("{} has more than {} fields".format(what, MAX_FIELDS))
        start = position
        tag = data[position]
        if tag < 0x80:
            position += 1
        else:
            tag, position = _varint(data, position, end, fail)
        wire_type = tag & 7
        if tag < 8 or tag >> 3 > _MAX_FIELD_NUMBER:
            raise fail("byte {} holds no field (field number {})".format(start, tag >> 3))
        kind, argument = tags.get(tag, (None, None))
        if wire_type == _LENGTH_DELIMITED:
            length = data[position] if position < end else 0x80
            if length < 0x80:
                position += 1
            else:
                length, position = _varint(data, position, end, fail)
            if length > end - position:
                raise fail("field {} at byte {} runs past the end of its message ({} bytes declared, {} left)".format(
                    tag >> 3, start, length, end - position))
            inner, position = position, position + length
            if kind == _MESSAGE:
                memory += message_cost
                if length:
                    if len(stack) + 1 >= MAX_DEPTH:
                        raise TooManyFields("{} nests messages more than {} deep".format(what, MAX_DEPTH))
                    stack.append((position, end, message))
                    position, end, message = inner, position, argument
                    tags = _tags(message)
            elif kind == _PACKED_VARINTS:  # one value per byte below 0x80
                ends = np.flatnonzero(np.frombuffer(data, np.uint8, length, inner) < 0x80)
                if length and (len(ends) == 0 or ends[-1] != length - 1 or np.diff(ends, prepend=-1).max() > 10):
                    raise fail("field {} at byte {} holds a varint cut short or longer than 10 bytes".format(
                        tag >> 3, start))
                memory += len(ends) * argument
            elif kind == _PACKED_FIXED:
                if length % argument:
                    raise fail("field {} at byte {} holds {} bytes, no whole number of {}-byte values".format(
                        tag >> 3, start, length, argument))
                memory += 2 * length
            else:  # a string or bytes, or an unknown field, kept as bytes
                memory += (string_cost if kind == _STRING else unknown_cost) + length
        elif kind == _RUN:
            position, elements = _run(data, start, end, data[start:position], wire_type)
            if not elements:
                raise fail("field {} at byte {} is cut short".format(tag >> 3, start))
            memory += elements * argument
        elif wire_type == _VARINT or wire_type in _FIXED_SIZES:
            if wire_type == _VARINT:
                _, position = _varint(data, position, end, fail)
            elif position + _FIXED_SIZES[wire_type] > end:
                raise fail("field {} at byte {} is cut short".format(tag >> 3, start))
            else:
                position += _FIXED_SIZES[wire_type]
            memory += argument if kind == _SCALAR else unknown_cost
        else:
            raise fail("byte {} holds {} (field {}), which no field of a {} is".format(
                start, _GROUP_TAGS.get(wire_type, "wire type {}".format(wire_type)), tag >> 3, descriptor.full_name))
