"""verify_net / load_net refuse Python ops whose pickled builders would run foreign code.

Every malicious payload here writes a marker file when it runs. A fresh process shows that plain
Caffe2 / plain pickle DOES run each one (its marker appears); verify_net refuses each, names the
op index, op type and callable, and its own marker never appears.
"""
import copyreg
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from caffe2.proto import caffe2_pb2, metanet_pb2
from caffe2.python import core, workspace
from google.protobuf import text_format
from hypothesis import given, settings, strategies as st

from pycumsum_op import UnsafeNetError, load_net, verify_net
from pycumsum_op.ops.builders import scan_backward, scan_forward
from pycumsum_op.ops.builders import BUILDERS

SYSTEM = "{}.system".format(os.system.__module__)  # "posix.system" on Linux: what pickle writes
PARAMS = {"scan": "cumsum", "axis": 1, "exclusive": False, "reverse": False, "dtype": None}
EXT_CODE = 0x5C3  # a copyreg extension code nobody else uses


class Reduce(object):
    """Pickles as ``func(*args)``: what an attacker writes with __reduce__."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)

    def __call__(self, *args):  # pickle insists that a __reduce__ callable be callable; never called
        raise AssertionError("Reduce objects are pickled, never called")


def _touch_cmd(marker):
    return "touch '{}'".format(marker)


def payloads(marker_dir):
    """name -> (builder pickle bytes, marker file, the callable verify_net must name, plain pickle runs it)."""
    def marker(name):
        return os.path.join(str(marker_dir), name)

    found = {}

    def add(name, data, callable_name, runs_on_unpickle=True):
        found[name] = (data, marker(name), callable_name, runs_on_unpickle)

    # the builder itself is os.system: plain pickle only references it, Caffe2 CALLS it at CreateNet
    add("system_builder", pickle.dumps((os.system, (_touch_cmd(marker("system_builder")),), {})), SYSTEM,
        runs_on_unpickle=False)
    add("system_in_args", pickle.dumps(
        (scan_forward, (Reduce(os.system, _touch_cmd(marker("system_in_args"))),), PARAMS)), SYSTEM)
    add("eval_in_kwargs", pickle.dumps((scan_forward, (), dict(PARAMS, axis=Reduce(
        eval, "open({!r}, 'w').close() or 1".format(marker("eval_in_kwargs")))))), "builtins.eval")
    add("subprocess_protocol0", pickle.dumps(
        (scan_forward, (Reduce(subprocess.call, ["touch", marker("subprocess_protocol0")]),), PARAMS),
        protocol=0), "subprocess.call")
    add("exec_protocol2", pickle.dumps(
        (scan_backward, (), {"x": Reduce(exec, "open({!r}, 'w').close()".format(marker("exec_protocol2")))}),
        protocol=2), "builtins.exec")
    # getattr(__import__("os"), "system")("touch ..."): a call on the result of a call
    system = Reduce(getattr, Reduce(__import__, "os"), "system")
    add("getattr_chain", pickle.dumps((scan_forward, (Reduce(system, _touch_cmd(marker("getattr_chain"))),),
                                       PARAMS)), "builtins.getattr")
    copyreg.add_extension(os.system.__module__, "system", EXT_CODE)
    try:  # EXT opcodes name os.system by a number: the unpickler's cache can skip find_class
        add("extension_code", pickle.dumps(
            (scan_forward, (Reduce(os.system, _touch_cmd(marker("extension_code"))),), PARAMS), protocol=2),
            None)
    finally:
        copyreg.remove_extension(os.system.__module__, "system", EXT_CODE)
    return found


def python_op_net(builder, grad_builder=b"", op_type="Python", name="evil_net"):
    """A NetDef whose one Python op (named like ours) carries the given pickles."""
    net = caffe2_pb2.NetDef()
    net.name = name
    op = net.op.add()
    op.type, op.name = op_type, "PyCumSum"
    op.input.append("x")
    op.output.append("y")
    for arg_name, data in (("pickled_builder", builder), ("pickled_grad_builder", grad_builder)):
        arg = op.arg.add()
        arg.name, arg.s = arg_name, data
    arg = op.arg.add()
    arg.name, arg.i = "pass_workspace", 0
    return net


DANGER_CHILD = r'''
import copyreg, json, os, pickle, sys
import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import workspace
spec = json.loads(sys.argv[1])
errors = {}
# 1. plain Caffe2: creating the net calls the builder
net = caffe2_pb2.NetDef()
with open(spec["net"], "rb") as handle:
    net.ParseFromString(handle.read())
workspace.FeedBlob("x", np.zeros(3, np.float32))
try:
    workspace.CreateNet(net)
except Exception as error:
    errors["caffe2"] = repr(error)
# 2. plain pickle.loads on each payload (an app that registered the extension code, for EXT)
copyreg.add_extension(spec["system_module"], "system", spec["ext_code"])
for name, path in spec["payloads"].items():
    with open(path, "rb") as handle:
        try:
            pickle.loads(handle.read())
        except Exception as error:
            errors[name] = repr(error)
print("REPORT" + json.dumps(errors))
'''


def test_plain_caffe2_and_plain_pickle_do_run_the_payloads(tmp_path):
    """The danger, demonstrated: a fresh process with only caffe2 runs every payload."""
    found = payloads(tmp_path)
    data, marker, _, _ = found["system_builder"]
    (tmp_path / "evil.pb").write_bytes(python_op_net(data).SerializeToString())
    files = {}
    for name, (data, _, _, runs) in found.items():
        if runs:
            files[name] = str(tmp_path / (name + ".pkl"))
            with open(files[name], "wb") as handle:
                handle.write(data)
    spec = {"net": str(tmp_path / "evil.pb"), "payloads": files, "system_module": os.system.__module__,
            "ext_code": EXT_CODE}
    proc = subprocess.run([sys.executable, "-c", DANGER_CHILD, json.dumps(spec)], cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120, universal_newlines=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert os.path.exists(marker), "Caffe2 did not run the os.system builder: " + proc.stdout
    for name, (_, payload_marker, _, runs) in found.items():
        if runs:
            assert os.path.exists(payload_marker), "plain pickle did not run payload {}: {}".format(
                name, proc.stdout)


@pytest.mark.parametrize("name", sorted(payloads("/nonexistent")))
def test_verify_refuses_each_payload_and_runs_nothing(tmp_path, name):
    data, marker, callable_name, _ = payloads(tmp_path)[name]
    copyreg.add_extension(os.system.__module__, "system", EXT_CODE)  # even when the code is registered
    try:
        with pytest.raises(UnsafeNetError) as caught:
            load_net(python_op_net(data).SerializeToString())
    finally:
        copyreg.remove_extension(os.system.__module__, "system", EXT_CODE)
    problem, = caught.value.problems
    assert (problem.op_index, problem.op_type, problem.arg) == (0, "Python", "pickled_builder")
    message = str(caught.value)
    assert "evil_net" in message and "op 0 (Python 'PyCumSum') pickled_builder" in message
    if callable_name is None:
        assert "EXT" in problem.reason
    else:
        assert problem.callable == callable_name
        assert callable_name in message and "allow=" in message
    assert not os.path.exists(marker)


def test_refused_os_system_net_cannot_be_created_through_load_net(tmp_path):
    """The whole user flow: load_net(path) raises before any NetDef reaches Caffe2."""
    data, marker, _, _ = payloads(tmp_path)["system_builder"]
    (tmp_path / "evil.pb").write_bytes(python_op_net(data).SerializeToString())
    (tmp_path / "evil.pbtxt").write_text(text_format.MessageToString(python_op_net(data)))
    for path in ("evil.pb", "evil.pbtxt"):
        with pytest.raises(UnsafeNetError, match=r"op 0 \(Python 'PyCumSum'\) pickled_builder: .*" + SYSTEM):
            load_net(tmp_path / path)
    assert not os.path.exists(marker)


def test_allowing_a_callable_lets_it_through_but_verification_still_calls_nothing(tmp_path):
    found = payloads(tmp_path)
    for allow in ([SYSTEM], [os.system], SYSTEM):
        verified = verify_net(python_op_net(found["system_builder"][0]), allow=allow)
        assert [op.op_index for op in verified] == [0]
        # allowed inside a pycumsum builder's arguments: still refused, they take plain values only
        with pytest.raises(UnsafeNetError, match="scan_forward with arguments it refuses"):
            verify_net(python_op_net(found["system_in_args"][0]), allow=allow)
    assert not any(os.path.exists(marker) for _, marker, _, _ in found.values())


def test_gradient_op_and_grad_builder_are_checked_and_all_problems_listed(tmp_path):
    evil = payloads(tmp_path)["system_builder"][0]
    good = pickle.dumps((scan_forward, (), PARAMS))
    net = python_op_net(good, evil)
    net.op.extend(python_op_net(evil, good, op_type="PythonGradient").op)
    net.op.extend(python_op_net(evil, op_type="PythonDLPack").op)
    with pytest.raises(UnsafeNetError) as caught:
        verify_net(net)
    got = [(p.op_index, p.op_type, p.arg, p.callable) for p in caught.value.problems]
    assert got == [(0, "Python", "pickled_grad_builder", SYSTEM), (1, "PythonGradient", "pickled_builder", SYSTEM),
                   (2, "PythonDLPack", "pickled_builder", SYSTEM)]
    assert "3 problem(s)" in str(caught.value)


def test_a_second_builder_argument_cannot_hide_behind_a_good_one(tmp_path):
    evil = payloads(tmp_path)["system_builder"][0]
    net = python_op_net(pickle.dumps((scan_forward, (), PARAMS)))
    net.op[0].arg.add(name="pickled_builder", s=evil)
    with pytest.raises(UnsafeNetError) as caught:
        verify_net(net)
    reasons = [(p.arg, p.callable, p.reason) for p in caught.value.problems]
    assert reasons[0] == ("pickled_builder", None, "the argument appears 2 times")
    assert reasons[1][:2] == ("pickled_builder", SYSTEM)


@pytest.mark.parametrize("data, reason", [
    (b"not a pickle", "malformed"),
    (pickle.dumps((scan_forward, (), PARAMS))[:-5], "malformed"),
    (b"\x80\x02Pfoo\n.", "PERSID"),
    (pickle.dumps([scan_forward, (), PARAMS]), "not a builder tuple"),
    (pickle.dumps((scan_forward, ())), "not a builder tuple"),
    (pickle.dumps((scan_forward, [], PARAMS)), "not tuple/dict"),
    (pickle.dumps(("scan_forward", (), PARAMS)), "names no callable"),
    (pickle.dumps((scan_forward, (), {1: 2})), "non-string keys"),
    # allowed module, other attribute: only exact allowed names pass
    (b"\x80\x04\x8c\x18pycumsum_op.ops.builders\x8c\x0fcaffe2_pb2.Enum\x93)}\x87.",
     "pycumsum_op.ops.builders.caffe2_pb2.Enum"),
    # BUILD with slot state on the placeholder of an allowed global: refused, not obeyed
    (b"\x80\x04\x8c\x18pycumsum_op.ops.builders\x8c\x0cscan_forward\x93N}\x8c\t_callable\x88s\x86b)}\x87.",
     "sets attribute '_callable'"),
    # our builder CALLED while unpickling (REDUCE): never needed, refused
    (pickle.dumps((scan_forward, (Reduce(scan_forward, "cumsum", 0),), PARAMS)), "while unpickling"),
])
def test_malformed_or_odd_builders_are_refused(data, reason):
    with pytest.raises(UnsafeNetError, match=reason.replace("(", r"\(")):
        verify_net(python_op_net(data))


def test_token_form_ops_are_reported_as_not_portable():
    net = core.Net("token_form")
    net.Python(lambda inputs, outputs: None, grad_f=lambda inputs, outputs: None)(["tx"], ["ty"])
    net.AddGradientOperators({"ty": "ty_grad"})
    with pytest.raises(UnsafeNetError) as caught:
        verify_net(net)
    got = [(p.op_index, p.op_type, p.arg) for p in caught.value.problems]
    assert got == [(0, "Python", "token"), (1, "PythonGradient", "token")]
    assert "not portable" in str(caught.value)
    bare = python_op_net(b"")
    del bare.op[0].arg[:]
    with pytest.raises(UnsafeNetError, match="neither pickled_builder nor token"):
        verify_net(bare)


def test_nested_nets_plans_and_meta_net_defs_are_searched(tmp_path):
    evil_net = python_op_net(payloads(tmp_path)["system_builder"][0], name="inner")
    outer = caffe2_pb2.NetDef(name="outer")
    if_op = outer.op.add(type="If")
    if_op.arg.add(name="then_net").n.CopyFrom(evil_net)
    rnn_op = outer.op.add(type="RecurrentNetwork")
    rnn_op.arg.add(name="step_net", s=text_format.MessageToString(evil_net).encode("utf-8"))
    with pytest.raises(UnsafeNetError) as caught:
        verify_net(outer)
    wheres = [p.where for p in caught.value.problems]
    assert wheres == ["net 'outer' op 0 (If) arg then_net > net 'inner' op 0 (Python 'PyCumSum')",
                      "net 'outer' op 1 (RecurrentNetwork) arg step_net > net 'inner' op 0 (Python 'PyCumSum')"]
    plan = caffe2_pb2.PlanDef(name="plan")
    plan.network.add().CopyFrom(evil_net)
    meta = metanet_pb2.MetaNetDef()
    meta.nets.add(key="predict", value=evil_net)
    for container in (plan, core.Net(evil_net), meta):
        with pytest.raises(UnsafeNetError, match=SYSTEM):
            verify_net(container)
    with pytest.raises(TypeError, match="verify_net takes"):
        verify_net("a string")


def test_verify_passes_real_pycumsum_nets_and_reports_their_builders():
    net = core.Net("real_cumsum")
    y = net.PyCumSum("rx", "ry", axis=0, exclusive=True, dtype="double")
    net.AddGradientOperators({y: "ry_grad"})
    verified = verify_net(net)
    assert [(op.op_index, op.op_type) for op in verified] == [(0, "Python"), (1, "PythonGradient")]
    assert all(set(op.builders) == set(BUILDERS) for op in verified)


def scale_builder(factor):
    """A user's own builder: y = factor * x."""
    def scale(inputs, outputs):
        outputs[0].feed(inputs[0].data * factor)
    return scale


def test_allowed_user_builder_verifies_and_runs(clean_workspace):
    net = core.Net("user_builder")
    net.Python((scale_builder, (3.0,), {}))(["ux"], ["uy"])
    with pytest.raises(UnsafeNetError, match=r"scale_builder, which is not allowed"):
        verify_net(net)
    assert verify_net(net, allow=[scale_builder])[0].builders == (scale_builder.__module__ + ".scale_builder",)
    assert verify_net(net, allow=scale_builder.__module__ + ".scale_builder")
    with pytest.raises(TypeError, match="allow= takes"):
        verify_net(net, allow=[3])
    netdef = load_net(net.Proto().SerializeToString(), allow=[scale_builder])
    workspace.FeedBlob("ux", np.arange(4, dtype=np.float32))
    workspace.RunNetOnce(netdef)
    np.testing.assert_array_equal(workspace.FetchBlob("uy"), np.arange(4, dtype=np.float32) * 3)


def test_array_arguments_are_refused_even_with_numpy_reconstruction_allowed():
    """An allowed callable is only recorded while verifying, but Caffe2 would run it: pycumsum_op's
    builders take plain values, so allowing numpy's reconstruction does not let an array through."""
    net = python_op_net(pickle.dumps((scan_forward, (np.arange(3),), PARAMS)))
    with pytest.raises(UnsafeNetError, match="numpy.core.multiarray._reconstruct"):
        verify_net(net)
    allow = ["numpy.core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype"]
    with pytest.raises(UnsafeNetError, match="scan_forward with arguments it refuses"):
        verify_net(net, allow=allow)


GOOD_BUILDER = pickle.dumps((scan_forward, (), PARAMS))


@settings(max_examples=200)
@given(st.data())
def test_fuzzed_builder_pickles_give_a_verdict_never_a_crash(data):
    """Mutated real builders and random bytes: verify_net passes only our builders, refuses the rest
    with UnsafeNetError, and never raises anything else."""
    blob = bytearray(GOOD_BUILDER)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(blob) - 1))
        blob[position] = data.draw(st.integers(0, 255))
    candidate = data.draw(st.one_of(st.just(bytes(blob)), st.binary(max_size=64)))
    try:
        verified = verify_net(python_op_net(candidate))
    except UnsafeNetError as error:
        assert error.problems[0].op_index == 0
    else:
        assert verified[0].builders[0] in BUILDERS
