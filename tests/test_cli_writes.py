"""The command line writes each output whole or not at all, never through a symlink, and refuses one path
given for two outputs: one line on stderr, exit 2, the file a symlink points to never appears."""
import io
import os
import resource
import signal
import subprocess
import sys

import numpy as np
import pytest
from caffe2.python import core
from onnx import TensorProto, helper

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from pycumsum_op._atomic_files import write_atomically
from pycumsum_op.cli import main
from pycumsum_op.serialization import load_net
from onnx_support import needs_onnx_backend, onnx_backend_refusal
from test_cli import legacy_files, own_stderr_lines, save  # noqa: F401 (a fixture)

CLI = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")


@pytest.fixture
def files(tmp_path):
    net = core.Net("cli_writes")
    net.AddExternalOutput(net.PyCumSum("x", "y", axis=1))
    graph = helper.make_graph([helper.make_node("CumSum", ["x", "axis"], ["y"])], "writes",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor("axis", TensorProto.INT64, [], [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    (tmp_path / "model.onnx").write_bytes(model.SerializeToString())
    return {"net": str(save(net.Proto(), tmp_path / "net.pb")), "model": str(tmp_path / "model.onnx"),
            "dir": tmp_path}


def one_line_error(status, capsys, *words):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and "error:" in lines[0], err
    for word in words:
        assert word in lines[0], lines[0]


@needs_onnx_backend
def test_onnx_import_refuses_one_path_for_both_nets(files, capsys):
    same = str(files["dir"] / "nets.pb")
    status = main(["onnx", "import", files["model"], "--predict-net", same, "--init-net", same])
    one_line_error(status, capsys, "given twice as an output")
    assert not os.path.exists(same)
    # the same file under two spellings
    status = main(["onnx", "import", files["model"], "--predict-net", same,
                   "--init-net", os.path.join(str(files["dir"]), ".", "nets.pb")])
    one_line_error(status, capsys, "given twice as an output")
    assert not os.path.exists(same)


def commands(files, out):
    return {
        "lower": ["lower", files["net"], "-o", out],
        "onnx_import": ["onnx", "import", files["model"], "--predict-net", out,
                        "--init-net", str(files["dir"] / "init.pb")],
        "onnx_export": ["onnx", "export", files["net"], "--input", "x=float32:2,3", "-o", out],
    }


@pytest.mark.parametrize("command", sorted(commands({"net": "", "model": "", "dir": __import__("pathlib").Path()},
                                                    "")))
def test_outputs_are_never_written_through_a_symlink(files, capsys, command):
    if command.startswith("onnx") and onnx_backend_refusal():  # `onnx` refuses itself (tests/test_torch_versions.py)
        pytest.skip(onnx_backend_refusal())
    marker = files["dir"] / "marker"
    link = files["dir"] / "out.pb"
    os.symlink(str(marker), str(link))
    status = main(commands(files, str(link))[command])
    one_line_error(status, capsys, "symbolic link")
    assert not marker.exists() and os.path.islink(str(link))


def test_doctor_fix_is_never_written_through_a_symlink(legacy_files, tmp_path, capsys):
    """The doctor's --fix output too (a net with the sparse-gradient error, so that there is a fix to write)."""
    predict, init = legacy_files
    marker, link = tmp_path / "marker", tmp_path / "fixed.pb"
    os.symlink(str(marker), str(link))
    status = main(["doctor", str(predict), "--init-net", str(init), "--loss", "loss", "--fix", str(link)])
    one_line_error(status, capsys, "symbolic link")
    assert not marker.exists()


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(files):
    """In a child whose file size limit (RLIMIT_FSIZE) is below the lowered net's size, the write fails
    (EFBIG) after some bytes: exit 2, one line, the old output intact, no temporary file left."""
    out = files["dir"] / "out.pb"
    out.write_bytes(b"old output")

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
        resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))

    before = sorted(os.listdir(str(files["dir"])))
    proc = subprocess.run([CLI, "lower", files["net"], "-o", str(out)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=300, preexec_fn=small_files)
    assert proc.returncode == 2 and len(own_stderr_lines(proc.stderr)) == 1, proc.stderr
    assert "cannot write the lowered net" in proc.stderr and "too large" in proc.stderr.lower()
    assert out.read_bytes() == b"old output"
    assert sorted(os.listdir(str(files["dir"]))) == before


def test_successful_writes_replace_the_file_with_ordinary_permissions(files, capsys):
    out = files["dir"] / "out.pb"
    out.write_bytes(b"old output")
    assert main(commands(files, str(out))["lower"]) == 0
    assert [op.type for op in load_net(str(out)).op] == ["ATen"]
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask
    assert sorted(os.listdir(str(files["dir"]))) == ["model.onnx", "net.pb", "out.pb"]


def test_write_atomically_keeps_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "t.bin"
    target.write_bytes(b"old")

    def half(handle):
        handle.write(b"new, half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        write_atomically(str(target), half)
    assert target.read_bytes() == b"old" and os.listdir(str(tmp_path)) == ["t.bin"]
    write_atomically(str(target), lambda handle: handle.write(np.arange(3, dtype=np.int8).tobytes()))
    assert target.read_bytes() == b"\x00\x01\x02"


def test_save_net_is_atomic_and_refuses_a_symlink_too(tmp_path):
    from pycumsum_op import save_net
    net = core.Net("saved_safely")
    net.PyCumSum("x", "y", axis=0)
    marker, link = tmp_path / "marker", tmp_path / "net.pbtxt"
    os.symlink(str(marker), str(link))
    with pytest.raises(OSError, match="symbolic link"):
        save_net(net, str(link))
    assert not marker.exists()
    os.unlink(str(link))
    save_net(net, str(link))
    assert load_net(str(link)).op[0].type == "Python" and sorted(os.listdir(str(tmp_path))) == ["net.pbtxt"]


def test_demo_draw_refuses_a_symlink_planted_in_its_folder(tmp_path, capsys):
    """Checked before the demo runs: exit 2, one line, the file the link names never written."""
    marker, folder = tmp_path / "marker", tmp_path / "drawn"
    folder.mkdir()
    os.symlink(str(marker), str(folder / "before.svg"))
    status = main(["demo", "--steps", "1", "--draw", str(folder)])
    one_line_error(status, capsys, "--draw: cannot write", "before.svg", "symbolic link")
    assert not marker.exists() and os.listdir(str(folder)) == ["before.svg"]


def test_demo_drawings_planted_later_are_refused_by_the_writer(tmp_path):
    """A link planted after the command's check: the demo's drawing check fails, nothing is written through it."""
    from pycumsum_op import demo
    from pycumsum_op.doctor.draw import DrawingUnavailable, drawing_tools
    try:
        drawing_tools()
    except DrawingUnavailable as missing:
        pytest.skip(str(missing))
    marker, folder = tmp_path / "marker", tmp_path / "drawn"
    folder.mkdir()
    os.symlink(str(marker), str(folder / "after.svg"))
    out = io.StringIO()
    checks = demo._drawings(out, demo._legacy_net(), str(folder))
    assert [(check.what, check.passed) for check in checks] == [("doctor drawings", False)]
    assert "symbolic link" in checks[0].result and "not drawn: cannot write" in out.getvalue()
    assert not marker.exists() and os.path.islink(str(folder / "after.svg"))
