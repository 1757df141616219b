"""The accelerator (pycumsum_op/kernels/compiled.py, the ``fast`` extra) against torch, and without it.

Every compiled scan must EQUAL torch's result (NaN where torch has NaN: IEEE 754 leaves the sign of a
NaN made from two NaNs open, and the compiled adds may take either), on data over 40 decades, with
NaN and infinities, and on int64 sums that wrap around. Each case also runs with the accelerator
turned off by its environment variable, which must give the same values by another path. Speed is
`make bench`'s job; nothing here is timed.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from pycumsum_op.kernels import ScanSpec, compiled, cumsum_forward, engine, tuning
from pycumsum_op.kernels import cummax as cummax_kernels
from pycumsum_op.scans import scan as registered_scan
from pycumsum_op.torch_versions import has
from engine_support import NEEDS_NUMBA

FLAGS = [(False, False), (True, False), (False, True), (True, True)]  # (exclusive, reverse)
#: where the forward takes the accelerator (elsewhere it stays torch's call): 16-lane rows, wide ones (blocks of
#: lanes), two blocks, short lanes, rows of 4-13 lanes (four lanes' chains; 13 lanes of float64 and int64 are
#: tuning.COMPILED_NARROW_BYTES or more, which take the row loops)
SHAPES = [((600, 50), 0), ((300, 32), 0), ((2, 700, 16), 1), ((600, 200), 0), ((3, 600, 40), 1),
          ((2, 520, 2, 8), 1), ((520, 1100), 0), ((2, 1100, 5), 1), ((1200, 4), 0), ((2, 3000), 0),
          ((300, 40, 8), 1), ((300, 40, 13), 1)]


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


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape, axis", SHAPES)
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
@pytest.mark.parametrize("in_place", [False, True])
def test_cumsum_off_the_last_axis_is_torchs(accelerator, shape, axis, dtype, exclusive, reverse, in_place):
    x = values(shape, dtype)
    target = x.copy() if in_place else np.empty_like(x)
    path = engine.choose_path(x if not in_place else target, target, axis, exclusive, reverse)[0]
    assert (path == "compiled") is accelerator
    actual = cumsum_forward(target if in_place else x, ScanSpec("PyCumSum", axis, exclusive, reverse), out=target)
    assert_same(actual, oracle(x, axis, exclusive, reverse))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("operation, scan, identity", [(compiled.SUM, torch.cumsum, 0),
                                                       (compiled.PRODUCT, torch.cumprod, 1)])
@NEEDS_NUMBA
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("inner", [1, 2, 3, 4, 5, 7, 15])
@pytest.mark.parametrize("outer", [1, 2, 5])
@pytest.mark.parametrize("contiguous", [True, False])
def test_narrow_rows(dtype, operation, scan, identity, exclusive, reverse, in_place, inner, outer, contiguous,
                     monkeypatch):
    """Narrow rows straight through the kernels: the chains (C-contiguous: lanes in fours, a last group of two lanes
    as a pair, of 1 or 3 repeating its last lane, groups across outer slices) and the row loops (views with gaps;
    15 lanes of float64 and int64 are tuning.COMPILED_NARROW_BYTES or more), in blocks of 3 lanes."""
    monkeypatch.setattr(tuning, "COMPILED_BLOCK", 3)
    x = values((outer, 301, inner if contiguous else 2 * inner), dtype, seed=2)
    if operation == compiled.PRODUCT:
        x = np.where(np.isfinite(x), np.sign(x), x) if np.dtype(dtype).kind == "f" else x % 3 - 1
    target = x.copy() if in_place else np.empty_like(x)
    source = target if in_place else x
    if not contiguous:
        source, target, x = source[:, :, ::2], target[:, :, ::2], x[:, :, ::2]
    compiled.scan_rows(source, target, operation, exclusive, reverse)
    expected = oracle(x, 1, exclusive, reverse, scan, identity)
    assert_same(target, expected.astype(x.dtype) if dtype == np.int32 else expected)


@NEEDS_NUMBA
def test_float32_sums_are_taken_in_float64():
    """torch 1.10's CPU cumsum adds float32 in float64 and rounds each element once; so do the kernels (a
    float32 accumulator would give 1e8 + 1 + ... = 1e8 here)."""
    x = np.array([[1e8] * 3] + [[1.0] * 3] * 99, np.float32)
    y = np.empty_like(x)
    compiled.scan_rows(x[None], y[None], compiled.SUM, False, False)
    assert_same(y, torch.cumsum(torch.from_numpy(x), 0).numpy())
    assert y[-1, 0] == np.float32(1e8 + 99)


@pytest.mark.parametrize("shape, axis, dtype", [((70000,), 0, np.float32),
                                                ((300, 1023), 1, np.float32), ((64, 1100), 1, np.int64),
                                                ((4, 8192), 1, np.float64), ((1, 5000, 1), 1, np.float32)])
def test_one_chain_stays_with_torch(accelerator, shape, axis, dtype):
    """1-D (one add chain either way, also with dimensions of 1 around it), lanes shorter than
    tuning.COMPILED_CHAINS_MIN_BYTES, integer sums (a 1-cycle add) and lanes 64 KiB apart:
    torch's own call is the cheaper one, with the accelerator or without (measured in benchmarks/)."""
    x = values(shape, dtype)
    assert engine.choose_path(x, np.empty_like(x), axis, False, False)[0] == "torch"
    assert engine.direct(shape, np.dtype(dtype), axis) is engine.torch_scan


@pytest.mark.parametrize("shape, axis, dtype", [((70000,), 0, np.float32), ((1, 5000, 1), 1, np.float64),
                                                ((4099,), 0, np.int64), ((1, 20011), 1, np.int32)])
@pytest.mark.parametrize("in_place", [False, True])
def test_one_lane_reversed_is_one_chain(accelerator, shape, axis, dtype, in_place):
    """A single lane reversed (a 1-D scan's gradient) or shifted and reversed: one chain with the accelerator
    (torch has no reverse scan; the blocked path copies through its buffer both ways), the blocked path without;
    torch's bits, in place too."""
    x = values(shape, dtype)
    for exclusive in (False, True):
        target = x.copy() if in_place else np.empty_like(x)
        source = target if in_place else x
        assert (engine.choose_path(source, target, axis, exclusive, True)[0] == "compiled") is accelerator
        actual = cumsum_forward(source, ScanSpec("PyCumSum", axis, exclusive, True), out=target)
        assert actual is target
        assert_same(actual, oracle(x, axis, exclusive, True).astype(dtype))  # torch sums int32 into int64


@pytest.mark.parametrize("shape, axis", [((3, 3000), 1), ((64, 1100), 1), ((4, 600, 2), 1), ((3000, 3), 0),
                                         ((5000, 2), 0), ((2, 3000), 1), ((6, 1100), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_of_one_to_three_lanes_take_the_chains(accelerator, shape, axis, dtype):
    """The last axis with two rows or more, and rows of 2-3 lanes, of floats: four chains at once (two lanes,
    and the last two of six, as a pair) with the accelerator (the op's direct call too), torch's call without;
    reversed (the gradient) the chains as well, the blocked path without; torch's bits every way."""
    x = values(shape, dtype)
    found = engine.direct(x.shape, x.dtype, axis)
    assert (getattr(found, "func", None) is engine.compiled_scan) is accelerator
    assert (found is engine.torch_scan) is not accelerator
    assert (engine.choose_path(x, np.empty_like(x), axis, False, True)[0] == "compiled") is accelerator
    out = np.empty_like(x)
    found(torch.from_numpy(x), torch.from_numpy(out), axis)
    assert_same(out, oracle(x, axis, False, False))
    for exclusive, reverse in FLAGS:
        actual = cumsum_forward(x, ScanSpec("PyCumSum", axis, exclusive, reverse))
        assert_same(actual, oracle(x, axis, exclusive, reverse))


@pytest.mark.parametrize("shape, axis, dtype", [((1000, 7, 5), 1, np.float32), ((1000, 7, 12), 1, np.int32),
                                                ((2000, 3, 7), 1, np.float64), ((600, 12, 9), 1, np.float32),
                                                ((1000, 10, 8), 1, np.float64), ((200, 30, 3), 1, np.float32),
                                                ((3000, 2, 2), 1, np.float32)])
def test_short_lanes_and_narrow_rows_stay_torchs(accelerator, shape, axis, dtype):
    """Rows narrower than a cache line with lanes shorter than tuning.COMPILED_CHAINS_MIN_LENGTH (4 lanes or more)
    or tuning.COMPILED_CHAINS_MIN_BYTES (1-3 lanes): torch's strided loop is as fast there (measured), so the
    forward is its call with the accelerator or without;
    reversed, they take the accelerator's loop (torch has no reverse scan)."""
    x = values(shape, dtype)
    assert engine.direct(x.shape, x.dtype, axis) is engine.torch_scan
    assert engine.choose_path(x, np.empty_like(x), axis, False, False)[0] == "torch"
    assert (engine.choose_path(x, np.empty_like(x), axis, False, True)[0] == "compiled") is accelerator


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_rows_of_a_line_take_the_accelerator_where_torch_would_run(accelerator, dtype):
    """Rows of a cache line or more, lanes of any length: the compiled loop even where torch's lanes stay in
    cache, and the op's direct call is that loop; torch's bits either way."""
    x = values((2, 3000), dtype)
    found = engine.direct(x.shape, x.dtype, 0)
    assert (getattr(found, "func", None) is engine.compiled_scan) is accelerator
    assert (found is engine.torch_scan) is not accelerator
    assert engine.choose_path(x, np.empty_like(x), 0, False, False)[0] == ("compiled" if accelerator else "torch")
    out = np.empty_like(x)
    found(torch.from_numpy(x), torch.from_numpy(out), 0)
    assert_same(out, oracle(x, 0, False, False))
    assert_same(cumsum_forward(x, ScanSpec("PyCumSum", 0)), oracle(x, 0, False, False))


def test_direct_is_the_engines_own_path(accelerator):
    """`engine.direct` (the op's shortcut) claims exactly the shapes the engine scans by one torch call or one
    compiled loop; random shapes around the thresholds."""
    rng = np.random.RandomState(14)
    for _ in range(300):
        rank = rng.randint(1, 5)
        shape = tuple(int(np.exp(rng.uniform(0, np.log(1 << 21) / rank))) for _ in range(rank))
        axis, dtype = int(rng.randint(rank)), np.dtype([np.float32, np.float64, np.int64][rng.randint(3)])
        found = engine.direct(shape, dtype, axis)
        path = engine.choose_path(np.empty(shape, dtype), np.empty(shape, dtype), axis, False, False)[0]
        if found is None:
            assert path not in ("torch", "compiled"), (shape, axis, dtype)
        else:
            name = "torch" if found is engine.torch_scan else found.func is engine.compiled_scan and "compiled"
            assert name == path, (shape, axis, dtype)


@NEEDS_NUMBA
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("maximum", [True, False])
@pytest.mark.parametrize("block", [1024, 3])
@pytest.mark.parametrize("inner", [1, 2, 4, 7, 12])
@pytest.mark.parametrize("contiguous", [True, False])
def test_extremum_rows_are_torchs_cummax_and_cummin(dtype, maximum, block, inner, contiguous, monkeypatch):
    """Rows narrower than tuning.COMPILED_EXTREMUM_CHAINS_WIDTH four lanes at a time (C-contiguous; the last group
    of 41 lanes or fewer repeats its last lane), wider ones (and views with gaps) whole, and cut into blocks of 3
    lanes (tuning.COMPILED_BLOCK)."""
    monkeypatch.setattr(tuning, "COMPILED_BLOCK", block)
    x = values((41, 30, inner if contiguous else 2 * inner), dtype, seed=4)
    if dtype != np.int64:
        x[::3, ::4] = 1.5  # ties: torch keeps the later index
    if not contiguous:
        x = x[:, :, ::2]
    values_out, indices = np.empty_like(x), np.empty(x.shape, np.int64)
    compiled.extremum_rows(x, values_out, indices, maximum)
    expected_values, expected_indices = (torch.cummax if maximum else torch.cummin)(torch.from_numpy(x), 1)
    assert_same(values_out, expected_values.numpy())
    assert_same(indices, expected_indices.numpy())


@NEEDS_NUMBA
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
@pytest.mark.parametrize("block", [1024, 7])
def test_products_are_torchs_cumprod(dtype, exclusive, reverse, block, monkeypatch):
    monkeypatch.setattr(tuning, "COMPILED_BLOCK", block)
    rng = np.random.RandomState(5)
    x = rng.uniform(0.5, 1.5, (300, 20)).astype(dtype) if dtype != np.int64 else rng.randint(-3, 4, (300, 20))
    y = np.empty_like(x)
    compiled.scan_rows(x[None], y[None], compiled.PRODUCT, exclusive, reverse)
    assert_same(y, oracle(x, 0, exclusive, reverse, torch.cumprod, 1))


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
def test_caffe2_op_forward_and_gradient(accelerator, shape, axis, exclusive, reverse, torch_scan):
    """The op and its gradient op, against torch.autograd (float32 data, no NaN: gradients of NaN differ)."""
    rng = np.random.RandomState(6)
    x = rng.standard_normal(shape).astype(np.float32)
    grad_y = rng.standard_normal(shape).astype(np.float32)
    y, grad_x = run_op(x, grad_y, axis, exclusive, reverse)
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
    cached = sorted(os.listdir(str(tmp_path / "cache")))
    assert cached and any(name.endswith(".nbi") for root, _, names in os.walk(str(tmp_path / "cache"))
                          for name in names)
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
            "from pycumsum_op.kernels import engine, ScanSpec, cumsum_forward\n"
            "x = np.ones((1000, 200), np.float32)\n"
            "print(engine.choose_path(x, x.copy(), 0, False, False)[0], cumsum_forward(x, ScanSpec('PyCumSum', 0))[-1, 0])\n")
    assert python(code, env) == "compiled 1000.0\n"


@pytest.mark.parametrize("setting", ["0", "off", "False", " no "])
def test_the_switch_turns_the_accelerator_off(monkeypatch, setting):
    monkeypatch.setenv(compiled.SWITCH, setting)
    assert not compiled.enabled()
    x = np.ones((1000, 200), np.float32)
    assert engine.choose_path(x, x.copy(), 0, False, False)[0] != "compiled"


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


#: (scan, exclusive, reverse): cummax and cummin take no exclusive argument
FAMILY_FLAGS = [("cumprod", exclusive, reverse) for exclusive, reverse in FLAGS] + [
    (scan, False, reverse) for scan in ("cummax", "cummin") for reverse in (False, True)]


@pytest.mark.parametrize("scan, exclusive, reverse", FAMILY_FLAGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape, axis", [((600, 50), 0), ((3, 600, 40), 1)])
def test_family_off_the_last_axis_is_torchs(accelerator, torch_scan, scan, dtype, shape, axis, exclusive, reverse):
    """cumprod (float64 / int64 products), cummax and cummin (ties: the later index) through their kernels,
    with the accelerator's row loops and without."""
    kernel = registered_scan(scan)
    rng = np.random.RandomState(8)
    if dtype == np.int64:
        x = rng.randint(-3, 4, size=shape).astype(np.int64)  # products wrap around
    else:
        x = rng.uniform(0.9, 1.1, size=shape).astype(dtype)
        x.reshape(-1)[rng.randint(x.size, size=20)] = np.nan
        x.reshape(-1)[rng.randint(x.size, size=20)] = 1.0  # ties
    spec = ScanSpec(kernel.op_name, axis, exclusive, reverse) if exclusive else ScanSpec(kernel.op_name, axis,
                                                                                          reverse=reverse)
    plan = kernel.plan(spec, x)
    loop = "product" if scan == "cumprod" else "extremum"
    assert (engine.compiled_views(loop, axis, x, np.empty(shape, plan.result_dtype)) is not None) is accelerator
    actual = kernel.forward(x, spec, None, plan)
    expected = torch_scan(torch.from_numpy(x), axis, exclusive, reverse, None, scan)
    for got, want in zip(actual, expected) if isinstance(actual, tuple) else [(actual, expected)]:
        assert_same(got, want.numpy())


@pytest.mark.parametrize("scan, loop", [("cumprod", "product"), ("cummax", "extremum"), ("cummin", "extremum")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("shape, axis", [((5000,), 0), ((3, 2000), 1), ((2, 3000), 1), ((600, 50), 0),
                                         ((4, 600, 2), 1), ((700, 5), 0), ((300, 30), 0)])
def test_family_ops_make_one_call(accelerator, clean_workspace, torch_scan, scan, loop, dtype, shape, axis):
    """PyCumProd's, PyCumMax's and PyCumMin's direct calls (`Scan.direct`): the accelerator's loop where
    `engine.compiled_views` takes the scan (the op's own path), torch's scan otherwise; in the Caffe2 op, with
    both outputs of cummax / cummin, torch's bits either way, on the first run and on the remembered call."""
    rng = np.random.RandomState(9)
    x = rng.randint(-3, 4, size=shape) if dtype == np.int64 else rng.uniform(0.9, 1.1, shape)
    x = x.astype(dtype)
    if dtype != np.int64:
        x.reshape(-1)[::7] = 1.0  # ties: the later index
        x.reshape(-1)[::97] = np.nan
    kernel = registered_scan(scan)
    spec = ScanSpec(kernel.op_name, axis)
    found = kernel.direct(spec, kernel.plan(spec, x), x)
    compiled_path = engine.compiled_views(loop, axis, x, np.empty_like(x)) is not None
    assert (getattr(found, "func", None) in (engine.compiled_scan, cummax_kernels._compiled_extremum)) is compiled_path
    workspace.FeedBlob("direct_x", x)
    net = core.Net("family_direct")
    outputs = ["direct_v", "direct_i"] if loop == "extremum" else ["direct_v"]
    getattr(net, kernel.op_name)("direct_x", outputs, axis=axis)
    workspace.CreateNet(net)
    expected = torch_scan(torch.from_numpy(x), axis, scan=scan)
    for _ in range(2):  # the second run takes the call the first one remembered
        workspace.RunNet(net.Proto().name)
        for name, want in zip(outputs, expected if loop == "extremum" else [expected]):
            assert_same(workspace.FetchBlob(name), want.numpy())


def test_a_broken_numba_counts_as_none(tmp_path):
    """A numba that fails to import (here: one raising as numba does for a numpy it was not built for) turns
    the accelerator off; the scans still run, by the other paths."""
    (tmp_path / "numba").mkdir()
    (tmp_path / "numba" / "__init__.py").write_text("raise ImportError('Numba needs NumPy 1.22 or less')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    env.pop(compiled.SWITCH, None)
    code = ("import numpy as np\n"
            "from pycumsum_op.kernels import ScanSpec, compiled, cumsum_forward, engine\n"
            "x = np.ones((2000, 200), np.float32)\n"
            "print(compiled.enabled(), engine.choose_path(x, x.copy(), 0, False, False)[0],\n"
            "      cumsum_forward(x, ScanSpec('PyCumSum', 0))[-1, 0])\n")
    assert python(code, env) == "False lanes 2000.0\n"


@pytest.mark.parametrize("loop, shape, taken", [
    ("extremum", (2000, 3), False), ("extremum", (2000, 4), True), ("extremum", (2000, 8), True),
    ("extremum", (3, 2000), True), ("product", (2000, 8), True), ("product", (2000, 15), True),
    ("product", (2, 3000), True), ("product", (2000, 3), True), ("product", (3000, 2), True),
    ("product", (5000, 1), False)])
def test_family_takes_the_accelerator_where_it_wins(accelerator, loop, shape, taken):
    """cummax / cummin from rows of tuning.COMPILED_EXTREMUM_MIN_WIDTH lanes; cumprod as sums: rows of
    tuning.COMPILED_NARROW lanes, narrower rows of 4 lanes or more with lanes of tuning.COMPILED_CHAINS_MIN_LENGTH,
    rows of 1-3 lanes (two lanes or more, of tuning.COMPILED_CHAINS_MIN_BYTES; measured in benchmarks/RESULTS.md)."""
    x = np.ones(shape, np.float32)
    assert (engine.compiled_views(loop, 0, x, np.empty_like(x)) is not None) is (taken and accelerator)
