"""Every door that turns outside data into a Caffe2 net verifies what it makes, or refuses it.

Each attack carries an ``os.system`` pickle that would create a marker file; the marker must never
appear. Where the attack is live against Caffe2 itself, a fresh process shows that it is (the marker
appears there), so that the refusal tested here is the refusal of a real threat. Benign nets (PyCumSum
in nested nets, an LSTM from ``caffe2.python.rnn_cell`` with its gradient) keep working and are compared
with torch.
"""
import os
import pickle
import shutil
import subprocess
import sys
from xml.etree import ElementTree

import numpy as np
import onnx
import pytest
import torch
from caffe2.proto import caffe2_pb2
from caffe2.python import core, model_helper, rnn_cell, workspace
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto, helper

import pycumsum_op
from pycumsum_op import UnsafeNetError, lower, verify_net
from pycumsum_op.lowering import LoweringError
from pycumsum_op.doctor import diagnose
from onnx_support import needs_onnx_backend, onnx_backend_refusal
from rnn_support import cumsum_cell, recurrent_netdef
from test_cli import own_stderr_lines

if onnx_backend_refusal() is None:  # else the ONNX tests are skipped with it (asserted: tests/test_torch_versions.py)
    from pycumsum_op.onnx.importer import CumSumBackend

CLI = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")
SYSTEM = "{}.system".format(os.system.__module__)


def evil_pickle(marker):
    return pickle.dumps((os.system, ("touch '{}'".format(marker),), {}))


def evil_op(marker, name="PyCumSum"):
    op = caffe2_pb2.OperatorDef(type="Python", name=name, input=["x"], output=["y"])
    op.arg.add(name="pickled_builder", s=evil_pickle(marker))
    return op


def benign_pycumsum(blob_in, blob_out, name):
    """A NetDef named ``name`` holding one PyCumSum (core.Net would make the name unique per process)."""
    net = core.Net("doors_scratch")
    net.PyCumSum(blob_in, blob_out, axis=0)
    netdef = caffe2_pb2.NetDef(name=name)
    netdef.op.extend(net.Proto().op)
    return netdef


def run_cli(*args):
    return subprocess.run([CLI] + [str(arg) for arg in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)


def one_line_refusal(result, command):
    lines = own_stderr_lines(result.stderr)
    assert result.returncode == 2 and "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert lines[0].startswith("pycumsum-op {}: error:".format(command))
    return lines[0]


def python_ops_anywhere(netdef):
    """Python op types in ``netdef`` and every net nested in it, read with protobuf's own parsers
    (independent of verify_net's walk): NetDef fields anywhere, text in string arguments that parse."""
    found = []
    for op in netdef.op:
        if op.type.startswith("Python"):
            found.append(op.type)
        for arg in op.arg:
            nested = ([arg.n] if arg.HasField("n") else []) + list(arg.nets)
            if arg.s:
                parsed = caffe2_pb2.NetDef()
                try:
                    text_format.Parse(arg.s.decode("latin-1"), parsed)
                    nested.append(parsed)
                except (text_format.ParseError, UnicodeDecodeError):
                    pass
            for inner in nested:
                found += python_ops_anywhere(inner)
    return found


def run_in_fresh_process(code, tmp_path):
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    return proc


# -- ONNX import ---------------------------------------------------------------------------------------

def python_node_model(marker, domain="evil.custom"):
    """A model whose one node is a Caffe2 Python op in a custom domain; onnx.checker accepts it."""
    node = helper.make_node("Python", ["x"], ["y"], domain=domain, name="payload",
                            pickled_builder=evil_pickle(marker))
    graph = helper.make_graph([node], "attack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid(domain, 1)])


def step_net_node_model(marker):
    """A custom-domain RecurrentNetwork node whose step_net text holds the Python op: not a Python node
    itself, so only the verification of the translated net can refuse it."""
    inner = caffe2_pb2.NetDef(name="hidden_step")
    inner.op.extend([evil_op(marker)])
    node = helper.make_node("RecurrentNetwork", ["x"], ["y"], domain="evil.custom", name="carrier",
                            step_net=text_format.MessageToString(inner).encode("ascii"))
    graph = helper.make_graph([node], "attack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid("evil.custom", 1)])


STOCK_RUNS_IT = r'''
import sys, numpy as np, onnx
from caffe2.python.onnx.backend import prepare
model = onnx.load(sys.argv[1])
try:
    prepare(model).run([np.zeros(3, np.float32)])
except Exception as error:
    print("raised", type(error).__name__)
'''


@needs_onnx_backend
def test_onnx_python_node_runs_on_the_stock_backend_and_is_refused_by_every_door(tmp_path):
    marker = tmp_path / "marker"
    model = python_node_model(marker)
    onnx.checker.check_model(model)  # the attack passes onnx's own checks
    onnx.save(model, str(tmp_path / "attack.onnx"))
    proc = subprocess.run([sys.executable, "-c", STOCK_RUNS_IT, str(tmp_path / "attack.onnx")], cwd=str(tmp_path),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert marker.exists(), proc.stderr[-2000:]  # Caffe2's own backend runs the pickle: the threat is real
    marker.unlink()
    x = np.zeros(3, np.float32)
    doors = {
        "prepare": lambda: pycumsum_op.onnx.prepare(model).run([x]),
        "prepare_lower": lambda: pycumsum_op.onnx.prepare(model, lower="aten").run([x]),
        "to_caffe2": lambda: pycumsum_op.onnx.to_caffe2(model),
        "backend_run_model": lambda: CumSumBackend.run_model(model, [x]),
        "backend_run_node": lambda: CumSumBackend.run_node(model.graph.node[0], [x]),
    }
    for door, call in doors.items():
        with pytest.raises(UnsafeNetError) as caught:
            call()
        problem, = caught.value.problems
        assert (problem.op_type, problem.arg) == ("Python", "pickled_builder"), door
        assert "ONNX node 'payload' (domain 'evil.custom', op_type 'Python')" in problem.where, door
        assert "unpickles and calls its builder" in problem.reason, door
    line = one_line_refusal(run_cli("onnx", "import", tmp_path / "attack.onnx", "--predict-net", tmp_path / "p.pb",
                                    "--init-net", tmp_path / "i.pb", "--lower", "aten"), "onnx")
    assert "ONNX node 'payload'" in line and "pickled_builder" in line
    assert not marker.exists() and not (tmp_path / "p.pb").exists()


@needs_onnx_backend
def test_install_makes_the_stock_backend_verify(tmp_path):
    from caffe2.python.onnx import backend as stock

    marker = tmp_path / "marker"
    pycumsum_op.onnx.install()
    pycumsum_op.onnx.install()  # idempotent: one checked translation, not two
    for model in (python_node_model(marker), step_net_node_model(marker)):
        # a Python node is refused as unsafe; a step-net carrier has no accepted ONNX form: never translated
        with pytest.raises(ValueError, match="pickled_builder|has no accepted forms"):
            stock.prepare(model).run([np.zeros(3, np.float32)])
        with pytest.raises(ValueError, match="pickled_builder|has no accepted forms"):
            stock.Caffe2Backend.onnx_graph_to_caffe2_net(model)
    assert not marker.exists()


@needs_onnx_backend
def test_nodes_carrying_nested_nets_are_refused_before_translation(tmp_path):
    """A RecurrentNetwork node carrying a step net is no accepted ONNX form: refused before any net is made (the
    nets a translation makes are verified with their nested nets as well: `verify_translation`)."""
    marker = tmp_path / "marker"
    model = step_net_node_model(marker)
    with pytest.raises(ValueError, match=r"^ONNX RecurrentNetwork node 'carrier' \(opset 11\): domain 'evil.custom' "
                                         r"has no accepted forms"):
        pycumsum_op.onnx.prepare(model)
    onnx.save(model, str(tmp_path / "carrier.onnx"))
    line = one_line_refusal(run_cli("onnx", "import", tmp_path / "carrier.onnx", "--predict-net", tmp_path / "p.pb",
                                    "--init-net", tmp_path / "i.pb"), "onnx")
    assert "ONNX RecurrentNetwork node 'carrier' (opset 11): domain 'evil.custom' has no accepted forms" in line
    assert not marker.exists() and not (tmp_path / "p.pb").exists()


@needs_onnx_backend
def test_torch_exported_onnx_models_still_import_and_match_torch():
    class Head(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(torch.relu(x), dim=1)

    x = torch.randn(3, 5)
    path_model = _torch_onnx(Head(), x)
    for lowered in (None, "aten"):
        y = pycumsum_op.onnx.prepare(path_model, lower=lowered).run([x.numpy()])[0]
        np.testing.assert_allclose(y, Head()(x).numpy(), rtol=1e-6, atol=1e-6)


def _torch_onnx(module, x):
    import io
    buffer = io.BytesIO()
    torch.onnx.export(module, (x,), buffer, opset_version=11, input_names=["x"], output_names=["y"])
    return onnx.load_from_string(buffer.getvalue())


# -- lower ---------------------------------------------------------------------------------------------

def if_net(then_net, name="if_outer"):
    outer = caffe2_pb2.NetDef(name=name, external_input=["cond", "x"])
    outer.op.add(type="If", input=["cond"]).arg.add(name="then_net").n.CopyFrom(then_net)
    return outer


@pytest.mark.parametrize("target", ["aten", "portable"])
def test_lower_lowers_pycumsum_inside_if_and_matches_torch(target, clean_workspace):
    lowered = lower(if_net(benign_pycumsum("x", "y", "then_branch")), target, shapes={"x": (4, 3)},
                    dtypes={"x": np.float32})
    assert python_ops_anywhere(lowered) == []
    x = np.random.RandomState(0).randn(4, 3).astype(np.float32)
    workspace.FeedBlob("cond", np.array(True))
    workspace.FeedBlob("x", x)
    workspace.RunNetOnce(lowered)
    np.testing.assert_allclose(workspace.FetchBlob("y"), torch.cumsum(torch.from_numpy(x), 0).numpy(),
                               rtol=1e-5, atol=1e-5)


def rnn_with_pycumsum(name, text):
    """h_t = x_t + cumsum(h_{t-1}, -1) as a trainable RecurrentNetwork with its gradient op; both ops carry
    both step nets, as NetDef or as text."""
    net = core.Net(recurrent_netdef(name, cumsum_cell, forward_only=False))
    net.AddGradientOperators({net.Proto().op[-1].output[0]: name + "_out_grad"})
    net.Proto().external_input.append(name + "_out_grad")
    netdef = net.Proto()
    for op in netdef.op:
        for arg in op.arg:
            if text and arg.name.endswith("step_net"):
                arg.s = text_format.MessageToString(arg.n).encode("ascii")
                arg.ClearField("n")
    return netdef


@pytest.mark.parametrize("text", [False, True], ids=["netdef", "text"])
def test_lower_lowers_pycumsum_in_rnn_step_nets_forward_and_gradient_and_matches_torch(text, clean_workspace):
    name = "lrnn_" + ("t" if text else "n")
    netdef = rnn_with_pycumsum(name, text)
    assert [op.type for op in netdef.op] == ["RecurrentNetwork", "RecurrentNetworkGradient"]
    assert sorted(python_ops_anywhere(netdef)) == ["Python"] * 2 + ["PythonGradient"] * 2
    lowered = lower(netdef, "aten")
    assert python_ops_anywhere(lowered) == []
    assert all(bool(arg.s) == text for op in lowered.op for arg in op.arg if arg.name.endswith("step_net"))
    rng = np.random.RandomState(1)
    x, h0, grad = rng.randn(3, 2, 4), rng.randn(1, 2, 4), rng.randn(3, 2, 4)
    for blob, value in (("_x", x), ("_h0", h0), ("_out_grad", grad)):
        workspace.FeedBlob(name + blob, value.astype(np.float32))
    workspace.RunNetOnce(lowered)
    x_ref, h0_ref = torch.from_numpy(x).requires_grad_(), torch.from_numpy(h0[0]).requires_grad_()
    h, states = h0_ref, []
    for t in range(3):
        h = x_ref[t] + torch.cumsum(h, -1)
        states.append(h)
    (torch.stack(states) * torch.from_numpy(grad)).sum().backward()
    for blob, expected in ((lowered.op[0].output[0], torch.stack(states).detach()), (name + "_x_grad", x_ref.grad),
                           (name + "_h0_grad", h0_ref.grad[None])):
        np.testing.assert_allclose(workspace.FetchBlob(blob), expected.numpy(), rtol=1e-4, atol=1e-4)


def nested_carriers(inner):
    """{form: net} holding ``inner`` where Caffe2 creates nets: If, While, Do, step nets as NetDef and text."""
    text = text_format.MessageToString(inner).encode("ascii")
    nets = {}
    for name, (op_type, arg_name, as_text) in {
            "if": ("If", "then_net", False), "while": ("While", "loop_net", False), "do": ("Do", "net", False),
            "step_net": ("RecurrentNetwork", "step_net", True),
            "forward_backward_step_net": ("RecurrentNetwork", "backward_step_net", True),
            "gradient_backward_step_net": ("RecurrentNetworkGradient", "backward_step_net", True),
            "custom_text_net": ("SomeFutureOp", "body_net", True)}.items():
        outer = caffe2_pb2.NetDef(name="outer_" + name)
        arg = outer.op.add(type=op_type, name="holder").arg.add(name=arg_name)
        if as_text:
            arg.s = text
        else:
            arg.n.CopyFrom(inner)
        nets[name] = outer
    return nets


def test_lower_refuses_a_python_op_it_cannot_lower_in_any_nested_net(tmp_path):
    marker = tmp_path / "marker"
    inner = caffe2_pb2.NetDef(name="hidden")
    inner.op.extend([evil_op(marker)])
    for form, outer in nested_carriers(inner).items():
        for target in ("aten", "portable"):
            with pytest.raises(LoweringError) as caught:
                lower(outer, target)
            message = str(caught.value)
            assert "op 0 ({} 'holder') arg".format(outer.op[0].type) in message, (form, message)
            assert "> net 'hidden' op 0 (Python 'PyCumSum'" in message, (form, message)
    path = tmp_path / "nested.pb"
    path.write_bytes(nested_carriers(inner)["step_net"].SerializeToString())
    line = one_line_refusal(run_cli("lower", path, "-o", tmp_path / "out.pb"), "lower")
    assert "arg step_net > net 'hidden' op 0 (Python 'PyCumSum'" in line
    assert not marker.exists() and not (tmp_path / "out.pb").exists()


def test_lower_refuses_a_nested_net_it_cannot_read():
    outer = caffe2_pb2.NetDef(name="outer")
    outer.op.add(type="RecurrentNetwork").arg.add(name="step_net", s=b'op { type: "Python" } \xff')
    with pytest.raises(LoweringError, match="step_net: Caffe2 may read this argument as a text NetDef"):
        lower(outer)


# -- verify_net: the step nets of RecurrentNetwork, forward and gradient ---------------------------------

GRADIENT_RUNS_IT = r'''
import sys
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace
import numpy as np
net = caffe2_pb2.NetDef()
net.ParseFromString(open(sys.argv[1], "rb").read())
wrapped = core.Net(net)
wrapped.AddGradientOperators({net.op[-1].output[0]: "rnn_out_grad"})
wrapped.Proto().external_input.append("rnn_out_grad")
workspace.FeedBlob("rnn_x", np.ones((2, 1, 3), np.float32))
workspace.FeedBlob("rnn_h0", np.ones((1, 1, 3), np.float32))
workspace.FeedBlob("rnn_out_grad", np.ones((2, 1, 3), np.float32))
try:
    workspace.RunNetOnce(wrapped.Proto())
except Exception as error:
    print("raised", str(error).splitlines()[0][:200])
'''


def rnn_with_backward_text(marker):
    """A trainable RecurrentNetwork (h_t = x_t * h_{t-1}) whose backward_step_net text holds the Python op."""
    netdef = recurrent_netdef("rnn", lambda net, x_t, h_prev: net.Mul([x_t, h_prev], "h_t"), forward_only=False)
    backward_arg, = [arg for arg in netdef.op[-1].arg if arg.name == "backward_step_net"]
    backward = caffe2_pb2.NetDef()
    backward.CopyFrom(backward_arg.n)  # recurrent_net writes a NetDef; the text form is Caffe2's other one
    evil = backward.op.add()
    evil.CopyFrom(evil_op(marker))
    del evil.input[:], evil.output[:]
    backward_arg.ClearField("n")
    backward_arg.s = text_format.MessageToString(backward).encode("ascii")
    return netdef


def test_a_forward_rnn_backward_step_net_text_is_read(tmp_path):
    marker = tmp_path / "marker"
    netdef = rnn_with_backward_text(marker)
    (tmp_path / "rnn.pb").write_bytes(netdef.SerializeToString())
    proc = run_in_fresh_process(GRADIENT_RUNS_IT.replace("sys.argv[1]", repr(str(tmp_path / "rnn.pb"))), tmp_path)
    assert marker.exists(), proc.stderr[-2000:]  # the gradient op parses the copied text and runs the pickle
    marker.unlink()
    with pytest.raises(UnsafeNetError) as caught:
        pycumsum_op.load_net(str(tmp_path / "rnn.pb"))
    problem, = caught.value.problems
    assert problem.callable == SYSTEM and problem.arg == "pickled_builder"
    assert "op 0 (RecurrentNetwork" in problem.where and "arg backward_step_net > net" in problem.where
    with pytest.raises(LoweringError, match="arg backward_step_net > net"):
        lower(netdef)
    assert not marker.exists()


def test_every_nested_form_is_verified(tmp_path):
    marker = tmp_path / "marker"
    inner = caffe2_pb2.NetDef(name="hidden")
    inner.op.extend([evil_op(marker)])
    for form, outer in nested_carriers(inner).items():
        with pytest.raises(UnsafeNetError) as caught:
            verify_net(outer)
        assert [p.callable for p in caught.value.problems] == [SYSTEM], form
    benign = benign_pycumsum("x", "y", "hidden")
    for form, outer in nested_carriers(benign).items():
        assert [op.builders[0] for op in verify_net(outer)] == ["pycumsum_op.ops.builders.scan_forward"], form
        with pytest.raises(UnsafeNetError, match="must hold none"):
            verify_net(outer, python_ops=False)


def lstm_net(forward_only):
    model = model_helper.ModelHelper(name="lstm")
    x, lengths, h0, c0 = model.net.AddExternalInputs("lx", "llen", "lh0", "lc0")
    (out, _, _, _) = rnn_cell.LSTM(model, x, lengths, (h0, c0), 3, 4, scope="lstm", forward_only=forward_only)
    loss = model.net.SumElements(out, "lloss")
    if not forward_only:
        model.AddGradientOperators([loss])
    return model, out


def test_real_lstm_forward_and_gradient_verify_lower_and_match_torch(clean_workspace):
    model, out = lstm_net(forward_only=False)
    full = model.net.Proto()
    assert [op.type for op in full.op].count("RecurrentNetworkGradient") == 1
    assert verify_net(full) == [] and verify_net(model.param_init_net) == []
    lowered = lower(full)
    assert lowered == full  # nothing to lower: every op, nested nets included, as it was
    T, N = 5, 2
    rng = np.random.RandomState(0)
    x = rng.randn(T, N, 3).astype(np.float32)
    h0, c0 = (rng.randn(1, N, 4).astype(np.float32) for _ in range(2))
    workspace.RunNetOnce(model.param_init_net)
    for blob, value in (("lx", x), ("llen", np.full(N, T, np.int32)), ("lh0", h0), ("lc0", c0)):
        workspace.FeedBlob(blob, value)
    workspace.RunNetOnce(pycumsum_op.load_net(lowered.SerializeToString()))
    weights = {name: torch.from_numpy(workspace.FetchBlob("lstm/" + name).copy()).double()
               for name in ("i2h_w", "i2h_b", "gates_t_w", "gates_t_b")}
    # Caffe2 orders the gates i, f, o, g; torch i, f, g, o
    order = torch.cat([torch.arange(0, 8), torch.arange(12, 16), torch.arange(8, 12)])
    reference = torch.nn.LSTM(3, 4).double()
    with torch.no_grad():
        reference.weight_ih_l0.copy_(weights["i2h_w"][order])
        reference.bias_ih_l0.copy_(weights["i2h_b"][order])
        reference.weight_hh_l0.copy_(weights["gates_t_w"][order])
        reference.bias_hh_l0.copy_(weights["gates_t_b"][order])
    x_ref = torch.from_numpy(x).double().requires_grad_()
    y_ref, _ = reference(x_ref, (torch.from_numpy(h0).double(), torch.from_numpy(c0).double()))
    y_ref.sum().backward()
    np.testing.assert_allclose(workspace.FetchBlob(str(out)), y_ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(workspace.FetchBlob("lx_grad"), x_ref.grad.numpy(), rtol=1e-4, atol=1e-5)


# -- the doctor ----------------------------------------------------------------------------------------

def test_the_doctor_reports_an_unsafe_net_as_unsafe(tmp_path):
    marker = tmp_path / "marker"
    net = caffe2_pb2.NetDef(name="suspect", external_input=["x"])
    net.op.extend([evil_op(marker)])
    net.op.add(type="SumElements", input=["y"], output=["loss"])
    with pytest.raises(UnsafeNetError, match="pickled_builder"):
        diagnose(net, ["loss"])
    for nested in (False, True):
        path = tmp_path / "suspect{}.pb".format(int(nested))
        path.write_bytes((if_net(net, "outer") if nested else net).SerializeToString())
        result = run_cli("doctor", path, "--loss", "loss" if not nested else "cond")
        line = one_line_refusal(result, "doctor")
        assert "healthy" not in result.stdout + result.stderr
        assert "refusing net" in line and "op 0 (Python 'PyCumSum') pickled_builder" in line and SYSTEM in line
    assert not marker.exists()


# -- fuzz ----------------------------------------------------------------------------------------------

_CARRIERS = [("If", "then_net", "n"), ("While", "loop_net", "n"), ("Do", "net", "n"), ("Relu", "anything", "nets"),
             ("RecurrentNetwork", "step_net", "s"), ("RecurrentNetwork", "backward_step_net", "s"),
             ("RecurrentNetworkGradient", "backward_step_net", "s"), ("RecurrentNetworkGradient", "step_net", "s"),
             ("Unknown", "other_net", "s")]


@st.composite
def net_trees(draw, depth=0):
    """(NetDef, number of evil ops in it): ops are benign PyCumSum, evil Python ops, plain ops, or carriers
    of a nested tree in any form Caffe2 reads."""
    net = caffe2_pb2.NetDef(name="n{}_{}".format(depth, draw(st.integers(0, 99))))
    evil = 0
    for index in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["pycumsum", "evil", "plain", "carrier"] if depth < 3 else
                                    ["pycumsum", "evil", "plain"]))
        blob_in, blob_out = "b{}_{}_in".format(depth, index), "b{}_{}_out".format(depth, index)
        if kind == "pycumsum":
            net.op.extend(benign_pycumsum(blob_in, blob_out, "fuzz").op)
        elif kind == "evil":
            net.op.extend([evil_op(FUZZ_MARKER)])
            evil += 1
        elif kind == "plain":
            net.op.add(type="Relu", input=[blob_in], output=[blob_out])
        else:
            op_type, arg_name, field = draw(st.sampled_from(_CARRIERS))
            inner, inner_evil = draw(net_trees(depth + 1))
            arg = net.op.add(type=op_type).arg.add(name=arg_name)
            if field == "n":
                arg.n.CopyFrom(inner)
            elif field == "nets":
                arg.nets.add().CopyFrom(inner)
            else:
                arg.s = text_format.MessageToString(inner).encode("ascii")
            evil += inner_evil
    return net, evil


FUZZ_MARKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz-marker-must-not-exist")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(net_trees())
def test_fuzz_nested_nets_verify_and_lower(tree):
    netdef, evil = tree
    expected_python = len(python_ops_anywhere(netdef))
    if evil:
        with pytest.raises(UnsafeNetError) as caught:
            verify_net(netdef)
        assert [p.callable for p in caught.value.problems] == [SYSTEM] * evil
        with pytest.raises(LoweringError, match=r"Python 'PyCumSum'"):
            lower(netdef)
    else:
        assert len(verify_net(netdef)) == expected_python
        lowered = lower(netdef)
        assert python_ops_anywhere(lowered) == []
        assert verify_net(lowered, python_ops=False) == []
    assert not os.path.exists(FUZZ_MARKER)


@needs_onnx_backend
def test_backend_run_node_still_runs_standard_nodes_like_torch():
    x = np.random.RandomState(0).randn(2, 5).astype(np.float32)
    y, = CumSumBackend.run_node(helper.make_node("Relu", ["x"], ["y"]), [x])
    np.testing.assert_array_equal(y, torch.relu(torch.from_numpy(x)).numpy())
    y, = CumSumBackend.run_node(helper.make_node("Softmax", ["x"], ["y"], axis=1), {"x": x}, opset_version=11)
    np.testing.assert_allclose(y, torch.softmax(torch.from_numpy(x), 1).numpy(), rtol=1e-5, atol=1e-6)


def test_lower_command_lowers_nested_nets(tmp_path):
    path = tmp_path / "nested.pbtxt"
    path.write_text(text_format.MessageToString(nested_carriers(benign_pycumsum("x", "y", "inner"))["step_net"]))
    result = run_cli("lower", path, "-o", tmp_path / "out.pb")
    assert result.returncode == 0, result.stderr
    assert "lowered 1 Python op(s) to target aten" in result.stdout
    lowered = pycumsum_op.load_net(str(tmp_path / "out.pb"))
    assert python_ops_anywhere(lowered) == [] and verify_net(lowered, python_ops=False) == []
    step_text = lowered.op[0].arg[0].s
    assert b'type: "ATen"' in step_text and b"Python" not in step_text


@st.composite
def onnx_graphs(draw, depth=0):
    """(nodes, number of foreign pickles): a chain x -> ... -> y of Relu nodes, Python nodes in a custom
    domain, custom-domain RecurrentNetwork nodes carrying a step net (benign or not) as text, and If nodes
    whose branches are such chains."""
    nodes, evil, current = [], 0, "x"
    for index in range(draw(st.integers(1, 4))):
        out = "t_d{}_{}".format(depth, index)
        kind = draw(st.sampled_from(["relu"] * 4 + ["python", "carrier"] + (["if"] if depth < 2 else [])))
        if kind == "relu":
            nodes.append(helper.make_node("Relu", [current], [out]))
        elif kind == "python":
            nodes.append(helper.make_node("Python", [current], [out], domain="fuzz.custom",
                                          pickled_builder=evil_pickle(FUZZ_MARKER)))
            evil += 1
        elif kind == "carrier":
            foreign = draw(st.booleans())
            inner = caffe2_pb2.NetDef(name="carried")
            inner.op.extend([evil_op(FUZZ_MARKER)] if foreign else benign_pycumsum("a", "b", "carried").op)
            nodes.append(helper.make_node("RecurrentNetwork", [current], [out], domain="fuzz.custom",
                                          step_net=text_format.MessageToString(inner).encode("ascii")))
            evil += foreign
        else:
            branches = []
            for branch in ("then", "else"):
                inner_nodes, inner_evil = draw(onnx_graphs(depth + 1))
                inner_nodes.append(helper.make_node("Identity", [inner_nodes[-1].output[0]], [branch + out]))
                branches.append(helper.make_graph(inner_nodes, branch, [], [
                    helper.make_tensor_value_info(branch + out, TensorProto.FLOAT, [3])]))
                evil += inner_evil
            cond = "c_{}_{}".format(depth, index)
            nodes.append(helper.make_node("Constant", [], [cond], value=helper.make_tensor(cond, TensorProto.BOOL,
                                                                                           [], [True])))
            nodes.append(helper.make_node("If", [cond], [out], then_branch=branches[0], else_branch=branches[1]))
        current = out
    return nodes, evil


@needs_onnx_backend
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(onnx_graphs())
def test_fuzz_onnx_graphs_are_refused_exactly_when_a_foreign_pickle_is_reachable(graph_and_evil):
    nodes, evil = graph_and_evil
    nodes = nodes + [helper.make_node("Identity", [nodes[-1].output[0]], ["y"])]
    graph = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid("fuzz.custom", 1)])
    try:
        pycumsum_op.onnx.to_caffe2(model)
    except UnsafeNetError as error:
        assert evil and error.problems
        assert all(problem.arg == "pickled_builder" for problem in error.problems)
    except ValueError as error:  # FormRefused: RecurrentNetwork and If have no accepted ONNX form, never translated
        assert any(node.op_type in ("RecurrentNetwork", "If") for node in nodes), error
    else:
        assert not evil
    assert not os.path.exists(FUZZ_MARKER)


@needs_onnx_backend
def test_the_stock_zip_archive_reader_is_guarded_after_install(tmp_path, monkeypatch):
    """Caffe2's ``prepare_zip_archive`` read the model with onnx.load, which resolved an external-data location
    against the working folder (``sub/../../secret`` here names a real file); after install() it reads the
    archive as CumSumBackend does, and the tensor that points outside is refused before anything reads it."""
    import zipfile

    from caffe2.python.onnx.backend import Caffe2Backend

    import pycumsum_op.onnx
    from pycumsum_op.onnx.model_input import ExternalDataError

    (tmp_path / "work" / "sub").mkdir(parents=True)
    (tmp_path / "secret").write_bytes(np.full(3, 7, np.float32).tobytes())
    monkeypatch.chdir(str(tmp_path / "work"))
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "zipped",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    weight = graph.initializer.add(name="w", data_type=TensorProto.FLOAT, dims=[3])
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value="sub/../../secret")
    archive = str(tmp_path / "model.zip")
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("__MODEL_PROTO", helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 11)]).SerializeToString())
    pycumsum_op.onnx.install()
    for reader in (Caffe2Backend.prepare_zip_archive, pycumsum_op.onnx.backend.prepare_zip_archive):
        with pytest.raises(ExternalDataError, match="ONNX tensor 'w' keeps its data in an external file"):
            reader(archive)


# The doctor's drawings: a net's names are text in the picture, never DOT or SVG, and nothing in the SVG links,
# loads or runs. The oracle is the SVG itself, read with ElementTree: the text graphviz shows for each name.
INJECTED_NAME = '"x" { injected [URL="javascript:alert(document.domain)", label="click me"]; } /*"'


def sparse_gradient_netdef(name="drawn", op_name="", blobs=("x", "x_T", "idx", "len", "s", "y")):
    """Transpose -> SparseLengthsSum -> Transpose -> SumElements: one finding (Transpose refuses the sparse
    gradient SparseLengthsSum makes), every name given."""
    x, x_t, indices, lengths, summed, y = blobs
    netdef = caffe2_pb2.NetDef(name=name)
    netdef.op.add(type="Transpose", name=op_name, input=[x], output=[x_t])
    netdef.op.add(type="SparseLengthsSum", input=[x_t, indices, lengths], output=[summed])
    netdef.op.add(type="Transpose", input=[summed], output=[y])
    netdef.op.add(type="SumElements", input=[y], output=["loss"])
    return netdef


def svg_texts(svg: bytes) -> list:
    """The text of every <text> element of ``svg``, as a browser shows it."""
    return ["".join(element.itertext()) for element in ElementTree.fromstring(svg).iter()
            if element.tag.rpartition("}")[2] == "text"]


def assert_inert(svg: bytes):
    """No link, script, event handler or URL anywhere in the SVG's markup (its text may spell anything)."""
    for element in ElementTree.fromstring(svg).iter():
        assert element.tag.rpartition("}")[2] not in ("a", "script", "foreignObject", "image", "use"), element.tag
        for attribute, value in element.attrib.items():
            assert "href" not in attribute.lower() and not attribute.lower().rpartition("}")[2].startswith("on")
            assert "javascript" not in value.lower() and "url" not in attribute.lower(), (attribute, value)


needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")


@needs_dot
def test_a_drawn_net_name_cannot_write_dot_or_links_into_the_picture():
    from pycumsum_op.doctor.draw import draw_findings
    netdef = sparse_gradient_netdef(INJECTED_NAME)
    svg = draw_findings(netdef, diagnose(netdef, ["loss"]))
    assert_inert(svg)
    texts = svg_texts(svg)
    assert INJECTED_NAME in texts  # the caption shows the name, whole, as text
    assert "click me" not in texts  # no node of the name's making
    assert "#0 Transpose" in texts and "refuses the sparse gradient" in texts


@needs_dot
@pytest.mark.parametrize("name, seen", [
    ("relu\\", "relu\\"), ("a\\nb\\l\\N\\G", "a\\nb\\l\\N\\G"), ('q"uote', 'q"uote'),
    ("&#60;script&#62;&amp;", "&#60;script&#62;&amp;"), ("</text><script>alert(1)</script>", None),
    ("line\nbreak\x00\u202eevil\u2028", "line\\x0abreak\\x00\\u202eevil\\u2028"), ("{ } [ ] ; -> --", None),
    ("n" * 300, "n" * 120 + "...(+180 chars)")])
def test_names_are_escaped_for_dot_and_shown_as_text(name, seen):
    """In an op's name, a blob's name and the net's name alike: drawn, inert, and shown as the text itself
    (control and format characters as visible escapes, long names cut)."""
    from pycumsum_op.doctor.draw import draw_findings
    seen = name if seen is None else seen
    netdef = sparse_gradient_netdef(name, op_name=name, blobs=(name, "x_T", "idx", "len", "s", "y"))
    svg = draw_findings(netdef, diagnose(netdef, ["loss"]))
    assert_inert(svg)
    texts = svg_texts(svg)
    assert seen in texts and "#0 Transpose " + seen in texts, texts


@pytest.mark.slow  # forty dot runs
@needs_dot
@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("C", "Zl", "Zp")), min_size=1, max_size=30).filter(
    lambda text: text.strip() == text and "  " not in text), min_size=4, max_size=4, unique=True))
def test_fuzzed_printable_names_are_drawn_as_themselves(names):
    """Any printable name (graphviz trims and folds spaces itself: names without them at the ends or doubled)."""
    from pycumsum_op.doctor.draw import draw_findings
    netdef = sparse_gradient_netdef(names[0], blobs=tuple(names) + ("s", "y"))
    svg = draw_findings(netdef, diagnose(netdef, ["loss"]))
    assert_inert(svg)
    texts = svg_texts(svg)
    for name in names:
        assert name in texts, (name, texts)


def test_an_svg_with_a_link_script_or_handler_is_refused():
    from pycumsum_op.doctor.draw import DrawingRefused, check_inert
    head = b'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
    check_inert(head + b"<g><text>javascript:alert(1)</text></g></svg>")  # text is text
    for body, words in [(b'<a xlink:href="javascript:alert(1)"><text>x</text></a>', "<a> element"),
                        (b"<script>alert(1)</script>", "<script> element"),
                        (b'<g onload="alert(1)"/>', "has a onload attribute"),
                        (b'<text href="https://example.com">x</text>', "has a href attribute"),
                        (b"<g>", "not well-formed")]:
        with pytest.raises(DrawingRefused, match=words):
            check_inert(head + body + b"</svg>")


@pytest.mark.slow  # two pycumsum-op processes
@needs_dot
def test_the_doctor_draws_a_hostile_net_or_refuses_it_in_one_line(tmp_path):
    """The command: the injected name and an op named ``relu\\`` drawn (exit 1: findings), the SVG inert; a dot
    that fails is one line."""
    netdef = sparse_gradient_netdef(INJECTED_NAME, op_name="relu\\")
    predict, svg = tmp_path / "p.pb", tmp_path / "drawn.svg"
    predict.write_bytes(netdef.SerializeToString())
    result = run_cli("doctor", predict, "--loss", "loss", "--draw", svg)
    assert result.returncode == 1 and own_stderr_lines(result.stderr) == [], result.stderr
    drawn = svg.read_bytes()
    assert_inert(drawn)
    assert sorted(os.listdir(str(tmp_path))) == ["drawn.svg", "p.pb"]  # nothing but the named output
    assert "#0 Transpose relu\\" in svg_texts(drawn) and INJECTED_NAME in svg_texts(drawn)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dot").write_text("#!/bin/sh\necho 'Error: out of cheese' >&2\nexit 3\n")
    (fake / "dot").chmod(0o755)
    refused = subprocess.run([CLI, "doctor", str(predict), "--loss", "loss", "--draw", str(tmp_path / "r.svg")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300,
                             env=dict(os.environ, PATH="{}:{}".format(fake, os.environ["PATH"])))
    assert refused.returncode == 2 and not (tmp_path / "r.svg").exists()
    assert own_stderr_lines(refused.stderr) == [
        "pycumsum-op doctor: error: --draw: graphviz's dot failed (exit 3): Error: out of cheese"]


def test_a_dot_past_its_time_limit_is_refused_in_one_line(tmp_path, monkeypatch):
    """A dot that never finishes (here a script whose child holds the pipes) is killed with its process group."""
    import time
    from pycumsum_op.doctor import draw
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\nsleep 60 &\nsleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", "{}:{}".format(tmp_path, os.environ["PATH"]))
    monkeypatch.setattr(draw, "DOT_SECONDS", 0.5)
    netdef = sparse_gradient_netdef()
    start = time.monotonic()
    with pytest.raises(draw.DrawingRefused, match=r"^graphviz's dot did not lay out the drawing within 0.5 s "
                                                  r"\(DOT_SECONDS\)$"):
        draw.draw_findings(netdef, diagnose(netdef, ["loss"]))
    assert time.monotonic() - start < 5


def test_dot_runs_with_its_address_space_capped(tmp_path, monkeypatch):
    """The limit dot runs under, as dot's process sees it (a stand-in that reports it and fails)."""
    from pycumsum_op.doctor import draw
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\nexec {} -c 'import resource, sys; print(resource.getrlimit(resource.RLIMIT_AS)[0], "
                    "file=sys.stderr); sys.exit(4)'\n".format(sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", "{}:{}".format(tmp_path, os.environ["PATH"]))
    netdef = sparse_gradient_netdef()
    with pytest.raises(draw.DrawingRefused, match=r"^graphviz's dot failed \(exit 4\): {}$".format(2 ** 30)):
        draw.draw_findings(netdef, diagnose(netdef, ["loss"]))
