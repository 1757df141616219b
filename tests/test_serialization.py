"""Nets with PyCumSum saved (.pb, .pbtxt, mobile_exporter, predictor_exporter minidb) and reloaded.

Every reload runs in a fresh Python process that imports only caffe2 and numpy: the child asserts
that pycumsum_op is NOT imported before the net is created and IS afterwards (the builder's pickle
brings it). Results must equal the building process's bit for bit, and torch's (the oracle).
The golden nets in tests/data/ (made by tests/data/make_golden.py: 0.1.0's PyCumSum net, 0.2.0's scan
family net) are loaded as committed.
"""
import importlib.util
import json
import os
import pickletools
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace
from google.protobuf import text_format

import pycumsum_op
from pycumsum_op import UnsafeNetError, load_net, verify_net

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
BUILDERS = ("pycumsum_op.ops.builders.scan_forward", "pycumsum_op.ops.builders.scan_backward")
CHILD_TIMEOUT = 120


def _load_make_golden():
    spec = importlib.util.spec_from_file_location("pycumsum_make_golden", os.path.join(DATA, "make_golden.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_golden = _load_make_golden()
GOLDEN_PB, GOLDEN_PBTXT = make_golden.golden_paths()

# The child's common start: only caffe2 + numpy, and the proof that pycumsum_op is not there yet.
CHILD_PRELUDE = r'''
import json, sys
import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import workspace
from google.protobuf import text_format
spec = json.loads(sys.argv[1])
report = {"before": "pycumsum_op" in sys.modules}

def read_netdef(path):
    net = caffe2_pb2.NetDef()
    with open(path, "rb") as handle:
        data = handle.read()
    if path.endswith(".pbtxt"):
        text_format.Parse(data.decode("utf-8"), net)
    else:
        net.ParseFromString(data)
    return net

def note_import():
    report["after"] = "pycumsum_op" in sys.modules
    if report["after"]:
        report["module_file"] = sys.modules["pycumsum_op"].__file__
'''
CHILD_EPILOGUE = r'''
np.savez(spec["out"], **results)
print("REPORT" + json.dumps(report))
'''


def run_child(body, spec, tmp_path):
    """Run CHILD_PRELUDE + body + CHILD_EPILOGUE in a fresh interpreter; returns (report, arrays)."""
    spec = dict(spec, out=str(tmp_path / "child_results.npz"))
    proc = subprocess.run([sys.executable, "-c", CHILD_PRELUDE + body + CHILD_EPILOGUE, json.dumps(spec)],
                          cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=CHILD_TIMEOUT, universal_newlines=True)
    assert proc.returncode == 0, "child failed:\n" + proc.stdout + proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT")][-1]
    with np.load(spec["out"]) as results:
        arrays = {name: results[name] for name in results.files}
    return json.loads(line[len("REPORT"):]), arrays


def assert_pickle_brought_pycumsum_op(report):
    assert report["before"] is False, "pycumsum_op was imported before the net was created"
    assert report["after"] is True, "creating the net did not import pycumsum_op"
    assert os.path.dirname(report["module_file"]) == os.path.dirname(pycumsum_op.__file__)


@pytest.fixture
def own_workspace():
    """A private, empty Caffe2 workspace; the previous one is current again afterwards."""
    previous = workspace.CurrentWorkspace()
    workspace.SwitchWorkspace("test_serialization", True)
    workspace.ResetWorkspace()
    yield workspace
    workspace.ResetWorkspace()
    workspace.SwitchWorkspace(previous)


# ---------------------------------------------------------------------------------------------
# NetDef .pb / .pbtxt, and the golden nets

def golden_feeds():
    rng = np.random.RandomState(7)
    return {
        "x": rng.standard_normal((2, 3, 4)).astype(np.float32),
        "xi": rng.randint(-50, 50, size=(3, 2)).astype(np.int32),
        "y1_grad": rng.standard_normal((2, 3, 4)).astype(np.float32),
        "y2_grad": rng.standard_normal((2, 3, 4)),
    }


def golden_oracle(feeds, torch_scan):
    """torch's values for the golden net's outputs, and torch.autograd's x gradient."""
    x = torch.tensor(feeds["x"], requires_grad=True)
    y1 = torch_scan(x, 1)
    y2 = torch_scan(x.double(), -1, exclusive=True, reverse=True)
    yi = torch_scan(torch.tensor(feeds["xi"]), 0)
    (x_grad,) = torch.autograd.grad([y1, y2], [x], [torch.tensor(feeds["y1_grad"]), torch.tensor(feeds["y2_grad"])])
    return {"y1": y1.detach().numpy(), "y2": y2.detach().numpy(), "yi": yi.numpy(), "x_grad": x_grad.numpy()}


def assert_matches_oracle(got, expected):
    for name, want in expected.items():
        assert got[name].dtype == want.dtype, (name, got[name].dtype, want.dtype)
        assert got[name].shape == want.shape, name
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5, err_msg=name)


RELOAD_BODY = r'''
feeds = np.load(spec["feeds"])
results = {}
for label, path in spec["nets"]:
    net = read_netdef(path)
    workspace.ResetWorkspace()
    for name in feeds.files:
        workspace.FeedBlob(name, feeds[name])
    if "after" not in report:
        assert "pycumsum_op" not in sys.modules
        workspace.CreateNet(net)
        note_import()
    else:
        workspace.CreateNet(net)
    for _ in range(2):  # a second run must give the same result
        workspace.RunNet(net.name)
    for out in spec["outputs"]:
        results[label + "/" + out] = workspace.FetchBlob(out)
'''


GOLDEN_FAMILY_PB, GOLDEN_FAMILY_PBTXT = make_golden.golden_paths(version=make_golden.VERSION_V0_2_0,
                                                                 name=make_golden.NAME_V0_2_0)


def golden_family_feeds():
    rng = np.random.RandomState(11)
    x = rng.uniform(-2, 2, (2, 3, 4)).astype(np.float32)
    x[0, 1, 2] = x[1, 0, 3] = x[1, 2, 3] = 0  # cumprod's gradient at zeros
    x[1, 1, :2] = x[1, 1, 3]  # ties for cummax/cummin
    feeds = {"x": x, "xi": rng.randint(-3, 4, size=(3, 5)).astype(np.int32)}
    feeds.update({name: rng.standard_normal(x.shape).astype(np.float32) for name in make_golden.GRAD_INPUTS_V0_2_0})
    return feeds


def golden_family_oracle(feeds, torch_scan):
    """torch's values for the 0.2.0 golden net's outputs, and torch.autograd's x gradient."""
    x = torch.tensor(feeds["x"], requires_grad=True)
    xi = torch.tensor(feeds["xi"])
    prod = torch_scan(x, 1, False, True, None, "cumprod")
    max_values, max_index = torch_scan(x, -1, False, True, None, "cummax")
    min_values, min_index = torch_scan(x, 0, False, False, None, "cummin")
    lse = torch_scan(x, 2, True, False, None, "logcumsumexp")
    total = torch_scan(x, 1, True)
    max_i, max_i_index = torch_scan(xi, 1, scan="cummax")
    grads = [torch.tensor(feeds[name]) for name in make_golden.GRAD_INPUTS_V0_2_0]
    (x_grad,) = torch.autograd.grad([prod, max_values, min_values, lse, total], [x], grads)
    values = [prod, max_values, max_index, min_values, min_index, lse, total,
              torch_scan(xi, 0, True, False, None, "cumprod"), max_i, max_i_index, x_grad]
    return {name: value.detach().numpy() for name, value in zip(make_golden.OUTPUTS_V0_2_0, values)}


#: golden version -> (net builder, feeds, torch oracle, fetched outputs, committed (.pb, .pbtxt) files)
GOLDENS = {
    "0.1.0": (make_golden.build_golden_net, golden_feeds, golden_oracle, make_golden.OUTPUTS,
              (GOLDEN_PB, GOLDEN_PBTXT)),
    "0.2.0": (make_golden.build_golden_net_v0_2_0, golden_family_feeds, golden_family_oracle,
              make_golden.OUTPUTS_V0_2_0, (GOLDEN_FAMILY_PB, GOLDEN_FAMILY_PBTXT)),
}


@pytest.fixture(scope="module", params=list(GOLDENS))
def reloaded(request, tmp_path_factory, torch_scan):
    """Build a version's golden net here, save it as .pb and .pbtxt, reload those and the committed golden
    files in one fresh process; returns (parent outputs, child report, child outputs, oracle, output names)."""
    build, make_feeds, oracle, outputs, (golden_pb, golden_pbtxt) = GOLDENS[request.param]
    tmp_path = tmp_path_factory.mktemp("reload")
    feeds = make_feeds()
    previous = workspace.CurrentWorkspace()
    workspace.SwitchWorkspace("test_serialization_build", True)
    try:
        net = build()
        for name, value in feeds.items():
            workspace.FeedBlob(name, value)
        workspace.RunNetOnce(net)
        parent = {name: workspace.FetchBlob(name) for name in outputs}
    finally:
        workspace.ResetWorkspace()
        workspace.SwitchWorkspace(previous)
    pb_path, pbtxt_path = tmp_path / "fresh.pb", tmp_path / "fresh.pbtxt"
    pb_path.write_bytes(net.Proto().SerializeToString())
    pbtxt_path.write_text(text_format.MessageToString(net.Proto()))
    np.savez(str(tmp_path / "feeds.npz"), **feeds)
    spec = {"feeds": str(tmp_path / "feeds.npz"), "outputs": list(outputs),
            "nets": [["fresh_pb", str(pb_path)], ["fresh_pbtxt", str(pbtxt_path)],
                     ["golden_pb", golden_pb], ["golden_pbtxt", golden_pbtxt]]}
    report, child = run_child(RELOAD_BODY, spec, tmp_path)
    return parent, report, child, oracle(feeds, torch_scan), outputs


@pytest.mark.slow  # the reloaded fixture: a fresh process per saved-net version
def test_building_process_matches_torch(reloaded):
    parent, _, _, oracle, _ = reloaded
    assert_matches_oracle(parent, oracle)


@pytest.mark.slow
@pytest.mark.parametrize("label", ["fresh_pb", "fresh_pbtxt", "golden_pb", "golden_pbtxt"])
def test_reloaded_net_in_fresh_process_is_identical(reloaded, label):
    parent, report, child, oracle, outputs = reloaded
    assert_pickle_brought_pycumsum_op(report)
    got = {name: child[label + "/" + name] for name in outputs}
    for name in outputs:
        assert got[name].dtype == parent[name].dtype, name
        np.testing.assert_array_equal(got[name], parent[name], err_msg=name)
    assert_matches_oracle(got, oracle)


def test_golden_files_are_the_same_net_and_reference_the_stable_builders():
    binary = load_net(GOLDEN_PB)
    text = load_net(GOLDEN_PBTXT)
    assert binary == text
    types = [op.type for op in binary.op]
    assert types.count("Python") == 3 and types.count("PythonGradient") == 2
    verified = verify_net(binary)
    assert [op.op_type for op in verified] == ["Python"] * 3 + ["PythonGradient"] * 2
    assert all(op.builders == BUILDERS for op in verified)
    # the import paths are literally in the saved bytes: renaming a builder breaks these files
    for op in binary.op:
        if op.type.startswith("Python"):
            pickled = {arg.name: arg.s for arg in op.arg if arg.name.startswith("pickled")}
            strings = [arg for opcode, arg, _ in pickletools.genops(pickled["pickled_builder"])
                       if isinstance(arg, str)]
            assert strings[:2] == ["pycumsum_op.ops.builders", "scan_forward"]


def test_family_golden_files_load_verify_and_carry_each_scan():
    binary, text = load_net(GOLDEN_FAMILY_PB), load_net(GOLDEN_FAMILY_PBTXT)
    assert binary == text
    verified = verify_net(binary)
    assert all(op.builders == BUILDERS for op in verified)
    assert [op.op_type for op in verified] == ["Python"] * 7 + ["PythonGradient"] * 5
    scans = []
    assert {op.type for op in binary.op} == {"Python", "PythonGradient", "Sum"}  # Sum adds up x's gradients
    for op in (op for op in binary.op if op.type.startswith("Python")):
        pickled = {arg.name: arg.s for arg in op.arg if arg.name.startswith("pickled")}
        for arg, builder in (("pickled_builder", "scan_forward"), ("pickled_grad_builder", "scan_backward")):
            strings = [value for _, value, _ in pickletools.genops(pickled[arg]) if isinstance(value, str)]
            assert strings[:2] == ["pycumsum_op.ops.builders", builder]
        scans.append(strings[strings.index("scan") + 1])
    assert scans[:7] == ["cumprod", "cummax", "cummin", "logcumsumexp", "cumsum", "cumprod", "cummax"]
    two_outputs = [op for op in binary.op if op.name in ("PyCumMax", "PyCumMin") and op.type == "Python"]
    assert [len(op.output) for op in two_outputs] == [2, 2, 2]


# ---------------------------------------------------------------------------------------------
# load_net: formats and errors

def test_load_net_reads_bytes_paths_and_text(tmp_path):
    net = make_golden.build_golden_net().Proto()
    text = text_format.MessageToString(net)
    (tmp_path / "a.pb").write_bytes(net.SerializeToString())
    (tmp_path / "a.pbtxt").write_text(text)
    (tmp_path / "noext").write_text(text)
    (tmp_path / "noext_binary").write_bytes(net.SerializeToString())
    loaded = [load_net(net.SerializeToString()), load_net(bytearray(net.SerializeToString())),
              load_net(str(tmp_path / "a.pb")), load_net(tmp_path / "a.pbtxt"), load_net(text),
              load_net(tmp_path / "noext"), load_net(tmp_path / "noext_binary")]
    for result in loaded:
        assert isinstance(result, caffe2_pb2.NetDef)
        assert result == net


def test_load_net_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no_such_model.pb"):
        load_net(str(tmp_path / "no_such_model.pb"))
    (tmp_path / "broken.pbtxt").write_text("op { type: ")
    with pytest.raises(ValueError, match="could not parse .*broken.pbtxt"):
        load_net(tmp_path / "broken.pbtxt")
    with pytest.raises(ValueError, match="could not parse the given bytes"):
        load_net(b"\xff\xff\xff\xff")
    with pytest.raises(TypeError, match="load_net takes"):
        load_net(42)


def test_load_net_verifies_by_default_and_verify_false_skips_it():
    net = core.Net("token_net")
    net.Python(lambda inputs, outputs: None)(["a"], ["b"])
    data = net.Proto().SerializeToString()
    with pytest.raises(UnsafeNetError, match="token-form"):
        load_net(data)
    assert load_net(data, verify=False).op[0].type == "Python"


# ---------------------------------------------------------------------------------------------
# Caffe2's deployment flows

def predictor_net():
    """y = PyCumSum(x * w, axis=1) with w a parameter (the exported weight)."""
    net = core.Net("deploy_cumsum")
    scaled = net.Mul(["x", "w"], "x_scaled", broadcast=1)
    net.PyCumSum(scaled, "y", axis=1)
    net.Proto().name = "deploy_cumsum"
    return net


W = np.array([0.5, -2.0, 3.0], np.float32)
X_DEPLOY = np.random.RandomState(3).standard_normal((4, 3)).astype(np.float32)


def deploy_oracle(torch_scan):
    return torch_scan(torch.tensor(X_DEPLOY) * torch.tensor(W), 1).numpy()


MOBILE_BODY = r'''
init_net, predict_net = read_netdef(spec["init"]), read_netdef(spec["predict"])
assert "pycumsum_op" not in sys.modules
predictor = workspace.Predictor(init_net, predict_net)
note_import()
x = np.load(spec["x"])
results = {"by_list": predictor.run([x])[0], "by_dict": predictor.run({"x": x})[0],
           "second_batch": predictor.run([x[:2]])[0]}
'''


@pytest.mark.slow
def test_mobile_exporter_and_predictor_in_fresh_process(own_workspace, tmp_path, torch_scan):
    from caffe2.python.predictor import mobile_exporter

    net = predictor_net()
    workspace.FeedBlob("w", W)
    workspace.FeedBlob("x", X_DEPLOY)
    workspace.RunNetOnce(net)
    parent = workspace.FetchBlob("y")
    init_net, predict_net = mobile_exporter.Export(workspace, net, ["w"])
    assert list(predict_net.external_output) == ["y"]
    verify_net(init_net), verify_net(predict_net)
    (tmp_path / "init_net.pb").write_bytes(init_net.SerializeToString())
    (tmp_path / "predict_net.pb").write_bytes(predict_net.SerializeToString())
    np.save(str(tmp_path / "x.npy"), X_DEPLOY)
    report, child = run_child(MOBILE_BODY, {"init": str(tmp_path / "init_net.pb"),
                                            "predict": str(tmp_path / "predict_net.pb"),
                                            "x": str(tmp_path / "x.npy")}, tmp_path)
    assert_pickle_brought_pycumsum_op(report)
    expected = deploy_oracle(torch_scan)
    np.testing.assert_allclose(parent, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(child["by_list"], parent)
    np.testing.assert_array_equal(child["by_dict"], parent)
    np.testing.assert_array_equal(child["second_batch"], parent[:2])


MINIDB_BODY = r'''
from caffe2.python.predictor import predictor_exporter as pe
assert "pycumsum_op" not in sys.modules
predict_net = pe.prepare_prediction_net(spec["db"], "minidb")
note_import()
results = {}
for i, path in enumerate(spec["xs"]):
    workspace.FeedBlob("x", np.load(path))
    workspace.RunNet(predict_net.Proto().name)
    results["y%d" % i] = workspace.FetchBlob("y")
'''


def save_minidb(path):
    """predictor_exporter.save_to_db of the deploy net with its parameter w (in the current workspace)."""
    from caffe2.python.predictor import predictor_exporter as pe

    net = predictor_net()
    workspace.FeedBlob("w", W)
    meta = pe.PredictorExportMeta(predict_net=net.Proto(), parameters=["w"], inputs=["x"], outputs=["y"],
                                shapes={"x": X_DEPLOY.shape, "y": X_DEPLOY.shape})
    pe.save_to_db("minidb", str(path), meta)
    return net


@pytest.mark.slow
def test_predictor_exporter_minidb_in_fresh_process(own_workspace, tmp_path, torch_scan):
    save_minidb(tmp_path / "model.minidb")
    xs = [X_DEPLOY, 10 * X_DEPLOY[::-1].copy()]
    for i, x in enumerate(xs):
        np.save(str(tmp_path / "x{}.npy".format(i)), x)
    report, child = run_child(MINIDB_BODY, {"db": str(tmp_path / "model.minidb"),
                                            "xs": [str(tmp_path / "x{}.npy".format(i)) for i in range(2)]},
                              tmp_path)
    assert_pickle_brought_pycumsum_op(report)
    np.testing.assert_allclose(child["y0"], deploy_oracle(torch_scan), rtol=1e-6, atol=1e-6)
    expected1 = torch_scan(torch.tensor(xs[1]) * torch.tensor(W), 1).numpy()
    np.testing.assert_allclose(child["y1"], expected1, rtol=1e-5, atol=1e-5)


def test_minidb_can_be_verified_before_anything_is_created(own_workspace, tmp_path):
    """load_from_db only reads the MetaNetDef: verify_net it, then prepare_prediction_net."""
    from caffe2.python.predictor import predictor_exporter as pe

    save_minidb(tmp_path / "model.minidb")
    workspace.ResetWorkspace()
    meta = pe.load_from_db(str(tmp_path / "model.minidb"), "minidb")
    verified = verify_net(meta)
    assert [op.builders for op in verified] == [BUILDERS]
    predict_net = pe.prepare_prediction_net(str(tmp_path / "model.minidb"), "minidb")
    workspace.FeedBlob("x", X_DEPLOY)
    workspace.RunNet(predict_net.Proto().name)
    np.testing.assert_allclose(workspace.FetchBlob("y"), np.cumsum(X_DEPLOY.astype(np.float64) * W, axis=1),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("data, reason", [
    (b"", "it is empty"),
    (b"\n\x05model\x0c trailing garbage", "byte 7 holds an end-group tag (field 1), which no field of a "
                                          "caffe2.NetDef is"),  # name, then an end-group tag
    (b"\x08\x01", "fields that a NetDef does not define"),
])
def test_load_net_refuses_what_does_not_parse_completely_without_leaking_warnings(tmp_path, data, reason):
    path = tmp_path / "model.pb"
    path.write_bytes(data)
    for source in (path, data):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValueError, match="could not parse .*" + re.escape(reason)):
                load_net(source)
        assert caught == []


def test_load_net_names_a_directory(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        load_net(tmp_path)


@pytest.mark.parametrize("suffix, text", [(".pb", False), (".bin", False), (".pbtxt", True), (".prototxt", True),
                                          (".pbtext", True), (".TXT", True)])
def test_save_net_writes_text_exactly_for_the_text_suffixes_load_net_reads_as_text(tmp_path, suffix, text):
    net = core.Net("saved")
    net.PyCumSum("x", "y", axis=1)
    path = tmp_path / ("model" + suffix)
    pycumsum_op.save_net(net, path)
    if text:
        parsed = caffe2_pb2.NetDef()
        text_format.Parse(path.read_text(), parsed)
    else:
        parsed = caffe2_pb2.NetDef.FromString(path.read_bytes())
    assert parsed == net.Proto() == load_net(path)
