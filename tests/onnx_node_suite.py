"""onnx's own backend node tests (every model under onnx/backend/test/data/node) through
``pycumsum_op.onnx.backend``, as onnx's backend test runner runs them: the model prepared, then run on each
of its data sets, each output equal to the expected one in dtype and within the node test's tolerances
(rtol 1e-3, atol 1e-7; strings exactly).

Each test ends as one of: "pass"; "refused" (prepare raised `FormRefused`, or the stock backend's
RuntimeError, one line); "wrong" (other numbers,
shapes or dtypes); "error" (any other exception, at prepare or at run time: a form accepted at import that
fails when the net runs); "crash" (the process died). Caffe2 may abort the process, so tests run in child
processes, one per batch, each reused until a test kills it (then restarted after that test).

    PYTHONPATH=. python tests/onnx_node_suite.py              # the tally and every test's outcome
    PYTHONPATH=. python tests/onnx_node_suite.py --write      # tests/data/onnx_node_refusals.txt from today's run
    PYTHONPATH=. python tests/onnx_node_suite.py --stock      # the same through Caffe2's own backend
    PYTHONPATH=. python tests/onnx_node_suite.py --installed  # Caffe2's own backend after pycumsum_op.onnx.install()
    PYTHONPATH=. python tests/onnx_node_suite.py --portable   # prepare(lower="portable"): no ATen op may be left
"""
import glob
import json
import os
import subprocess
import sys

import onnx.backend.test.loader

HERE = os.path.dirname(os.path.abspath(__file__))
#: the node tests expected to be refused at prepare: "name: the refusal's one line", grouped by ONNX op
REFUSALS = os.path.join(HERE, "data", "onnx_node_refusals.txt")


def node_tests():
    """{name: onnx's TestCase} of every node test onnx ships (its models and data sets are in the wheel)."""
    return {case.name: case for case in onnx.backend.test.loader.load_model_tests(kind="node")}


def _run_one(case, stock=False):
    """(kind, detail) of node test ``case`` through pycumsum_op's backend (``stock``: Caffe2's own; "installed":
    Caffe2's own after `pycumsum_op.onnx.install`; "portable": ``prepare(lower="portable")``, whose nets holding an
    ATen op is "wrong"), in this process."""
    import numpy as np
    import onnx
    from onnx.backend.test.runner import Runner

    import pycumsum_op.onnx
    from pycumsum_op.onnx.ops.contract import FormRefused

    if stock == "portable":
        backend = _Portable
    elif stock:
        from caffe2.python.onnx.backend import Caffe2Backend as backend
        if stock == "installed":
            pycumsum_op.onnx.install()
    else:
        backend = pycumsum_op.onnx.backend
    model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
    try:
        rep = backend.prepare(model, "CPU")
    except FormRefused as error:
        return "refused", str(error)
    except RuntimeError as error:  # the stock backend's own refusals, e.g. of a model without a default opset
        return "refused", "{}: {}".format(type(error).__name__, _first_line(error))
    except Exception as error:  # a translation's bug, reported as such
        return "error", "prepare: {}: {}".format(type(error).__name__, _first_line(error))
    if stock == "portable" and any(op.type == "ATen" for net in (rep.init_net, rep.predict_net) for op in net.op):
        return "wrong", "the portable nets hold the ATen operator"
    loader = Runner.__new__(Runner)
    for data_set in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set*"))):
        inputs, expected = [], []
        for k in range(len(glob.glob(os.path.join(data_set, "input_*.pb")))):
            loader._load_proto(os.path.join(data_set, "input_{}.pb".format(k)), inputs, model.graph.input[k].type)
        for k in range(len(glob.glob(os.path.join(data_set, "output_*.pb")))):
            loader._load_proto(os.path.join(data_set, "output_{}.pb".format(k)), expected,
                               model.graph.output[k].type)
        try:
            outputs = [np.asarray(output) for output in rep.run(inputs)]
        except Exception as error:
            return "error", "run: {}: {}".format(type(error).__name__, _first_line(error))
        try:
            Runner.assert_similar_outputs(expected, outputs, rtol=case.rtol, atol=case.atol)
        except AssertionError as error:
            return "wrong", " ".join(str(error).split())[:300]
    return "pass", None


class _Portable:
    """`pycumsum_op.onnx.prepare` for the portable target, as a backend."""

    @staticmethod
    def prepare(model, device):
        import pycumsum_op.onnx
        return pycumsum_op.onnx.prepare(model, device, lower="portable")


def _first_line(error):
    return ((str(error).strip().splitlines() or [""])[0])[:300]


def _child(names, stock):
    import warnings

    warnings.simplefilter("ignore")
    cases = node_tests()
    for name in names:
        kind, detail = _run_one(cases[name], stock)
        print(json.dumps([name, kind, detail]), flush=True)


def outcomes(names, stock=False):
    """{name: (kind, detail)} of node tests ``names``, run in one child process, restarted after a test that
    makes it die (that test: "crash"); ``stock``: through Caffe2's own backend ("installed": after
    `pycumsum_op.onnx.install`)."""
    results, todo = {}, list(names)
    environment = dict(os.environ, GLOG_minloglevel="3")
    while todo:
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"] + _mode_flags(stock),
                               input=json.dumps(todo),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                               env=environment)
        for line in child.stdout.splitlines():
            if line.startswith("["):
                name, kind, detail = json.loads(line)
                results[name] = (kind, detail)
        todo = [name for name in todo if name not in results]
        if todo:
            last = (child.stderr.strip().splitlines() or [""])[-1]
            results[todo[0]] = ("crash", "exit {}: {}".format(child.returncode, last[:300]))
            todo = todo[1:]
    return results


def _mode_flags(stock):
    return ["--" + stock] if stock in ("installed", "portable") else ["--stock"] if stock else []


def _mode(arguments):
    for mode in ("installed", "portable"):
        if "--" + mode in arguments:
            return mode
    return "--stock" in arguments


def op_of(name, cases=None):
    """The op types of node test ``name``'s model, as its refusal list groups it."""
    case = (cases or node_tests())[name]
    model = onnx.load(os.path.join(case.model_dir, "model.onnx"), load_external_data=False)
    return ",".join(sorted({node.op_type for node in model.graph.node}))


def read_refusals(path=REFUSALS):
    """{name: reason} of the refusal list (lines "name: reason"; "#" starts a comment)."""
    refusals = {}
    with open(path) as listed:
        for line in listed:
            if line.strip() and not line.startswith("#"):
                name, _, reason = line.rstrip("\n").partition(": ")
                refusals[name] = reason
    return refusals


def write_refusals(results, path=REFUSALS):
    cases = node_tests()
    groups = {}
    for name, (kind, detail) in results.items():
        if kind == "refused":
            groups.setdefault(op_of(name, cases), []).append("{}: {}".format(name, detail))
    with open(path, "w") as listed:
        listed.write("# onnx {}'s node tests that pycumsum_op.onnx.backend refuses at prepare, by the ops of their "
                     "models;\n# written by tests/onnx_node_suite.py --write, checked by "
                     "tests/test_onnx_node_suite.py\n".format(onnx.__version__))
        for op in sorted(groups):
            listed.write("# {}\n".format(op))
            listed.writelines(line + "\n" for line in sorted(groups[op]))


def main(arguments):
    import collections

    results = outcomes(sorted(node_tests()), stock=_mode(arguments))
    tally = collections.Counter(kind for kind, _ in results.values())
    for name in sorted(results):
        print(name, *results[name])
    print(dict(tally))
    if "--write" in arguments:
        write_refusals(results)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(json.loads(sys.stdin.read()), _mode(sys.argv))
    else:
        main(sys.argv[1:])
