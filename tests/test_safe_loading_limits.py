"""verify_net's cost is bounded by its input, builder arguments are checked by the builders' own rules,
and fuzzed real nets and pickles get a verdict: accepted (every Python op verified) or UnsafeNetError."""
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace
from google.protobuf import text_format
from hypothesis import given, settings, strategies as st

import pycumsum_op
from pycumsum_op import UnsafeNetError, verify_net
from pycumsum_op._safe_unpickle import MAX_PICKLE_BYTES
from pycumsum_op.kernels import ScanArgumentError
from pycumsum_op.scans import SCANS
from pycumsum_op.ops import add_scan_op, scan_backward, scan_forward
from pycumsum_op.serialization import BUILDER_ARGS, PYTHON_OP_TYPES

DATA = os.path.join(os.path.dirname(__file__), "data")
PARAMS = {"scan": "cumsum", "axis": 0, "exclusive": False, "reverse": False, "dtype": None}

#: How every "unknown scan" message lists the registry (sorted names).
KNOWN_SCANS = ", ".join(repr(name) for name in sorted(SCANS))


def python_op_net(builder, grad_builder=None, name="limits"):
    net = caffe2_pb2.NetDef(name=name)
    op = net.op.add(type="Python", name="PyCumSum", input=["lx"], output=["ly"])
    op.arg.add(name="pickled_builder", s=builder)
    op.arg.add(name="pickled_grad_builder", s=grad_builder or pickle.dumps((scan_backward, (), PARAMS)))
    return net


def tuple_tree(levels):
    tree = ()
    for _ in range(levels):
        tree = (tree, tree)
    return tree


#: name -> builder pickle: tiny inputs that cost gigabytes or exponential time in a naive verifier
BOMBS = {
    "binary_memo_index_2**27": b"\x80\x02N" + b"r" + struct.pack("<I", 2 ** 27) + b".",
    "protocol0_memo_index_2**25": b"Np33554432\n.",
    "frame_longer_than_data": b"\x80\x04\x95" + struct.pack("<Q", 2 ** 40) + b"N.",
    "shared_tuple_tree_150_levels": pickle.dumps((scan_forward, (), dict(PARAMS, scan=tuple_tree(150)))),
    "largest_pickle_of_empty_dicts": b"\x80\x04" + b"}" * (MAX_PICKLE_BYTES - 3) + b".",
    "over_the_size_cap": pickle.dumps((scan_forward, (), dict(PARAMS, scan="x" * MAX_PICKLE_BYTES))),
}

MEMORY_CHILD = r'''
import json, pickle, resource, sys
from caffe2.proto import caffe2_pb2
from pycumsum_op import UnsafeNetError, verify_net
from pycumsum_op.ops import scan_forward, scan_backward
params = {"scan": "cumsum", "axis": 0}
def net(data):
    n = caffe2_pb2.NetDef(name="bomb")
    n.op.add(type="Python").arg.add(name="pickled_builder", s=data)
    return n
verify_net(net(pickle.dumps((scan_forward, (), params))))  # warm up imports and caches
report = {}
for name, path in json.loads(sys.argv[1]).items():
    data = open(path, "rb").read()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        verify_net(net(data))
        reason = "accepted"
    except UnsafeNetError as error:
        reason = error.problems[0].reason
    report[name] = [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, reason]
print("REPORT" + json.dumps(report))
'''


@pytest.mark.slow  # child processes with memory and time limits
def test_tiny_crafted_pickles_cost_little_memory_and_no_time(tmp_path):
    """In a fresh process (ru_maxrss is per process): peak memory grows < 64 MiB over all bombs, and
    the 2**150-node tuple tree is refused without being walked (the child would never finish)."""
    paths = {}
    for name, data in BOMBS.items():
        paths[name] = str(tmp_path / name)
        with open(paths[name], "wb") as handle:
            handle.write(data)
    proc = subprocess.run([sys.executable, "-c", MEMORY_CHILD, json.dumps(paths)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=120, universal_newlines=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.split("REPORT", 1)[1])
    growth_kib = {name: grown for name, (grown, _) in report.items()}
    assert sum(growth_kib.values()) < 64 * 1024, growth_kib  # ru_maxrss is in KiB on Linux
    reasons = {name: reason for name, (_, reason) in report.items()}
    assert "memo index 134217728" in reasons["binary_memo_index_2**27"]
    assert "memo index 33554432" in reasons["protocol0_memo_index_2**25"]
    assert "frame" in reasons["frame_longer_than_data"]
    assert "scan=<tuple> is a tuple" in reasons["shared_tuple_tree_150_levels"]
    assert "not a builder tuple" in reasons["largest_pickle_of_empty_dicts"]
    assert "MAX_PICKLE_BYTES" in reasons["over_the_size_cap"]


@pytest.mark.parametrize("args, kwargs, reason", [
    ((), dict(PARAMS, scan="nope"), "unknown scan='nope'; known scans: " + KNOWN_SCANS),
    ((), dict(PARAMS, evil=1), "unexpected keyword argument 'evil'"),
    ((), dict(PARAMS, axis=2 ** 80000), "axis=<int of 80001 bits> does not fit in int64"),
    ((), dict(PARAMS, axis="1"), "axis must be an integer"),
    ((), dict(PARAMS, dtype="complex64"), "unknown dtype='complex64'"),
    ((), dict(PARAMS, exclusive=2), "exclusive must be True or False"),
    ((), {"scan": "cumsum"}, "axis must be an integer (like torch.cumsum's dim), got axis=None"),
    ((), dict(PARAMS, scan=["cumsum"]), "scan=<list> is a list"),
    (("cumsum", 0, False, False, None, False, 5), {}, "too many positional arguments"),
    ((), dict(PARAMS, axis_input=5), "axis_input must be True or False"),
])
def test_builder_arguments_are_checked_with_the_builders_rules(clean_workspace, args, kwargs, reason):
    """Refused at verify time, naming op index, op type, argument; and Caffe2 itself fails on the same net
    (a Python op calls pickled_builder, a PythonGradient op pickled_grad_builder)."""
    for position, (builder, op_type) in enumerate(((scan_forward, "Python"), (scan_backward, "PythonGradient"))):
        pickles = [pickle.dumps((scan_forward, (), PARAMS)), pickle.dumps((scan_backward, (), PARAMS))]
        pickles[position] = pickle.dumps((builder, args, kwargs))
        net = python_op_net(*pickles)
        net.op[0].type = op_type
        if op_type == "PythonGradient":
            net.op[0].input[:] = ["lx", "lx", "lx"]
        with pytest.raises(UnsafeNetError) as caught:
            verify_net(net)
        problem, = caught.value.problems
        assert (problem.op_index, problem.op_type, problem.arg) == (0, op_type, BUILDER_ARGS[position])
        assert reason in problem.reason and builder.__name__ in problem.reason
        workspace.FeedBlob("lx", np.arange(3, dtype=np.float32))
        with pytest.raises(Exception):  # the oracle: Caffe2 refuses it too, at CreateNet or at the run
            workspace.RunNetOnce(net)


def test_good_arguments_pass_and_run(clean_workspace):
    net = python_op_net(pickle.dumps((scan_forward, ("cumsum", 0), {"reverse": True, "dtype": "double"})))
    assert len(verify_net(net)) == 1
    workspace.FeedBlob("lx", np.arange(3, dtype=np.float32))
    workspace.RunNetOnce(net)
    np.testing.assert_array_equal(workspace.FetchBlob("ly"), [3.0, 3.0, 2.0])


def test_unknown_scan_names_raise_scan_argument_error_everywhere():
    net = core.Net("unknown_scan")
    for call in (lambda: add_scan_op(net, "nope", "ux", axis=0), lambda: scan_forward("nope", 0),
                 lambda: scan_backward("nope", 0), lambda: add_scan_op(net, ["cumsum"], "ux", axis=0)):
        with pytest.raises(ScanArgumentError, match=r"unknown scan=.*known scans: " + re.escape(KNOWN_SCANS)):
            call()
    assert pycumsum_op.scans.scan("cumsum").op_name == "PyCumSum"


# --- fuzzing real saved nets, text step nets and builder pickles -------------------------------------

with open(os.path.join(DATA, "golden_cumsum_v0.1.0.pb"), "rb") as _handle:
    GOLDEN_PB = _handle.read()
with open(os.path.join(DATA, "golden_cumsum_v0.1.0.pbtxt"), "rb") as _handle:
    GOLDEN_TEXT = _handle.read()
GOOD_PICKLE = pickle.dumps((scan_forward, (), PARAMS))
#: opcodes an attacker would splice in: huge memo puts, frames, calls, globals, extension codes
OPCODES = [b"r\xff\xff\xff\x7f", b"p999999999\n", b"q\xff", b"\x95\xff\xff\xff\xff\x00\x00\x00\x00", b"R", b"b",
           b"cos\nsystem\n", b"\x93", b"\x82\x01", b"Pid\n", b"\x81", b"t", b"0", b"(", b"\x94", b"h\x00",
           b"\x8c\x04evil", b"J\xff\xff\xff\x7f", b"\x8a\x09" + b"\xff" * 9, b"}", b")", b"\x85", b"."]


def mutate(draw, data):
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "splice", "insert"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[position:]
        elif kind == "splice":
            data[position:position] = draw(st.sampled_from(OPCODES))
        else:
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


def count_pickled_ops(net, depth=0):
    """Independent oracle: ops carrying a builder pickle, in binary nested nets and in text step nets
    parsed by protobuf's Python parser (None when that parser cannot read one)."""
    total = 0
    for op in net.op:
        for arg in op.arg:
            for inner in ([arg.n] if arg.HasField("n") else []) + list(arg.nets):
                inner_count = count_pickled_ops(inner, depth + 1)
                if inner_count is None:
                    return None
                total += inner_count
            # recurrent_network_op.h: RecurrentNetwork reads step_net, its gradient backward_step_net, and the
            # gradient maker copies every forward argument: any text in a *_net argument may be a net
            name = arg.name.decode("latin-1") if isinstance(arg.name, bytes) else arg.name  # invalid UTF-8: bytes
            if (name == "net" or name.endswith("_net")) and arg.s and not arg.HasField("n"):
                try:
                    inner = text_format.Parse(arg.s.decode("latin-1"), caffe2_pb2.NetDef())
                except Exception:
                    return None
                inner_count = count_pickled_ops(inner, depth + 1)
                if inner_count is None:
                    return None
                total += inner_count
        total += any(arg.name in BUILDER_ARGS and arg.s for arg in op.arg)
    return total


@pytest.mark.slow
@settings(max_examples=400)
@given(st.data())
def test_fuzzed_nets_and_pickles_get_accepted_fully_verified_or_refused(data):
    source = data.draw(st.sampled_from(["binary_net", "text_step_net", "builder_pickle", "random_pickle"]))
    if source == "binary_net":
        net = caffe2_pb2.NetDef()
        try:
            with warnings.catch_warnings():  # protobuf warns when it stops early at a stray end-group tag
                warnings.simplefilter("ignore", RuntimeWarning)
                net.ParseFromString(mutate(data.draw, GOLDEN_PB))
        except Exception:  # not a NetDef at all: load_net reports it as unparseable
            return
    elif source == "text_step_net":
        net = caffe2_pb2.NetDef(name="outer")
        net.op.add(type=data.draw(st.sampled_from(["RecurrentNetwork", "RecurrentNetworkGradient"]))).arg.add(
            name="step_net", s=mutate(data.draw, GOLDEN_TEXT))
        net.op[0].arg.add(name="backward_step_net", s=net.op[0].arg[0].s)
    elif source == "builder_pickle":
        net = python_op_net(mutate(data.draw, GOOD_PICKLE))
    else:
        net = python_op_net(data.draw(st.binary(max_size=64)))
    try:
        verified = verify_net(net)
    except UnsafeNetError as error:
        assert error.problems and all(isinstance(problem.reason, str) for problem in error.problems)
        return
    oracle = count_pickled_ops(net)
    if oracle is not None:
        assert len(verified) == oracle
    for op in verified:
        assert set(op.builders) <= {"pycumsum_op.ops.builders.scan_forward", "pycumsum_op.ops.builders.scan_backward"}


def test_python_ops_without_pickles_are_never_accepted():
    for op_type in sorted(PYTHON_OP_TYPES):
        net = caffe2_pb2.NetDef(name="bare")
        net.op.add(type=op_type)
        with pytest.raises(UnsafeNetError, match="neither pickled_builder nor token"):
            verify_net(net)
