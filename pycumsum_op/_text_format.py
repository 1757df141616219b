"""Read a text-format NetDef from raw bytes exactly as Caffe2's C++ reads it.

Caffe2 parses a RecurrentNetwork ``step_net`` / ``backward_step_net`` held as a string with
``caffe2::TextFormat::ParseFromString`` (caffe2/utils/proto_utils.cc): it replaces every
``cuda_gpu_id`` by ``device_id`` in the raw bytes, then runs protobuf's C++ text parser, which reads
bytes, not text: a ``#`` comment may hold any byte but NUL, a quoted string any byte but NUL and
newline (non-UTF-8 included), and string fields are not checked for UTF-8 (caffe2.proto is proto2).
Python's ``text_format`` wants str and turns a non-ASCII byte inside a quoted string into its UTF-8
form, so the net it reads can hold other bytes than the net Caffe2 runs.

`parse_text_netdef` therefore tokenizes the raw bytes with the C++ tokenizer's rules (whitespace,
``#`` comments, quoted strings with the escapes ``\\a \\b \\f \\n \\r \\t \\v \\\\ \\? \\' \\"``, octal and
``\\x``; adjacent strings join), writes the same tokens as ASCII with every string escaped byte for
byte, and parses that with ``text_format`` into a copy of caffe2.proto whose string fields are bytes;
the binary form of that message is the NetDef returned. Where it cannot promise the bytes C++ would
read (a NUL byte, a ``\\u`` escape) it raises `TextNetError`, as it does for text C++ refuses
(a byte >= 0x80 or a control character outside strings and comments, a newline inside a string,
a bad escape). A caller must treat `TextNetError` as "could not check", never as "not a net".

>>> parse_text_netdef(b'name: "n\\xff" # caf\\xe9\\nop { type: "Relu" }').name  # not UTF-8: bytes
b'n\\xff'
>>> parse_text_netdef(b'op { type: "Relu" } trailing junk')
Traceback (most recent call last):
...
pycumsum_op._text_format.TextNetError: not a text NetDef: Message type "caffe2.NetDef" has no field named "trailing".
"""
import re
from typing import Iterator, List, Tuple

from caffe2.proto import caffe2_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

#: What Caffe2's TextFormat::ParseFromString rewrites in the raw text before parsing it.
CAFFE2_TEXT_REWRITES = ((b"cuda_gpu_id", b"device_id"),)
_SIMPLE_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("f"): 12, ord("n"): 10, ord("r"): 13, ord("t"): 9,
                   ord("v"): 11, ord("\\"): 92, ord("?"): 63, ord("'"): 39, ord('"'): 34}
_OCTAL = frozenset(b"01234567")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_POSITION = re.compile(r"^\d+:\d+ : ")
_WHITESPACE = frozenset(b" \t\n\r\v\f")
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
# a number starts with a digit or ".digit"; C++ refuses a letter right after it, and no token that
# may follow a value starts with [.+-], so the longest run is the C++ token or a parse error in both
_NUMBER = re.compile(rb"(?:[0-9]|\.[0-9])[A-Za-z0-9_.+-]*")
_PLAIN_RUN = {quote: re.compile(b"[^\\\\\n" + bytes([quote]) + b"]+") for quote in b"\"'"}


class TextNetError(ValueError):
    """Text that Caffe2's C++ parser refuses, or might read differently from this reader."""


def _string_literal(data: bytes, start: int) -> Tuple[bytes, int]:
    """The bytes of the quoted string at ``start`` (C++ ParseStringAppend rules) and the index after it."""
    quote, value, i, end = data[start], bytearray(), start + 1, len(data)
    while True:
        if i >= end:
            raise TextNetError("a string starting at byte {} is not closed".format(start))
        byte = data[i]
        if byte == quote:
            return bytes(value), i + 1
        if byte == 10:
            raise TextNetError("a string starting at byte {} crosses a line".format(start))
        if byte != 92:  # any other raw bytes, non-UTF-8 included, are taken as they are
            run = _PLAIN_RUN[quote].match(data, i)
            value += run.group()
            i = run.end()
            continue
        escape = data[i + 1] if i + 1 < end else None
        if escape in _SIMPLE_ESCAPES:
            value.append(_SIMPLE_ESCAPES[escape])
            i += 2
        elif escape in _OCTAL:  # one to three octal digits, truncated to a byte as C++'s char cast does
            digits = 1
            while digits < 3 and i + 1 + digits < end and data[i + 1 + digits] in _OCTAL:
                digits += 1
            value.append(int(data[i + 1:i + 1 + digits], 8) & 0xFF)
            i += 1 + digits
        elif escape == ord("x") and i + 2 < end and data[i + 2] in _HEX:  # one or two hex digits
            digits = 2 if i + 3 < end and data[i + 3] in _HEX else 1
            value.append(int(data[i + 2:i + 2 + digits], 16))
            i += 2 + digits
        elif escape in (ord("u"), ord("U")):
            raise TextNetError("a \\u escape at byte {}: not read here (Caffe2 nets never need one)".format(i))
        else:
            raise TextNetError("an invalid escape sequence at byte {}".format(i))


def _tokens(data: bytes) -> Iterator[Tuple[str, bytes]]:
    """("string" | "word" | "symbol", bytes) tokens of C++'s text-format tokenizer; comments dropped."""
    i, end = 0, len(data)
    while i < end:
        byte = data[i]
        if byte in _WHITESPACE:
            i += 1
        elif byte == ord("#"):
            newline = data.find(b"\n", i)
            i = end if newline < 0 else newline + 1
        elif byte in (ord('"'), ord("'")):
            value, i = _string_literal(data, i)
            yield "string", value
        else:
            match = _WORD.match(data, i) or _NUMBER.match(data, i)
            if match:
                yield "word", match.group()
                i = match.end()
            elif 0x21 <= byte <= 0x7E:
                yield "symbol", data[i:i + 1]
                i += 1
            else:
                raise TextNetError("byte 0x{:02x} at {} is outside any string or comment".format(byte, i))


def _escaped(value: bytes) -> bytes:
    """A string literal of ``value`` in which every byte is a two-digit ``\\x`` escape (pure ASCII)."""
    return b'"' + "".join("\\x{:02x}".format(byte) for byte in value).encode("ascii") + b'"'


def _ascii_text(data: bytes) -> str:
    """The tokens of ``data`` as ASCII text that protobuf's Python parser splits the same way."""
    out: List[bytes] = []
    strings: List[bytes] = []  # adjacent strings, joined into one as both parsers do
    glue = False
    for kind, value in _tokens(data):
        if kind == "string":
            strings.append(value)
            glue = False
            continue
        if strings:
            out.append(_escaped(b"".join(strings)))
            strings = []
        if glue and kind == "word":  # "- 5" is one signed number to C++; Python wants "-5"
            out[-1] += value
        else:
            out.append(value)
        glue = value == b"-"
    if strings:
        out.append(_escaped(b"".join(strings)))
    return b" ".join(out).decode("ascii")


def _bytes_netdef_class():
    """NetDef of a private copy of caffe2.proto in which every string field is bytes."""
    file_proto = descriptor_pb2.FileDescriptorProto()
    caffe2_pb2.DESCRIPTOR.CopyToProto(file_proto)
    pending = list(file_proto.message_type)
    while pending:
        message = pending.pop()
        pending.extend(message.nested_type)
        for field in message.field:
            if field.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("caffe2.NetDef"))


_BytesNetDef = _bytes_netdef_class()


def parse_text_netdef(data: bytes) -> caffe2_pb2.NetDef:
    """The NetDef Caffe2's C++ reads from text ``data``; raises `TextNetError` if it cannot say."""
    if not isinstance(data, bytes):
        raise TextNetError("text NetDef must be bytes, got {}".format(type(data).__name__))
    if b"\0" in data:  # C++ stops a string at NUL when unescaping it: refuse rather than guess
        raise TextNetError("a NUL byte at {}".format(data.index(b"\0")))
    for old, new in CAFFE2_TEXT_REWRITES:
        data = data.replace(old, new)
    raw = _BytesNetDef()
    try:
        text_format.Parse(_ascii_text(data), raw)
        netdef = caffe2_pb2.NetDef()
        netdef.ParseFromString(raw.SerializeToString())
    except TextNetError:
        raise
    except Exception as error:  # ParseError, DecodeError, RecursionError, ...
        # positions refer to the re-written text, not to the caller's: drop them
        raise TextNetError("not a text NetDef: {}".format(_POSITION.sub("", str(error))[:300]))
    return netdef
