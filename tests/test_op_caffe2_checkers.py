"""PyCumSum under Caffe2's own operator checkers (caffe2.python.hypothesis_test_util).

assertGradientChecks compares the op's gradient with finite differences of the op itself;
assertReferenceChecks compares forward and gradient with torch (the shared oracle).
The op is the OperatorDef that ``net.PyCumSum`` builds, CPU only (``hu.gcs_cpu_only``).
"""
import caffe2.python.hypothesis_test_util as hu
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from caffe2.python import core
from hypothesis import given, settings

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)


def pycumsum_operator(axis, exclusive, reverse, in_place):
    """The OperatorDef of ``net.PyCumSum("X", "Y" or "X", ...)``."""
    net = core.Net("checked")
    net.PyCumSum("X", "X" if in_place else "Y", axis=axis, exclusive=exclusive, reverse=reverse)
    (op,) = net.Proto().op
    return op


def small_tensors(dtype):
    """Rank 1-4 tensors with 1-3 entries per dimension, values in [-1, 1]."""
    width = np.dtype(dtype).itemsize * 8  # (torch 1.4's hu.tensor draws float64 values for any float dtype)
    return hu.tensor(min_dim=1, max_dim=4, dtype=dtype, min_value=1, max_value=3,
                     elements=st.floats(min_value=-1.0, max_value=1.0, width=width))


scan_flags = dict(axis_pick=st.integers(0, 7), exclusive=st.booleans(), reverse=st.booleans(),
                  in_place=st.booleans())


def axis_for(X, axis_pick):
    """An axis in -ndim..ndim-1 (negative ones included) chosen by ``axis_pick``."""
    return axis_pick % (2 * X.ndim) - X.ndim


class TestPyCumSumWithCaffe2Checkers(hu.HypothesisTestCase):
    @pytest.fixture(autouse=True)
    def _oracle(self, torch_scan):
        self.torch_scan = torch_scan

    @settings(max_examples=60)
    @given(X=small_tensors(np.float32), **scan_flags, **hu.gcs_cpu_only)
    def test_gradient_checks(self, X, axis_pick, exclusive, reverse, in_place, gc, dc):
        op = pycumsum_operator(axis_for(X, axis_pick), exclusive, reverse, in_place)
        self.assertGradientChecks(gc, op, [X], 0, [0])

    @settings(max_examples=60)
    @given(X=st.one_of(small_tensors(np.float32), small_tensors(np.float64)), **scan_flags,
           **hu.gcs_cpu_only)
    def test_reference_checks(self, X, axis_pick, exclusive, reverse, in_place, gc, dc):
        axis = axis_for(X, axis_pick)
        op = pycumsum_operator(axis, exclusive, reverse, in_place)

        def reference(X):
            return (self.torch_scan(torch.from_numpy(X), axis, exclusive, reverse).numpy(),)

        def gradient_reference(grad_y, outputs, inputs):
            x = torch.tensor(inputs[0], requires_grad=True)
            (self.torch_scan(x, axis, exclusive, reverse) * torch.from_numpy(grad_y)).sum().backward()
            return (x.grad.numpy(),)

        self.assertReferenceChecks(gc, op, [X], reference, output_to_grad=op.output[0],
                                   grad_reference=gradient_reference)
