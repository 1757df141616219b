"""``pycumsum-op lower`` as users run it: a subprocess on saved .pb / .pbtxt nets.

Exit 0 with the lowered net written (checked by running it against torch), 2 with one line on stderr.
"""
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from pycumsum_op.cli import main
from test_cli import load, own_stderr_lines, run_cli, save

pytestmark = pytest.mark.slow  # a pycumsum-op process per run


def assert_one_line_error(result, *words):
    assert result.returncode == 2, result.stdout + result.stderr
    lines = own_stderr_lines(result.stderr)
    assert "Traceback" not in result.stderr and len(lines) == 1 and lines[0].startswith("pycumsum-op lower: error:")
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def scan_net(tmp_path):
    """z = Relu(PyCumSum(x, axis=1, exclusive=True)) saved as binary."""
    net = core.Net("cli_lower")
    net.Relu(net.PyCumSum("x", "y", axis=1, exclusive=True), "z")
    return save(net.Proto(), tmp_path / "net.pb")


@pytest.mark.parametrize("target, extra, out_name", [
    ("aten", [], "lowered.pbtxt"),
    ("portable", ["--shape", "x=2,7", "--dtype", "x=float32"], "lowered.pb"),
])
def test_lower_writes_a_net_without_python_ops_that_matches_torch(scan_net, tmp_path, target, extra, out_name,
                                                                  clean_workspace, torch_scan):
    out = tmp_path / out_name
    result = run_cli("lower", scan_net, "--target", target, *extra, "-o", out)
    assert result.returncode == 0, result.stderr
    assert "lowered 1 Python op(s) to target {}".format(target) in result.stdout
    lowered = load(out)
    assert [op.type for op in lowered.op if op.type.startswith("Python")] == []
    x = np.random.RandomState(0).randn(2, 7).astype(np.float32)
    workspace.FeedBlob("x", x)
    workspace.RunNetOnce(lowered)
    expected = torch.relu(torch_scan(torch.from_numpy(x), 1, exclusive=True)).numpy()
    np.testing.assert_allclose(workspace.FetchBlob("z"), expected, rtol=1e-6, atol=1e-6)


def test_bad_input_exits_2_with_one_line(scan_net, tmp_path):
    out = tmp_path / "out.pb"
    assert_one_line_error(run_cli("lower", scan_net, "--target", "portable", "-o", out),
                          "needs the shape and dtype of its input 'x'", "--shape BLOB=")
    assert not out.exists()


def test_more_bad_input_in_process(scan_net, tmp_path, capsys):
    """The same command line, run by cli.main in this process (a subprocess costs seconds)."""
    out = tmp_path / "out.pb"
    token = core.Net("cli_token")
    token.Python(lambda inputs, outputs: None)(["x"], ["y"])
    cases = [
        ([tmp_path / "missing.pb"], ["missing.pb"]),
        ([scan_net, "--shape", "x=2,seven"], ["x=2,seven"]),
        ([scan_net, "--shape", "x=2,-3"], ["--shape 'x=2,-3'", "sizes of at least 0"]),
        ([scan_net, "--dtype", "x=floaty"], ["'floaty'"]),
        ([save(token.Proto(), tmp_path / "token.pbtxt")], ["op 0 (Python", "token-form"]),
    ]
    for args, words in cases:
        status = main(["lower"] + [str(arg) for arg in args] + ["-o", str(out)])
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and lines[0].startswith("pycumsum-op lower: error:"), captured.err
        assert all(word in lines[0] for word in words), lines[0]
    assert not out.exists()
