"""torchvision backbones (random weights from their constructors, no download) under an ordinal head (softmax over
the classes, then their cumulative sum: torch.cumsum), exported by torch.onnx.export at opsets 11 and 13 with a
static or a dynamic batch, imported by pycumsum_op.onnx.prepare and run against onnxruntime (graph optimizations
off): both outputs (the ordinal distribution and the backbone's logits) within 1e-4. ResNet-18 and SqueezeNet 1.0
(MaxPool with ceil_mode) run in the normal suite; the others (a small DenseNet: BatchNormalization, and a Pad
before each AveragePool) are marked slow.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)
torchvision = pytest.importorskip("torchvision", reason="torchvision==0.11.3 (requirements-dev.txt)")

import warnings

import numpy as np
import onnx
import torch

import pycumsum_op.onnx
from pycumsum_op.onnx.facts import GraphFacts
from onnx_support import onnxruntime_outputs

from torchvision_models import CLASSES, export

#: the normal suite's backbones, at both opsets, static and dynamic (two of ResNet-18's four are slow: `CASES`)
FAST = ("resnet18", "squeezenet1_0")
#: the slow ones (5-15 s per export and import), each once, the opsets and axes in turn (every combination of each
#: was measured once: docs/onnx.md); "densenet" is torchvision's DenseNet made small (DenseNet-121's export alone
#: takes 30 s): its BatchNormalization, which the export does not fold, and the Pad torch writes before AveragePool
SLOW = ("mobilenet_v2", "googlenet", "efficientnet_b0", "mnasnet0_5", "densenet", "mobilenet_v3_small")


def assert_matches_onnxruntime(model, batch):
    images = np.random.default_rng(batch).standard_normal((batch, 3, 64, 64)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = pycumsum_op.onnx.prepare(model).run([images])
    theirs = onnxruntime_outputs(model, {"images": images})
    assert [output.shape for output in ours] == [(batch, CLASSES)] * 2
    for got, want in zip(ours, theirs):
        assert np.abs(got - want).max() <= 1e-4


def _case(name, opset, dynamic, slow):
    return pytest.param(name, opset, dynamic, marks=[pytest.mark.slow] if slow else [],
                        id="{}-{}-{}".format(name, opset, "dynamic" if dynamic else "static"))


#: ResNet-18 (5 s an export and import) at opset 11 static and 13 dynamic in the normal suite, the other two slow
CASES = [_case(name, opset, dynamic, slow=name == "resnet18" and (opset == 13) != dynamic)
         for name in FAST for opset in (11, 13) for dynamic in (False, True)] + [
    _case(name, (11, 13)[number % 2], number % 3 != 1, slow=True) for number, name in enumerate(SLOW)]


@pytest.mark.parametrize("name, opset, dynamic", CASES)
def test_backbone_with_an_ordinal_head_equals_onnxruntime(name, opset, dynamic):
    model = export(name, opset, dynamic)
    ops = {node.op_type for node in model.graph.node}
    assert "CumSum" in ops and (name != "densenet" or {"BatchNormalization", "Pad", "AveragePool"} <= ops), ops
    assert_matches_onnxruntime(model, batch=2 if dynamic else 1)  # a dynamic batch is run at another size


def test_batch_normalization_kept_by_the_export_equals_onnxruntime():
    model = export("resnet18", 13, True, training=torch.onnx.TrainingMode.PRESERVE)
    assert "BatchNormalization" in {node.op_type for node in model.graph.node}
    assert_matches_onnxruntime(model, batch=3)


@pytest.mark.slow
def test_a_slice_of_an_input_of_unknown_rank_equals_onnxruntime():
    """ShuffleNetV2 with a dynamic batch: torch reads the channels off the tensor's Shape, and slices a tensor whose
    rank ONNX's shape inference leaves unknown (`GraphFacts.rank` reads it off the ops that make it)."""
    model = export("shufflenet_v2_x0_5", 13, True)
    graph = onnx.shape_inference.infer_shapes(model).graph
    facts = GraphFacts(graph)
    assert any(facts.dims(node.input[0]) is None for node in graph.node if node.op_type == "Slice")
    assert_matches_onnxruntime(model, batch=2)


@pytest.mark.parametrize("path", ["aten", "portable", "cli"])
def test_resnet18_through_the_other_paths_equals_onnxruntime(path):
    """`lower="aten"`, `lower="portable"` (a static batch) and `pycumsum-op onnx import` (every backbone through every
    path: `tests/onnx_model_sweep.py --source torchvision`, docs/onnx.md)."""
    import onnx_model_sweep
    model = export("resnet18", 13, False)
    images = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    expected = onnxruntime_outputs(model, {"images": images})[0]
    assert onnx_model_sweep.outcome(model, {"images": images}, path, expected) == "match"


def test_a_segmentation_model_resizing_to_sizes_read_at_run_time_equals_onnxruntime():
    """LR-ASPP MobileNetV3 (random weights): its Resize (bilinear, align_corners=False) to sizes torch computes from
    the input's Shape, exported with a dynamic batch and run at another (fcn_resnet50 and deeplabv3_mobilenet_v3_large
    match too, measured once: their export takes 5-10 s)."""
    import io
    torch.manual_seed(0)
    module = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        pretrained=False, pretrained_backbone=False, num_classes=3).eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, torch.randn(1, 3, 64, 64), buffer, opset_version=13, input_names=["images"],
                          output_names=["out"], dynamic_axes={"images": {0: "batch"}, "out": {0: "batch"}})
    model = onnx.load_from_string(buffer.getvalue())
    assert "Resize" in {node.op_type for node in model.graph.node}
    images = np.random.default_rng(2).standard_normal((2, 3, 64, 64)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = pycumsum_op.onnx.prepare(model).run([images])
    theirs = onnxruntime_outputs(model, {"images": images})
    assert ours[0].shape == (2, 3, 64, 64)
    assert np.abs(ours[0] - theirs[0]).max() <= 1e-4
