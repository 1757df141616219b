"""The sweeps behind docs/onnx.md's tables: every model of a source (the thirteen families of `transformer_models`,
its wider set of heads and families, or the backbones of `torchvision_models`) at opsets 11, 13, 14, static and
dynamic axes, through ``prepare``, ``lower="aten"``, ``lower="portable"`` (static shapes) and the command line,
each output compared with onnxruntime (max abs difference <= 1e-4), or refused in one line.

    PYTHONPATH=. python tests/onnx_model_sweep.py [FAMILY ...] [--opsets 11,13,14] [--paths prepare,aten,...]
    PYTHONPATH=. python tests/onnx_model_sweep.py --source wider [MODEL ...]   # heads, more families
    PYTHONPATH=. python tests/onnx_model_sweep.py --source torchvision --opsets 11,13   # CNN backbones
    PYTHONPATH=. python tests/onnx_model_sweep.py --table OUTPUT   # its printed rows as docs/onnx.md's table
    PYTHONPATH=. python tests/onnx_model_sweep.py --summary OUTPUT   # one row per model (the wider sweep's table)
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx

import transformer_models
from onnx_support import onnxruntime_outputs

TOLERANCE = 1e-4
PATHS = ("prepare", "aten", "portable", "cli")


def run_path(model, feeds, path):
    """The model's first output through ``path``; raises what the path raises."""
    import pycumsum_op.onnx
    from caffe2.python import workspace

    if path in ("prepare", "aten", "portable"):
        rep = pycumsum_op.onnx.prepare(model, lower=None if path == "prepare" else path)
        return rep.run(feeds)[0]
    with tempfile.TemporaryDirectory() as folder:
        onnx.save(model, os.path.join(folder, "m.onnx"))
        command = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")
        result = subprocess.run([command, "onnx", "import", os.path.join(folder, "m.onnx"), "--predict-net",
                                 os.path.join(folder, "p.pb"), "--init-net", os.path.join(folder, "i.pb")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        if result.returncode:
            raise RuntimeError(result.stderr.strip())
        from pycumsum_op.serialization import load_net
        workspace.ResetWorkspace()
        workspace.RunNetOnce(load_net(os.path.join(folder, "i.pb")))
        for name, value in feeds.items():
            workspace.FeedBlob(name, value)
        predict = load_net(os.path.join(folder, "p.pb"))
        workspace.RunNetOnce(predict)
        return workspace.FetchBlob(predict.external_output[0])


def oracle(model, feeds, run_torch=None):
    """onnxruntime's first output, or torch's (``run_torch()``) where onnxruntime refuses the model (torch writes
    int64 Min/Max at opset 11, which onnxruntime takes from opset 12 on); and which it is."""
    try:
        return onnxruntime_outputs(model, feeds)[0], "onnxruntime"
    except Exception:  # onnxruntime's InvalidGraph
        if run_torch is None:
            raise
        import torch
        with torch.no_grad():
            return run_torch().numpy(), "torch"


def outcome(model, feeds, path, expected):
    """"match", "MISMATCH <diff>" or "refused: <one line>"."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = run_path(model, feeds, path)
    except Exception as error:  # a refusal, reported by its first line
        return "refused: " + (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    if ours.shape != expected.shape:
        return "MISMATCH shape {} vs {}".format(ours.shape, expected.shape)
    difference = float(np.max(np.abs(ours.astype(np.float64) - expected))) if ours.size else 0.0
    return "match" if difference <= TOLERANCE else "MISMATCH {:.3g}".format(difference)


def _order():
    return [name for names, _ in sources().values() for name in names]


def table(lines) -> str:
    """The sweep's printed rows as a Markdown table: family x opset x axes, one column per path."""
    cells, notes = {}, {}
    for line in lines:
        fields = line.split(" ", 4)
        if len(fields) < 5 or fields[3] not in PATHS:
            continue
        family, opset, axes, path, rest = fields
        result, _, note = rest.partition(" (")
        cells[family, opset, axes, path] = result.split(":")[0].split(" ")[0] if result.startswith("refused") else \
            result.strip()
        if note:
            notes[family, opset, axes] = "(" + note.strip()
    rows = ["| family | opset | axes | " + " | ".join(PATHS) + " | note |", "|" + " --- |" * (len(PATHS) + 4)]
    for key in sorted({key[:3] for key in cells}, key=lambda k: (_order().index(k[0]), k[1], k[2])):
        rows.append("| {} | {} | {} | {} | {} |".format(*key, " | ".join(cells.get(key + (path,), "-") for path in PATHS),
                                                          notes.get(key, "")))
    return "\n".join(rows)


def _transformer_exports(build):
    """``exported(name, opset, dynamic)`` for the models ``build`` makes: (model, feeds, note, torch's outputs)."""
    def exported(name, opset, dynamic):
        module, example = build(name)
        feeds = {"input_ids": example[0].numpy(), "attention_mask": example[1].numpy()}
        try:
            model, note = transformer_models.export(module, example, opset, dynamic), ""
        except Exception:  # torch's constant folding fails on some models: export as users then do
            model, note = transformer_models.export(module, example, opset, dynamic, fold=False), \
                "(exported without constant folding) "
        return model, feeds, note, lambda: module(*example)
    return exported


def _torchvision_exports(name, opset, dynamic):
    """A backbone's export under the ordinal head (`torchvision_models`), its images (a dynamic batch run at 2)."""
    import torchvision_models
    images = np.random.default_rng(int(dynamic)).standard_normal((1 + int(dynamic), 3, 64, 64)).astype(np.float32)
    return torchvision_models.export(name, opset, dynamic), {"images": images}, "", None


def sources():
    """--source -> (the models' names, ``exported(name, opset, dynamic)``)."""
    sources = {"transformers": (transformer_models.FAMILIES, _transformer_exports(transformer_models.build)),
               "wider": (transformer_models.WIDER, _transformer_exports(transformer_models.build_wider))}
    try:
        import torchvision_models
        sources["torchvision"] = (torchvision_models.BACKBONES, _torchvision_exports)
    except ImportError:  # torchvision is a test dependency only
        pass
    return sources


def summary(lines) -> str:
    """The sweep's printed rows as one Markdown row per model: each opset and axes' cell "match" when every path
    matches, else what the paths got (the refusing op named), and the count of matching rows; then the totals."""
    outcomes, order = {}, []
    for line in lines:
        fields = line.split(" ", 4)
        if len(fields) < 5:
            continue
        name, opset, axes, path, rest = fields
        if name not in order:
            order.append(name)
        outcomes.setdefault((name, opset, axes), []).append((path, rest.strip()))
    columns = sorted({key[1:] for key in outcomes},
                     key=lambda k: (int(k[0]) if k[0].isdigit() else 0, k[1] != "static"))
    rows = ["| model | " + " | ".join("{} {}".format(*column) for column in columns) + " | rows matching |",
            "|" + " --- |" * (len(columns) + 2)]
    matched = total = unexported = 0
    for name in order:
        cells, good, count = [], 0, 0
        for column in columns:
            results = outcomes.get((name,) + column, [])
            if any(path == "export" for path, _ in results):
                cells.append("torch cannot export")
                unexported += 1
                continue
            count += len(results)
            good += sum(result.startswith("match") for _, result in results)
            misses = sorted({result.split(":")[0] + ": " + _refused_op(result) if result.startswith("refused")
                             else result.split(" (")[0] for _, result in results if not result.startswith("match")})
            cells.append("match" if not misses else "; ".join(misses))
        matched, total = matched + good, total + count
        rows.append("| {} | {} | {}/{} |".format(name, " | ".join(cells), good, count))
    rows.append("")
    rows.append("{} of {} rows match ({:.1f}%); {} model x opset x axes cases torch 1.10.2 cannot export.".format(
        matched, total, 100.0 * matched / max(total, 1), unexported))
    return "\n".join(rows)


def _refused_op(result: str) -> str:
    """The ONNX op a refusal names ("ONNX Tile node ..."), else the refusal's first words."""
    words = result.split()
    return words[words.index("ONNX") + 1] if "ONNX" in words[:-1] else " ".join(words[1:4])


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("families", nargs="*")
    parser.add_argument("--source", default="transformers", choices=("transformers", "wider", "torchvision"),
                        help="transformer_models.FAMILIES, transformer_models.WIDER or torchvision_models.BACKBONES")
    parser.add_argument("--opsets", default="11,13,14")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--table", metavar="OUTPUT", help="print an earlier run's output as a Markdown table")
    parser.add_argument("--summary", metavar="OUTPUT", help="the same, one row per model")
    args = parser.parse_args(argv)
    if args.table or args.summary:
        with open(args.table or args.summary) as output:
            lines = [line.strip() for line in output if line.strip()]
        print(table(lines) if args.table else summary(lines))
        return 0
    names, exported = sources()[args.source]
    for family in args.families or names:
        for opset in [int(o) for o in args.opsets.split(",")]:
            for dynamic in (False, True):
                axes = "dynamic" if dynamic else "static"
                try:
                    model, feeds, note, run_torch = exported(family, opset, dynamic)
                except Exception as error:  # torch cannot export it (an op new in a later opset)
                    print(family, opset, axes, "export", "refused: " + str(error).splitlines()[0][:200], flush=True)
                    continue
                expected, source = oracle(model, feeds, run_torch)
                for path in args.paths.split(","):
                    if path == "portable" and dynamic:
                        continue
                    print(family, opset, axes, path, outcome(model, feeds, path, expected),
                          note + ("" if source == "onnxruntime" else "(oracle: torch)"), flush=True)


if __name__ == "__main__":
    sys.exit(main())
