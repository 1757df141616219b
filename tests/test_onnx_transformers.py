"""Tiny transformers models of the families whose exports hold CumSum (`transformer_models`: built from configs,
random weights, no download), exported by torch.onnx.export and run through pycumsum_op.onnx against
onnxruntime. Each family is exported once, at one of opsets 11, 13, 14, with static or dynamic axes in turn
(the full family x opset x axes x path sweep is tests/onnx_model_sweep.py, its results in docs/onnx.md).
torch 1.10.2's constant folding fails on GPT-Neo, and on I-BERT with static axes: GPT-Neo is exported without it.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)
transformers = pytest.importorskip("transformers", reason="transformers==4.26.1 (requirements-dev.txt)")

import numpy as np

import onnx_model_sweep
import transformer_models

FAMILIES = list(transformer_models.FAMILIES)
#: (family, opset, dynamic): every family once, the opsets and axes in turn
CASES = [(family, (11, 13, 14)[number % 3], number % 2 == 1 or family == "ibert")
         for number, family in enumerate(FAMILIES)]


@pytest.fixture(scope="module")
def exports():
    """(family, opset, dynamic) -> (model, feeds, expected): each model exported once for the module."""
    made = {}

    def get(family, opset, dynamic):
        if (family, opset, dynamic) not in made:
            module, example = transformer_models.build(family)
            model = transformer_models.export(module, example, opset, dynamic, fold=family != "gpt-neo")
            feeds = {"input_ids": example[0].numpy(), "attention_mask": example[1].numpy()}
            expected = onnx_model_sweep.oracle(model, feeds, lambda: module(*example))[0]
            made[family, opset, dynamic] = model, feeds, expected
        return made[family, opset, dynamic]
    return get


@pytest.mark.slow  # a torch.onnx.export of a transformer each
@pytest.mark.parametrize("family, opset, dynamic", CASES, ids=["{}-{}-{}".format(f, o, "dynamic" if d else "static")
                                                              for f, o, d in CASES])
def test_family_equals_onnxruntime(exports, family, opset, dynamic):
    model, feeds, expected = exports(family, opset, dynamic)
    assert "CumSum" in [node.op_type for node in model.graph.node]
    assert onnx_model_sweep.outcome(model, feeds, "prepare", expected) == "match"


@pytest.mark.slow
@pytest.mark.parametrize("family, opset", [("roberta", 11), ("biogpt", 14), ("bloom", 11)])
@pytest.mark.parametrize("path", ["aten", "portable"])
def test_lowered_families_equal_onnxruntime(exports, family, opset, path):
    """No Python op left: the nets run in a C++ predictor (static shapes: "portable" fixes the scan length)."""
    assert (family, opset, False) in CASES  # exported once for the module
    model, feeds, expected = exports(family, opset, False)
    assert onnx_model_sweep.outcome(model, feeds, path, expected) == "match"
    import pycumsum_op.onnx
    init_net, predict_net = pycumsum_op.onnx.to_caffe2(model, lower=path)
    assert [op.type for net in (init_net, predict_net) for op in net.op if op.type == "Python"] == []


@pytest.mark.slow  # a subprocess
def test_command_line_import_equals_onnxruntime(exports):
    model, feeds, expected = exports("xlm-roberta", 13, True)
    assert onnx_model_sweep.outcome(model, feeds, "cli", expected) == "match"


def test_sweep_outcome_reports_a_wrong_result_as_a_mismatch(exports):
    """The sweep's comparison can fail: a perturbed expectation is a mismatch."""
    model, feeds, expected = exports("roberta", 11, False)
    assert onnx_model_sweep.outcome(model, feeds, "prepare", expected + np.float32(1e-3)).startswith("MISMATCH")
