"""`pycumsum_op.torch_versions` against the torch that runs the tests: every capability in the table is
probed on this torch (its functions, Caffe2's ATen and C++ operators), and what the package refuses
here is refused in one message naming the torch version it needs."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from pycumsum_op import ScanArgumentError
from onnx_support import ONNX_BACKEND, onnx_backend_refusal
from pycumsum_op.torch_versions import SINCE, TORCH, has, needs, require, version_tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
X = np.array([[1.0, -2.0, 0.0], [3.0, 4.0, 5.0]])


def runs(op_type, inputs, outputs=1, **arguments):
    """Whether Caffe2 runs ``op_type`` on ``inputs`` (arrays) here."""
    workspace.ResetWorkspace()
    names = ["tv_in{}".format(i) for i in range(len(inputs))]
    for name, value in zip(names, inputs):
        workspace.FeedBlob(name, value)
    try:
        workspace.RunOperatorOnce(core.CreateOperator(
            op_type, names, ["tv_out{}".format(i) for i in range(outputs)], **arguments))
    except RuntimeError:
        return False
    finally:
        workspace.ResetWorkspace()
    return True


def logcumsumexp_exact_at_minus_infinity():
    inf = float("inf")
    return hasattr(torch, "logcumsumexp") and torch.logcumsumexp(
        torch.tensor([-inf, -inf, 0.0], dtype=torch.float64), 0).tolist() == [-inf, -inf, 0.0]


def slice_reads_short_starts():
    """Caffe2's Slice with starts/ends shorter than the rank, in a child process (torch 1.4 aborts)."""
    program = ("import numpy as np\nfrom caffe2.python import core, workspace\n"
               "x = np.arange(24, dtype=np.int64).reshape(4, 3, 2)\nworkspace.FeedBlob('x', x)\n"
               "workspace.RunOperatorOnce(core.CreateOperator('Slice', ['x'], ['y'], starts=[1], ends=[3]))\n"
               "assert np.array_equal(workspace.FetchBlob('y'), x[1:3])\n")
    return subprocess.run([sys.executable, "-c", program], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          timeout=300).returncode == 0


def python_op_error_keeps_its_type():
    """Whether a net run raises a Python op's own exception (ScanArgumentError), not a RuntimeError."""
    net = core.Net("tv_raise")
    net.PyCumSum("tv_x", "tv_y", axis=3)
    workspace.FeedBlob("tv_x", np.zeros(2, np.float32))
    try:
        workspace.RunNetOnce(net)
    except ScanArgumentError:
        return True
    except RuntimeError as error:
        assert "ScanArgumentError: PyCumSum: axis=3 is out of range" in str(error)
        return False
    finally:
        workspace.ResetWorkspace()
    raise AssertionError("axis=3 on a vector ran")


def autograd_reverses_cumsum_by_flips():
    """Whether autograd's gradient of cumsum is torch's flip -> cumsum -> flip (not total - cumsum + w, which
    rounds differently on float32 data over 12 decades)."""
    rng = np.random.RandomState(0)
    w = torch.from_numpy((rng.standard_normal((4, 64)) * 10.0 ** rng.randint(-6, 7, (4, 64))).astype(np.float32))
    x = torch.zeros(4, 64, requires_grad=True)
    (grad,) = torch.autograd.grad(torch.cumsum(x, 1), x, w)
    return torch.equal(grad, w.flip(1).cumsum(1).flip(1))


PROBES = {
    "torch.cummax": lambda: hasattr(torch, "cummax") and hasattr(torch, "cummin"),
    "torch.logcumsumexp": lambda: hasattr(torch, "logcumsumexp"),
    "torch.logcumsumexp -inf": logcumsumexp_exact_at_minus_infinity,
    "torch autograd reversed cumsum by flips": autograd_reverses_cumsum_by_flips,
    "aten cummax": lambda: runs("ATen", [X], 2, operator="cummax", dim=1),
    "aten logcumsumexp": logcumsumexp_exact_at_minus_infinity,  # the ATen operator is torch's kernel
    "aten flip bool": lambda: runs("ATen", [X > 0], operator="flip", dims=[1]),
    "aten cumprod_backward(grad, input, output)": lambda: runs("ATen", [X, X, np.cumprod(X, 1)],
                                                               operator="cumprod_backward", dim=1),
    "aten cumprod_backward(grad, input)": lambda: runs("ATen", [X, X], operator="cumprod_backward", dim=1) or runs(
        "ATen", [X, X, np.cumprod(X, 1)], operator="cumprod_backward", dim=1),
    "caffe2 Slice short starts": slice_reads_short_starts,
    "caffe2 Scale double": lambda: runs("Scale", [X], scale=2.0),
    "caffe2 Sum double": lambda: runs("Sum", [X, X]),
    "caffe2 python op exception type": python_op_error_keeps_its_type,
    "caffe2 onnx backend without onnx.optimizer": lambda: onnx_backend_refusal() is None,
}


def test_every_capability_has_a_probe():
    assert sorted(PROBES) == sorted(SINCE)


@pytest.mark.parametrize("capability", sorted(SINCE))
def test_the_table_says_what_this_torch_does(capability):
    assert has(capability) == bool(PROBES[capability]()), (capability, torch.__version__)


def test_the_aten_ops_the_lowering_always_uses_run_here():
    """The forms emitted on every torch (no capability): the cumsum/cumprod scans, flip/roll/index_fill, and
    the gradients' eq with -inf (isneginf's stand-in), masked_fill and scatter_add (cummaxmin_backward's)."""
    indices = np.zeros(X.shape, np.int64)
    assert runs("ATen", [X], operator="cumsum", dim=1) and runs("ATen", [X], operator="cumprod", dim=1)
    assert runs("ATen", [X], operator="flip", dims=[1]) and runs("ATen", [X], operator="roll", shifts=[1], dims=[1])
    assert runs("ATen", [X, np.array([0], np.int64)], operator="index_fill", dim=1, value=0.0)
    assert runs("ATen", [X], operator="eq", other=float("-inf"))
    assert runs("ATen", [X, X > 0], operator="masked_fill", value=0.0)
    assert runs("ATen", [X, indices, X], operator="scatter_add", dim=1)


@pytest.mark.skipif(not has("torch.flip 0-d"), reason="torch {} crashes on torch.flip of a 0-d tensor "
                    "(the aten target never emits one)".format(torch.__version__))
def test_flip_of_a_0d_tensor_runs_here():
    assert torch.flip(torch.tensor(1.0), [0]).item() == 1.0


@pytest.mark.parametrize("reverse", [False, True])
def test_a_0d_input_of_unknown_rank_is_scanned_or_refused_by_an_assert_never_a_crash(reverse):
    """Lowered without shapes, a 0-d input reaches the ATen ops: where torch's flip of a 0-d tensor crashes
    (torch 1.9), the forward of a reversed scan and the gradient (a flipped cumsum) fail the net with a
    message instead; a forward scan flips nothing and runs. Elsewhere both equal torch's."""
    workspace.ResetWorkspace()  # lower reads the facts of blobs already in the workspace: none here
    forward = core.Net("tv_zero_d")
    forward.PyCumSum("tv_z", "tv_zy", axis=0, reverse=reverse)
    forward.SumElements("tv_zy", "tv_zloss")
    lowered = pycumsum_op.lower(forward, target="aten")
    train = core.Net(lowered)
    train.AddGradientOperators(["tv_zloss"])
    workspace.ResetWorkspace()
    workspace.FeedBlob("tv_z", np.array(2.5, np.float32))
    if not has("torch.flip 0-d") and reverse:
        with pytest.raises(RuntimeError, match="0-d input 'tv_z' on torch .*whose flip of a 0-d tensor crashes"):
            workspace.RunNetOnce(lowered)
        return
    workspace.RunNetOnce(lowered)
    assert workspace.FetchBlob("tv_zy").shape == () and workspace.FetchBlob("tv_zy") == np.float32(2.5)
    workspace.ResetWorkspace()
    workspace.FeedBlob("tv_z", np.array(2.5, np.float32))
    if not has("torch.flip 0-d"):
        with pytest.raises(RuntimeError, match="a 0-d gradient on torch .*whose flip of a 0-d tensor crashes"):
            workspace.RunNetOnce(train)
        return
    workspace.RunNetOnce(train)
    tensor = torch.tensor(2.5, requires_grad=True)
    (expected,) = torch.autograd.grad(torch.cumsum(tensor, 0).sum(), tensor)
    assert workspace.FetchBlob("tv_z_grad") == expected.item()


def test_messages_name_the_torch_version_needed():
    assert version_tuple("1.10.2+cu102") == (1, 10, 2) and TORCH == version_tuple(torch.__version__)
    assert needs("aten cummax", "op 0") == "op 0 needs torch >= 1.5 (this is torch {})".format(torch.__version__)
    assert needs("caffe2 onnx backend without onnx.optimizer", "x").startswith("x needs torch >= 1.10 (")
    if not has("aten cummax"):
        with pytest.raises(ValueError, match=r"^op 0 needs torch >= 1\.5 \(this is torch "):
            require("aten cummax", "op 0", ValueError)


def test_onnx_loads_or_is_refused_in_one_message_and_one_cli_line(tmp_path):
    refusal = onnx_backend_refusal()
    if has(ONNX_BACKEND):
        assert refusal is None
        return
    assert refusal.startswith("pycumsum_op.onnx with onnx ") and "needs torch >= 1.10 (this is torch " in refusal
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from pycumsum_op.cli import main; sys.exit(main())", "onnx", "import",
         str(tmp_path / "m.onnx"), "--predict-net", str(tmp_path / "p.pb"), "--init-net", str(tmp_path / "i.pb")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    errors = [line for line in result.stderr.splitlines() if line.startswith("pycumsum-op")]
    assert result.returncode == 2 and errors == ["pycumsum-op onnx: error: " + refusal], result.stderr
    assert not os.path.exists(str(tmp_path / "p.pb"))
