"""PyCumSum under concurrency: 8 Python threads running their own nets in one workspace, a DAG net
(num_workers=4) with several PyCumSum ops, and 8 threads each running a DAG net.

Caffe2 releases the GIL in RunNet and the Python op takes it back, from the caller's thread or a
DAG worker thread. The runs happen in a child process with a hard timeout, so a deadlock (or a
crash) fails the test instead of hanging or killing pytest. Every result is checked in the child
against numpy float64 cumsums; the child reports counts and any mismatch.
"""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # hundreds of threaded runs in a child process

CHILD_TIMEOUT = 240

CHILD = r'''
import json, sys, threading
import numpy as np
from caffe2.python import core, workspace
import pycumsum_op
from pycumsum_op.kernels import ScanArgumentError
from pycumsum_op.torch_versions import has
# before torch 1.6 a Python op's exception reaches the caller as a RuntimeError carrying its message
RUN_ERROR = ScanArgumentError if has("caffe2 python op exception type") else (ScanArgumentError, RuntimeError)

spec = json.loads(sys.argv[1])
MAIN = threading.get_ident()
report = {"errors": [], "mismatches": [], "runs": {}, "faults_seen": 0, "worker_threads": []}
lock = threading.Lock()

def ref_scan(x, axis, exclusive=False, reverse=False):
    """float64 numpy reference of ONNX-style cumsum."""
    x = np.asarray(x, np.float64)
    if reverse:
        x = np.flip(x, axis)
    y = np.cumsum(x, axis)
    if exclusive:
        y = y - x
    return np.flip(y, axis) if reverse else y

def check(where, got, want):
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-4):
        with lock:
            report["mismatches"].append(where)

def count(key):
    with lock:
        report["runs"][key] = report["runs"].get(key, 0) + 1

# ---- phase 1: 8 threads, each its own forward+gradient net, in the same workspace
def simple_net(t):
    net = core.Net("thread_%d" % t)
    x, g = "t%d_x" % t, "t%d_y_grad" % t
    y = net.PyCumSum(x, "t%d_y" % t, axis=t % 2, reverse=bool(t % 3 == 0))
    net.AddExternalInput(g)
    net.AddGradientOperators({y: g})
    workspace.FeedBlob(x, np.zeros((4, 6), np.float32))
    workspace.FeedBlob(g, np.zeros((4, 6), np.float32))
    workspace.CreateNet(net)
    return net.Proto().name

def run_simple(t, name, iters):
    axis, reverse = t % 2, bool(t % 3 == 0)
    rng = np.random.RandomState(t)
    for i in range(iters):
        x = rng.standard_normal((4, 6)).astype(np.float32)
        g = rng.standard_normal((4, 6)).astype(np.float32)
        if t == 7 and i % 10 == 5:  # this thread also feeds bad input now and then
            workspace.FeedBlob("t7_x", x[0])
            try:
                workspace.RunNet(name)
            except RUN_ERROR as error:
                with lock:
                    if "axis=1 is out of range for an input of shape (6,)" in str(error):
                        report["faults_seen"] += 1
                    else:  # the right exception with another message is a failure, said as such
                        report["errors"].append("thread 7 iter %d: bad input failed with %r" % (i, str(error)))
                continue
            with lock:
                report["errors"].append("bad input did not fail")
            continue
        workspace.FeedBlob("t%d_x" % t, x)
        workspace.FeedBlob("t%d_y_grad" % t, g)
        workspace.RunNet(name)
        check("thread %d iter %d y" % (t, i), workspace.FetchBlob("t%d_y" % t), ref_scan(x, axis, reverse=reverse))
        # gradient of a cumsum = the cumsum of g in the other direction
        check("thread %d iter %d x_grad" % (t, i), workspace.FetchBlob("t%d_x_grad" % t),
              ref_scan(g, axis, reverse=not reverse))
        count("simple")

def in_threads(target, items):
    def guarded(*args):
        try:
            target(*args)
        except Exception as error:  # reported, so a thread's failure fails the test
            with lock:
                report["errors"].append("%s: %r" % (args[:1], error))
    threads = [threading.Thread(target=guarded, args=item) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

names = [simple_net(t) for t in range(8)]
in_threads(run_simple, [(t, names[t], spec["iters"]) for t in range(8)])

# ---- phase 2: a DAG net with several PyCumSum ops, run from the main thread
def probe(inputs, outputs):
    with lock:
        report["worker_threads"].append(threading.get_ident() != MAIN)
    outputs[0].feed(np.zeros(1, np.float32))

def dag_net(p, with_probe):
    net = core.Net("dag_%s" % p)
    net.Proto().type = "dag"
    net.Proto().num_workers = 4
    x = p + "x"
    a = net.PyCumSum(x, p + "a", axis=0)
    b = net.PyCumSum(x, p + "b", axis=1, reverse=True)
    c = net.PyCumSum(a, p + "c", axis=1, exclusive=True)
    d = net.PyCumSum(b, p + "d", axis=0, dtype="double")
    e0 = net.PyCumSum(x, p + "e0", axis=-1)
    net.Add([c, e0], p + "e1")
    if with_probe:
        for k in range(3):
            net.Python(probe)([x], [p + "probe%d" % k])
    workspace.FeedBlob(x, np.zeros((5, 7), np.float32))
    workspace.CreateNet(net)
    return net.Proto().name

def dag_expected(x):
    a = ref_scan(x, 0).astype(np.float32)
    b = ref_scan(x, 1, reverse=True).astype(np.float32)
    return {"a": a, "b": b, "c": ref_scan(a, 1, exclusive=True), "d": ref_scan(b, 0), "e0": ref_scan(x, -1)}

def run_dag(p, name, iters, seed):
    rng = np.random.RandomState(seed)
    for i in range(iters):
        x = rng.standard_normal((5, 7)).astype(np.float32)
        workspace.FeedBlob(p + "x", x)
        workspace.RunNet(name)
        expected = dag_expected(x)
        for blob, want in expected.items():
            check("dag %s iter %d %s" % (p, i, blob), workspace.FetchBlob(p + blob), want)
        if workspace.FetchBlob(p + "d").dtype != np.float64:
            with lock:
                report["mismatches"].append("dag %s d dtype" % p)
        # e1 = c + e0 was computed from the SAME iteration's inputs (the DAG respected dependencies)
        check("dag %s iter %d e1" % (p, i), workspace.FetchBlob(p + "e1"), expected["c"] + expected["e0"])
        count("dag")

run_dag("main_", dag_net("main_", True), spec["dag_iters"], 100)

# ---- phase 3: 8 threads, each running its own DAG net
dags = [("th%d_" % t, dag_net("th%d_" % t, False)) for t in range(8)]
in_threads(run_dag, [(p, name, spec["threaded_dag_iters"], 200 + t) for t, (p, name) in enumerate(dags)])

print("REPORT" + json.dumps(report))
'''

SPEC = {"iters": 300, "dag_iters": 300, "threaded_dag_iters": 60}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    cwd = str(tmp_path_factory.mktemp("concurrency"))
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(SPEC)], cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=CHILD_TIMEOUT, universal_newlines=True)
    except subprocess.TimeoutExpired as expired:
        pytest.fail("concurrent runs did not finish in {} s (deadlock?): {}".format(
            CHILD_TIMEOUT, (expired.stderr or b"")[-3000:]))
    assert proc.returncode == 0, "child crashed or failed (rc {}):\n{}".format(proc.returncode, proc.stderr[-4000:])
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT")][-1]
    return json.loads(line[len("REPORT"):])


@pytest.mark.timeout(CHILD_TIMEOUT + 60)
def test_eight_threads_each_running_a_net_get_every_result_right(report):
    assert report["errors"] == []
    assert report["mismatches"] == []
    expected_faults = len(range(5, SPEC["iters"], 10))
    assert report["runs"]["simple"] == 8 * SPEC["iters"] - expected_faults
    assert report["faults_seen"] == expected_faults  # thread 7's bad inputs failed cleanly, in its own thread


@pytest.mark.timeout(CHILD_TIMEOUT + 60)
def test_dag_net_with_four_workers_gets_every_result_right(report):
    assert report["runs"]["dag"] == SPEC["dag_iters"] + 8 * SPEC["threaded_dag_iters"]
    assert report["mismatches"] == [] and report["errors"] == []


@pytest.mark.timeout(CHILD_TIMEOUT + 60)
def test_dag_python_ops_ran_on_worker_threads(report):
    """The DAG executor ran Python ops off the main thread, which was blocked in RunNet: the GIL
    was released by RunNet and taken by the workers (otherwise this would have deadlocked)."""
    assert len(report["worker_threads"]) == 3 * SPEC["dag_iters"]
    assert any(report["worker_threads"])
