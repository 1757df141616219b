"""onnx's own node tests for CumSum (opset 13, float64, the axis a run-time input), run through
``pycumsum_op.onnx.backend`` by onnx's backend test runner, as any ONNX backend is tested.

The runner makes a skipped test of every other model in onnx and CUDA variants (this Caffe2 build
has no GPU); those are dropped, so exactly the seven CPU CumSum tests run.
"""
import pytest
from onnx_support import onnx_backend_refusal

if onnx_backend_refusal():  # torch < 1.10 with onnx >= 1.9; the refusal itself: tests/test_torch_versions.py
    pytest.skip(onnx_backend_refusal(), allow_module_level=True)

import unittest

import onnx.backend.test

import pycumsum_op.onnx

runner = onnx.backend.test.BackendTest(pycumsum_op.onnx.backend, __name__)
runner.include(r"^test_cumsum_.*_cpu$")
CASES = {}
for case_name, case in runner.test_cases.items():
    for name in [name for name in vars(case) if name.startswith("test_")]:
        if getattr(getattr(case, name), "__unittest_skip__", False):
            delattr(case, name)
    if any(name.startswith("test_") for name in vars(case)):
        CASES[case_name] = case
globals().update(CASES)


def test_all_seven_cumsum_node_tests_run():
    names = sorted(name for case in CASES.values() for name in vars(case) if name.startswith("test_"))
    assert names == ["test_cumsum_1d_cpu", "test_cumsum_1d_exclusive_cpu", "test_cumsum_1d_reverse_cpu",
                     "test_cumsum_1d_reverse_exclusive_cpu", "test_cumsum_2d_axis_0_cpu",
                     "test_cumsum_2d_axis_1_cpu", "test_cumsum_2d_negative_axis_cpu"]


if __name__ == "__main__":
    unittest.main()
