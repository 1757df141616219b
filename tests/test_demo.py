"""``pycumsum-op demo`` end to end, as ``make demo`` runs it (with few steps)."""
import os
import re
import subprocess
import sys

import pytest

from test_cli import own_stderr_lines

pytestmark = pytest.mark.slow  # the whole demo in a process

CLI = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")


def run_demo(*args):
    return subprocess.run([CLI, "demo"] + [str(arg) for arg in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)


def test_the_demo_shows_the_error_the_fixes_and_training_that_matches_torch(tmp_path):
    result = run_demo("--steps", "40", "--seed", "3", "--draw", tmp_path / "drawn")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "Gradient of output prediction_cumsum_T is sparse (expected dense)" in out
    assert "op #0 Transpose" in out and "op #1 SparseLengthsSum" in out  # the diagnosis
    before, after = (tmp_path / "drawn" / name for name in ("before.svg", "after.svg"))
    assert "drawn with graphviz: {}".format(before) in out
    assert "refuses the sparse gradient" in before.read_text() and "put in by fix" in after.read_text()
    rows = dict(re.findall(r"^(fix\(strategy='\w+'\)|net\.PyCumSum\(axis=1\))\s+(.*)$", out, re.M))
    assert set(rows) == {"fix(strategy='ensure_dense')", "fix(strategy='pycumsum')", "net.PyCumSum(axis=1)"}
    for row in rows.values():  # computes, max|y-ref|, max|dx-dref|, max|y-torch.cumsum|, ms
        kind, value_error, gradient_error, off_by_one, milliseconds = row.split()
        assert float(value_error) < 1e-4 and float(gradient_error) < 1e-4 and float(milliseconds) > 0
        assert (float(off_by_one) > 0.1) == (kind == "exclusive")
    before, after = map(float, re.search(r"loss on all \d+ samples: ([\d.]+) -> ([\d.]+) \(decreased\)", out).groups())
    assert after < before
    assert "gradients match" in out and "40/40" in out  # the progress bar got to the end
    assert "batch 128, 40 steps;" in out and "over 40 steps x 4 parameters" in out
    assert own_stderr_lines(result.stderr) == []  # Caffe2 initialised once, quietly: no GlobalInit or CPU-feature notes
    summary = out[out.index("== Summary =="):].strip().splitlines()[1:]
    assert len(summary) >= 7 and all(line.startswith("ok ") for line in summary if line and "checks" not in line)
    assert out.rstrip().endswith("all checks passed")


def test_the_demo_refuses_a_bad_step_count():
    result = run_demo("--steps", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == ("pycumsum-op demo: error: argument --steps: expected a whole number "
                                              "of at least 1, got '0'")
