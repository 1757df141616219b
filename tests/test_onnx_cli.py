"""``pycumsum-op onnx import|export`` as users run it: subprocesses on files; exit 0, or 2 with one line."""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from caffe2.python import core
from onnx import TensorProto

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from onnx_support import LinearSoftmaxCumSum, cumsum_model, onnxruntime_outputs, run_saved_nets, torch_model
from pycumsum_op.serialization import load_net

pytestmark = pytest.mark.slow  # a pycumsum-op process per run

CLI = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")


def run_cli(*args):
    return subprocess.run([CLI] + [str(arg) for arg in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)


def test_import_writes_nets_that_equal_torch(tmp_path):
    module, x = LinearSoftmaxCumSum().eval(), torch.randn(3, 6)
    onnx.save(torch_model(module, x, 13), str(tmp_path / "head.onnx"))
    result = run_cli("onnx", "import", tmp_path / "head.onnx", "--predict-net", tmp_path / "p.pbtxt",
                     "--init-net", tmp_path / "i.pb")
    assert result.returncode == 0, result.stderr
    assert "head.onnx" in result.stdout
    y = run_saved_nets(tmp_path / "i.pb", tmp_path / "p.pbtxt", {"x": x.numpy()}, "y")
    np.testing.assert_allclose(y, module(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", ["aten", "portable"])
def test_import_lower_writes_nets_without_python_ops(target, tmp_path):
    module, x = LinearSoftmaxCumSum().eval(), torch.randn(5, 6)
    onnx.save(torch_model(module, x, 14), str(tmp_path / "head.onnx"))
    result = run_cli("onnx", "import", tmp_path / "head.onnx", "--predict-net", tmp_path / "p.pb",
                     "--init-net", tmp_path / "i.pbtxt", "--lower", target)
    assert result.returncode == 0, result.stderr
    assert "(CumSum lowered to {})".format(target) in result.stdout
    nets = [load_net(str(tmp_path / name)) for name in ("p.pb", "i.pbtxt")]
    assert [op.type for net in nets for op in net.op if op.type.startswith("Python")] == []
    y = run_saved_nets(tmp_path / "i.pbtxt", tmp_path / "p.pb", {"x": x.numpy()}, "y")
    np.testing.assert_allclose(y, module(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_import_lower_refuses_a_runtime_axis_in_one_line(tmp_path):
    onnx.save(cumsum_model(TensorProto.FLOAT, (2, 3), 0, "input", 11), str(tmp_path / "runtime_axis.onnx"))
    args = ["onnx", "import", tmp_path / "runtime_axis.onnx", "--predict-net", tmp_path / "p.pb", "--init-net",
            tmp_path / "i.pb", "--lower", "portable"]
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("pycumsum-op onnx: error: cannot import '{}': pycumsum_op.onnx.prepare(lower="
                                    "'portable'): ONNX CumSum node 'y': its axis 'axis' is a graph input, known only "
                                    "at run time".format(tmp_path / "runtime_axis.onnx")), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "p.pb").exists()
    assert run_cli(*args[:-2]).returncode == 0  # without --lower: PyCumSum reads the axis at run time
    unknown = run_cli(*args[:-1] + ["python"])
    assert unknown.returncode == 2 and "argument --lower: invalid choice: 'python'" in unknown.stderr


def test_export_writes_a_model_onnxruntime_runs(tmp_path):
    net = core.Net("cli_export")
    net.Relu("data", "relu")
    net.PyCumSum("relu", "y", axis=1, exclusive=True)
    net.AddExternalOutput(core.BlobReference("y"))
    (tmp_path / "p.pb").write_bytes(net.Proto().SerializeToString())
    result = run_cli("onnx", "export", tmp_path / "p.pb", "--input", "data=float32:4,6", "-o", tmp_path / "m.onnx",
                     "--opset", "14")
    assert result.returncode == 0, result.stderr
    model = onnx.load(str(tmp_path / "m.onnx"))
    assert model.opset_import[0].version == 14
    data = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    relu = np.maximum(data.astype(np.float64), 0)
    (y,) = onnxruntime_outputs(model, {"data": data})
    np.testing.assert_allclose(y, np.cumsum(relu, 1) - relu, rtol=1e-5, atol=1e-6)


def test_bad_input_exits_2_with_one_line(tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"\x00not a model")
    onnx.save(cumsum_model(TensorProto.UINT32, (4,), 0, "initializer", 11), str(tmp_path / "uint32.onnx"))
    net = core.Net("cli_slice")
    net.Slice("data", "part", starts=[0, 0], ends=[2, -1])
    net.AddExternalOutput(core.BlobReference("part"))
    (tmp_path / "slice.pb").write_bytes(net.Proto().SerializeToString())
    cases = [
        (["onnx", "import", tmp_path / "junk.onnx", "--predict-net", tmp_path / "p.pb", "--init-net",
          tmp_path / "i.pb"], "pycumsum-op onnx: error: cannot read ONNX model"),
        (["onnx", "import", tmp_path / "uint32.onnx", "--predict-net", tmp_path / "p.pb", "--init-net",
          tmp_path / "i.pb"], "pycumsum-op onnx: error: cannot import '{}': ONNX CumSum node 'y' (opset 11): input 0 'x' is "
                              "UINT32; Caffe2 runs CumSum right on".format(tmp_path / "uint32.onnx")),
        (["onnx", "export", tmp_path / "slice.pb", "--input", "data=float32:3,4", "-o", tmp_path / "m.onnx"],
         "pycumsum-op onnx: error: Caffe2 op Slice (data -> part): Caffe2's exporter writes it as opset-9 Slice"),
    ]
    for args, start in cases:
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith(start) and len(result.stderr.strip().splitlines()) == 1, result.stderr
    bad_input = run_cli("onnx", "export", tmp_path / "slice.pb", "--input", "data=float32", "-o", tmp_path / "m.onnx")
    assert bad_input.returncode == 2
    assert "bad --input 'data=float32': expected BLOB=DTYPE:D1,D2,..." in bad_input.stderr
