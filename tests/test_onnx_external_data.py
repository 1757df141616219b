"""ONNX external data is read from the model's folder only (`pycumsum_op.onnx.load_model`, ``onnx import``):
locations that are absolute, climb out with '..', or are symlinks leading out are refused, as are offsets and
lengths outside the file; the secret file's bytes never reach a written net. Benign external data still loads,
and the imported nets compute what onnxruntime computes on the original model."""
import os
import subprocess
import sys
import zipfile

import numpy as np
import onnx
import onnxruntime
import pytest

from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

from caffe2.python import workspace
from onnx import TensorProto, helper, numpy_helper

from pycumsum_op.onnx import backend, load_model, prepare
from pycumsum_op.onnx.model_input import ExternalDataError
from pycumsum_op.serialization import load_net

WEIGHTS = np.arange(6, dtype=np.float32).reshape(2, 3) + 0.5
CLI = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")
SECRET = np.full((2, 3), 1234.5, dtype=np.float32).tobytes()  # 24 bytes, the size the tensor wants


def save_external_model(folder) -> str:
    """model.onnx: y = cumsum(x + w, axis 1), w in weights.bin next to it; returns the model's path."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("CumSum", ["s", "axis"], ["y"])], "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(WEIGHTS, "w"), helper.make_tensor("axis", TensorProto.INT64, [], [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    path = os.path.join(str(folder), "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                    size_threshold=0)
    return path


def set_external(path, **entries) -> None:
    """Rewrite the external-data entries (location, offset, length) of tensor w in the model file."""
    model = onnx.load(path, load_external_data=False)
    tensor = next(t for t in model.graph.initializer if t.name == "w")
    current = {entry.key: entry.value for entry in tensor.external_data}
    current.update({key: str(value) for key, value in entries.items()})
    del tensor.external_data[:]
    for key, value in current.items():
        tensor.external_data.add(key=key, value=value)
    with open(path, "wb") as handle:
        handle.write(model.SerializeToString())


@pytest.fixture
def layout(tmp_path):
    """tmp/models/model.onnx (+ weights.bin), tmp/secret.bin outside the model's folder, tmp/out for outputs."""
    models, out = tmp_path / "models", tmp_path / "out"
    models.mkdir()
    out.mkdir()
    (tmp_path / "secret.bin").write_bytes(SECRET)
    return {"model": save_external_model(models), "models": str(models), "secret": str(tmp_path / "secret.bin"),
            "out": str(out)}


def cli_import(model, out):
    return subprocess.run([CLI, "onnx", "import", model,
                           "--predict-net", os.path.join(out, "p.pb"), "--init-net", os.path.join(out, "i.pb")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)


def attacks(layout):
    """name -> (how to plant it, the reason the refusal gives)."""
    def symlink_out():
        os.symlink(layout["secret"], os.path.join(layout["models"], "link.bin"))
        set_external(layout["model"], location="link.bin")

    def symlinked_folder_out():
        os.symlink(os.path.dirname(layout["secret"]), os.path.join(layout["models"], "up"))
        set_external(layout["model"], location="up/secret.bin")

    return {
        "dotdot": (lambda: set_external(layout["model"], location="../secret.bin"), "climbs out with '..'"),
        "dotdot_inside": (lambda: (os.mkdir(os.path.join(layout["models"], "sub")),
                                   set_external(layout["model"], location="sub/../../secret.bin")),
                          "climbs out with '..'"),
        "absolute": (lambda: set_external(layout["model"], location=layout["secret"]), "is an absolute path"),
        "symlink_out": (symlink_out, "is a symlink leading out of the model's folder"),
        "symlinked_folder_out": (symlinked_folder_out, "is a symlink leading out of the model's folder"),
        "length_past_end": (lambda: set_external(layout["model"], offset=16, length=24),
                            "offset 16 + length 24 passes the end of the 24-byte file"),
        "bad_offset": (lambda: set_external(layout["model"], offset=-1), "offset '-1' is not a whole number"),
        "fifo": (lambda: (os.mkfifo(os.path.join(layout["models"], "pipe.bin")),
                          set_external(layout["model"], location="pipe.bin")), "is not a regular file"),
        "missing": (lambda: set_external(layout["model"], location="nothere.bin"), "cannot open external data"),
    }


@pytest.mark.parametrize("name", sorted(attacks({"model": "", "models": "", "secret": ""})))
def test_external_data_outside_the_model_folder_is_refused(layout, name):
    plant, reason = attacks(layout)[name]
    plant()
    with pytest.raises(ExternalDataError, match="tensor 'w'") as caught:
        load_model(layout["model"])
    assert reason in str(caught.value)
    if name in ("dotdot_inside", "symlink_out", "absolute"):  # the CLI: one line, exit 2, nothing written
        proc = cli_import(layout["model"], layout["out"])
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.count("\n") == 1 and reason in proc.stderr, proc.stderr
        assert os.listdir(layout["out"]) == []


def test_onnx_load_of_this_onnx_would_read_the_secret(layout):
    """The danger, demonstrated with onnx itself: onnx.load strips only a leading '../', follows one inside
    the path, and copies the secret's bytes."""
    os.mkdir(os.path.join(layout["models"], "sub"))
    set_external(layout["model"], location="sub/../../secret.bin")
    leaked = onnx.load(layout["model"])
    assert numpy_helper.to_array(leaked.graph.initializer[0]).tobytes() == SECRET


def test_a_model_still_pointing_at_external_data_is_refused_by_prepare(layout):
    with pytest.raises(ExternalDataError, match="keeps its data in an external file"):
        prepare(onnx.load(layout["model"], load_external_data=False))


def test_benign_external_data_loads_and_matches_onnxruntime(layout, clean_workspace):
    inside = os.path.join(layout["models"], "sub")
    os.mkdir(inside)
    os.rename(os.path.join(layout["models"], "weights.bin"), os.path.join(inside, "weights.bin"))
    os.symlink(os.path.join("sub", "weights.bin"), os.path.join(layout["models"], "weights.bin"))  # stays inside
    x = np.random.RandomState(0).randn(2, 3).astype(np.float32)
    expected, = onnxruntime.InferenceSession(layout["model"]).run(None, {"x": x})
    np.testing.assert_allclose(expected, np.cumsum(x + WEIGHTS, axis=1), rtol=1e-6)
    np.testing.assert_allclose(prepare(load_model(layout["model"])).run([x]).y, expected, rtol=1e-6)
    proc = cli_import(layout["model"], layout["out"])
    assert proc.returncode == 0, proc.stderr
    init_net, predict_net = (load_net(os.path.join(layout["out"], name)) for name in ("i.pb", "p.pb"))
    workspace.RunNetOnce(init_net)
    workspace.FeedBlob("x", x)
    workspace.RunNetOnce(predict_net)
    np.testing.assert_allclose(workspace.FetchBlob("y"), expected, rtol=1e-6)


def test_model_and_external_data_together_are_capped(layout, monkeypatch):
    model_bytes = os.path.getsize(layout["model"])
    monkeypatch.setenv("PYCUMSUM_OP_MAX_INPUT_BYTES", str(model_bytes + 24))
    assert numpy_helper.to_array(load_model(layout["model"]).graph.initializer[0]).tolist() == WEIGHTS.tolist()
    monkeypatch.setenv("PYCUMSUM_OP_MAX_INPUT_BYTES", str(model_bytes + 23))
    with pytest.raises(ValueError, match="with its external data .* more than the {} allowed".format(
            model_bytes + 23)):
        load_model(layout["model"])


def test_zip_archives_are_read_within_the_cap(tmp_path, monkeypatch):
    """Caffe2's zip format (``prepare_zip_archive``): tensors marked b"__EXTERNAL" take a member's bytes."""
    weights = numpy_helper.from_array(WEIGHTS, "w")
    weights.raw_data = b"__EXTERNAL"
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "zipped",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    archive = str(tmp_path / "model.zip")
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("__MODEL_PROTO", model.SerializeToString())
        handle.writestr("w", WEIGHTS.tobytes())
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(backend.prepare_zip_archive(archive).run([x]).y, x + WEIGHTS)
    size = sum(info.file_size for info in zipfile.ZipFile(archive).infolist())
    monkeypatch.setenv("PYCUMSUM_OP_MAX_INPUT_BYTES", str(size - 1))
    with pytest.raises(ValueError, match="ONNX zip archive .* is {} bytes, more than the {} allowed".format(
            size, size - 1)):
        backend.prepare_zip_archive(archive)
