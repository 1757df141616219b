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


#: scan name -> (torch function, the identity an exclusive scan starts with; None: no exclusive form).
TORCH_SCANS = {
    "cumsum": (torch.cumsum, 0),
    "cumprod": (torch.cumprod, 1),
    "logcumsumexp": (torch.logcumsumexp, -float("inf")),
    "cummax": (torch.cummax, None),
    "cummin": (torch.cummin, None),
}


def _torch_scan(x, axis, exclusive=False, reverse=False, dtype=None, scan="cumsum"):
    """The oracle: torch.<scan>(x, axis[, dtype]), with ONNX/TensorFlow's flags built from torch ops.

    reverse = flip -> scan -> flip (cummax/cummin indices mapped back to positions in x); exclusive =
    the inclusive result shifted by one along ``axis`` behind the scan's identity (0, 1 or -inf).
    A 0-d tensor scans as a 1-element vector (torch accepts dim 0/-1). Works on tensors that
    require grad, so torch.autograd gives the gradient oracle too. cummax/cummin return
    (values, indices).
    """
    function, identity = TORCH_SCANS[scan]
    flat = x.reshape(1) if x.dim() == 0 else x
    dim = axis % flat.dim()
    if reverse:
        flat = flat.flip(dim)
    result = function(flat, dim) if dtype is None else function(flat, dim, dtype=dtype)
    if identity is None:  # values and indices
        values, indices = result
        if reverse:
            values, indices = values.flip(dim), (flat.shape[dim] - 1) - indices.flip(dim)
        return values.reshape(x.shape), indices.reshape(x.shape)
    if exclusive:
        leading = torch.full_like(result.narrow(dim, 0, min(1, result.shape[dim])), identity)
        result = torch.cat([leading, result.narrow(dim, 0, max(result.shape[dim] - 1, 0))], dim)
    if reverse:
        result = result.flip(dim)
    return result.reshape(x.shape)


@pytest.fixture(scope="session")
def torch_scan():
    """The torch oracle ``torch_scan(tensor, axis, exclusive, reverse, dtype, scan="cumsum")`` (see `_torch_scan`)."""
    return _torch_scan


@pytest.fixture(scope="session")
def to_torch_dtype():
    """numpy dtype (or None) -> the torch dtype of the same name (or None)."""
    def convert(dtype):
        return None if dtype is None else getattr(torch, np.dtype(dtype).name)
    return convert
