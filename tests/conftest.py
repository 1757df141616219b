"""Shared test fixtures: a clean Caffe2 workspace, running nets, and the torch oracle."""

import caffe2.python.hypothesis_test_util  # noqa: F401  (imported first: it loads its own hypothesis profile)
import os

import numpy as np
import pytest
import torch
from caffe2.python import workspace
from hypothesis import HealthCheck, Verbosity, settings

from pycumsum_op.kernels.route import routes
from torch_oracles import PREFIX_ORACLES
from torch_oracles import torch_scan as _torch_scan


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
def fresh_routes():
    """No route kept across tests: routes are kept per layout and read the `tuning` constants when made, and tests
    retune those constants to reach every path."""
    routes.cache_clear()
    yield
    routes.cache_clear()


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
    """The torch oracle ``torch_scan(tensor, axis, exclusive, reverse, dtype, scan="cumsum")`` (see `torch_oracles.torch_scan`)."""
    return _torch_scan


@pytest.fixture(scope="session")
def to_torch_dtype():
    """numpy dtype (or None) -> the torch dtype of the same name (or None)."""
    def convert(dtype):
        return None if dtype is None else getattr(torch, np.dtype(dtype).name)
    return convert
