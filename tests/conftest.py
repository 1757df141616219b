"""Shared test fixtures: a clean Caffe2 workspace, running nets, and the torch oracle."""

import caffe2.python.hypothesis_test_util  # noqa: F401  (imported first: it loads its own hypothesis profile)
import numpy as np
import pytest
import torch
from caffe2.python import workspace
from hypothesis import HealthCheck, Verbosity, settings

# Loaded after Caffe2's test utilities so that their verbose "dev" profile does not win.
settings.register_profile("pycumsum_op", deadline=None, database=None, verbosity=Verbosity.normal,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pycumsum_op")


@pytest.fixture
def clean_workspace():
    """An empty Caffe2 workspace for the test, emptied again afterwards."""
    workspace.ResetWorkspace()
    yield workspace
    workspace.ResetWorkspace()


def _run_net(net, feeds=None):
    """Feed ``feeds`` ({blob name: array}), then create and run ``net`` by its proto name."""
    for name, value in (feeds or {}).items():
        workspace.FeedBlob(name, value)
    workspace.CreateNet(net, overwrite=True)
    workspace.RunNet(net.Proto().name)


@pytest.fixture(scope="session")
def run_net():
    """``run_net(net, feeds)``: feed, create and run a net (session-scoped, so hypothesis tests may use it)."""
    return _run_net


def _torch_scan(x, axis, exclusive=False, reverse=False, dtype=None):
    """The oracle: torch.cumsum(x, axis, dtype), with ONNX CumSum's flags built from torch ops.

    reverse = flip -> cumsum -> flip; exclusive = the inclusive result shifted by one along
    ``axis`` with a leading 0. A 0-d tensor scans as a 1-element vector (torch accepts dim 0/-1).
    Works on tensors that require grad, so torch.autograd gives the gradient oracle too.
    """
    flat = x.reshape(1) if x.dim() == 0 else x
    dim = axis % flat.dim()
    if reverse:
        flat = flat.flip(dim)
    result = torch.cumsum(flat, dim, dtype=dtype)
    if exclusive:
        leading_zero = torch.zeros_like(result.narrow(dim, 0, min(1, result.shape[dim])))
        result = torch.cat([leading_zero, result.narrow(dim, 0, max(result.shape[dim] - 1, 0))], dim)
    if reverse:
        result = result.flip(dim)
    return result.reshape(x.shape)


@pytest.fixture(scope="session")
def torch_scan():
    """The torch oracle ``torch_scan(tensor, axis, exclusive, reverse, dtype)`` (see `_torch_scan`)."""
    return _torch_scan


@pytest.fixture(scope="session")
def to_torch_dtype():
    """numpy dtype (or None) -> the torch dtype of the same name (or None)."""
    def convert(dtype):
        return None if dtype is None else getattr(torch, np.dtype(dtype).name)
    return convert
