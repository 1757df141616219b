"""Shared test fixtures: a clean Caffe2 workspace, running nets, and the torch oracle."""

import caffe2.python.hypothesis_test_util  # noqa: F401  (imported first: it loads its own hypothesis profile)
import os
from functools import partial

import numpy as np
import pytest
import torch
from caffe2.python import workspace
from hypothesis import HealthCheck, Verbosity, settings

from pycumsum_op.kernels.plan import planned
from pycumsum_op.torch_versions import has


def _support_modules_without_doctests() -> list:
    """The support modules here (not test_*.py) that hold no doctest: --doctest-modules would only import them, and
    some import onnx's backend, which older torch cannot load (their tests skip with its refusal first)."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    for name in sorted(os.listdir(here)):
        if name.endswith(".py") and not name.startswith("test_") and name != "conftest.py":
            with open(os.path.join(here, name), encoding="utf-8") as source:
                if ">>>" not in source.read():
                    found.append(name)
    return found


collect_ignore = _support_modules_without_doctests()

# Loaded after Caffe2's test utilities so that their verbose "dev" profile does not win.
settings.register_profile("pycumsum_op", deadline=None, database=None, verbosity=Verbosity.normal,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pycumsum_op")


@pytest.fixture(autouse=True)
def fresh_plans():
    """No plan kept across tests: plans are kept per layout and read the `tuning` constants when made, and tests
    retune those constants to reach every path."""
    planned.cache_clear()
    yield
    planned.cache_clear()


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


def _prefix_logcumsumexp(x, dim):
    """logcumsumexp from torch's elementwise ops, one prefix at a time (the oracle where torch's logcumsumexp
    is missing, before 1.6, or NaN after a leading -inf, before 1.9): log(sum(exp(prefix - m))) + m, m the
    prefix's maximum held constant (0 where infinite); differentiable, so autograd gives its gradient."""
    if x.numel() == 0:
        return x.clone()
    results = []
    for end in range(1, x.shape[dim] + 1):
        prefix = x.narrow(dim, 0, end)
        top = prefix.max(dim, keepdim=True)[0].detach()
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        results.append(torch.log(torch.exp(prefix - top).sum(dim)) + top.squeeze(dim))
    return torch.stack(results, dim)


def _prefix_extremum(maximum, x, dim):
    """cummax / cummin (values, indices) from each prefix's torch.max / torch.min (the oracle before torch 1.5):
    the index is the last position holding the prefix's extremum (a tie goes to the later element; NaN wins)."""
    if x.numel() == 0:
        return x.clone(), torch.zeros(x.shape, dtype=torch.int64)
    values, indices = [], []
    for end in range(1, x.shape[dim] + 1):
        prefix = x.narrow(dim, 0, end)
        value = (prefix.max(dim, keepdim=True) if maximum else prefix.min(dim, keepdim=True))[0].detach()
        nan = value != value
        hits = (prefix.detach() == value) | (nan & (prefix.detach() != prefix.detach()))
        positions = torch.arange(end).reshape((-1,) + (1,) * (x.dim() - dim - 1))
        last = torch.where(hits, positions.expand_as(prefix), torch.full_like(positions, -1).expand_as(prefix))
        last = last.max(dim, keepdim=True)[0]
        values.append(prefix.gather(dim, last).squeeze(dim))  # the gradient goes to the winner
        indices.append(last.squeeze(dim))
    return torch.stack(values, dim), torch.stack(indices, dim)


def _flip(tensor, dim):
    """tensor.flip(dim); bool through uint8 (torch < 1.5 has no bool flip)."""
    return tensor.to(torch.uint8).flip(dim).to(torch.bool) if tensor.dtype == torch.bool else tensor.flip(dim)


#: scan name -> (torch function, the identity an exclusive scan starts with; None: no exclusive form).
TORCH_SCANS = {
    "cumsum": (torch.cumsum, 0),
    "cumprod": (torch.cumprod, 1),
    "logcumsumexp": (torch.logcumsumexp if has("torch.logcumsumexp -inf") else _prefix_logcumsumexp, -float("inf")),
    "cummax": (torch.cummax if has("torch.cummax") else partial(_prefix_extremum, True), None),
    "cummin": (torch.cummin if has("torch.cummax") else partial(_prefix_extremum, False), None),
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
        flat = _flip(flat, dim)
    result = function(flat, dim) if dtype is None else function(flat, dim, dtype=dtype)
    if identity is None:  # values and indices
        values, indices = result
        if reverse:
            values, indices = _flip(values, dim), (flat.shape[dim] - 1) - _flip(indices, dim)
        return values.reshape(x.shape), indices.reshape(x.shape)
    if exclusive and result.shape[dim] > 0:  # (torch 1.4 cannot differentiate an empty narrow)
        leading = torch.full_like(result.narrow(dim, 0, min(1, result.shape[dim])), identity)
        result = torch.cat([leading, result.narrow(dim, 0, max(result.shape[dim] - 1, 0))], dim)
    if reverse:
        result = _flip(result, dim)
    return result.reshape(x.shape)


#: The scans whose oracle here is a prefix-by-prefix one (this torch lacks an exact torch.<scan>): quadratic.
PREFIX_ORACLES = frozenset(name for name, (function, _) in TORCH_SCANS.items()
                           if function in (_prefix_logcumsumexp,) or isinstance(function, partial))


@pytest.fixture(scope="session")
def large_oracle():
    """``large_oracle(scan)``: skip a test of 64K-element lanes when the scan's oracle is a prefix-by-prefix one
    (quadratic in the lane; torch < 1.9 for logcumsumexp, < 1.5 for cummax/cummin); smaller tests check it."""
    def check(scan):
        if scan in PREFIX_ORACLES:
            pytest.skip("torch {} has no exact torch.{}: its prefix oracle is too slow for 64K-element lanes".format(
                torch.__version__, scan))
    return check


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
