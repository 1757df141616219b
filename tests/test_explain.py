"""`pycumsum_op.explain` and ``pycumsum-op explain``: the route a scan follows, and why; the path it names is the
path that runs (recorded), with the accelerator and without it; why the accelerator is off when it is."""
import contextlib
import io
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op
from pycumsum_op.cli import main
from pycumsum_op.kernels import compiled
from pycumsum_op.scans import Scan, register, unregister
from pycumsum_op.scans import scan as registered_scan
from engine_support import NEEDS_NUMBA, record_paths
from scan_family_support import assert_outputs_equal
from torch_oracles import PREFIX_ORACLES, float64_reference

#: (op, shape, axis, dtype, flags): each scan where the accelerator runs and where it does not
CASES = [("cumsum", (600, 50), 0, np.float32, {}), ("cumsum", (70000,), 0, np.float32, {"reverse": True}),
         ("cumsum", (300, 40, 8), 1, np.int32, {"exclusive": True}), ("cumsum", (7, 9), 1, np.float64, {}),
         ("cumprod", (2000, 4), 0, np.float64, {"exclusive": True}), ("cumprod", (5000,), 0, np.float32, {}),
         ("cummax", (2000, 8), 0, np.float32, {}), ("cummin", (2000, 3), 0, np.int64, {"reverse": True}),
         ("logcumsumexp", (600, 50), 0, np.float32, {})]


@pytest.mark.parametrize("on", [pytest.param(True, marks=NEEDS_NUMBA), False], ids=["accelerated", "plain"])
@pytest.mark.parametrize("op, shape, axis, dtype, flags", CASES)
def test_the_path_explained_is_the_path_run(clean_workspace, torch_scan, monkeypatch, on, op, shape, axis, dtype,
                                            flags):
    """Through the Caffe2 op: cumsum's engine paths by name, the accelerator's loops as "compiled" (the family's
    torch calls are not recorded: nothing is); the op's output is torch's."""
    monkeypatch.setenv(compiled.SWITCH, "1" if on else "0")
    explained = pycumsum_op.explain(shape, axis, dtype, op, **flags)
    assert explained.accelerator == ("on" if on else "off: turned off by {}=0".format(compiled.SWITCH))
    path = explained.route.path
    assert path == (explained.accelerated if on else explained.plain).path
    x = np.random.RandomState(1).uniform(0.5, 1.5, shape).astype(dtype)
    entry = registered_scan(op)
    outputs = ["ex_y", "ex_i"][:len(entry.outputs)]
    taken = record_paths(monkeypatch)
    workspace.FeedBlob("ex_x", x)
    net = core.Net("explained")
    getattr(net, entry.op_name)("ex_x", outputs, axis=axis, **flags)
    workspace.RunNetOnce(net)
    assert taken == ([path] if op == "cumsum" or path == "compiled" else [])
    if op in PREFIX_ORACLES and op == "logcumsumexp":  # torch < 1.9: no exact torch.logcumsumexp to equal
        expected = float64_reference(torch.from_numpy(x), axis, scan=op, **flags)
        assert_outputs_equal([workspace.FetchBlob("ex_y")], [expected.numpy()])
        return
    expected = torch_scan(torch.from_numpy(x), axis, scan=op, **flags)
    expected = expected[0] if isinstance(expected, tuple) else expected
    np.testing.assert_array_equal(workspace.FetchBlob("ex_y"), expected.numpy())


def test_the_command_prints_both_routes_and_the_accelerators_state(monkeypatch):
    monkeypatch.setenv(compiled.SWITCH, "off")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["explain", "--shape", "64,4096", "--axis", "0", "--op", "PyCumProd", "--reverse"]) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("cumprod (PyCumProd) of float32 (64, 4096) along axis 0, inclusive, reverse")
    assert lines[1].startswith("  with the accelerator:    compiled (row loops): rows of 4096 lanes >= COMPILED_NARROW")
    assert lines[2].startswith("  without the accelerator: torch (staged)")
    assert lines[3] == "  accelerator: off: turned off by PYCUMSUM_OP_ACCELERATOR=off (this process runs the second)"


@pytest.mark.parametrize("argv, message", [
    (["--shape", "4,x", "--axis", "0"], "--shape: expected comma-separated sizes"),
    (["--shape", "4,5", "--axis", "2"], "PyCumSum: axis=2 is out of range for an input of shape (4, 5)"),
    (["--shape", "4,5", "--axis", "0", "--op", "cumsun"], "explain: unknown scan='cumsun'"),
    (["--shape", "4,5", "--axis", "0", "--op", "cummax", "--exclusive"], "explain: cummax (PyCumMax) takes no "
                                                                         "exclusive"),
    (["--shape", "4,5", "--axis", "0", "--op", "logcumsumexp", "--dtype", "int32"], "PyLogCumSumExp: input of "
                                                                                    "shape (4, 5) has dtype int32"),
    (["--shape", "4,5", "--axis", "0", "--dtype", "float7"], "explain: shape must be whole numbers and dtype"),
    (["--shape", "4,5", "--axis", "0", "--dtype", "(3,)f4"], "explain: dtype=\"('<f4', (3,))\" is not a bool, "
                                                             "integer or floating dtype"),
    (["--shape", "4,5", "--axis", "0", "--dtype", "complex64"], "explain: dtype='complex64' is not a bool"),
    (["--shape", "4611686018427387904,2", "--axis", "0", "--dtype", "int8"], "explain: shape=(4611686018427387904, "
                                                                             "2) of int8 spans more than "
                                                                             "9223372036854775807 bytes")])
def test_bad_input_is_one_line(capsys, argv, message):
    assert main(["explain"] + argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pycumsum-op explain: error: ") and message in err and err.count("\n") == 1


def test_a_scan_without_a_kernel_says_so():
    entry = register(registered_scan("cumsum")._replace(name="explained_sum", op_name="PyExplainedSum", kernel=None,
                                                        arguments=frozenset(["reverse"])))
    try:
        text = str(pycumsum_op.explain((4, 5), 1, op="PyExplainedSum"))
    finally:
        unregister(entry.name)
    assert text.splitlines() == ["explained_sum (PyExplainedSum) of float32 (4, 5) along axis 1, inclusive, forward "
                                 "-> float32", "  its own forward function (the entry declares no kernel to route)"]
    assert isinstance(entry, Scan)


@pytest.mark.parametrize("stub, status", [
    ("import sys; sys.modules['numba'] = None", "off: numba is not installed (pip install 'pycumsum_op[fast]')"),
    ("import os; os.environ['PYCUMSUM_OP_ACCELERATOR'] = 'no'", "off: turned off by PYCUMSUM_OP_ACCELERATOR=no")])
def test_why_the_accelerator_is_off(stub, status):
    """numba missing, or switched off (a numba failing to import: tests/test_compiled_kernels.py)."""
    code = stub + "\nfrom pycumsum_op.scans.explain import explain\nprint(explain((8, 4096), 0).accelerator)\n"
    env = dict(os.environ)
    env.pop(compiled.SWITCH, None)
    child = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, env=env, timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout == status + "\n"


def test_shapes_past_what_python_writes_out_are_refused_in_short_lines(capsys):
    """Python refuses to write an integer of more than 4,300 digits: such extents are named by their size, and a
    --shape of 130,000 characters is cut in its one line."""
    from pycumsum_op.kernels import ScanArgumentError
    with pytest.raises(ScanArgumentError, match=r"^explain: shape=\(a 16610-bit number, 3\) of float32 spans more"):
        pycumsum_op.explain((10 ** 5000, 3), 0)
    with pytest.raises(ScanArgumentError, match=r"^explain: shape=\(a 16610-bit negative number,\) has a negative"):
        pycumsum_op.explain((-10 ** 5000,), 0)
    assert main(["explain", "--shape", "9" * 130000, "--axis", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400, err[:500]
    if hasattr(sys, "get_int_max_str_digits"):  # int() refuses more than 4,300 digits: the shape is cut
        assert err.rstrip().endswith("...(+129800 chars)"), err
    else:  # CPython 3.6 reads the number (no digit limit there): it is named by its size
        assert "explain: shape=(a 431851-bit number,) of float32 spans more than" in err, err
