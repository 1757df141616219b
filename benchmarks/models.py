"""Real-size models imported with `pycumsum_op.onnx.prepare`, against onnxruntime and torch eager.

Each model (random weights: torchvision constructors, transformers configs; torch.onnx.export at opset 13 with a
dynamic batch) is run by Caffe2 through pycumsum_op, by onnxruntime with its default graph optimizations and with
none, and by torch eager, on one input, in alternating order (`timing.measure`); one thread each, then every
thread of the machine. ``prepare`` is timed against onnxruntime's session creation. Every row first checks that
Caffe2's output equals onnxruntime's (no optimizations) within float32 tolerance: a wrong output is reported, never
timed as a success.

    python benchmarks/run.py --only-models [--models resnet18,bert-base]
"""
import functools
import io
import sys
import time
import warnings

import numpy as np
import onnx
import onnxruntime
import torch

from timing import duration, measure, median, table

#: name -> (builder of (module, example inputs, input names), what it is)
MODELS = {}

#: The goals: Caffe2's run time over onnxruntime's (default optimizations), one thread.
GEOMETRIC_MEAN_TARGET, WORST_TARGET = 1.5, 2.5


def _model(name, what):
    def register(builder):
        MODELS[name] = (builder, what)
        return builder
    return register


def _vision(constructor, pixels, batch):
    import torchvision
    torch.manual_seed(0)
    module = getattr(torchvision.models, constructor)(pretrained=False).eval()
    return module, (torch.rand(batch, 3, pixels, pixels),), ["x"]


#: name -> (torchvision constructor, pixels, batch, what it is)
_VISION = {"resnet18": ("resnet18", 224, 2, "ResNet-18, 224 px, batch 2"),
           "resnet50": ("resnet50", 224, 1, "ResNet-50, 224 px, batch 1"),
           "mobilenet_v3": ("mobilenet_v3_large", 224, 1, "MobileNetV3-large, 224 px, batch 1"),
           "resnext50": ("resnext50_32x4d", 128, 1, "ResNeXt-50 32x4d, 128 px, batch 1")}
MODELS.update((name, (functools.partial(_vision, constructor, pixels, batch), what))
              for name, (constructor, pixels, batch, what) in _VISION.items())


def _text(config, model_class, batch, sequence, mask=True):
    torch.manual_seed(0)
    inner = model_class(config).eval()

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, *inputs):
            return self.inner(*inputs, return_dict=False)[0]

    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, config.vocab_size, (batch, sequence), generator=generator)
    if not mask:
        return Hidden(), (ids,), ["input_ids"]
    return Hidden(), (ids, torch.ones(batch, sequence, dtype=torch.int64)), ["input_ids", "attention_mask"]


@_model("bert-base", "BERT-base's shape (RoBERTa, 12 layers, hidden 768), batch 1 x 128")
def _bert_base():
    import transformers as tf
    config = tf.RobertaConfig(vocab_size=1000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                              intermediate_size=3072, max_position_embeddings=132, pad_token_id=1)
    return _text(config, tf.RobertaModel, 1, 128)


@_model("roberta", "RoBERTa, 4 layers, hidden 256, batch 4 x 128")
def _roberta():
    import transformers as tf
    config = tf.RobertaConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                              intermediate_size=1024, max_position_embeddings=132, pad_token_id=1)
    return _text(config, tf.RobertaModel, 4, 128)


@_model("gpt-neox", "GPT-NeoX, 4 layers, hidden 256, batch 4 x 128")
def _gpt_neox():
    import transformers as tf
    config = tf.GPTNeoXConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                              intermediate_size=1024, max_position_embeddings=256)
    return _text(config, tf.GPTNeoXModel, 4, 128)


@_model("t5-encoder", "T5 encoder, 4 layers, d_model 256, batch 4 x 128")
def _t5():
    import transformers as tf
    config = tf.T5Config(vocab_size=1000, d_model=256, d_kv=64, d_ff=1024, num_layers=4, num_heads=4)
    return _text(config, tf.T5EncoderModel, 4, 128)


@_model("vit", "ViT, 4 layers, hidden 256, 224 px, batch 1")
def _vit():
    import transformers as tf
    config = tf.ViTConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                          image_size=224, patch_size=16)
    torch.manual_seed(0)
    inner = tf.ViTModel(config, add_pooling_layer=False).eval()

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, pixels):
            return self.inner(pixel_values=pixels, return_dict=False)[0]

    return Hidden(), (torch.rand(1, 3, 224, 224),), ["pixel_values"]


def exported(module, example, names) -> onnx.ModelProto:
    buffer = io.BytesIO()
    axes = {name: {0: "batch"} for name in names + ["y"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(module, example, buffer, opset_version=13, input_names=names, output_names=["y"],
                              dynamic_axes=axes)
    return onnx.load_from_string(buffer.getvalue())


def _session(model, threads, optimized):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    if not optimized:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def time_model(name, budget_s, threads):
    """One model's row: prepare vs session creation, then the four runtimes at ``threads`` threads."""
    from pycumsum_op.onnx import prepare
    builder, what = MODELS[name]
    module, example, names = builder()
    model = exported(module, example, names)
    feeds = {key: value.numpy() for key, value in zip(names, example)}
    started = time.perf_counter()
    rep = prepare(model)
    prepare_s = time.perf_counter() - started
    started = time.perf_counter()
    plain = _session(model, threads, optimized=False)
    session_s = time.perf_counter() - started
    optimized = _session(model, threads, optimized=True)
    got, expected = rep.run(feeds)[0], plain.run(None, feeds)[0]
    # the largest difference against the largest magnitude: float32 sums in another order differ by a few ulps of
    # the output's scale, whatever the entry
    error = (float(np.max(np.abs(got - expected)) / max(1.0, float(np.max(np.abs(expected)))))
             if got.shape == expected.shape and np.isfinite(got).all() else None)
    row = {"model": name, "what": what, "nodes": len(model.graph.node), "threads": threads, "prepare": prepare_s,
           "session": session_s, "relative_error": error, "equal": error is not None and error < 1e-4}
    torch.set_num_threads(threads)
    with torch.no_grad():
        candidates = {"caffe2": lambda: rep.run(feeds), "onnxruntime": lambda: optimized.run(None, feeds),
                      "onnxruntime_plain": lambda: plain.run(None, feeds), "torch": lambda: module(*example)}
        samples = measure(candidates, budget_s, 7, 40)
    row.update({key: median(times) for key, times in samples.items()})
    print("timed {} at {} thread(s)".format(name, threads), file=sys.stderr)
    return row


def run(names, budget_s, thread_counts):
    rows = [time_model(name, budget_s, threads) for threads in thread_counts for name in names]
    torch.set_num_threads(1)
    return rows, markdown(rows)


def markdown(rows):
    ratio = "{:.2f}x".format
    lines = []
    for threads in sorted({row["threads"] for row in rows}):
        chosen = [row for row in rows if row["threads"] == threads]
        lines += ["### Real-size models imported (`prepare`), {} thread(s): Caffe2 vs onnxruntime".format(threads), "",
                  table(["model", "equal to onnxruntime", "Caffe2", "onnxruntime", "vs onnxruntime",
                         "onnxruntime, no optimizations", "vs that", "torch eager", "prepare", "session"],
                        [[row["what"], "yes" if row["equal"] else "NO ({})".format(row["relative_error"]),
                          duration(row["caffe2"]), duration(row["onnxruntime"]),
                          ratio(row["caffe2"] / row["onnxruntime"]), duration(row["onnxruntime_plain"]),
                          ratio(row["caffe2"] / row["onnxruntime_plain"]), duration(row["torch"]),
                          duration(row["prepare"]), duration(row["session"])] for row in chosen]), ""]
        ratios = [row["caffe2"] / row["onnxruntime"] for row in chosen]
        mean = float(np.exp(np.mean(np.log(ratios))))
        lines += ["- geometric mean {} (target <= {}x): {}; worst {} (target <= {}x): {}; {} of {} equal".format(
            ratio(mean), GEOMETRIC_MEAN_TARGET, "PASS" if mean <= GEOMETRIC_MEAN_TARGET else "MISS",
            ratio(max(ratios)), WORST_TARGET, "PASS" if max(ratios) <= WORST_TARGET else "MISS",
            sum(row["equal"] for row in chosen), len(chosen)), ""]
    return "\n".join(lines)
