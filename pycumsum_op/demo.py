"""``pycumsum-op demo`` (``make demo``): the legacy SparseLengthsSum cumsum net, its error, the diagnosis
(drawn with graphviz when asked: ``--draw DIR``), both fixes, then an ordinal classifier trained
with an Earth Mover's Distance loss through PyCumSum.

Every number is checked against PyTorch in the same process; `run_demo` returns 0
when all checks pass, 1 otherwise, and ends with a summary table.
"""
import os
import statistics
import sys
import time
from typing import List, NamedTuple

import numpy as np
import torch
from caffe2.python import core, workspace

from ._atomic_files import check_target, write_atomically
from .doctor import diagnose, fix
from .doctor.diagnose import caffe2_error_summary
from .doctor.draw import DrawingRefused, DrawingUnavailable, draw_findings, draw_repairs
from .examples import Caffe2OrdinalEMD, TorchOrdinalEMD, init_params, make_ordinal_data
from .idioms import add_sparse_lengths_cumsum
from .ops import add_scan_op
from .progress import ProgressBar

ROWS, COLUMNS = 256, 128           # the legacy net's `prediction`: (N, C)
TIMING_RUNS = 15
TRAINING = {"samples": 1024, "features": 8, "hidden": 32, "classes": 6, "batch": 128, "learning_rate": 1.0}
GRADIENT_TOLERANCE = 1e-4          # max |caffe2 - torch| / max |torch| over all parameter gradients
CUMSUM_TOLERANCE = 1e-4


class Check(NamedTuple):
    """One line of the closing summary."""
    what: str
    result: str
    passed: bool


def _steps(count: int) -> str:
    """The count with its noun.

    >>> _steps(1), _steps(40)
    ('1 step', '40 steps')
    """
    return "{} step{}".format(count, "" if count == 1 else "s")


def _section(out, title: str) -> None:
    out.write("\n== {} ==\n".format(title))


def _legacy_net():
    """The legacy SparseLengthsSum cumsum net over blob "prediction", with loss = sum(weights * pred_cdist)."""
    net = core.Net("demo_legacy")
    pred_cdist = add_sparse_lengths_cumsum(net, "prediction", COLUMNS, blob_out="pred_cdist")
    net.AddExternalInput("weights")
    net.SumElements(net.Mul([pred_cdist, "weights"], "weighted"), "loss")
    return net


def _pycumsum_net():
    """torch.cumsum(prediction, 1) as one net.PyCumSum."""
    net = core.Net("demo_pycumsum")
    net.AddExternalInput("prediction", "weights")
    pred_cdist = add_scan_op(net, "cumsum", "prediction", "pred_cdist", axis=1)
    net.SumElements(net.Mul([pred_cdist, "weights"], "weighted"), "loss")
    return net


class _Measured(NamedTuple):
    output: np.ndarray
    gradient: np.ndarray
    milliseconds: float


def _forward_backward(netdef, name: str) -> _Measured:
    """Run a copy of ``netdef`` with its gradient ops TIMING_RUNS times: output, d loss/d prediction, median ms."""
    net = core.Net(netdef)
    net.Proto().name = name
    gradients = net.AddGradientOperators(["loss"])
    workspace.CreateNet(net, overwrite=True)
    times = []
    for _ in range(TIMING_RUNS):
        start = time.perf_counter()
        workspace.RunNet(name)
        times.append(1000 * (time.perf_counter() - start))
    return _Measured(workspace.FetchBlob("pred_cdist"), workspace.FetchBlob(str(gradients["prediction"])),
                     statistics.median(times))


def _torch_references(prediction: np.ndarray, weights: np.ndarray):
    """torch.cumsum, its exclusive shift (what the legacy net computes) and their autograd gradients."""
    x = torch.tensor(prediction, requires_grad=True)
    inclusive = torch.cumsum(x, 1)
    exclusive = torch.cat([torch.zeros_like(inclusive[:, :1]), inclusive[:, :-1]], 1)
    w = torch.from_numpy(weights)
    grad_inclusive, = torch.autograd.grad((inclusive * w).sum(), x, retain_graph=True)
    grad_exclusive, = torch.autograd.grad((exclusive * w).sum(), x)
    return {True: (exclusive.detach().numpy(), grad_exclusive.numpy()),
            False: (inclusive.detach().numpy(), grad_inclusive.numpy())}


def _max_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - b).max())


def _reproduce(out, net) -> Check:
    _section(out, "1. The legacy net: Transpose -> SparseLengthsSum(triangular indices) -> Transpose")
    workspace.RunNetOnce(net)
    out.write("prediction: {} x {}; forward runs: pred_cdist[0, :4] = {}\n".format(
        ROWS, COLUMNS, np.round(workspace.FetchBlob("pred_cdist")[0, :4], 3)))
    try:
        core.Net(net.Proto()).AddGradientOperators(["loss"])
        error = None
    except Exception as caught:  # what the user saw
        error = caught
    out.write("backward: net.AddGradientOperators(['loss']) raises:\n  {}\n".format(
        str(error).strip().splitlines()[0] if error else "nothing (unexpected)"))
    summary = caffe2_error_summary(error) if error else "no error"
    return Check("the legacy net, backward", "fails: " + summary, "is sparse (expected dense)" in summary)


def _diagnosis(out, net) -> Check:
    _section(out, "2. Diagnosis: pycumsum_op.doctor.diagnose(net, ['loss'])")
    findings = diagnose(net, ["loss"])
    for finding in findings:
        out.write(str(finding) + "\n")
    return Check("doctor.diagnose", "{} finding(s): {}".format(len(findings), "; ".join(
        "op #{} {} <- op #{} {}".format(f.op_index, f.op_type, f.source_index, f.source_type) for f in findings)),
        len(findings) == 1 and findings[0].idiom is not None)


#: the files ``--draw DIR`` writes in DIR
DRAWINGS = ("before.svg", "after.svg")


def check_drawing_targets(directory: str) -> None:
    """OSError when a drawing's path in ``directory`` is a symlink or anything but a regular file, checked before
    the demo runs (`write_atomically` checks again when it writes)."""
    for name in DRAWINGS:
        check_target(os.path.join(directory, name))


def _drawings(out, net, directory: str) -> List[Check]:
    """The legacy net around its finding and the PyCumSum-fixed net, as SVGs in ``directory`` (none, with the
    reason, where graphviz is missing or the drawing is refused)."""
    netdef = net.Proto()
    try:
        drawings = dict(zip(DRAWINGS, (draw_findings(netdef, diagnose(netdef, ["loss"])),
                                       draw_repairs(netdef, fix(netdef, ["loss"], strategy="pycumsum")))))
    except (DrawingUnavailable, DrawingRefused) as reason:
        out.write("not drawn: {}\n".format(reason))
        return []
    try:
        os.makedirs(directory, exist_ok=True)
        for name, svg in drawings.items():
            write_atomically(os.path.join(directory, name), lambda handle, svg=svg: handle.write(svg))
    except OSError as error:  # a symlink or a folder where a drawing goes, a folder that cannot be made
        out.write("not drawn: cannot write {!r}: {}\n".format(error.filename or directory, error.strerror or error))
        return [Check("doctor drawings", "not written: {}".format(error.strerror or error), False)]
    out.write("drawn with graphviz: {} (red: the op that refuses the sparse gradient, orange: the op "
              "that makes it sparse, yellow: the rest of the idiom), {} (green: what fix put in)\n".format(
                  *(os.path.join(directory, name) for name in drawings)))
    return [Check("doctor drawings", ", ".join(os.path.join(directory, name) for name in drawings),
                  all(svg.lstrip().startswith(b"<?xml") for svg in drawings.values()))]


def _fixes(out, net, prediction: np.ndarray, weights: np.ndarray) -> List[Check]:
    _section(out, "3. The fixes, checked against torch.cumsum and torch.autograd")
    references = _torch_references(prediction, weights)
    candidates = [("fix(strategy='ensure_dense')", fix(net, ["loss"], strategy="ensure_dense"), True),
                  ("fix(strategy='pycumsum')", fix(net, ["loss"], strategy="pycumsum"), True),
                  ("net.PyCumSum(axis=1)", _pycumsum_net().Proto(), False)]
    out.write("ref = torch.cumsum(prediction, 1), shifted one column for the exclusive nets; "
              "dref = its torch.autograd gradient\n")
    out.write("{:<30} {:<9} {:>12} {:>12} {:>18} {:>10}\n".format(
        "net", "computes", "max|y-ref|", "max|dx-dref|", "max|y-torch.cumsum|", "fwd+bwd ms"))
    checks, milliseconds = [], []
    for number, (label, netdef, exclusive) in enumerate(candidates):
        measured = _forward_backward(netdef, "demo_fix_{}".format(number))
        reference, reference_gradient = references[exclusive]
        value_error = _max_error(measured.output, reference)
        gradient_error = _max_error(measured.gradient, reference_gradient)
        kind = "exclusive" if exclusive else "inclusive"
        milliseconds.append(measured.milliseconds)
        out.write("{:<30} {:<9} {:>12.2e} {:>12.2e} {:>18.2f} {:>10.2f}\n".format(
            label, kind, value_error, gradient_error, _max_error(measured.output, references[False][0]),
            measured.milliseconds))
        checks.append(Check(label, "backward works; {} cumsum, max err {:.1e}, grad err {:.1e}, {:.2f} ms".format(
            kind, value_error, gradient_error, measured.milliseconds),
            value_error < CUMSUM_TOLERANCE and gradient_error < CUMSUM_TOLERANCE))
    out.write("The legacy net is an EXCLUSIVE cumsum (column 0 is 0), off by one against torch.cumsum.\n"
              "strategy='pycumsum' keeps that meaning with one PyCumSum(exclusive=True), {:.0f}x faster here "
              "(O(N*C) instead of O(N*C^2));\nfor torch.cumsum itself use net.PyCumSum(x, y, axis=1).\n"
              .format(milliseconds[0] / milliseconds[1]))
    return checks


def _train(out, steps: int, seed: int) -> List[Check]:
    config = TRAINING
    _section(out, "4. Ordinal classifier trained with an EMD loss through PyCumSum, next to a PyTorch twin")
    out.write("{features} features -> FC({hidden}) -> tanh -> FC({classes}) -> softmax -> PyCumSum = CDF; "
              "loss = mean 0.5*||CDF - target CDF||^2\nSGD lr={learning_rate}, batch {batch}, {steps}; "
              "every step's loss and gradients compared with torch.autograd's\n".format(steps=_steps(steps), **config))
    data = make_ordinal_data(config["samples"], config["features"], config["classes"], seed)
    params = init_params(config["features"], config["hidden"], config["classes"], seed)
    model = Caffe2OrdinalEMD(params, config["learning_rate"])
    twin = TorchOrdinalEMD(params, config["learning_rate"])
    before = model.evaluate(data.features, data.one_hot)
    batches = config["samples"] // config["batch"]
    bar = ProgressBar(steps, out)
    worst_gradient = worst_loss = 0.0
    start = time.perf_counter()
    for step in range(steps):
        rows = slice((step % batches) * config["batch"], (step % batches + 1) * config["batch"])
        ours = model.step(data.features[rows], data.one_hot[rows])
        theirs = twin.step(data.features[rows], data.one_hot[rows])
        worst_gradient = max(worst_gradient, ours.max_gradient_difference(theirs))
        worst_loss = max(worst_loss, abs(ours.loss - theirs.loss))
        bar.update(step + 1, "batch loss {:.4f}".format(ours.loss))
    seconds = time.perf_counter() - start
    after = model.evaluate(data.features, data.one_hot)
    decreased = after.loss < before.loss
    matched = worst_gradient < GRADIENT_TOLERANCE
    out.write("loss on all {} samples: {:.4f} -> {:.4f} ({}); mean |predicted - true class|: {:.2f} -> {:.2f}\n"
              .format(config["samples"], before.loss, after.loss, "decreased" if decreased else "did NOT decrease",
                      before.class_error, after.class_error))
    out.write("gradients vs the PyTorch twin: max relative difference {:.1e} over {} x 4 parameters "
              "(tolerance {:.0e}): {}\n".format(worst_gradient, _steps(steps), GRADIENT_TOLERANCE,
                                                 "gradients match" if matched else "gradients DIFFER"))
    out.write("batch losses vs the twin: max difference {:.1e}; {:.0f} steps/s (both frameworks)\n".format(
        worst_loss, steps / seconds))
    return [Check("EMD training, {}".format(_steps(steps)), "loss {:.4f} -> {:.4f}, class error {:.2f} -> {:.2f}"
                  .format(before.loss, after.loss, before.class_error, after.class_error), decreased),
            Check("gradients vs PyTorch twin", "max relative difference {:.1e}".format(worst_gradient), matched)]


def _summary(out, checks: List[Check]) -> None:
    _section(out, "Summary")
    width = max(len(check.what) for check in checks)
    for check in checks:
        out.write("{:<4} {:<{width}}  {}\n".format("ok" if check.passed else "FAIL", check.what, check.result,
                                                  width=width))


def run_demo(steps: int, seed: int = 0, out=None, draw_directory: str = None) -> int:
    """Run the demo, writing to ``out`` (default stdout), the drawings to ``draw_directory`` when given; 0 when
    every check passes, else 1."""
    out = out or sys.stdout
    out.write("pycumsum_op demo: torch.cumsum for Caffe2, and the cure for "
              "'Gradient of output ... is sparse (expected dense)'  (seed {})\n".format(seed))
    rng = np.random.RandomState(seed)
    prediction = rng.randn(ROWS, COLUMNS).astype(np.float32)
    weights = rng.randn(ROWS, COLUMNS).astype(np.float32)
    workspace.FeedBlob("prediction", prediction)
    workspace.FeedBlob("weights", weights)
    net = _legacy_net()
    checks = [_reproduce(out, net), _diagnosis(out, net)]
    if draw_directory:
        checks += _drawings(out, net, draw_directory)
    checks += _fixes(out, net, prediction, weights)
    checks += _train(out, steps, seed)
    _summary(out, checks)
    passed = all(check.passed for check in checks)
    out.write("\n{}\n".format("all checks passed" if passed else "SOME CHECKS FAILED"))
    return 0 if passed else 1
