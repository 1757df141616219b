"""The accelerator (pycumsum_op/kernels/compiled.py, the ``fast`` extra) against torch, and the route that takes it.

Every compiled scan must EQUAL torch's result (NaN where torch has NaN: IEEE 754 leaves the sign of a NaN made
from two NaNs open, and the compiled adds may take either), on data over 40 decades, with NaN and infinities, and
on int64 sums that wrap around. The kernels are driven straight by hypothesis around the boundaries of their loops
(groups of four lanes, pairs, single lanes, blocks of lanes) plus a short list of named edge shapes; which path a
scan takes is one table (`PATH_TABLE`) whose shapes are made from the `tuning` constants the route reads, checked
with the accelerator and without, each case run and held against torch, the path run recorded. Speed is
`make bench`'s job; nothing here is timed.
"""
import functools
import os
import subprocess
import sys

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace
from hypothesis import example, given, settings

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from pycumsum_op.kernels import ScanSpec, compiled, cumsum_forward, engine, tuning
from pycumsum_op.kernels.cumprod import KERNEL as CUMPROD
from pycumsum_op.kernels.cumsum import KERNEL as CUMSUM
from pycumsum_op.kernels.route import SAME, routes
from pycumsum_op.scans import scan as registered_scan
from pycumsum_op.torch_versions import has
from engine_support import NEEDS_NUMBA, record_paths, scan_route
from scan_family_support import assert_outputs_equal
from torch_oracles import PREFIX_ORACLES, float64_reference, torch_scan

FLAGS = [(False, False), (True, False), (False, True), (True, True)]  # (exclusive, reverse)
DTYPES = [np.float32, np.float64, np.int32, np.int64]


@pytest.fixture(params=[True, False], ids=["accelerated", "plain"])
def accelerator(request, monkeypatch):
    """The accelerator on (the ``fast`` extra is a test dependency) or turned off by PYCUMSUM_OP_ACCELERATOR=0."""
    if request.param and NEEDS_NUMBA.args[0]:
        pytest.skip(NEEDS_NUMBA.kwargs["reason"])
    monkeypatch.setenv(compiled.SWITCH, "1" if request.param else "0")
    assert compiled.enabled() is request.param
    return request.param


def values(shape, dtype, seed=0):
    """Floats of mixed sign from 1e-20 to 1e20 with NaN and +-inf sprinkled in; int64 near its limits
    (sums wrap around); int32 small."""
    rng = np.random.RandomState(seed)
    if dtype == np.int64:
        return rng.randint(-(1 << 62), 1 << 62, size=shape, dtype=np.int64)
    if dtype == np.int32:
        return rng.randint(-1000, 1000, size=shape).astype(np.int32)
    x = (rng.standard_normal(shape) * 10.0 ** rng.randint(-20, 21, size=shape)).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.randint(flat.size, size=flat.size // 500 + 1)] = np.nan
    flat[rng.randint(flat.size, size=flat.size // 700 + 1)] = np.inf
    flat[rng.randint(flat.size, size=flat.size // 900 + 1)] = -np.inf
    return x


def factors(shape, dtype, seed=0):
    """Products that neither overflow nor vanish: +-1 (NaN, +-inf kept) for floats, -1..1 for integers."""
    x = values(shape, dtype, seed)
    return np.where(np.isfinite(x), np.sign(x), x).astype(dtype) if np.dtype(dtype).kind == "f" else x % 3 - 1


def oracle(x, axis, exclusive, reverse, scan=torch.cumsum, identity=0):
    """torch's inclusive scan, with exclusive / reverse built from torch ops."""
    t = torch.from_numpy(np.ascontiguousarray(x))
    if reverse:
        t = t.flip(axis)
    t = scan(t, axis)
    if exclusive:
        t = torch.cat([torch.full_like(t.narrow(axis, 0, 1), identity), t.narrow(axis, 0, t.shape[axis] - 1)], axis)
    if reverse:
        t = t.flip(axis)
    return t.numpy()


def assert_same(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)  # NaN equals NaN (np.array_equal's equal_nan needs numpy 1.19)


# --- the kernels straight: the chains (C-contiguous rows: lanes in fours, neighbours of one row as one vector, a
# last group of two lanes as a pair, of 1 or 3 repeating its last lane, groups across outer slices, one lane alone)
# and the row loops (any view, gaps too, in blocks of tuning.COMPILED_BLOCK lanes)

#: (outer, inner) of the named edges: one lane; a pair; three (a group repeating its last lane); four neighbours;
#: 4k + 1 lanes (a group of three, then a pair); 4k + 2 (groups, then a pair); groups across outer slices; rows of
#: 5-15 neighbours with a ragged end; a row wider than a block of 3.
EDGE_ROWS = [(1, 1), (1, 2), (1, 3), (1, 4), (5, 1), (3, 2), (2, 3), (5, 3), (2, 5), (1, 7), (3, 15), (2, 16)]


@st.composite
def kernel_cases(draw):
    """(kernel, dtype, outer, length, inner, exclusive, reverse, in_place, contiguous, chains, block)."""
    contiguous = draw(st.booleans())
    return (draw(st.sampled_from([CUMSUM, CUMPROD])), draw(st.sampled_from(DTYPES)),
            draw(st.integers(1, 6)), draw(st.one_of(st.integers(1, 40), st.just(301))),
            draw(st.one_of(st.integers(1, 17), st.integers(18, 70))), draw(st.booleans()), draw(st.booleans()),
            draw(st.booleans()), contiguous, contiguous and draw(st.booleans()), draw(st.sampled_from([3, 1024])))


def check_scan_rows(kernel, dtype, outer, length, inner, exclusive, reverse, in_place, contiguous, chains, block):
    make = factors if kernel is CUMPROD else values
    x = make((outer, length, inner if contiguous else 2 * inner), dtype, seed=outer * 1000 + length * 10 + inner)
    target = x.copy() if in_place else np.empty_like(x)
    source = target if in_place else x
    if not contiguous:
        source, target, x = source[:, :, ::2], target[:, :, ::2], x[:, :, ::2]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "COMPILED_BLOCK", block)
        compiled.scan_rows(source, target, kernel, exclusive, reverse, chains)
    scan, identity = (torch.cumprod, 1) if kernel is CUMPROD else (torch.cumsum, 0)
    expected = oracle(x, 1, exclusive, reverse, scan, identity)
    assert_same(target, expected.astype(x.dtype))  # torch scans int32 into int64


@NEEDS_NUMBA
@settings(max_examples=120)
@given(case=kernel_cases())
@example(case=(CUMSUM, np.float64, 1, 301, 1, True, True, True, True, True, 1024))  # one chain, in place
@example(case=(CUMPROD, np.int64, 5, 40, 3, False, True, False, False, False, 3))  # gaps, blocks of 3
def test_scan_rows_are_torchs(case):
    check_scan_rows(*case)


@NEEDS_NUMBA
@pytest.mark.parametrize("outer, inner", EDGE_ROWS)
def test_scan_rows_edges(outer, inner):
    """Each named edge by both loops, every flag, sums and products, in place and not."""
    for exclusive, reverse in FLAGS:
        for kernel, dtype, in_place, chains in [(CUMSUM, np.float32, False, True),
                                                (CUMSUM, np.int64, True, True),
                                                (CUMPROD, np.float64, True, True),
                                                (CUMSUM, np.float64, False, False)]:
            check_scan_rows(kernel, dtype, outer, 37, inner, exclusive, reverse, in_place, True, chains, 3)


@NEEDS_NUMBA
def test_float32_sums_are_taken_in_float64():
    """torch 1.10's CPU cumsum adds float32 in float64 and rounds each element once; so do the kernels (a
    float32 accumulator would give 1e8 + 1 + ... = 1e8 here)."""
    x = np.array([[1e8] * 3] + [[1.0] * 3] * 99, np.float32)
    for chains in (True, False):
        y = np.empty_like(x)
        compiled.scan_rows(x[None], y[None], CUMSUM, False, False, chains)
        assert_same(y, torch.cumsum(torch.from_numpy(x), 0).numpy())
        assert y[-1, 0] == np.float32(1e8 + 99)


@NEEDS_NUMBA
@settings(max_examples=40)
@given(dtype=st.sampled_from([np.float32, np.float64, np.int64]), maximum=st.booleans(),
       block=st.sampled_from([3, 1024]), outer=st.integers(1, 41), length=st.integers(1, 30),
       inner=st.sampled_from([1, 2, 3, 4, 5, 7, 8, 12]), contiguous=st.booleans(), chains=st.booleans())
@example(dtype=np.float32, maximum=True, block=1024, outer=41, length=30, inner=7, contiguous=True, chains=True)
@example(dtype=np.float64, maximum=False, block=3, outer=41, length=30, inner=12, contiguous=False, chains=False)
def test_extremum_rows_are_torchs_cummax_and_cummin(dtype, maximum, block, outer, length, inner, contiguous, chains):
    """Four lanes at a time (C-contiguous; a last group repeating its last lane), or whole rows (views with gaps
    too) cut into blocks of 3 lanes (tuning.COMPILED_BLOCK); ties take the later index, NaN wins and stays."""
    x = values((outer, length, inner if contiguous else 2 * inner), dtype, seed=4)
    if dtype != np.int64:
        x[::3, ::4] = 1.5  # ties: torch keeps the later index
    if not contiguous:
        x = x[:, :, ::2]
    values_out, indices = np.empty_like(x), np.empty(x.shape, np.int64)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tuning, "COMPILED_BLOCK", block)
        compiled.extremum_rows(x, values_out, indices, maximum, chains and contiguous)
    expected_values, expected_indices = torch_scan(torch.from_numpy(x), 1, scan="cummax" if maximum else "cummin")
    assert_same(values_out, expected_values.numpy())
    assert_same(indices, expected_indices.numpy())


# --- which path each scan takes: one table, shapes made from the constants the route reads

def path_table():
    """[(scan, shape, axis, dtype, exclusive, reverse, in_place, (path, variant) with the accelerator, path without)]:
    each row sits on one side of one of the route's boundaries (`tuning`)."""
    t, f32, f64, i64 = tuning, np.float32, np.float64, np.int64
    wide, few, chain_length = t.COMPILED_NARROW, t.COMPILED_FEW_LANES, t.COMPILED_CHAINS_MIN_LENGTH
    span32 = t.COMPILED_CHAINS_MIN_BYTES // 4  # float32 elements of a lane spanning the chains' least bytes
    wider = t.COMPILED_EXTREMUM_CHAINS_WIDTH
    rows_length = t.CACHE_SETS * t.CACHE_WAYS + 76  # lanes longer than torch's strided loop keeps in cache
    rows, chains, one = "row loops", "chains of four", "one chain"
    return [
        # cumsum forward: rows of COMPILED_NARROW lanes or more by the row loops, at any length
        ("cumsum", (600, wide), 0, f32, False, False, False, ("compiled", rows), "torch"),
        ("cumsum", (2, 700, wide), 1, i64, False, False, False, ("compiled", rows), "lanes"),  # an aliased stride
        ("cumsum", (2, 520, 2, 8), 1, f64, False, False, False, ("compiled", rows), "lanes"),
        # rows of COMPILED_FEW_LANES up to COMPILED_NARROW: chains where lanes reach COMPILED_CHAINS_MIN_LENGTH
        ("cumsum", (300, chain_length, few), 1, f32, False, False, False, ("compiled", chains), "torch"),
        ("cumsum", (300, chain_length - 1, few), 1, f32, False, False, False, ("torch", "out="), "torch"),
        ("cumsum", (300, 40, wide - 3), 1, i64, False, False, False, ("compiled", rows), "torch"),  # >= NARROW_BYTES
        # rows of 1-3 floating lanes: two lanes or more spanning COMPILED_CHAINS_MIN_BYTES, not an aliased span
        ("cumsum", (4, span32 + 1), 1, f32, False, False, False, ("compiled", chains), "torch"),
        ("cumsum", (3 * span32, 2), 0, f32, False, False, False, ("compiled", chains), "torch"),
        ("cumsum", (8, span32 - 1), 1, f32, False, False, False, ("torch", "out="), "torch"),
        ("cumsum", (1, 4 * span32), 1, f32, False, False, False, ("torch", "out="), "torch"),  # one lane
        ("cumsum", (4, 2 * span32), 1, i64, False, False, False, ("torch", "out="), "torch"),  # a 1-cycle add
        ("cumsum", (4, t.COMPILED_CHAINS_ALIASED_SPAN // 8), 1, f64, False, False, False, ("torch", "out="),
         "torch"),
        # without the accelerator, torch's loop missing the cache: numpy's row adds on wide rows, else the buffer
        ("cumsum", (rows_length, t.ROWS_MIN_WIDTH + 8), 0, f32, False, False, False, ("compiled", rows), "rows"),
        ("cumsum", (3000, 40), 0, f32, False, False, False, ("compiled", rows), "lanes"),
        # reversed (the gradients) and shifted in place: the accelerator's one pass, else the buffered paths
        ("cumsum", (70000,), 0, f32, False, True, False, ("compiled", one), "lanes"),
        ("cumsum", (4099,), 0, i64, True, True, True, ("compiled", one), "lanes"),
        ("cumsum", (600, 50), 0, f64, True, True, True, ("compiled", rows), "lanes"),
        ("cumsum", (1000, 7, 5), 1, f32, False, True, False, ("compiled", chains), "lanes"),
        ("cumsum", (rows_length, t.ROWS_MIN_WIDTH + 8), 0, f32, False, True, False, ("compiled", rows), "rows"),
        ("cumsum", (300, 40, 8), 1, f32, True, False, True, ("compiled", chains), "lanes"),
        ("cumsum", (5000, 3), 0, i64, True, False, True, ("compiled", chains), "lanes"),
        # small inputs and single elements
        ("cumsum", (7, 9), 1, f32, True, True, False, ("numpy", ""), "numpy"),
        ("cumsum", (t.SMALL_SIZE, 1), 1, f32, True, False, False, ("trivial", ""), "trivial"),
        # cumprod: products as sums, integers too
        ("cumprod", (2000, few), 0, f32, False, False, False, ("compiled", chains), "torch"),
        ("cumprod", (2000, wide), 0, i64, True, True, False, ("compiled", rows), "torch"),
        ("cumprod", (3000, 2), 0, i64, False, False, False, ("compiled", chains), "torch"),
        ("cumprod", (5000, 1), 0, f32, False, False, False, ("torch", "out="), "torch"),
        ("cumprod", (2000, few - 1), 0, f64, False, True, False, ("compiled", chains), "torch"),
        # cummax / cummin: from COMPILED_EXTREMUM_MIN_WIDTH lanes, chains below COMPILED_EXTREMUM_CHAINS_WIDTH
        ("cummax", (2000, t.COMPILED_EXTREMUM_MIN_WIDTH), 0, f32, False, False, False, ("compiled", chains),
         "torch"),
        ("cummin", (2000, t.COMPILED_EXTREMUM_MIN_WIDTH - 1), 0, f64, False, False, False, ("torch", "out="),
         "torch"),
        ("cummax", (2000, wider), 0, i64, False, True, False, ("compiled", rows), "torch"),
        ("cummin", (3, 2000), 0, f32, False, False, False, ("compiled", rows), "torch"),
        ("cummin", (2000, 5), 0, f32, False, True, False, ("compiled", rows), "torch"),  # flipped views
        # logcumsumexp: torch's, into the output or staged
        ("logcumsumexp", (600, 50), 0, f32, False, False, False, ("torch", "out="), "torch"),
        ("logcumsumexp", (600, 50), 0, f64, True, True, False, ("torch", "staged"), "torch"),
    ]


def run_scan(name, x, axis, exclusive, reverse, in_place):
    """The scan's registered forward on x (into x itself when ``in_place``): its first output."""
    kernel = registered_scan(name)
    spec = ScanSpec(kernel.op_name, axis, exclusive, reverse)
    out = x if in_place else None
    result = kernel.forward(x, spec, out)
    return result[0] if isinstance(result, tuple) else result


def scan_oracle(name, x, axis, exclusive, reverse):
    """torch's scan (`torch_oracles.torch_scan`: from each prefix where this torch has no exact torch.<scan>,
    exact for cummax / cummin; logcumsumexp's then in float64, rounded once to x's dtype)."""
    t = torch.from_numpy(np.ascontiguousarray(x))
    if name in PREFIX_ORACLES and name == "logcumsumexp":
        return float64_reference(t, axis, exclusive, reverse, scan=name).numpy()
    result = torch_scan(t, axis, exclusive, reverse, scan=name)
    return (result[0] if isinstance(result, tuple) else result).numpy()


@pytest.mark.parametrize("case", path_table(), ids=lambda case: "{}-{}-{}".format(case[0], case[1], case[3].__name__))
def test_the_path_table(accelerator, case, monkeypatch):
    """The route names the table's path (and variant, with the accelerator); the scan runs exactly that path and
    gives torch's bits."""
    name, shape, axis, dtype, exclusive, reverse, in_place, (on, variant), off = case
    sharing = SAME if in_place else "apart"
    found = scan_route(name, shape, dtype, axis, exclusive, reverse, sharing=sharing)
    assert (found.path, found.variant if accelerator else "") == ((on, variant) if accelerator else (off, ""))
    x = (factors if name == "cumprod" else values)(shape, dtype)
    if name == "logcumsumexp":
        x = np.where(np.isnan(x), 0, x).astype(dtype)
    expected = scan_oracle(name, x, axis, exclusive, reverse)
    taken = record_paths(monkeypatch)
    actual = run_scan(name, x.copy() if in_place else x, axis, exclusive, reverse, in_place)
    assert taken == ([found.path] if name == "cumsum" or found.path == "compiled" else [])
    if name in PREFIX_ORACLES and name == "logcumsumexp":  # torch < 1.9: the float64 reference, within rounding
        assert_outputs_equal([actual], [expected])
    else:
        assert_same(actual, expected.astype(actual.dtype) if dtype == np.int32 else expected)


@settings(max_examples=40)
@given(rank=st.integers(1, 4), data=st.data(), dtype=st.sampled_from([np.float32, np.float64, np.int64]),
       exclusive=st.booleans(), reverse=st.booleans(), accelerated=st.booleans())
def test_the_routed_path_is_the_path_run(rank, data, dtype, exclusive, reverse, accelerated):
    """Random shapes of up to 64K elements around the thresholds: cumsum runs the path its route names, torch's bits."""
    shape = tuple(data.draw(st.integers(1, int((1 << 16) ** (1 / rank))), label="side") for _ in range(rank))
    axis = data.draw(st.integers(0, rank - 1), label="axis")
    x = values(shape, dtype, seed=sum(shape))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(compiled.SWITCH, "1" if accelerated else "0")
        taken = record_paths(patch)
        found = scan_route("cumsum", shape, dtype, axis, exclusive, reverse)
        actual = cumsum_forward(x, ScanSpec("PyCumSum", axis, exclusive, reverse))
    assert taken == [found.path]
    assert_same(actual, oracle(x, axis, exclusive, reverse))


# --- the Caffe2 ops: one call where the route is one call, kept per shape; forward and gradient

def run_op(x, grad_y, axis, exclusive, reverse):
    """Forward and gradient of net.PyCumSum in a fresh workspace: (y, grad_x)."""
    workspace.ResetWorkspace()
    net = core.Net("compiled_kernels")
    y = net.PyCumSum("ck_x", "ck_y", axis=axis, exclusive=exclusive, reverse=reverse)
    net.AddExternalInput("ck_y_grad")
    net.AddGradientOperators({y: "ck_y_grad"})
    workspace.FeedBlob("ck_x", x)
    workspace.FeedBlob("ck_y_grad", grad_y)
    workspace.RunNetOnce(net)
    return workspace.FetchBlob("ck_y"), workspace.FetchBlob("ck_x_grad")


@pytest.mark.parametrize("shape, axis", [((600, 50), 0), ((20, 30, 200), 1), ((64, 300), 1)])
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
def test_caffe2_op_forward_and_gradient(accelerator, shape, axis, exclusive, reverse, torch_scan, monkeypatch):
    """The op and its gradient op, against torch.autograd (float32 data, no NaN: gradients of NaN differ); the
    paths run are the routes' of the forward and of the gradient (a reverse scan)."""
    rng = np.random.RandomState(6)
    x = rng.standard_normal(shape).astype(np.float32)
    grad_y = rng.standard_normal(shape).astype(np.float32)
    taken = record_paths(monkeypatch)
    y, grad_x = run_op(x, grad_y, axis, exclusive, reverse)
    assert taken == [scan_route("cumsum", shape, np.float32, axis, exclusive, r).path for r in (reverse, not reverse)]
    tx = torch.from_numpy(x).requires_grad_()
    shifted = tx.flip(axis) if reverse else tx
    expected = torch.cumsum(shifted, axis)
    if exclusive:
        expected = torch.cat([torch.zeros_like(expected.narrow(axis, 0, 1)),
                              expected.narrow(axis, 0, shape[axis] - 1)], axis)
    if reverse:
        expected = expected.flip(axis)
    if has("torch autograd reversed cumsum by flips"):
        (expected_grad,) = torch.autograd.grad(expected, tx, torch.from_numpy(grad_y))
    else:  # before torch 1.10 autograd's reversed cumsum cancels (`torch_versions`): torch's scan the other way
        expected_grad = torch_scan(torch.from_numpy(grad_y), axis, exclusive, not reverse)
    assert_same(y, expected.detach().numpy())
    assert_same(grad_x, expected_grad.numpy())


@pytest.mark.parametrize("scan", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("shape, axis", [((5000,), 0), ((2, 3000), 1), ((600, 50), 0), ((4, 600, 2), 1),
                                         ((700, 5), 0)])
def test_ops_make_their_routes_one_call(accelerator, clean_workspace, torch_scan, scan, dtype, shape, axis,
                                        monkeypatch):
    """The ops' one call (`Route.call`, where the route is one call): the accelerator's loop where the route takes
    it, torch's scan otherwise (small cumsums: the numpy path); in the Caffe2 op, with both outputs of cummax / cummin, torch's bits either way, on the first
    run and on the remembered call."""
    rng = np.random.RandomState(9)
    x = rng.randint(-3, 4, size=shape) if dtype == np.int64 else rng.uniform(0.9, 1.1, shape)
    x = x.astype(dtype)
    if dtype != np.int64:
        x.reshape(-1)[::7] = 1.0  # ties: the later index
        x.reshape(-1)[::97] = np.nan
    entry = registered_scan(scan)
    found = scan_route(scan, shape, dtype, axis)
    assert (found.call is not None) is found.direct
    taken = record_paths(monkeypatch)
    workspace.FeedBlob("direct_x", x)
    net = core.Net("family_direct")
    outputs = ["direct_v", "direct_i"] if len(entry.outputs) > 1 else ["direct_v"]
    getattr(net, entry.op_name)("direct_x", outputs, axis=axis)
    workspace.CreateNet(net)
    expected = torch_scan(torch.from_numpy(x), axis, scan=scan)
    for _ in range(2):  # the second run takes the call the first one remembered
        workspace.RunNet(net.Proto().name)
        for name, want in zip(outputs, expected if len(outputs) > 1 else [expected]):
            assert_same(workspace.FetchBlob(name), want.numpy())
    recorded = scan == "cumsum" or found.path == "compiled"  # the family's torch calls are not recorded
    assert taken == ([found.path] * 2 if recorded else [])


def test_the_op_remembers_direct_calls_per_shape_and_dtype(monkeypatch):
    """After its first run with a shape and dtype, the op's forward is one torch.cumsum between tensors wrapping
    the blobs (the accelerator off: with it, two rows take its chains); new values, dtypes (checked again: int32
    sums into int64) and shapes stay torch's."""
    monkeypatch.setenv(compiled.SWITCH, "0")
    calls = []
    monkeypatch.setattr(engine, "torch_scan", lambda src, dst, axis: calls.append(axis) or torch.cumsum(
        src, axis, out=dst))
    workspace.ResetWorkspace()
    net = core.Net("compiled_kernels_direct")
    net.PyCumSum("ck_x", "ck_y", axis=-1)
    workspace.FeedBlob("ck_x", np.zeros((2, 40000), np.float32))
    workspace.CreateNet(net)
    for seed, dtype, shape in [(1, np.float32, (2, 40000)), (2, np.float32, (2, 40000)), (3, np.float64, (2, 40000)),
                               (4, np.int32, (2, 40000)), (5, np.float32, (70000,)), (6, np.float32, (2, 40000))]:
        x = values(shape, dtype, seed)
        workspace.FeedBlob("ck_x", x)
        workspace.RunNet(net.Proto().name)
        expected = torch.cumsum(torch.from_numpy(x), -1).numpy()
        assert_same(workspace.FetchBlob("ck_y"), expected)
    assert calls == [1, 1, 1, 0, 1]  # int32 is no direct call; axis -1 normalised


@pytest.mark.parametrize("scan", ["cumsum", "cumprod", "cummax", "logcumsumexp"])
def test_the_op_keeps_the_route_of_each_shape(clean_workspace, torch_scan, scan, monkeypatch):
    """A repeated run on a shape the op has met makes no route (it finds the one kept in `routes`): a route is made on
    the first run of each shape and dtype only, and every run still equals torch, small shapes (not one call) and new
    dtypes included."""
    monkeypatch.setenv(compiled.SWITCH, "0")
    kernel = registered_scan(scan)
    net = core.Net("kept_routes")
    outputs = ["kept_v", "kept_i"][:len(kernel.outputs)]
    getattr(net, kernel.op_name)("kept_x", outputs, axis=0, reverse=True)
    workspace.FeedBlob("kept_x", np.zeros((3, 2), np.float32))
    workspace.CreateNet(net)
    made = []  # per run: whether a route was made
    for seed, shape, dtype in [(1, (3, 2), np.float32), (2, (3, 2), np.float32), (3, (5,), np.float32),
                               (4, (3, 2), np.float64), (5, (5,), np.float32), (6, (3, 2), np.float32)]:
        x = values(shape, dtype, seed)
        workspace.FeedBlob("kept_x", x)
        before = routes.cache_info().misses
        workspace.RunNet(net.Proto().name)
        made.append(routes.cache_info().misses > before)
        expected = torch_scan(torch.from_numpy(x), 0, reverse=True, scan=scan)
        for name, want in zip(outputs, expected if len(outputs) > 1 else [expected]):
            assert_same(workspace.FetchBlob(name), want.numpy())
    assert made == [True, False, True, True, False, False]


@NEEDS_NUMBA
def test_turning_the_accelerator_off_takes_effect_at_once(clean_workspace, monkeypatch):
    """A route through the accelerator is not kept: an op that ran it turns to torch's paths on its next run once
    the switch says off."""
    monkeypatch.setenv(compiled.SWITCH, "1")
    shape = (tuning.SMALL_SIZE // tuning.COMPILED_NARROW, tuning.COMPILED_NARROW)
    assert scan_route("cumsum", shape, np.float32, 0, reverse=True).path == "compiled"
    taken = record_paths(monkeypatch)
    net = core.Net("switched_off")
    net.PyCumSum("switch_x", "switch_y", axis=0, reverse=True)
    x = values(shape, np.float32)
    workspace.FeedBlob("switch_x", x)
    workspace.CreateNet(net)
    expected = torch.flip(torch.cumsum(torch.flip(torch.from_numpy(x), [0]), 0), [0]).numpy()
    for setting in ("1", "0"):
        monkeypatch.setenv(compiled.SWITCH, setting)
        workspace.RunNet(net.Proto().name)
        np.testing.assert_allclose(workspace.FetchBlob("switch_y"), expected, rtol=1e-5, atol=1e-30)
    assert taken[0] == "compiled" and taken[1:] and "compiled" not in taken[1:]


@NEEDS_NUMBA
@pytest.mark.parametrize("maximum", [True, False])
def test_the_accelerated_extremum_does_not_depend_on_torchs_cummax(maximum, torch_scan, monkeypatch):
    """Before torch 1.5 there is no torch.cummax and the scans use their numpy forms: the accelerator's loop must
    still compute the maximum (minimum) it was asked for."""
    from pycumsum_op.kernels import cummax as extremum

    monkeypatch.setenv(compiled.SWITCH, "1")
    monkeypatch.setattr(extremum, "TORCH_CUMMAX", functools.partial(extremum.sequential_extremum, True))
    monkeypatch.setattr(extremum, "TORCH_CUMMIN", functools.partial(extremum.sequential_extremum, False))
    scan = "cummax" if maximum else "cummin"
    x = values((tuning.SMALL_SIZE // tuning.COMPILED_EXTREMUM_MIN_WIDTH, tuning.COMPILED_EXTREMUM_MIN_WIDTH),
               np.float32, seed=3)
    spec = ScanSpec("PyCumMax" if maximum else "PyCumMin", 0)
    kernel = registered_scan(scan)
    assert scan_route(scan, x.shape, x.dtype, 0).path == "compiled"
    taken = record_paths(monkeypatch)
    found_values, found_indices = kernel.forward(x, spec)
    want_values, want_indices = torch_scan(torch.from_numpy(x), 0, scan=scan)
    assert taken == ["compiled"]
    assert_same(found_values, want_values.numpy())
    assert_same(found_indices, want_indices.numpy())


# --- switching it on and off, the cache, a broken numba

def python(code, env):
    child = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, env=env, timeout=300)
    assert child.returncode == 0, child.stderr
    return child.stdout


@NEEDS_NUMBA
def test_import_does_not_load_numba_and_the_cache_is_the_users(tmp_path):
    """``import pycumsum_op`` leaves numba alone; the first compiled scan imports it and caches its machine
    code in PYCUMSUM_OP_CACHE_DIR, which a second process reads (nothing is written beside the package)."""
    env = dict(os.environ, PYCUMSUM_OP_CACHE_DIR=str(tmp_path / "cache"))
    env.pop(compiled.SWITCH, None)
    code = ("import sys, numpy as np, pycumsum_op\n"
            "from pycumsum_op.kernels import ScanSpec, cumsum_forward\n"
            "print('numba' in sys.modules)\n"
            "x = np.arange(200000, dtype=np.float32).reshape(1000, 200) / 7\n"
            "print(float(cumsum_forward(x, ScanSpec('PyCumSum', 0))[-1, -1]), 'numba' in sys.modules)\n")
    expected = "False\n{} True\n".format(float(torch.cumsum(torch.arange(200000, dtype=torch.float32)
                                                           .reshape(1000, 200) / 7, 0)[-1, -1]))
    assert python(code, env) == expected
    assert any(name.endswith(".nbi") for root, _, names in os.walk(str(tmp_path / "cache")) for name in names)
    assert python(code, env) == expected  # from the cache
    package = os.path.dirname(compiled.__file__)
    assert not [name for name in os.listdir(package) if name.endswith((".nbi", ".nbc"))]


@NEEDS_NUMBA
def test_an_unwritable_cache_compiles_in_memory(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    env = dict(os.environ, PYCUMSUM_OP_CACHE_DIR=str(blocker / "cache"))
    env.pop(compiled.SWITCH, None)
    code = ("import numpy as np\n"
            "from pycumsum_op.kernels import ScanSpec, cumsum_forward\n"
            "from pycumsum_op.kernels.cumsum import DTYPES, KERNEL\n"
            "from pycumsum_op.kernels.route import route\n"
            "x, spec = np.ones((1000, 200), np.float32), ScanSpec('PyCumSum', 0)\n"
            "print(route(KERNEL, DTYPES, spec, x.shape, x.dtype).path, cumsum_forward(x, spec)[-1, 0])\n")
    assert python(code, env) == "compiled 1000.0\n"


@pytest.mark.parametrize("setting", ["0", "off", "False", " no "])
def test_the_switch_turns_the_accelerator_off(monkeypatch, setting):
    monkeypatch.setenv(compiled.SWITCH, setting)
    assert not compiled.enabled()
    assert compiled.status() == "off: turned off by {}={}".format(compiled.SWITCH, setting)
    assert scan_route("cumsum", (1000, 200), np.float32, 0).path != "compiled"


def test_a_broken_numba_counts_as_none(tmp_path):
    """A numba that fails to import (here: one raising as numba does for a numpy it was not built for) turns
    the accelerator off, and its status quotes the error; the scans still run, by the other paths."""
    (tmp_path / "numba").mkdir()
    (tmp_path / "numba" / "__init__.py").write_text("raise ImportError('Numba needs NumPy 1.22 or less')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    env.pop(compiled.SWITCH, None)
    code = ("import numpy as np\n"
            "from pycumsum_op.kernels import ScanSpec, compiled, cumsum_forward\n"
            "from pycumsum_op.kernels.cumsum import DTYPES, KERNEL\n"
            "from pycumsum_op.kernels.route import route\n"
            "x, spec = np.ones((2000, 200), np.float32), ScanSpec('PyCumSum', 0)\n"
            "print(compiled.enabled(), route(KERNEL, DTYPES, spec, x.shape, x.dtype).path,\n"
            "      cumsum_forward(x, spec)[-1, 0])\n"
            "print(compiled.status())\n")
    assert python(code, env) == ("False lanes 2000.0\n"
                                 "off: numba failed to import: ImportError: Numba needs NumPy 1.22 or less\n")
