"""``pycumsum-op doctor`` as users run it: a subprocess on saved .pb / .pbtxt nets.

Exit status 0 = healthy, 1 = findings, 2 = bad input with a one-line reason and no traceback.
What --fix writes is checked with Caffe2's own AddGradientOperators.
"""
import os
import subprocess
import sys

import pytest
from caffe2.proto import caffe2_pb2
from caffe2.python import core
from google.protobuf import text_format

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from doctor_support import gradient_ops_work
from pycumsum_op.idioms import add_sparse_lengths_cumsum

CLI = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")


def run_cli(*args):
    return subprocess.run([CLI] + [str(arg) for arg in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)


def save(netdef, path):
    if str(path).endswith(".pbtxt"):
        path.write_text(text_format.MessageToString(netdef))
    else:
        path.write_bytes(netdef.SerializeToString())
    return path


def load(path):
    netdef = caffe2_pb2.NetDef()
    if str(path).endswith(".pbtxt"):
        text_format.Parse(path.read_text(), netdef)
    else:
        netdef.ParseFromString(path.read_bytes())
    return netdef


@pytest.fixture
def question_files(tmp_path):
    """The question's net (.pb) and its init net holding the constants (.pbtxt)."""
    net, init = core.Net("question"), core.Net("question_init")
    add_sparse_lengths_cumsum(net, "prediction", 5, blob_out="pred_cdist", init_net=init)
    net.SumElements("pred_cdist", "loss")
    return save(net.Proto(), tmp_path / "predict.pb"), save(init.Proto(), tmp_path / "init.pbtxt")


def assert_one_line_error(result, *words):
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and len(lines) == 1 and lines[0].startswith("pycumsum-op doctor: error:")
    for word in words:
        assert word in lines[0]


def test_a_healthy_net_exits_0(tmp_path):
    net = core.Net("healthy")
    net.AveragedLoss(net.PyCumSum("x", "y", axis=1), "loss")
    result = run_cli("doctor", save(net.Proto(), tmp_path / "healthy.pbtxt"), "--loss", "loss")
    assert result.returncode == 0, result.stderr
    assert "healthy" in result.stdout


def test_the_question_net_exits_1_with_the_finding_and_fix_writes_a_working_net(question_files, tmp_path):
    predict, init = question_files
    out = tmp_path / "fixed.pbtxt"
    result = run_cli("doctor", predict, "--init-net", init, "--loss", "loss", "--fix", out, "--strategy", "pycumsum")
    assert result.returncode == 1, result.stderr
    for part in ("1 finding", "op #0 Transpose", "op #1 SparseLengthsSum", "prediction_cumsum_T", "EXCLUSIVE",
                 "wrote the fixed net"):
        assert part in result.stdout
    fixed = load(out)
    assert [(op.type, op.name) for op in fixed.op] == [("Python", "PyCumSum"), ("SumElements", "")]
    assert list(fixed.external_input) == list(load(predict).external_input)
    assert gradient_ops_work(fixed, ["loss"])


def test_fix_with_ensure_dense_writes_binary(question_files, tmp_path):
    predict, init = question_files
    out = tmp_path / "fixed.pb"
    result = run_cli("doctor", predict, "--init-net", init, "--loss", "loss", "--fix", out)
    assert result.returncode == 1, result.stderr
    fixed = load(out)
    assert "EnsureDense" in [op.type for op in fixed.op] and gradient_ops_work(fixed, ["loss"])
    rerun = run_cli("doctor", out, "--loss", "loss")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr


def test_bad_input_exits_2_with_one_line(question_files, tmp_path):
    predict, _ = question_files
    assert_one_line_error(run_cli("doctor", tmp_path / "missing.pb", "--loss", "loss"), "missing.pb")
    garbage = tmp_path / "garbage.pbtxt"
    garbage.write_text("this is { not a net")
    assert_one_line_error(run_cli("doctor", garbage, "--loss", "loss"), "garbage.pbtxt")
    assert_one_line_error(run_cli("doctor", predict, "--loss", "no_such_blob"), "'no_such_blob'")


def test_a_two_character_gradient_name_is_reported_and_fix_refuses(tmp_path):
    net = core.Net("two_chars")
    net.AddExternalInput("gy")
    net.Sigmoid("x", "y")
    predict = save(net.Proto(), tmp_path / "two.pbtxt")
    result = run_cli("doctor", predict, "--loss", "y=gy", "--fix", tmp_path / "out.pbtxt")
    assert "two-character" in result.stdout
    assert_one_line_error(result, "--fix")
    assert not (tmp_path / "out.pbtxt").exists()
