"""Run lowered nets in the C++ predictor with no Python in its environment; compare with torch.

    python examples/cpp_predictor/check.py PREDICTOR WORK_DIR

For each case: build a Caffe2 net with pycumsum_op's Python ops, lower it (`pycumsum_op.lower`),
export it with Caffe2's ``mobile_exporter`` (its outputs must be exactly the blobs the case names),
write the inputs as .npy, run PREDICTOR under ``env -i`` (no PATH, no PYTHONPATH, no venv) and
compare every output with torch (inf and NaN exactly where torch has them). Two cases must fail cleanly
instead: a portable net fed another scan length (the lowering's Assert) and the un-lowered net (Caffe2's C++
has no Python op): exit 1, Caffe2's message on stderr, no signal. Prints one line per case; exit 0 when all
pass, 1 otherwise.
"""
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch
from caffe2.python import core, workspace
from caffe2.python.predictor import mobile_exporter

import pycumsum_op
from pycumsum_op.scans import SCANS

LEARNING_RATE = 0.1


def _export(netdef, params, directory):
    """Export with mobile_exporter (parameters from the workspace); returns the predict net's outputs."""
    init_net, predict_net = mobile_exporter.Export(workspace, netdef, params)
    os.makedirs(directory, exist_ok=True)
    for name, net in (("init.pb", init_net), ("predict.pb", predict_net)):
        with open(os.path.join(directory, name), "wb") as handle:
            handle.write(net.SerializeToString())
    return list(predict_net.external_output)


def _run_binary(binary, directory, inputs):
    """Run the predictor with an empty environment; returns (CompletedProcess, {output: array})."""
    out = os.path.join(directory, "out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    args = [os.path.abspath(binary), os.path.join(directory, "init.pb"), os.path.join(directory, "predict.pb"), out]
    for name, value in inputs.items():
        path = os.path.join(directory, name + ".npy")
        np.save(path, value)
        args.append("{}={}".format(name, path))
    result = subprocess.run(["env", "-i"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, timeout=300)
    outputs = {name[:-4]: np.load(os.path.join(out, name)) for name in os.listdir(out) if name.endswith(".npy")}
    return result, outputs


class Case(object):
    """One net: ``build()`` returns (netdef, params, inputs, expected {output: torch result}, tolerance)."""

    def __init__(self, name, build, outputs):
        self.name, self.build, self.outputs = name, build, outputs

    def check(self, binary, work):
        workspace.ResetWorkspace()
        netdef, params, inputs, expected, tolerance = self.build()
        directory = os.path.join(work, self.name)
        exported = _export(netdef, params, directory)
        if sorted(exported) != sorted(self.outputs):
            return False, "mobile_exporter outputs {}, expected {}".format(exported, self.outputs)
        result, got = _run_binary(binary, directory, inputs)
        if result.returncode != 0:
            return False, "exit {}: {}".format(result.returncode, result.stderr.strip())
        worst = 0.0
        for name, want in expected.items():
            if name not in got:
                return False, "{}: not written by the predictor ({})".format(name, result.stdout.strip())
            if got[name].dtype != want.dtype or got[name].shape != want.shape:
                return False, "{}: {} {} from C++, torch gives {} {}".format(
                    name, got[name].dtype, got[name].shape, want.dtype, want.shape)
            finite = np.isfinite(want) if want.dtype.kind == "f" else np.ones(want.shape, bool)
            if not np.array_equal(got[name][~finite], want[~finite], equal_nan=True) or not np.all(
                    np.isfinite(got[name][finite])):  # inf and NaN exactly where torch has them
                return False, "{}: {} non-finite values from C++ where torch has {}".format(
                    name, np.sum(~np.isfinite(got[name])), np.sum(~finite))
            worst = max(worst, float(np.max(np.abs(got[name][finite].astype(np.float64) - want[finite]), initial=0)))
        return worst <= tolerance, "max |C++ - torch| = {:.2g} (tolerance {:.0e})".format(worst, tolerance)


def _head(target, classes):
    """FC -> Softmax -> PyCumSum: class probabilities -> their cumulative distribution."""
    def build():
        rng = np.random.RandomState(classes)
        x = rng.randn(5, 8).astype(np.float32)
        w, b = rng.randn(classes, 8).astype(np.float32), rng.randn(classes).astype(np.float32)
        for name, value in (("x", x), ("w", w), ("b", b)):
            workspace.FeedBlob(name, value)
        net = core.Net("head")
        net.FC(["x", "w", "b"], "logits")
        net.Softmax("logits", "p")
        net.PyCumSum("p", "y", axis=1)
        net.AddExternalOutput(core.BlobReference("y"))
        lowered = pycumsum_op.lower(net, target)
        linear = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b))
        expected = torch.cumsum(torch.softmax(linear, 1), 1).numpy()
        return lowered, ["w", "b"], {"x": x}, {"y": expected}, 1e-6
    return Case("head_{}_{}".format(target, classes), build, ["y"])


def _scan(scan, target, dtype, **flags):
    """One scan op on a (3, 40, 2) input along axis 1 (40: a whole number of portable blocks)."""
    def build():
        x = np.random.RandomState(7).uniform(-2, 2, (3, 40, 2))
        x = (x * 20).astype(dtype) if np.dtype(dtype).kind == "i" else x.astype(dtype)
        workspace.FeedBlob("x", x)
        net = core.Net("scan")
        outputs = getattr(net, SCANS[scan].op_name)(
            "x", ["y", "indices"] if scan in ("cummax", "cummin") else "y", axis=1, **flags)
        for output in (outputs if isinstance(outputs, tuple) else [outputs]):
            net.AddExternalOutput(output)
        lowered = pycumsum_op.lower(net, target)
        expected = _torch_scan(scan, torch.from_numpy(x), **flags)
        tolerance = 0.0 if target == "aten" or np.dtype(dtype).kind == "i" else 1e-5
        return lowered, [], {"x": x}, expected, tolerance
    suffix = "".join("_" + flag for flag, value in sorted(flags.items()) if value)
    return Case("{}_{}_{}{}".format(scan, target, np.dtype(dtype).name, suffix), build,
                ["y", "indices"] if scan in ("cummax", "cummin") else ["y"])


def _torch_scan(scan, x, exclusive=False, reverse=False):
    dim = 1
    if reverse:
        x = torch.flip(x, [dim])
    if scan in ("cummax", "cummin"):
        values, indices = getattr(torch, scan)(x, dim)
        if reverse:
            values, indices = torch.flip(values, [dim]), x.shape[dim] - 1 - torch.flip(indices, [dim])
        return {"y": values.numpy(), "indices": indices.numpy()}
    result = getattr(torch, scan)(x, dim)
    if exclusive:
        result = torch.cat([torch.zeros_like(result[:, :1]), result[:, :-1]], dim)
    if reverse:
        result = torch.flip(result, [dim])
    return {"y": result.numpy()}


def _nonfinite(target):
    """inf, -inf and NaN in the input and in the output's gradient, -0.0 and a running sum past float32's
    range and back: the scan and its gradient op lowered, against torch's cumsum and autograd."""
    def build():
        rng = np.random.RandomState(11)
        x = rng.uniform(-1, 1, (4, 100)).astype(np.float32)
        x[0, 30], x[1, 60], x[2, 10] = np.inf, -np.inf, np.nan
        x[3, :5] = [-0.0, 3e38, 3e38, -3e38, -3e38]  # torch: 0, 3e38, inf, 3e38, 0 (a float64 sum inside)
        grad_y = rng.uniform(-1, 1, (4, 100)).astype(np.float32)
        grad_y[0, 70], grad_y[1, 5], grad_y[3, 50] = np.nan, np.inf, -np.inf
        for name, value in (("x", x), ("y_grad_in", grad_y)):
            workspace.FeedBlob(name, value)
        net = core.Net("nonfinite")
        y = net.PyCumSum("x", "y", axis=1)
        net.AddGradientOperators({y: "y_grad_in"})
        net.AddExternalInput("y_grad_in")
        lowered = pycumsum_op.lower(net, target)
        tx = torch.from_numpy(x).requires_grad_()
        ty = torch.cumsum(tx, 1)
        ty.backward(torch.from_numpy(grad_y))
        assert not np.isfinite(ty.detach().numpy()).all() and not np.isfinite(tx.grad.numpy()).all()
        return lowered, [], {"x": x, "y_grad_in": grad_y}, {"y": ty.detach().numpy(), "x_grad": tx.grad.numpy()}, 1e-5
    return Case("nonfinite_{}".format(target), build, ["y", "x_grad"])


def _sgd_step(target):
    """One SGD step of FC -> Softmax -> PyCumSum -> squared error to a target CDF, gradients lowered."""
    def build():
        rng = np.random.RandomState(3)
        x, w, b = rng.randn(6, 8).astype(np.float32), rng.randn(40, 8).astype(np.float32), np.zeros(40, np.float32)
        label_cdf = np.cumsum(np.eye(40, dtype=np.float32)[rng.randint(0, 40, 6)], 1)
        blobs = {"x": x, "w": w, "b": b, "label_cdf": label_cdf, "lr": np.array([-LEARNING_RATE], np.float32),
                 "one": np.array([1.0], np.float32)}
        for name, value in blobs.items():
            workspace.FeedBlob(name, value)
        net = core.Net("train")
        net.FC(["x", "w", "b"], "logits")
        net.Softmax("logits", "p")
        cdf = net.PyCumSum("p", "cdf", axis=1)
        loss = net.AveragedLoss(net.SquaredL2Distance([cdf, "label_cdf"], "distance"), "loss")
        grads = net.AddGradientOperators([loss])
        for param in ("w", "b"):
            net.WeightedSum([param, "one", grads[param], "lr"], param + "_next")
        lowered = pycumsum_op.lower(net, target)
        assert not [op for op in lowered.op if op.type.startswith("Python")]
        tw, tb = torch.from_numpy(w).requires_grad_(), torch.from_numpy(b).requires_grad_()
        p = torch.softmax(torch.nn.functional.linear(torch.from_numpy(x), tw, tb), 1)
        distance = 0.5 * ((torch.cumsum(p, 1) - torch.from_numpy(label_cdf)) ** 2).sum(1)
        gw, gb = torch.autograd.grad(distance.mean(), [tw, tb])
        expected = {"w_next": (tw - LEARNING_RATE * gw).detach().numpy(),
                    "b_next": (tb - LEARNING_RATE * gb).detach().numpy()}
        return lowered, ["w", "b", "label_cdf", "lr", "one"], {"x": x}, expected, 1e-5
    # The gradients of the input and the label, which no op reads, are outputs for mobile_exporter too.
    return Case("sgd_step_{}".format(target), build, ["w_next", "b_next", "x_grad", "label_cdf_grad"])


def _fails_cleanly(name, build, message):
    """A net the C++ predictor must refuse: exit 1, ``message`` in its one-line error, no signal."""
    def check(binary, work):
        workspace.ResetWorkspace()
        netdef, params, inputs = build()
        directory = os.path.join(work, name)
        _export(netdef, params, directory)
        result, _ = _run_binary(binary, directory, inputs)
        last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]  # (Caffe2 may log before it)
        ok = result.returncode == 1 and last.startswith("predictor: Caffe2 error: ") and message in last
        return ok, "exit {}: {}".format(result.returncode, last)
    case = Case(name, None, None)
    case.check = check
    return case


def _scan_net(target):
    workspace.FeedBlob("x", np.zeros((3, 40), np.float32))
    net = core.Net("portable_length")
    net.PyCumSum("x", "y", axis=1)
    net.AddExternalOutput(core.BlobReference("y"))
    return net if target is None else pycumsum_op.lower(net, target)


CASES = [
    _head("aten", 40), _head("portable", 40), _head("portable", 17), _head("portable", 1000),
    _scan("cumsum", "portable", np.float32, exclusive=True, reverse=True),
    _scan("cumsum", "portable", np.int32), _scan("cumsum", "portable", np.float64, reverse=True),
    _scan("cumsum", "aten", np.float32, exclusive=True), _scan("cumprod", "aten", np.float64),
    _scan("cummax", "aten", np.float32), _scan("cummin", "aten", np.int64, reverse=True),
    _scan("logcumsumexp", "aten", np.float32, reverse=True),
    _sgd_step("aten"), _sgd_step("portable"), _nonfinite("portable"), _nonfinite("aten"),
    _fails_cleanly("portable_other_length", lambda: (_scan_net("portable"), [], {"x": np.ones((3, 41), np.float32)}),
                   "lowered to target 'portable' for scan length 40"),
    _fails_cleanly("not_lowered", lambda: (_scan_net(None), [], {"x": np.ones((3, 40), np.float32)}),
                   "Python"),
]


def main(argv) -> int:
    if len(argv) != 3:
        print("usage: check.py PREDICTOR WORK_DIR", file=sys.stderr)
        return 2
    binary, work = argv[1], argv[2]
    failed = 0
    for case in CASES:
        start = time.time()
        ok, detail = case.check(binary, work)
        failed += not ok
        print("{:4} {:42} {:4.1f} s  {}".format("ok" if ok else "FAIL", case.name, time.time() - start, detail))
    print("{} of {} cases passed".format(len(CASES) - failed, len(CASES)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
