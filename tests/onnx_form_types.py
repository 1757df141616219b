"""Which ONNX element types each form of `pycumsum_op.onnx.ops.FORMS` runs right in Caffe2: the measurement
behind each form's ``types``. Every case of `test_onnx_forms.form_cases` is retyped to each element type
(`typed_cases`) and run through ``pycumsum_op.onnx.prepare`` with the declared types lifted, and through
onnxruntime (graph optimizations off); a type is listed for a form when every case of it equals onnxruntime.
Caffe2 may abort on a type it has no kernel for, so the cases run in child processes (a crash is recorded and
the child restarted after the crashed case).

    PYTHONPATH=. python tests/onnx_form_types.py [OP ...]   # per form: the types that match, then the rest
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _child(items):
    """Run ``items`` ([op, opset, elem_type]) with every form's declared types lifted; one JSON line each."""
    import warnings

    from pycumsum_op.onnx.ops import DECLARATIONS
    from test_onnx_forms import typed_outcomes

    for op, declaration in list(DECLARATIONS.items()):
        DECLARATIONS[op] = declaration._replace(forms=tuple(form._replace(types=None) for form in declaration.forms))
    warnings.simplefilter("ignore")
    for op, opset, elem_type in items:
        print(json.dumps([op, opset, elem_type, typed_outcomes(op, opset, elem_type)]), flush=True)


def measure(items):
    """{(op, opset, elem_type): outcomes} for ``items``, each in a child process; a child that dies is restarted
    after the case it died on, which is recorded as a crash."""
    results, todo = {}, list(items)
    while todo:
        child = subprocess.run([sys.executable, __file__, "--child", json.dumps(todo)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True)
        for line in child.stdout.splitlines():
            op, opset, elem_type, outcomes = json.loads(line)
            results[op, opset, elem_type] = outcomes
        todo = [item for item in todo if tuple(item) not in results]
        if todo:
            last = (child.stderr.strip().splitlines() or ["exit {}".format(child.returncode)])[-1]
            results[tuple(todo[0])] = [["crash", "exit {}: {}".format(child.returncode, last[:200])]]
            todo = todo[1:]
    return results


def main(ops):
    from onnx import TensorProto

    from pycumsum_op.onnx.ops import FORMS
    from test_onnx_forms import ELEMENT_TYPES, form_opsets

    items = [[op, opset, elem_type] for op in sorted(ops or FORMS) for opset in form_opsets(op)
             for elem_type in ELEMENT_TYPES]
    results = measure(items)
    for op in sorted(ops or FORMS):
        for opset in form_opsets(op):
            right, other = [], []
            for elem_type in ELEMENT_TYPES:
                outcomes = results[op, opset, elem_type]
                name = TensorProto.DataType.Name(elem_type)
                kinds = sorted({kind for kind, _ in outcomes})
                if kinds == ["match"]:
                    right.append(name)
                elif kinds != ["unsupported"]:
                    other.append("{}: {}".format(name, "; ".join(
                        "{} {}".format(kind, detail or "")[:160] for kind, detail in outcomes if kind != "match")))
            print("{} {}: match {}".format(op, opset, " ".join(right)))
            if op == "Cast":  # its cases: each of 3 inputs in the type, to every type in turn
                for elem_type in ELEMENT_TYPES:
                    outcomes = results[op, opset, elem_type]
                    to = [TensorProto.DataType.Name(target) for k, target in enumerate(ELEMENT_TYPES)
                          if all(kind == "match" for kind, _ in outcomes[k::len(ELEMENT_TYPES)])]
                    print("    from {} to {}".format(TensorProto.DataType.Name(elem_type), " ".join(to)))
            for line in other:
                print("    " + line)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(json.loads(sys.argv[2]))
    else:
        main(sys.argv[1:])
