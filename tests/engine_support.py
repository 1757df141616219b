"""Scan inputs drawn around the engine's own thresholds (read from `pycumsum_op.kernels.engine`, not
copied), so that every path runs: numpy below SMALL_SIZE elements; torch where torch's strided loop
stays in cache; lanes for narrow rows of long lanes, reverse scans and dtype changes; rows for
ROWS_MIN_WIDTH-wide rows and aliased strides; compiled off the last axis where the accelerator is on. Each
case says whether the accelerator is on (`accelerator`), so both engines are drawn. Shared by
tests/test_forward.py and tests/test_gradient.py.
"""
import contextlib
import os
import sys

import hypothesis.strategies as st
import numpy as np
import pytest

from pycumsum_op.kernels import ScanSpec, compiled, tuning
from pycumsum_op.kernels.route import route, routes
from pycumsum_op.scans import scan as registered_scan

#: The tests of the compiled paths: the `fast` extra installs numba 0.56.4 on CPython >= 3.7 only.
NEEDS_NUMBA = pytest.mark.skipif(sys.version_info < (3, 7), reason="the `fast` extra installs no numba on CPython 3.6 "
                                 "(numba 0.56.4 needs 3.7): no compiled path there")

ENGINE_DTYPES = [np.float32, np.float64, np.int32, np.int64]
ENGINE_MAX_SIZE = 32 * tuning.SMALL_SIZE


@st.composite
def engine_shapes(draw, dtype):
    """(shape, axis): rank 1-4, up to ENGINE_MAX_SIZE elements, drawn as (outer, length, inner) around the axis."""
    itemsize = np.dtype(dtype).itemsize
    inner = draw(st.one_of(
        st.just(1),                                                       # the last axis
        st.integers(2, tuning.CACHE_LINE // itemsize - 1),                # rows narrower than a cache line
        st.integers(tuning.CACHE_LINE // itemsize, tuning.ROWS_MIN_WIDTH - 1),
        st.just(max(tuning.ROWS_MIN_ALIASED_WIDTH, tuning.ALIASED_STRIDE // itemsize)),  # an aliased stride
        st.integers(tuning.ROWS_MIN_WIDTH, tuning.ROWS_MIN_WIDTH + 64)))  # wide rows
    length = draw(st.integers(2, max(2, ENGINE_MAX_SIZE // inner)))
    outer = draw(st.integers(1, max(1, min(64, ENGINE_MAX_SIZE // (length * inner)))))
    outer_dims = [] if outer == 1 and draw(st.booleans()) else [outer]
    if outer % 2 == 0 and draw(st.booleans()):
        outer_dims = [2, outer // 2]
    inner_dims = [] if inner == 1 and draw(st.booleans()) else [inner]
    shape = tuple(outer_dims + [length] + inner_dims)
    axis = len(outer_dims) - (len(shape) if draw(st.booleans()) else 0)
    return shape, axis


@st.composite
def engine_cases(draw, dtypes=ENGINE_DTYPES):
    """(dtype, shape, axis, exclusive, reverse, seed, accelerated): hypothesis draws the layout and whether
    the accelerator is on, `engine_input` the data."""
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    shape, axis = draw(engine_shapes(dtype))
    return (dtype, shape, axis, draw(st.booleans()), draw(st.booleans()), draw(st.integers(0, 2 ** 31)),
            draw(st.booleans()))


@contextlib.contextmanager
def accelerator(on: bool):
    """The accelerator on (it is a test dependency) or turned off by its switch, inside the block."""
    saved = os.environ.get(compiled.SWITCH)
    os.environ[compiled.SWITCH] = "1" if on else "0"
    try:
        yield
    finally:
        if saved is None:
            del os.environ[compiled.SWITCH]
        else:
            os.environ[compiled.SWITCH] = saved


def engine_input(dtype, shape, seed):
    rng = np.random.RandomState(seed)
    values = rng.uniform(-1000, 1000, shape) if dtype.kind == "f" else rng.randint(-1000, 1000, shape)
    return values.astype(dtype)


def scan_route(name, shape, dtype, axis, exclusive=False, reverse=False, result=None, **layout):
    """The route of the registered scan ``name`` with those arguments (``result``: its ``dtype=``; `route.route`,
    ``layout``: its keywords)."""
    entry = registered_scan(name)
    spec = ScanSpec(entry.op_name, axis, exclusive, reverse, None if result is None else np.dtype(result))
    return route(entry.kernel, entry.dtypes, spec, shape, dtype, **layout)


def forward_path(dtype, shape, axis, exclusive, reverse, seed=None, accelerated=True):
    """The path a PyCumSum forward takes (its result dtype is torch's: int64 for integers, which it casts into
    the output first and scans there in place)."""
    return scan_route("cumsum", shape, dtype, axis, exclusive, reverse, accelerator=accelerated).path


def backward_path(dtype, shape, axis, exclusive, reverse, seed=None, accelerated=True):
    """The path the gradient of a float PyCumSum takes: the reverse scan of the output gradient."""
    return scan_route("cumsum", shape, dtype, axis, exclusive, not reverse, accelerator=accelerated).path


def record_paths(monkeypatch) -> list:
    """The paths the scans run from now on in the test, in order: cumsum's engine paths by name, the accelerator's
    loops as "compiled" (sums, products, cummax / cummin), and the Caffe2 op's one torch.cumsum as "torch"."""
    from pycumsum_op.kernels import engine

    taken = []

    def recording(name, function):
        def run(*args, **kwargs):
            taken.append(name)
            return function(*args, **kwargs)
        return run

    monkeypatch.setattr(engine, "_PATHS", {name: recording(name, path) for name, path in engine._PATHS.items()})
    monkeypatch.setattr(engine, "torch_scan", recording("torch", engine.torch_scan))
    for loop in ("scan_rows", "extremum_rows"):
        monkeypatch.setattr(compiled, loop, recording("compiled", getattr(compiled, loop)))
    routes.cache_clear()  # a kept route holds its one call (engine.torch_scan): made again, it holds the recorder
    return taken
