"""``pycumsum-op doctor`` on saved nets holding each idiom (binary and text, with and without an init net):
found, fixed with ``--strategy pycumsum`` and checked against torch; ``--draw`` / ``--draw-fixed`` with
graphviz, and the one-line refusal naming what to install when graphviz is missing."""
import os
import subprocess
import sys

import numpy as np
import pytest
from caffe2.python import core

from doctor_support import gradient_ops_work, run_with_gradients, torch_scan, torch_value_and_gradient
from test_cli import CLI, assert_one_line_error, load, run_cli, save
from test_doctor_idioms import cumsum_op_net, loop_net, misplaced_net, triangle

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("clean_workspace")]  # a pycumsum-op process per run
N, C = 3, 6


def inline_constants(net, init):
    """The net with its init net's fill ops in front: one file, no --init-net."""
    whole = core.Net(net.Proto().name + "_whole")
    whole.Proto().CopyFrom(net.Proto())
    del whole.Proto().op[:]
    whole.Proto().op.extend(list(init.Proto().op) + list(net.Proto().op))
    return whole


def matmul_net():
    net, init = core.Net("tri_matmul"), core.Net("tri_matmul_init")
    init.GivenTensorFill([], "tri", values=triangle(False, True).ravel().tolist(), shape=[C, C])
    net.AddExternalInput("x", "tri", "w")
    net.SumElements(net.Mul([net.MatMul(["x", "tri"], "y"), "w"], "weighted"), "loss")
    return net, init, torch_scan(exclusive=True)


def to_dense_net():
    net = misplaced_net("ToDense")
    init = core.Net("to_dense_init")
    for name in ("x_cumsum_indices", "x_cumsum_lengths"):  # the constants the helper fed, as fill ops
        values = core.workspace.FetchBlob(name)
        init.GivenTensorIntFill([], name, values=values.tolist(), shape=list(values.shape))
    return net, init, torch_scan(exclusive=True)


def onnx_cumsum_net():
    net, init = cumsum_op_net("constant_input", exclusive=0, reverse=1)
    return net, init, torch_scan(reverse=True)


#: Each idiom in one of the saved layouts (the file format is the same code for every net: one run each).
LAYOUTS = [(matmul_net, "binary", "init_net"), (to_dense_net, "text", "inline"), (onnx_cumsum_net, "text", "init_net")]


@pytest.mark.parametrize("build, file_format, constants", LAYOUTS,
                         ids=["-".join([build.__name__, form, constants]) for build, form, constants in LAYOUTS])
def test_each_idiom_in_a_saved_net_is_found_fixed_and_equals_torch(build, file_format, constants, tmp_path):
    net, init, reference = build()
    suffix = ".pb" if file_format == "binary" else ".pbtxt"
    if constants == "init_net":
        files = [save(net.Proto(), tmp_path / ("predict" + suffix)), "--init-net",
                 save(init.Proto(), tmp_path / "init.pb")]
    else:
        files = [save(inline_constants(net, init).Proto(), tmp_path / ("predict" + suffix))]
    out = tmp_path / ("fixed" + suffix)
    result = run_cli("doctor", *files, "--loss", "loss", "--fix", out, "--strategy", "pycumsum")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "checked 'y': equal to" in result.stdout and "on a random input (relative difference" in result.stdout
    fixed = load(out)
    assert [op.name for op in fixed.op if op.type == "Python"] == ["PyCumSum"] and gradient_ops_work(fixed, ["loss"])
    x, w = np.random.RandomState(2).randn(N, C).astype(np.float32), np.random.RandomState(3).randn(N, C).astype(
        np.float32)
    values, gradients = run_with_gradients(fixed, {"x": x, "w": w}, wrt=["x"], fetch=["y"],
                                           init_net=init.Proto() if constants == "init_net" else None)
    y_ref, dx_ref = torch_value_and_gradient(reference, x, w)
    np.testing.assert_allclose(values["y"], y_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gradients["x"], dx_ref, rtol=1e-5, atol=1e-5)


def test_without_its_init_net_a_triangular_product_is_not_guessed(tmp_path):
    net, _, _ = matmul_net()
    result = run_cli("doctor", save(net.Proto(), tmp_path / "predict.pb"), "--loss", "loss")
    assert result.returncode == 0 and "healthy" in result.stdout


def test_the_loop_is_reported_and_fix_refuses_it(tmp_path):
    net, output = loop_net(with_shape_input=False)
    predict = save(net.Proto(), tmp_path / "loop.pbtxt")
    refused = run_cli("doctor", predict, "--loss", "loss", "--fix", tmp_path / "out.pb")
    assert "not a cumulative sum of 'prediction'" in refused.stdout  # the findings come first
    assert_one_line_error(refused, "--fix: the net cannot be fixed by editing it")
    assert not (tmp_path / "out.pb").exists()


def test_draw_and_draw_fixed_write_svgs_with_the_path_highlighted(tmp_path):
    net, init, _ = to_dense_net()
    before, after = tmp_path / "before.svg", tmp_path / "after.svg"
    predict, init_file = save(net.Proto(), tmp_path / "p.pb"), save(init.Proto(), tmp_path / "i.pb")
    result = run_cli("doctor", predict, "--init-net", init_file, "--loss", "loss", "--draw", before,
                     "--fix", tmp_path / "f.pb", "--draw-fixed", after)
    assert result.returncode == 1, result.stderr
    assert "drew the findings to {}".format(before) in result.stdout
    assert "drew the fixed net to {}".format(after) in result.stdout
    drawn = before.read_text()
    assert drawn.lstrip().startswith("<?xml") and "<svg" in drawn
    for words in ("#0 Transpose", "refuses the sparse gradient", "#1 SparseLengthsSum", "makes the gradient sparse",
                  "#2 ToDense", "x_cumsum_T"):
        assert words in drawn, words
    fixed = after.read_text()
    assert "<svg" in fixed and "EnsureDense" in fixed and "put in by fix" in fixed
    assert "#2 SparseLengthsSum" in fixed and "its inputs changed by fix" in fixed


def test_drawing_without_graphviz_names_what_to_install(tmp_path):
    """With no ``dot`` on PATH the command stops before reading the net."""
    net, init, _ = to_dense_net()
    svg = tmp_path / "before.svg"
    result = subprocess.run([CLI, "doctor", str(save(net.Proto(), tmp_path / "p.pb")), "--loss", "loss", "--draw",
                             str(svg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                            timeout=120, env=dict(os.environ, PATH=os.path.dirname(sys.executable)))
    assert_one_line_error(result, "--draw: drawing needs graphviz's dot", "apt-get install graphviz")
    assert not svg.exists()


def test_draw_fixed_needs_fix(tmp_path):
    net, _, _ = to_dense_net()
    result = run_cli("doctor", save(net.Proto(), tmp_path / "p.pb"), "--loss", "loss", "--draw-fixed",
                     tmp_path / "a.svg")
    assert_one_line_error(result, "--draw-fixed draws the fixed net: give --fix OUT too")
