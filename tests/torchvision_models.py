"""torchvision 0.11.3 backbones (random weights from their constructors, no download) under an ordinal head (softmax
over the classes, then their cumulative sum), and their torch.onnx exports on 1x3x64x64 images."""
import io
import warnings

import onnx
import torch
import torchvision

CLASSES = 5
#: the backbones of docs/onnx.md's table (alexnet and vgg11 do not export at 64x64)
BACKBONES = ("resnet18", "squeezenet1_0", "mobilenet_v2", "googlenet", "efficientnet_b0", "mnasnet0_5",
             "shufflenet_v2_x0_5", "densenet121", "mobilenet_v3_small")


class Ordinal(torch.nn.Module):
    """An ordinal head on a backbone: the cumulative distribution over the classes, and the logits."""

    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone

    def forward(self, images):
        logits = self.backbone(images)
        return torch.cumsum(torch.softmax(logits, dim=1), dim=1), logits


def export(name, opset, dynamic, training=torch.onnx.TrainingMode.EVAL):
    """The ONNX model of backbone ``name`` under the ordinal head, exported on 1x3x64x64 images (``training``
    PRESERVE keeps BatchNormalization, which EVAL folds into the convolutions)."""
    torch.manual_seed(0)
    if name == "densenet":
        backbone = torchvision.models.DenseNet(growth_rate=8, block_config=(2, 2), num_init_features=8,
                                               num_classes=CLASSES)
    else:
        kwargs = {"init_weights": False} if name == "googlenet" else {}  # True draws with scipy, and warns
        backbone = getattr(torchvision.models, name)(num_classes=CLASSES, **kwargs)
    module = Ordinal(backbone).eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, torch.randn(1, 3, 64, 64), buffer, opset_version=opset, training=training,
                          input_names=["images"], output_names=["cdf", "logits"],
                          dynamic_axes={name: {0: "batch"} for name in ("images", "cdf", "logits")} if dynamic
                          else None)
    return onnx.load_from_string(buffer.getvalue())


