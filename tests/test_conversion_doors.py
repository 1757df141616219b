"""What users deploy or convert is right or refused: exit 0 with a correct result, or one line and exit 2.

Nets with no ops (lower, onnx export, doctor --fix), a net that declares no outputs (onnx export),
a net made by ``onnx import`` exported back (onnxruntime and torch as oracles), token-form nets
(save_net refuses what load_net refuses), and Caffe2's stock ONNX backend after ``install()`` on
torch.onnx.export's default models (initializers not listed as inputs), opsets 11-14.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
import torch
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace
from caffe2.python.predictor import mobile_exporter

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from onnx_support import LinearSoftmaxCumSum, needs_onnx_backend, onnx_backend_refusal, onnxruntime_outputs, torch_model
from pycumsum_op.serialization import UnsafeNetError, load_net, save_net
from test_cli import own_stderr_lines

if onnx_backend_refusal() is None:  # else the ONNX tests are skipped with it (asserted: tests/test_torch_versions.py)
    import pycumsum_op.onnx

CLI = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")


def run_cli(*args):
    return subprocess.run([CLI] + [str(arg) for arg in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)


def assert_refused(result, message):
    assert result.returncode == 2, result.stderr
    assert own_stderr_lines(result.stderr) == [message]


def test_a_net_without_ops_is_refused_alike(tmp_path):
    empty = caffe2_pb2.NetDef()
    empty.name = "empty"
    empty.external_input.append("x")
    empty.external_output.append("x")
    path = tmp_path / "empty.pbtxt"
    save_net(empty, str(path))
    cases = {
        "lower": ["lower", path, "--target", "aten", "-o", tmp_path / "lowered.pb"],
        "onnx": ["onnx", "export", path, "--input", "x=float32:2,3", "-o", tmp_path / "m.onnx"],
        "doctor": ["doctor", path, "--loss", "x", "--fix", tmp_path / "fixed.pb"],
    }
    if onnx_backend_refusal() is not None:  # `onnx` refuses itself here (tests/test_torch_versions.py)
        del cases["onnx"]
    for command, args in cases.items():
        assert_refused(run_cli(*args), "pycumsum-op {}: error: net '{}' has no ops: is it a Caffe2 NetDef?".format(
            command, path))
    assert sorted(os.listdir(tmp_path)) == ["empty.pbtxt"]


@needs_onnx_backend
def test_export_refuses_a_net_without_declared_outputs(tmp_path):
    net = core.Net("no_outputs")
    net.PyCumSum("x", "y", axis=1)
    save_net(net, str(tmp_path / "net.pb"))
    result = run_cli("onnx", "export", tmp_path / "net.pb", "--input", "x=float32:2,3", "-o", tmp_path / "m.onnx")
    assert_refused(result, "pycumsum-op onnx: error: export: net '{}' declares no outputs, so the model would have "
                           "none; declare them (net.AddExternalOutput(blob), or external_output: \"BLOB\" in a "
                           ".pbtxt)".format(net.Proto().name))
    assert not (tmp_path / "m.onnx").exists()


@needs_onnx_backend
@pytest.mark.parametrize("opset", [11, 13, 14])
def test_an_imported_model_exports_back(opset, tmp_path):
    """torch -> ONNX -> `onnx import` -> Caffe2 nets -> `onnx export` -> ONNX, run by onnxruntime = torch."""
    module, x = LinearSoftmaxCumSum().eval(), torch.randn(4, 6)
    onnx.save(torch_model(module, x, opset), str(tmp_path / "head.onnx"))
    imported = run_cli("onnx", "import", tmp_path / "head.onnx", "--predict-net", tmp_path / "p.pb",
                       "--init-net", tmp_path / "i.pb")
    assert imported.returncode == 0, imported.stderr
    exported = run_cli("onnx", "export", tmp_path / "p.pb", "--init-net", tmp_path / "i.pb", "--input",
                       "x=float32:4,6", "-o", tmp_path / "back.onnx", "--opset", opset)
    assert exported.returncode == 0, exported.stderr
    model = onnx.load(str(tmp_path / "back.onnx"))
    assert [output.name for output in model.graph.output] == ["y"]
    assert {"CumSum", "MatMul"} <= {node.op_type for node in model.graph.node}
    (y,) = onnxruntime_outputs(model, {"x": x.numpy()})
    np.testing.assert_allclose(y, module(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@needs_onnx_backend
def test_export_translates_matmul_arguments_and_constants():
    """Caffe2's MatMul (axis_a, trans_b) and a 0-d GivenTensorFill become ONNX nodes meaning the same."""
    net = core.Net("matmul_constant")
    net.MatMul(["a", "b"], "ab", axis_a=2, trans_b=1)
    net.GivenTensorFill([], "half", values=[0.5], shape=[])
    net.Mul(["ab", "half"], "scaled")
    net.PyCumSum("scaled", "y", axis=0, reverse=True)
    net.AddExternalOutput(core.BlobReference("y"))
    rng = np.random.RandomState(0)
    a, b = rng.randn(2, 3, 4).astype(np.float32), rng.randn(5, 4).astype(np.float32)
    model = pycumsum_op.onnx.export(net, value_info={"a": (np.float32, a.shape), "b": (np.float32, b.shape)})
    (y,) = onnxruntime_outputs(model, {"a": a, "b": b})
    expected = torch.flip(torch.cumsum(torch.flip(torch.from_numpy(a.reshape(6, 4) @ b.T) * 0.5, [0]), 0), [0])
    np.testing.assert_allclose(y, expected.numpy(), rtol=1e-5, atol=1e-5)


def test_save_net_refuses_token_form_as_load_net_does(tmp_path):
    net = core.Net("token_form")
    net.Python(lambda inputs, outputs: None)(["x"], ["y"])
    with pytest.raises(UnsafeNetError) as saving:
        save_net(net, str(tmp_path / "net.pb"))
    assert not (tmp_path / "net.pb").exists()
    (tmp_path / "written.pb").write_bytes(net.Proto().SerializeToString())
    with pytest.raises(UnsafeNetError) as loading:
        load_net(str(tmp_path / "written.pb"))
    assert str(saving.value) == str(loading.value)
    assert "token-form Python op" in str(saving.value)


STOCK_BACKEND_SCRIPT = textwrap.dedent("""
    import io, sys, warnings
    warnings.simplefilter("ignore")
    import numpy as np
    import onnx
    import torch
    import caffe2.python.onnx.backend as stock
    import pycumsum_op.onnx
    sys.path.insert(0, sys.argv[1])
    from onnx_support import LinearSoftmaxCumSum

    class Shifted(torch.nn.Module):  # an exclusive cumsum as torch users write it: a slice Caffe2 got wrong
        def forward(self, x):
            return torch.cat([torch.zeros_like(x[:, :1]), torch.cumsum(x, 1)[:, :-1]], 1)

    def exported(module, x, opset):
        buffer = io.BytesIO()
        torch.onnx.export(module, x, buffer, opset_version=opset, input_names=["x"], output_names=["y"])
        return onnx.load_from_string(buffer.getvalue())

    x = torch.randn(3, 6)
    slicing = exported(Shifted(), x, 13)
    constants = [onnx.helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.array([v])))
                 for name, v in (("s", 0), ("e", -1), ("a", 1))]
    slice_only = onnx.helper.make_model(onnx.helper.make_graph(
        constants + [onnx.helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], "s",
        [onnx.helper.make_tensor_value_info("x", 1, [3, 6])], [onnx.helper.make_tensor_value_info("y", 1, [3, 5])]),
        opset_imports=[onnx.helper.make_opsetid("", 13)])
    print("stock slice unchanged:", stock.prepare(slice_only).run([x.numpy()])[0].shape == tuple(x.shape))
    module = LinearSoftmaxCumSum().eval()
    pycumsum_op.onnx.install()
    y = stock.prepare(slicing).run([x.numpy()]).y
    print("installed slice:", float(np.abs(y - Shifted()(x).numpy()).max()) < 1e-5)
    for opset in (11, 12, 13, 14):
        buffer = io.BytesIO()
        torch.onnx.export(module, x, buffer, opset_version=opset, input_names=["x"], output_names=["y"])
        model = onnx.load_from_string(buffer.getvalue())
        listed = {tensor.name for tensor in model.graph.initializer} & {info.name for info in model.graph.input}
        y = stock.prepare(model).run([x.numpy()]).y
        print(opset, sorted(listed), float(np.abs(y - module(x).detach().numpy()).max()) < 1e-6)
""")


@needs_onnx_backend
def test_stock_backend_after_install_runs_default_torch_exports():
    result = subprocess.run([sys.executable, "-c", STOCK_BACKEND_SCRIPT, os.path.dirname(__file__)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["stock slice unchanged: True", "installed slice: True",
                                          "11 [] True", "12 [] True", "13 [] True", "14 [] True"]


@needs_onnx_backend
@pytest.mark.parametrize("lower", [None, "aten", "portable"])
def test_an_imported_model_exports_to_a_predictor_with_exactly_its_outputs(lower):
    """CumSum's constant axis becomes PyCumSum's axis=: the op that made it must not become an output."""
    module, x = LinearSoftmaxCumSum().eval(), torch.randn(4, 6)
    model = torch_model(module, x, 13)
    init_net, predict_net = pycumsum_op.onnx.to_caffe2(model, lower=lower)
    workspace.ResetWorkspace()
    workspace.RunNetOnce(init_net)
    params = [blob for op in init_net.op for blob in op.output]
    exported_init, exported_predict = mobile_exporter.Export(workspace, predict_net, params)
    assert list(exported_predict.external_output) == ["y"]
    predictor = workspace.Predictor(exported_init.SerializeToString(), exported_predict.SerializeToString())
    np.testing.assert_allclose(predictor.run([x.numpy()])[0], module(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    workspace.ResetWorkspace()
