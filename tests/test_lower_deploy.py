"""Lowered nets deployed where pycumsum_op cannot be imported.

Each child process puts a sys.meta_path blocker in front of every import of pycumsum_op (the
shared venv has it installed), proves that ``import pycumsum_op`` fails, then loads the net by
Caffe2's own flows: mobile_exporter → workspace.Predictor, and predictor_exporter minidb →
prepare_prediction_net. Outputs must equal torch's, for another batch size too.
"""
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op
from test_serialization import MINIDB_BODY, W, X_DEPLOY, own_workspace, predictor_net, run_child  # noqa: F401

pytestmark = pytest.mark.slow  # a fresh process per deploy flow

BLOCK_PYCUMSUM_OP = r'''
class _NoPycumsumOp(object):
    def find_spec(self, name, path=None, target=None):
        if name == "pycumsum_op" or name.startswith("pycumsum_op."):
            raise ImportError("pycumsum_op is blocked in this process")
        return None

sys.meta_path.insert(0, _NoPycumsumOp())
try:
    import pycumsum_op  # noqa: F401
    report["import_blocked"] = False
except ImportError:
    report["import_blocked"] = True
'''
TARGETS = ["aten", "portable"]
#: mobile_exporter lists every blob no op reads as an output: in a lowered net only y (tests/test_lower_export.py).
MOBILE_BODY = r'''
init_net, predict_net = read_netdef(spec["init"]), read_netdef(spec["predict"])
predictor = workspace.Predictor(init_net, predict_net)
note_import()
y = list(predict_net.external_output).index("y")
x = np.load(spec["x"])
results = {"by_list": predictor.run([x])[y], "by_dict": predictor.run({"x": x})[y],
           "second_batch": predictor.run([x[:2]])[y]}
'''


def lowered_predictor_net(target):
    """The deploy net (y = PyCumSum(x * w, axis=1)) lowered; x and w are in the workspace for the shapes."""
    workspace.FeedBlob("w", W)
    workspace.FeedBlob("x", X_DEPLOY)
    lowered = pycumsum_op.lower(predictor_net(), target)
    assert pycumsum_op.verify_net(lowered) == [] and not [op for op in lowered.op if op.type.startswith("Python")]
    return core.Net(lowered)


def torch_deploy(x):
    return torch.cumsum(torch.tensor(x) * torch.tensor(W), 1).numpy()


def assert_blocked_and_right(report, outputs, target):
    assert report["import_blocked"] is True and report["after"] is False
    tolerance = 0 if target == "aten" else 1e-6  # aten runs torch's own kernel
    for name, x in outputs:
        np.testing.assert_allclose(name, torch_deploy(x), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("target", TARGETS)
def test_mobile_exporter_to_predictor_without_pycumsum_op(target, own_workspace, tmp_path):  # noqa: F811
    from caffe2.python.predictor import mobile_exporter

    init_net, predict_net = mobile_exporter.Export(workspace, lowered_predictor_net(target), ["w"])
    (tmp_path / "init_net.pb").write_bytes(init_net.SerializeToString())
    (tmp_path / "predict_net.pb").write_bytes(predict_net.SerializeToString())
    np.save(str(tmp_path / "x.npy"), X_DEPLOY)
    report, child = run_child(BLOCK_PYCUMSUM_OP + MOBILE_BODY, {
        "init": str(tmp_path / "init_net.pb"), "predict": str(tmp_path / "predict_net.pb"),
        "x": str(tmp_path / "x.npy")}, tmp_path)
    assert_blocked_and_right(report, [(child["by_list"], X_DEPLOY), (child["by_dict"], X_DEPLOY),
                                      (child["second_batch"], X_DEPLOY[:2])], target)


@pytest.mark.parametrize("target", TARGETS)
def test_predictor_exporter_minidb_without_pycumsum_op(target, own_workspace, tmp_path):  # noqa: F811
    from caffe2.python.predictor import predictor_exporter as pe

    meta = pe.PredictorExportMeta(predict_net=lowered_predictor_net(target).Proto(), parameters=["w"],
                                  inputs=["x"], outputs=["y"], shapes={"x": X_DEPLOY.shape, "y": X_DEPLOY.shape})
    pe.save_to_db("minidb", str(tmp_path / "model.minidb"), meta)
    xs = [X_DEPLOY, 10 * np.concatenate([X_DEPLOY, X_DEPLOY])]  # another batch size
    for i, x in enumerate(xs):
        np.save(str(tmp_path / "x{}.npy".format(i)), x)
    report, child = run_child(BLOCK_PYCUMSUM_OP + MINIDB_BODY, {
        "db": str(tmp_path / "model.minidb"), "xs": [str(tmp_path / "x{}.npy".format(i)) for i in range(2)]},
        tmp_path)
    assert_blocked_and_right(report, [(child["y0"], xs[0]), (child["y1"], xs[1])], target)
