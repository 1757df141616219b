"""``pycumsum-op doctor`` as users run it: a subprocess on saved .pb / .pbtxt nets.

Exit status 0 = healthy, 1 = findings, 2 = bad input with a one-line reason and no traceback.
What --fix writes is checked with Caffe2's own AddGradientOperators.
"""
import os
import pkgutil
import re
import subprocess
import sys

import pytest
from caffe2.proto import caffe2_pb2
from caffe2.python import core
from google.protobuf import text_format

import pycumsum_op
import pycumsum_op.commands
from doctor_support import gradient_ops_work
from pycumsum_op.doctor.fix import STRATEGIES
from pycumsum_op.idioms import add_sparse_lengths_cumsum
from user_runs import own_stderr_lines  # noqa: F401 (also the other command-line tests')

pytestmark = pytest.mark.slow  # a pycumsum-op process per run

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
def legacy_files(tmp_path):
    """The legacy SparseLengthsSum cumsum net (.pb) and its init net holding the constants (.pbtxt)."""
    net, init = core.Net("legacy"), core.Net("legacy_init")
    add_sparse_lengths_cumsum(net, "prediction", 5, blob_out="pred_cdist", init_net=init)
    net.SumElements("pred_cdist", "loss")
    return save(net.Proto(), tmp_path / "predict.pb"), save(init.Proto(), tmp_path / "init.pbtxt")


def assert_one_line_error(result, *words):
    assert result.returncode == 2
    lines = own_stderr_lines(result.stderr)
    assert "Traceback" not in result.stderr and len(lines) == 1 and lines[0].startswith("pycumsum-op doctor: error:")
    for word in words:
        assert word in lines[0]


def test_a_healthy_net_exits_0(tmp_path):
    net = core.Net("healthy")
    net.AveragedLoss(net.PyCumSum("x", "y", axis=1), "loss")
    result = run_cli("doctor", save(net.Proto(), tmp_path / "healthy.pbtxt"), "--loss", "loss")
    assert result.returncode == 0, result.stderr
    assert "healthy" in result.stdout


def test_the_legacy_net_exits_1_with_the_finding_and_fix_writes_a_working_net(legacy_files, tmp_path):
    predict, init = legacy_files
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


def test_fix_with_ensure_dense_writes_binary(legacy_files, tmp_path):
    predict, init = legacy_files
    out = tmp_path / "fixed.pb"
    result = run_cli("doctor", predict, "--init-net", init, "--loss", "loss", "--fix", out)
    assert result.returncode == 1, result.stderr
    fixed = load(out)
    assert "EnsureDense" in [op.type for op in fixed.op] and gradient_ops_work(fixed, ["loss"])
    rerun = run_cli("doctor", out, "--loss", "loss")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr


def test_bad_input_exits_2_with_one_line(legacy_files, tmp_path):
    predict, _ = legacy_files
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


def test_version_and_no_command():
    version = run_cli("--version")
    assert (version.returncode, version.stdout) == (0, "pycumsum-op {}\n".format(pycumsum_op.__version__))
    bare = run_cli()
    assert bare.returncode == 2 and "Traceback" not in bare.stderr
    commands = sorted(module.name for module in pkgutil.iter_modules(pycumsum_op.commands.__path__)
                      if not module.name.startswith("_"))  # _common: what the commands share
    assert bare.stderr.splitlines()[-1] == "pycumsum-op: error: no command given; choose one of: {}".format(
        ", ".join(commands))


def test_argparse_errors_speak_the_users_words():
    result = run_cli("demo", "--steps", "abc")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == ("pycumsum-op demo: error: argument --steps: expected a whole number "
                                              "of at least 1, got 'abc'")


@pytest.mark.parametrize("make, reason", [
    (lambda path: path.write_bytes(b""), "it is empty"),
    (lambda path: path.write_bytes(b"\n\x03abc\x0c garbage"), "byte 5 holds an end-group tag (field 1)"),
    (lambda path: path.mkdir(), "is a directory"),
    (lambda path: path.symlink_to("/proc/self/mem"), "input/output error"),  # open() works, read() fails
    (lambda path: path.write_bytes(b"\x08\x01"), "fields that a NetDef does not define"),  # field 1 as an int
    (lambda path: path.write_bytes(caffe2_pb2.NetDef(name="no_ops").SerializeToString()), "has no ops"),
])
def test_unusable_net_files_exit_2_with_one_line_saying_which_and_why(tmp_path, make, reason):
    path = tmp_path / "model.pb"
    make(path)
    result = run_cli("doctor", path, "--loss", "loss")
    assert_one_line_error(result, "net {!r}".format(str(path)), reason)
    assert "Warning" not in "\n".join(own_stderr_lines(result.stderr)) and result.stdout == ""


def test_a_garbage_init_net_exits_2_naming_it(legacy_files, tmp_path):
    predict, _ = legacy_files
    garbage = tmp_path / "init.pb"
    garbage.write_bytes(b"\x0c\x01\x02")
    assert_one_line_error(run_cli("doctor", predict, "--init-net", garbage, "--loss", "loss"),
                          "cannot read init net {!r}".format(str(garbage)), "end-group tag")


def test_fix_to_pbtext_writes_text_that_the_doctor_reads_back(legacy_files, tmp_path):
    predict, init = legacy_files
    out = tmp_path / "fixed.pbtext"
    result = run_cli("doctor", predict, "--init-net", init, "--loss", "loss", "--fix", out)
    assert result.returncode == 1, result.stderr
    assert "text format" in result.stdout
    fixed = caffe2_pb2.NetDef()
    text_format.Parse(out.read_text(), fixed)  # text, as for .pbtxt
    assert gradient_ops_work(fixed, ["loss"])
    rerun = run_cli("doctor", out, "--loss", "loss")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr


def test_each_repaired_site_is_reported(legacy_files, tmp_path):
    predict, init = legacy_files
    result = run_cli("doctor", predict, "--init-net", init, "--loss", "loss", "--fix", tmp_path / "f.pb",
                     "--strategy", "pycumsum")
    assert result.stdout.rstrip().endswith(
        "repaired 1 site(s):\n  Transpose, SparseLengthsSum, Transpose -> 'pred_cdist': one "
        "PyCumSum('prediction', 'pred_cdist', axis=-1, exclusive=True)")
    assert "binary format" in result.stdout


def test_pycumsum_strategy_without_the_init_net_says_why_it_used_ensure_dense(legacy_files, tmp_path):
    predict, _ = legacy_files
    out = tmp_path / "fixed.pb"
    result = run_cli("doctor", predict, "--loss", "loss", "--fix", out, "--strategy", "pycumsum")
    assert result.returncode == 1, result.stderr
    assert "the values of 'prediction_cumsum_indices' and 'prediction_cumsum_lengths' are not in" in " ".join(
        result.stdout.split())
    assert result.stdout.rstrip().endswith(
        "  SparseLengthsSum -> 'prediction_cumsum_sls': EnsureDense on its input 'prediction_cumsum_T' (not "
        "PyCumSum: the cumsum idiom's constants 'prediction_cumsum_indices' and 'prediction_cumsum_lengths' are "
        "unknown; pass --init-net INIT_NET)")
    fixed = load(out)
    assert "EnsureDense" in [op.type for op in fixed.op] and gradient_ops_work(fixed, ["loss"])


def test_an_unknown_strategy_lists_fix_strategies(legacy_files):
    predict, _ = legacy_files
    result = run_cli("doctor", predict, "--loss", "loss", "--fix", "x.pb", "--strategy", "magic")
    assert_one_line_error(result, "--strategy 'magic': choose one of " + ", ".join(STRATEGIES))


def imported_modules(*args):
    """The modules the command imports: ``python -X importtime`` on the console script."""
    result = subprocess.run([sys.executable, "-X", "importtime", CLI] + [str(arg) for arg in args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.startswith("import time")]
    return result, {line.split("|")[-1].strip() for line in lines}


needs_importtime = pytest.mark.skipif(sys.version_info < (3, 7), reason="python -X importtime needs CPython 3.7")


@needs_importtime
def test_help_imports_neither_caffe2_nor_numpy():
    result, modules = imported_modules("doctor", "--help")
    assert result.returncode == 0 and "PREDICT_NET" in result.stdout
    assert not {"caffe2", "numpy", "torch", "google.protobuf"} & modules
    assert "pycumsum_op.commands.doctor" in modules


@needs_importtime
def test_doctor_imports_caffe2_but_not_torch_or_the_demo(legacy_files):
    predict, init = legacy_files
    result, modules = imported_modules("doctor", predict, "--init-net", init, "--loss", "loss")
    assert result.returncode == 1 and "1 finding" in result.stdout
    assert {"caffe2.python.core", "pycumsum_op.doctor.diagnose"} <= modules
    assert not {"torch", "pycumsum_op.demo", "pycumsum_op.examples", "pycumsum_op.kernels"} & modules
