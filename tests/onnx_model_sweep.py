"""The sweeps behind docs/onnx.md's tables: every model of a source (the thirteen families of `transformer_models`,
its wider set of heads and families, or the backbones of `torchvision_models`) at opsets 11, 13, 14, static and
dynamic axes, through ``prepare``, ``lower="aten"``, ``lower="portable"`` (static shapes) and the command line,
each output compared with onnxruntime (max abs difference <= 1e-4), or refused in one line.

    PYTHONPATH=. python tests/onnx_model_sweep.py [FAMILY ...] [--opsets 11,13,14] [--paths prepare,aten,...]
    PYTHONPATH=. python tests/onnx_model_sweep.py --source wider [MODEL ...]   # heads, more families
    PYTHONPATH=. python tests/onnx_model_sweep.py --source torchvision --opsets 11,13   # CNN backbones
    PYTHONPATH=. python tests/onnx_model_sweep.py --table OUTPUT   # its printed rows as docs/onnx.md's table
    PYTHONPATH=. python tests/onnx_model_sweep.py --summary OUTPUT   # one row per model (the wider sweep's table)

The families the tests do not name (transformers' base models, ``MODEL_MAPPING_NAMES``, less the families
`transformer_models` builds), each from a tiny config, through ``prepare`` against onnxruntime (match within 1e-4
relative + absolute, refused, wrong or error; a case torch or onnxruntime cannot run is not counted), each case in a
worker process that a crash or a hang (``--timeout`` seconds) ends without ending the sweep:

    PYTHONPATH=.:tests python tests/onnx_model_sweep.py --source families [FAMILY ...] [--opsets 13] [--axes static]
    PYTHONPATH=.:tests python tests/onnx_model_sweep.py --report OUTPUT [--markdown]   # an earlier run summed up
"""
import argparse
import inspect
import io
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
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
        if path == "portable":  # for builds without ATen (and without Python)
            kept = {op.type for net in (rep.init_net, rep.predict_net) for op in net.op} & {"ATen", "Python"}
            assert not kept, "the portable nets hold {}".format(", ".join(sorted(kept)))
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
    """"match", "MISMATCH <diff>", "WRONG <what>" or "refused: <one line>"."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = run_path(model, feeds, path)
    except AssertionError as error:
        return "WRONG {}".format(error)
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


# --source families: the transformers families the tests do not name, each built tiny from its config (random
# weights, no download) and exported by torch; cases run in a worker process a crash or a hang cannot stop.

#: the tiny sizes, by the attribute names the configs use (a list-valued default gets the value at each position)
TINY = dict(hidden_size=32, d_model=32, n_embd=32, dim=32, embed_dim=32, embed_dims=32, embedding_size=32,
            d_embed=32, hidden_sizes=32, conv_dim=32, projection_dim=32,
            num_hidden_layers=2, num_layers=2, n_layer=2, n_layers=2, encoder_layers=2, decoder_layers=2,
            num_decoder_layers=2, depths=1,
            num_attention_heads=2, n_head=2, n_heads=2, num_heads=2, encoder_attention_heads=2,
            decoder_attention_heads=2, num_decoder_attention_heads=2,
            intermediate_size=64, d_ff=64, ffn_dim=64, encoder_ffn_dim=64, decoder_ffn_dim=64, n_inner=64,
            hidden_dim=64, d_inner=64, d_kv=16, d_head=16, vocab_size=99, image_size=32, num_channels=3,
            window_size=4)
#: a family's own sizes where the common ones are not enough (Whisper's encoder takes exactly 2 x its positions)
TINY_OWN = {"whisper": dict(num_mel_bins=8, max_source_positions=16), "audio-spectrogram-transformer":
            dict(max_length=64, num_mel_bins=32)}
FAMILY_SEQUENCE, FAMILY_BATCH, FAMILY_PARAMETERS = 7, 2, 20_000_000
#: seconds one case (export, onnxruntime, import and run) may take before the worker is ended
CASE_TIMEOUT = 240


def named_families():
    """The model types (transformers' family names) `transformer_models` builds: the families the tests name."""
    return sorted({config.model_type for config, *_ in
                   list(transformer_models._configs().values()) + list(transformer_models._wider().values())})


def unnamed_families():
    """transformers' families with a PyTorch base model (``MODEL_MAPPING_NAMES``) the tests do not name."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    named = set(named_families())
    return [name for name in MODEL_MAPPING_NAMES if name not in named]


def tiny_config(config_class, own=None):
    """``config_class`` built with the `TINY` sizes it has (and ``own``), its sub-configs (CLIP's text and vision
    towers, ...) made tiny too; token ids the small vocabulary cannot hold set to 1."""
    from transformers import PretrainedConfig
    default = config_class()
    kwargs = {}
    for key, value in dict(TINY, **(own or {})).items():
        if not hasattr(default, key):
            continue
        current = getattr(default, key)
        if isinstance(current, (list, tuple)):
            kwargs[key] = [value] * len(current) if isinstance(value, int) else value
        elif current is None or isinstance(current, (int, float)) and not isinstance(current, bool):
            kwargs[key] = value
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
                "cls_token_id", "mask_token_id"):
        if isinstance(getattr(default, key, None), int) and getattr(default, key) >= TINY["vocab_size"]:
            kwargs[key] = 1
    for key, value in vars(default).items():
        if isinstance(value, PretrainedConfig):
            kwargs[key] = tiny_config(type(value)).to_dict()
    return config_class(**kwargs)


def build_family(name):
    """(module, feeds {name: array}, dynamic axes {name: {axis: label}}) for family ``name``: its base model
    (``AutoModel.from_config``) of a tiny config, called on its main input (input_ids with a padded attention mask,
    pixel_values, input_values or input_features; decoder_input_ids for an encoder-decoder) and returning its first
    output."""
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    config = tiny_config(CONFIG_MAPPING[name], TINY_OWN.get(name))
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config).eval()
    parameters = sum(p.numel() for p in model.parameters())
    if parameters > FAMILY_PARAMETERS:
        raise RuntimeError("{} parameters with the tiny sizes".format(parameters))
    accepted = inspect.signature(model.forward).parameters
    rng = np.random.default_rng(0)
    vision = getattr(config, "vision_config", config)
    pixels = (FAMILY_BATCH, getattr(vision, "num_channels", 3)) + (getattr(vision, "image_size", 32),) * 2
    feeds, axes = {}, {}
    main = model.main_input_name
    if main == "input_ids" or "input_ids" in accepted and main != "input_values":
        vocab = min(int(getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None),
                                                                           "vocab_size", 99)), 99)
        feeds["input_ids"] = rng.integers(3, vocab, (FAMILY_BATCH, FAMILY_SEQUENCE)).astype(np.int64)
        if "attention_mask" in accepted:
            feeds["attention_mask"] = np.ones((FAMILY_BATCH, FAMILY_SEQUENCE), np.int64)
            feeds["attention_mask"][1, -2:] = 0
        axes.update((key, {0: "batch", 1: "sequence"}) for key in feeds)
    if main == "pixel_values" or main == "input_ids" and "pixel_values" in accepted:
        feeds["pixel_values"] = rng.standard_normal(pixels).astype(np.float32)
        axes["pixel_values"] = {0: "batch"}
    if main == "input_values" and hasattr(config, "num_mel_bins"):  # a spectrogram (AST)
        feeds["input_values"] = rng.standard_normal((FAMILY_BATCH, config.max_length, config.num_mel_bins)).astype(
            np.float32)
        axes["input_values"] = {0: "batch"}
    elif main == "input_values":
        feeds["input_values"] = rng.standard_normal((FAMILY_BATCH, 1600)).astype(np.float32)
        axes["input_values"] = {0: "batch", 1: "samples"}
    if main == "input_features":
        if name == "whisper":
            shape = (FAMILY_BATCH, config.num_mel_bins, 2 * config.max_source_positions)
        else:
            shape = (FAMILY_BATCH, 32, getattr(config, "input_feat_per_channel", 80) *
                     getattr(config, "input_channels", 1))
        feeds["input_features"] = rng.standard_normal(shape).astype(np.float32)
        axes["input_features"] = {0: "batch"}
    if not feeds:
        raise RuntimeError("main input {!r} is none the sweep makes".format(main))
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in accepted:
        vocab = min(int(getattr(config, "vocab_size", 99) or 99), 99)
        feeds["decoder_input_ids"] = rng.integers(3, vocab, (FAMILY_BATCH, FAMILY_SEQUENCE)).astype(np.int64)
        axes["decoder_input_ids"] = {0: "batch", 1: "sequence"}
    return _FirstOutput(model, list(feeds)), feeds, axes


def _FirstOutput(model, names):
    """A module calling ``model`` with its inputs by ``names`` and returning the first tensor it outputs."""
    import torch

    class FirstOutput(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            out = self.model(**dict(zip(names, tensors)), return_dict=False)
            while isinstance(out, (tuple, list)):
                out = out[0]
            return out

    return FirstOutput().eval()


def family_case(module, feeds, axes, opset, dynamic):
    """One case's result: (kind, detail), kind one of "match", "refused", "wrong", "error", "not exportable"."""
    import torch
    import pycumsum_op.onnx
    from pycumsum_op.onnx.ops.contract import FormRefused
    buffer, note = io.BytesIO(), ""
    names = list(feeds)
    example = tuple(torch.from_numpy(feeds[key]) for key in names)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        for fold in (True, False):
            try:
                buffer = io.BytesIO()
                torch.onnx.export(module, example, buffer, opset_version=opset, input_names=names,
                                  output_names=["y"], dynamic_axes=dict(axes, y={0: "batch"}) if dynamic else None,
                                  do_constant_folding=fold)
                break
            except Exception as error:  # torch's constant folding fails on some models: export as users then do
                if not fold:
                    return "not exportable", "torch: " + _first_line(error)
                note = " (exported without constant folding)"
        model = onnx.load_from_string(buffer.getvalue())
        graph_inputs = {value.name for value in model.graph.input}  # torch drops an input the output does not read
        feeds = {key: value for key, value in feeds.items() if key in graph_inputs}
        _say(stage="onnxruntime")
        try:
            expected = onnxruntime_outputs(model, feeds)[0]
        except Exception as error:
            return "not exportable", "onnxruntime: " + _first_line(error)
        _say(stage="prepare")
        try:
            ours = np.asarray(pycumsum_op.onnx.prepare(model).run(feeds)[0])
        except FormRefused as error:
            return "refused", _first_line(error) + note
        except Exception as error:
            return "error", "{}: {}{}".format(type(error).__name__, _first_line(error), note)
    if ours.shape != expected.shape or ours.dtype != expected.dtype:
        return "wrong", "shape/dtype {} {} vs onnxruntime's {} {}{}".format(ours.shape, ours.dtype, expected.shape,
                                                                           expected.dtype, note)
    if expected.dtype.kind == "f":
        ok = np.allclose(ours, expected, rtol=TOLERANCE, atol=TOLERANCE, equal_nan=True)
        difference = float(np.nanmax(np.abs(ours.astype(np.float64) - expected))) if ours.size else 0.0
    else:
        ok = np.array_equal(ours, expected)
        difference = float(np.max(np.abs(ours.astype(np.float64) - expected))) if ours.size else 0.0
    return ("match" if ok else "wrong"), "max abs difference {:.3g}{}".format(difference, note)


def _first_line(error) -> str:
    return ((str(error).strip().splitlines() or [type(error).__name__])[0])[:300]


def family_worker():
    """The worker: reads {"family", "cases": [[opset, dynamic], ...]} lines on stdin, prints one JSON line (prefixed
    "@@ ") as each case starts, as it reaches onnxruntime and the import (its stage) and as it ends, and
    {"done": family} after a family's last case."""
    import torch
    torch.set_num_threads(1)
    for line in sys.stdin:
        request = json.loads(line)
        family = request["family"]
        try:
            module, feeds, axes = build_family(family)
        except Exception as error:  # the config cannot be made tiny, the model not built, an input not made
            _say(family=family, opset="-", axes="-", kind="not built", detail=_first_line(error))
            _say(done=family)
            continue
        for opset, dynamic in request["cases"]:
            case = dict(family=family, opset=opset, axes="dynamic" if dynamic else "static")
            _say(start=case)
            try:
                kind, detail = family_case(module, feeds, axes, opset, dynamic)
            except Exception as error:
                kind, detail = "error", "{}: {}".format(type(error).__name__, _first_line(error))
            _say(kind=kind, detail=detail, **case)
        _say(done=family)


def _say(**fields):
    print("@@ " + json.dumps(fields), flush=True)


class _Worker:
    """A worker process (`family_worker`), its stdout read by a thread so that a hang times out."""

    def __init__(self):
        tests = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(tests), tests,
                                                           os.environ.get("PYTHONPATH", "")]))
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        universal_newlines=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            if line.startswith("@@ "):
                self.lines.put(json.loads(line[3:]))
        self.lines.put(None)

    def end(self):
        self.process.kill()
        self.process.wait()


def sweep_families(families, opsets, dynamics, timeout=CASE_TIMEOUT):
    """Each family's cases through the worker, printed as "family opset axes path kind[: detail]" lines. A case that
    crashes the worker or outlasts ``timeout`` is "not exportable" when torch's export or onnxruntime was running,
    else an error; a new worker takes the family's remaining cases. Returns the printed lines."""
    worker, lines = None, []
    for family in families:
        pending = [[opset, dynamic] for opset in opsets for dynamic in dynamics]
        while pending:
            worker = worker or _Worker()
            worker.process.stdin.write(json.dumps(dict(family=family, cases=pending)) + "\n")
            worker.process.stdin.flush()
            case, stage = None, None
            while True:
                try:
                    message = worker.lines.get(timeout=timeout)
                except queue.Empty:
                    message = "timed out after {} s".format(timeout)
                if isinstance(message, dict) and "start" in message:
                    case, stage = message["start"], "export"
                elif isinstance(message, dict) and "stage" in message:
                    stage = message["stage"]
                elif isinstance(message, dict) and "kind" in message:
                    lines.append(_print_case(message))
                    if message["kind"] == "not built":
                        pending = []
                    else:
                        pending.remove([message["opset"], message["axes"] == "dynamic"])
                    case = None
                elif isinstance(message, dict) and "done" in message:
                    pending = []
                    break
                else:  # the worker died (a crash) or hangs
                    if message is None:
                        worker.process.wait()
                        message = "the worker ended with {}".format(worker.process.returncode)
                    worker.end()
                    worker = None
                    if case is None:  # building the model
                        lines.append(_print_case(dict(family=family, opset="-", axes="-", kind="not built",
                                                      detail=message)))
                        pending = []
                    else:
                        kind = "error" if stage == "prepare" else "not exportable"
                        lines.append(_print_case(dict(case, kind=kind, detail="{} ({})".format(
                            message, "torch's export" if stage == "export" else stage))))
                        pending.remove([case["opset"], case["axes"] == "dynamic"])
                    break
    if worker is not None:
        worker.process.stdin.close()
        worker.process.wait()
    return lines


def _print_case(case):
    """Prints a case's line ("family opset axes path kind: detail") and returns it."""
    path = {"not built": "build", "not exportable": "export"}.get(case["kind"], "prepare")
    line = " ".join(str(field) for field in (case["family"], case["opset"], case["axes"], path, case["kind"] + (
        ": " + case["detail"] if case.get("detail") else "")))
    print(line, flush=True)
    return line


def families_report(lines, markdown=False) -> str:
    """The families sweep's printed lines summed up: families and cases, the match rate of the exportable cases,
    refusals by ONNX op, every wrong and error case; with ``markdown``, one table row per family."""
    rows = []
    for line in lines:
        fields = line.split(" ", 4)
        if len(fields) == 5 and fields[3] in ("build", "export", "prepare"):
            kind, _, detail = fields[4].partition(": ")
            rows.append((fields[0], fields[1], fields[2], kind, detail))
    families = list(dict.fromkeys(row[0] for row in rows))
    counted = [row for row in rows if row[3] in ("match", "refused", "wrong", "error")]
    by_kind = {kind: [row for row in counted if row[3] == kind] for kind in ("match", "refused", "wrong", "error")}
    exportable = list(dict.fromkeys(row[0] for row in counted))
    out = ["{} families swept: {} not built, {} with no exportable case, {} with {} exportable cases.".format(
        len(families), sum(row[3] == "not built" for row in rows),
        len(families) - len(exportable) - sum(row[3] == "not built" for row in rows), len(exportable), len(counted)),
        "match {} ({:.1f}%), refused {}, wrong {}, error {}; not exportable (not counted) {}.".format(
            len(by_kind["match"]), 100.0 * len(by_kind["match"]) / max(len(counted), 1), len(by_kind["refused"]),
            len(by_kind["wrong"]), len(by_kind["error"]), sum(row[3] == "not exportable" for row in rows)),
        "families whose every exportable case matches: {} of {}.".format(
            sum(all(row[3] == "match" for row in counted if row[0] == family) for family in exportable),
            len(exportable))]
    ops = {}
    for row in by_kind["refused"]:
        ops.setdefault(_refused_op("refused: " + row[4]), []).append(row)
    if ops:
        out.append("refusals by op (cases, families):")
        for op, cases in sorted(ops.items(), key=lambda item: -len(item[1])):
            out.append("  {}: {} cases; {}".format(op, len(cases), ", ".join(dict.fromkeys(r[0] for r in cases))))
    for kind in ("wrong", "error"):
        for row in by_kind[kind]:
            out.append("{}: {} opset {} {}: {}".format(kind.upper(), *row[:3], row[4]))
    if markdown:
        out += ["", "| family | cases | match | refused (op) | wrong | error | not exportable |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for family in families:
            mine = [row for row in rows if row[0] == family]
            if any(row[3] == "not built" for row in mine):
                continue
            mine_counted = [row for row in mine if row in counted]
            refused = sorted({_refused_op("refused: " + row[4]) for row in mine if row[3] == "refused"})
            out.append("| {} | {} | {} | {} | {} | {} | {} |".format(
                family, len(mine_counted), sum(row[3] == "match" for row in mine),
                "{} ({})".format(sum(row[3] == "refused" for row in mine), ", ".join(refused)) if refused else 0,
                sum(row[3] == "wrong" for row in mine), sum(row[3] == "error" for row in mine),
                sum(row[3] == "not exportable" for row in mine)))
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("families", nargs="*")
    parser.add_argument("--source", default="transformers", choices=("transformers", "wider", "torchvision",
                                                                     "families"),
                        help="transformer_models.FAMILIES, transformer_models.WIDER, torchvision_models.BACKBONES "
                             "or the transformers families the tests do not name")
    parser.add_argument("--opsets", default="11,13,14")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--axes", default="static,dynamic", help="--source families: static, dynamic or both")
    parser.add_argument("--timeout", type=float, default=CASE_TIMEOUT, help="--source families: seconds per case")
    parser.add_argument("--table", metavar="OUTPUT", help="print an earlier run's output as a Markdown table")
    parser.add_argument("--summary", metavar="OUTPUT", help="the same, one row per model")
    parser.add_argument("--report", metavar="OUTPUT", help="an earlier --source families run's output summed up")
    parser.add_argument("--markdown", action="store_true", help="--source families, --report: a table per family")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        family_worker()
        return 0
    if args.table or args.summary or args.report:
        with open(args.table or args.summary or args.report) as output:
            lines = [line.strip() for line in output if line.strip()]
        print(families_report(lines, args.markdown) if args.report else table(lines) if args.table else
              summary(lines))
        return 0
    if args.source == "families":
        lines = sweep_families(args.families or unnamed_families(), [int(o) for o in args.opsets.split(",")],
                               [axes == "dynamic" for axes in args.axes.split(",")], args.timeout)
        print()
        print(families_report(lines, args.markdown))
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
