"""`pycumsum_op.wire_census`: the memory a parse would take, counted from the bytes. Oracles: the resident
memory protobuf's own parser takes (measured in a child process per input), an independent count made
by walking the parsed message, and protobuf's own verdict on what is readable."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace
from hypothesis import given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

from pycumsum_op import load_net, save_net, wire_census
from pycumsum_op.input_limits import InputTooLarge
from pycumsum_op.wire_census import COSTS, census
from onnx_support import needs_onnx_backend

NETDEF = caffe2_pb2.NetDef.DESCRIPTOR


def varint(value: int) -> bytes:
    out = b""
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            return out + bytes([low])
        out += bytes([low | 0x80])


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


N = 400000
# name -> (message, bytes as Python source: N elements of one kind; Caffe2 fields: NetDef.op 2, OperatorDef
# .input 1 / .arg 5, Argument .floats 5 / .ints 6 / .tensors 11 / .nets 9; ONNX: ModelProto.graph 7,
# GraphProto .node 1 / .initializer 5 / .input 11, NodeProto.attribute 5, TensorProto .dims 1 / .float_data 4)
SHAPES = {
    "empty ops": ("NetDef", "b'\\x12\\x00' * N"),
    "op inputs": ("NetDef", "field(2, b'\\x0a\\x00' * N)"),
    "op names": ("NetDef", "b''.join(field(2, field(3, b'op%d' % i)) for i in range(N))"),
    "unpacked ints": ("NetDef", "field(2, field(5, b'\\x30\\x07' * N))"),
    "ten-byte ints": ("NetDef", "field(2, field(5, b'\\x30' + b'\\xff' * 9 + b'\\x01') * 1 + field(5, (b'\\x30' + b'\\xff' * 9 + b'\\x01') * N))"),
    "packed ints": ("NetDef", "field(2, field(5, field(6, b'\\x05' * N)))"),
    "unpacked floats": ("NetDef", "field(2, field(5, b'\\x2d\\x00\\x00\\x80\\x3f' * N))"),
    "tensor float_data": ("NetDef", "field(2, field(5, field(11, field(3, b'\\x00' * 4 * N))))"),
    "unknown fields": ("NetDef", "b'\\x78\\x00' * N"),
    "nested nets": ("NetDef", "field(2, field(5, b'\\x4a\\x00' * N))"),
    "onnx nodes": ("ModelProto", "field(7, b'\\x0a\\x00' * N)"),
    "onnx attributes": ("ModelProto", "field(7, field(1, b'\\x2a\\x00' * N))"),
    "onnx graph inputs": ("ModelProto", "field(7, b'\\x5a\\x00' * N)"),
    "onnx dims": ("ModelProto", "field(7, field(5, b'\\x08\\x05' * N))"),
    "onnx float_data": ("ModelProto", "field(7, field(5, field(4, b'\\x00' * 4 * N)))"),
}
CHILD = r'''
import ctypes, gc, json, sys
import onnx
from caffe2.proto import caffe2_pb2
from pycumsum_op.wire_census import census
sys.path.insert(0, sys.argv[4])
from test_wire_census import field  # noqa: E402

def resident():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))

N = int(sys.argv[3])
message = caffe2_pb2.NetDef if sys.argv[1] == "NetDef" else onnx.ModelProto
data = eval(sys.argv[2])
gc.collect()
ctypes.CDLL("libc.so.6").malloc_trim(0)
before = resident()
parsed = message()
parsed.ParseFromString(data)
grew = resident() - before
print(json.dumps({"grew": grew, "estimate": census(data, message.DESCRIPTOR, "input").memory}))
'''


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_estimate_bounds_the_memory_protobuf_takes_and_stays_within_5x_of_it(shape):
    message, source = SHAPES[shape]
    proc = subprocess.run([sys.executable, "-c", CHILD, message, source, str(N), os.path.dirname(__file__)],
                          stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    assert found["grew"] > 0
    assert found["grew"] <= found["estimate"] <= 5 * found["grew"] + 2 ** 20, found


_WIDE = frozenset(["TYPE_INT64", "TYPE_UINT64", "TYPE_SINT64", "TYPE_FIXED64", "TYPE_SFIXED64", "TYPE_DOUBLE"])


def _expected_memory(message) -> int:
    """What `census` should charge for ``message``, counted on the parsed message (not its bytes): COSTS per
    message and string (plus its bytes); a scalar 2 * its size + 4 bytes (8 for 64-bit types, else 4),
    packed floats and doubles twice their bytes."""
    total = 0
    for descriptor, value in message.ListFields():
        values = value if descriptor.label == descriptor.LABEL_REPEATED else [value]
        type_name = {number: name for name, number in vars(type(descriptor)).items()
                     if name.startswith("TYPE_")}[descriptor.type]
        if type_name == "TYPE_MESSAGE":
            total += sum(COSTS["message"] + _expected_memory(item) for item in values)
        elif type_name in ("TYPE_STRING", "TYPE_BYTES"):
            total += sum(COSTS["string"] + len(item if isinstance(item, bytes) else item.encode("utf-8"))
                         for item in values)
        elif descriptor.GetOptions().packed and type_name in ("TYPE_FLOAT", "TYPE_DOUBLE"):
            total += 2 * (8 if type_name == "TYPE_DOUBLE" else 4) * len(values)
        else:
            total += len(values) * (2 * (8 if type_name in _WIDE else 4) + 4)
    return total


names = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)


@st.composite
def netdefs(draw, depth=0):
    net = caffe2_pb2.NetDef(name=draw(names))
    net.external_input.extend(draw(st.lists(names, max_size=3)))
    for _ in range(draw(st.integers(0, 4))):
        op = net.op.add(type=draw(names), input=draw(st.lists(names, max_size=3)),
                        output=draw(st.lists(names, max_size=2)))
        if draw(st.booleans()):
            op.device_option.device_type = draw(st.integers(0, 3))
        for _ in range(draw(st.integers(0, 3))):
            arg = op.arg.add(name=draw(names))
            kind = draw(st.sampled_from(["f", "i", "s", "floats", "ints", "strings", "n", "nets", "tensors"]))
            if kind == "f":
                arg.f = draw(st.floats(width=32, allow_nan=False))
            elif kind == "i":
                arg.i = draw(st.integers(-2 ** 63, 2 ** 63 - 1))
            elif kind == "s":
                arg.s = draw(st.binary(max_size=20))
            elif kind == "floats":
                arg.floats.extend(draw(st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=300)))
            elif kind == "ints":
                arg.ints.extend(draw(st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), min_size=1, max_size=300)))
            elif kind == "strings":
                arg.strings.extend(draw(st.lists(st.binary(max_size=5), min_size=1, max_size=5)))
            elif kind == "n" and depth < 2:
                arg.n.CopyFrom(draw(netdefs(depth + 1)))
            elif kind == "nets" and depth < 2:
                arg.nets.extend(draw(st.lists(netdefs(depth + 1), min_size=1, max_size=2)))
            else:
                tensor = arg.tensors.add(dims=draw(st.lists(st.integers(0, 9), max_size=3)), name=draw(names))
                tensor.float_data.extend(draw(st.lists(st.floats(width=32, allow_nan=False), max_size=50)))
                tensor.int64_data.extend(draw(st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), max_size=50)))
    return net


@settings(max_examples=200, deadline=None)
@given(netdefs())
def test_the_census_of_any_net_charges_exactly_what_the_parsed_net_holds(net):
    data = net.SerializeToString()
    found = census(data, NETDEF, "net")
    assert found.memory == _expected_memory(net)
    assert found.fields >= len(net.op)


@settings(max_examples=300, deadline=None)
@given(netdefs(), st.data())
def test_damaged_bytes_are_read_or_refused_with_a_value_error_never_anything_else(net, data):
    raw = bytearray(net.SerializeToString() or b"\x0a\x00")
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    raw = bytes(raw[:cut])
    parsed = caffe2_pb2.NetDef()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a stray end-group tag: protobuf stops there
            parsed.ParseFromString(raw)
        protobuf_reads = True
    except Exception:
        protobuf_reads = False
    try:
        census(raw, NETDEF, "net")
        census_reads = True
    except ValueError as error:
        assert str(error).startswith("net ")
        census_reads = False
    if census_reads:  # what the census reads, protobuf reads too (the census never waves garbage through)
        assert protobuf_reads


@pytest.mark.parametrize("data, message", [
    (b"\x12\x05\x0a", "field 2 at byte 0 runs past the end of its message (5 bytes declared, 1 left)"),
    (b"\x00\x00", "byte 0 holds no field (field number 0)"),
    (b"\xf8\xff\xff\xff\x1f\x00", "byte 0 holds no field (field number 1073741823)"),
    (field(2, field(5, field(6, b"\x80"))), "field 6 at byte 4 holds a varint cut short or longer than 10 bytes"),
    (field(2, field(5, field(11, field(3, b"\x00" * 6)))),
     "field 3 at byte 6 holds 6 bytes, no whole number of 4-byte values"),
    (b"\x13", "byte 0 holds a start-group tag (field 2), which no field of a caffe2.NetDef is"),
    (b"\x0a\x00\x0c", "byte 2 holds an end-group tag (field 1), which no field of a caffe2.NetDef is"),
    (b"\x0f", "byte 0 holds wire type 7 (field 1), which no field of a caffe2.NetDef is"),
    (b"\x2d\x00", "field 5 at byte 0 is cut short"),
    (b"\x12\x80", "the varint at byte 1 is cut short or longer than 10 bytes"),
    (b"\x08" + b"\xff" * 10 + b"\x01", "the varint at byte 1 is cut short or longer than 10 bytes"),
])
def test_bytes_that_are_no_message_are_refused_naming_the_byte(data, message):
    with pytest.raises(ValueError) as error:
        census(data, NETDEF, "net 'x.pb'")
    assert str(error.value) == "net 'x.pb' cannot be read as a caffe2.NetDef: " + message


def test_more_fields_or_deeper_nesting_than_read_is_too_large(monkeypatch):
    monkeypatch.setattr(wire_census, "MAX_FIELDS", 1000)
    with pytest.raises(InputTooLarge, match=r"^the given bytes has more than 1000 fields$"):
        load_net(b"\x12\x00" * 1001, verify=False)
    assert len(load_net(b"\x12\x00" * 1000, verify=False).op) == 1000
    deep = b""
    for _ in range(150):  # an op whose argument holds a net whose op holds an argument ...
        deep = field(2, field(5, field(8, deep)))
    with pytest.raises(InputTooLarge, match="nests messages more than 100 deep"):
        load_net(deep, verify=False)


def test_the_parse_cap_is_read_from_the_environment(monkeypatch):
    data = b"\x12\x00" * 1000  # 1000 empty ops: 320000 bytes charged
    monkeypatch.setenv("PYCUMSUM_OP_MAX_PARSE_BYTES", "320000")
    assert len(load_net(data, verify=False).op) == 1000
    monkeypatch.setenv("PYCUMSUM_OP_MAX_PARSE_BYTES", "319999")
    with pytest.raises(InputTooLarge) as error:
        load_net(data, verify=False)
    assert str(error.value) == ("the given bytes (2000 bytes, 1000 fields) would take about 320000 bytes of "
                                "memory once parsed, more than the 319999 allowed (PYCUMSUM_OP_MAX_PARSE_BYTES)")


@pytest.mark.slow
def test_an_init_net_of_48_mb_of_weights_loads_with_the_default_caps(tmp_path):
    weights = np.random.RandomState(0).standard_normal((3000, 4000)).astype(np.float32)
    init = core.Net("census_init")
    init.GivenTensorFill([], "w", shape=list(weights.shape), values=weights.ravel().tolist())
    path = str(tmp_path / "init.pb")
    save_net(init, path)
    loaded = load_net(path)
    workspace.ResetWorkspace()
    workspace.RunNetOnce(loaded)
    np.testing.assert_array_equal(workspace.FetchBlob("w"), weights)


@pytest.mark.slow
@needs_onnx_backend
def test_an_onnx_model_of_48_mb_of_weights_loads_with_the_default_caps(tmp_path):
    from pycumsum_op.onnx import load_model

    weights = np.random.RandomState(1).standard_normal((3000, 4000)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "census",
                              [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(weights.shape))],
                              [numpy_helper.from_array(weights, "w")])
    path = str(tmp_path / "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
    np.testing.assert_array_equal(numpy_helper.to_array(load_model(path).graph.initializer[0]), weights)
