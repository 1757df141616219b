"""Every scan path of the engine (pycumsum_op.kernels.engine) against torch, bit for bit.

Each path adds a lane's elements in order in float64 (int64 for integers) and rounds once,
as torch.cumsum does on CPU, so float32/float64/int32/int64 results must EQUAL torch's, and
float16 results must equal the float64 reference rounded to float16. Cases are chosen so that
the route (`pycumsum_op.kernels.route.route`) names the path under test (asserted), with the engine's size thresholds lowered
(``tiny_blocks``) so that small arrays still cross block, tile and thread boundaries. The same
paths are then driven through real Caffe2 nets (forward and gradient), with the paths taken
recorded. Timing is never tested here: speed is `make bench`'s job.
"""
import tracemalloc

import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)
from pycumsum_op.kernels import ScanSpec, compiled, cumsum_backward, cumsum_forward, engine, tuning
from pycumsum_op.kernels.route import APART, SAME, routes
from pycumsum_op.torch_versions import has
from engine_support import scan_route

FLAGS = [(False, False), (True, False), (False, True), (True, True)]  # (exclusive, reverse)


@pytest.fixture(autouse=True)
def without_accelerator(monkeypatch):
    """The paths without the ``fast`` extra (tests/test_compiled_kernels.py runs the compiled one)."""
    monkeypatch.setenv(compiled.SWITCH, "0")


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Engine thresholds scaled down: 24-element buffers, rows from 12 lanes (4 with a 32-byte aliased stride),
    a cache of 4 sets of 2 16-byte lines (so torch's strided loop keeps lanes of up to 8 rows of 16 bytes or
    more, fewer with aliased strides, 64 bytes of narrower rows)."""
    for name, value in [("SMALL_SIZE", 0), ("BUFFER_ELEMENTS", 24), ("ROWS_MIN_WIDTH", 12),
                        ("ROWS_MIN_ALIASED_WIDTH", 4), ("ALIASED_STRIDE", 32), ("ROWS_MIN_BLOCK", 2),
                        ("CACHE_LINE", 16), ("CACHE_SETS", 4), ("CACHE_WAYS", 2), ("STREAM_CACHE_BYTES", 64)]:
        monkeypatch.setattr(tuning, name, value)


@pytest.fixture
def paths_taken(monkeypatch):
    """The names of the engine paths run during the test, in order (the Caffe2 op's direct call counts as
    "torch")."""
    taken = []

    def recording(name, path):
        def run(*args):
            taken.append(name)
            return path(*args)
        return run

    monkeypatch.setattr(engine, "_PATHS", {name: recording(name, path) for name, path in engine._PATHS.items()})
    monkeypatch.setattr(engine, "torch_scan", recording("torch", engine.torch_scan))  # the Caffe2 op's direct call
    routes.cache_clear()  # a kept route holds its one call (engine.torch_scan): made again, it holds the recorder
    return taken


def values(shape, dtype, seed=0):
    """Random data of ``dtype``; floats of mixed sign over 12 decades (float16: 4), so that float64
    sums round: a different order of additions would change float64 results (about half of them)."""
    rng = np.random.RandomState(seed)
    if np.dtype(dtype).kind in "iu":
        return np.asarray(rng.randint(-1000, 1000, size=shape)).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return np.asarray(rng.rand(*shape) < 0.5)
    decades = 2 if np.dtype(dtype) == np.float16 else 6
    return np.asarray(rng.standard_normal(shape) * 10.0 ** rng.randint(-decades, decades + 1, size=shape)
                      ).astype(dtype)


def oracle(x, axis, exclusive, reverse, dtype=None):
    """torch's scan (in float64 for float16 input, rounded back: torch sums float16 in float32)."""
    result_dtype = np.dtype(dtype) if dtype is not None else (
        np.dtype(np.int64) if x.dtype.kind in "biu" else x.dtype)
    t = torch.from_numpy(np.ascontiguousarray(x.astype(np.float64) if x.dtype == np.float16 else x))
    if t.dim() == 0:
        t = t.reshape(1)
    if reverse and t.dtype == torch.bool and not has("aten flip bool"):  # torch 1.4: no bool flip; widen exactly
        t = t.to(torch.int64)
    if reverse:
        t = t.flip(axis)
    t = torch.cumsum(t, axis, dtype=None if x.dtype == np.float16 else getattr(torch, result_dtype.name))
    if exclusive:
        t = torch.cat([torch.zeros_like(t.narrow(axis, 0, 1)), t.narrow(axis, 0, t.shape[axis] - 1)], axis)
    if reverse:
        t = t.flip(axis)
    return t.numpy().astype(result_dtype).reshape(x.shape)


def assert_equal(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


def run_kernel(x, axis, exclusive, reverse, in_place=False, dtype=None):
    """cumsum_forward of x, into a new array or (in_place) into x itself."""
    spec = ScanSpec("PyCumSum", axis, exclusive, reverse, None if dtype is None else np.dtype(dtype))
    if in_place:
        return cumsum_forward(x, spec, out=x)
    return cumsum_forward(x, spec)


# shape, axis, dtype (of input and result), the path the route must name forward, and reversed
# (under tiny_blocks)
KERNEL_CASES = [
    ((7, 50), 1, np.float32, "torch", "lanes"),      # last axis; reversed: float64 blocks
    ((1, 5, 3), 1, np.float32, "torch", "lanes"),    # one outer slice
    ((9, 6), 1, np.float32, "torch", "lanes"),       # reversed: whole lanes fit, float32 buffer
    ((3, 40), -1, np.float64, "torch", "lanes"),
    ((4, 5), -1, np.float64, "torch", "lanes"),
    ((6, 11), 1, np.int64, "torch", "lanes"),
    ((6, 11), 1, np.int32, "torch", "lanes"),        # dtype=int32: sums in int64, like torch
    ((5, 4, 3), 1, np.float32, "torch", "lanes"),    # rows of 12 bytes streamed: torch's strided loop
    ((3, 4, 5), 1, np.float64, "torch", "lanes"),    # rows of 40 bytes, lanes short enough for the cache
    ((3, 4, 13), 1, np.float32, "torch", "lanes"),   # wide rows, short lanes: still torch
    ((3, 20, 5), 1, np.float64, "lanes", "lanes"),   # rows of 40 bytes, long lanes: through the buffer
    ((40, 3), 0, np.float32, "lanes", "lanes"),      # narrow rows, lanes too long to stream from cache
    ((40, 3), 0, np.float64, "lanes", "lanes"),
    ((30, 16), 0, np.float32, "rows", "rows"),       # a non-last axis with wide rows
    ((2, 13, 3, 4), 1, np.int64, "rows", "rows"),
    ((3, 20, 4), 1, np.float64, "rows", "rows"),     # rows of 4 lanes, 32 bytes: an aliased stride
    ((9, 5, 8), 1, np.float32, "rows", "rows"),
    ((6, 50), 1, np.float16, "lanes", "lanes"),      # torch sums float16 in float32: not for us
]


@pytest.mark.parametrize("shape, axis, dtype, forward_path, reverse_path", KERNEL_CASES)
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
@pytest.mark.parametrize("in_place", [False, True])
def test_each_path_matches_torch(tiny_blocks, paths_taken, shape, axis, dtype, forward_path, reverse_path,
                                 exclusive, reverse, in_place):
    x = values(shape, dtype)
    # a shifted scan in place would make torch read what it wrote: the blocked path takes it
    path = reverse_path if reverse or (exclusive and in_place) else forward_path
    normalised = axis % len(shape)
    assert scan_route("cumsum", shape, dtype, axis, exclusive, reverse, result=dtype,
                      sharing=SAME if in_place else APART).path == path
    expected = oracle(x, normalised, exclusive, reverse, dtype=dtype)
    actual = run_kernel(x.copy() if in_place else x, axis, exclusive, reverse, in_place=in_place, dtype=dtype)
    assert paths_taken == [path]
    assert_equal(actual, expected)


def test_ragged_tiles_and_blocks(tiny_blocks, paths_taken):
    """Random shapes, axes and flags: tiles and blocks that do not divide the input evenly, on every path."""
    rng = np.random.RandomState(11)
    for _ in range(300):
        shape = tuple(rng.randint(1, 9, size=rng.randint(1, 5)))
        axis = int(rng.randint(len(shape)))
        exclusive, reverse, in_place = (bool(flag) for flag in rng.randint(2, size=3))
        x = values(shape, [np.float32, np.float64, np.int64][rng.randint(3)], seed=rng.randint(1 << 20))
        actual = run_kernel(x.copy() if in_place else x, axis, exclusive, reverse, in_place=in_place)
        assert_equal(actual, oracle(x, axis, exclusive, reverse))
    assert {"trivial", "torch", "lanes", "rows"} <= set(paths_taken)


@pytest.mark.parametrize("exclusive, reverse", FLAGS)
@pytest.mark.parametrize("shape, axis", [((5, 1, 3), 1), ((), 0), ((), -1), ((1,), 0), ((4, 1), -1)])
def test_trivial_path_length_one(paths_taken, shape, axis, exclusive, reverse):
    x = values(shape, np.float32)
    for in_place in (False, True):
        del paths_taken[:]
        actual = run_kernel(x.copy(), axis, exclusive, reverse, in_place=in_place)
        assert paths_taken == ["trivial"]
        assert_equal(actual, oracle(x, axis % max(x.ndim, 1), exclusive, reverse))


@pytest.mark.parametrize("shape, axis", [((0,), 0), ((0, 5), 0), ((0, 5), 1), ((5, 0), 1), ((3, 0, 2), 2)])
def test_empty_inputs_take_no_path(paths_taken, shape, axis):
    x = np.zeros(shape, np.float32)
    assert run_kernel(x, axis, True, True).shape == shape
    assert paths_taken == []


@pytest.mark.parametrize("exclusive, reverse", FLAGS)
@pytest.mark.parametrize("in_place", [False, True])
def test_numpy_path_small_inputs(paths_taken, exclusive, reverse, in_place):
    x = values((7, 9), np.float32)
    actual = run_kernel(x.copy() if in_place else x, 1, exclusive, reverse, in_place=in_place)
    assert paths_taken == ["numpy"]
    assert_equal(actual, oracle(x, 1, exclusive, reverse))


def _uncollapsible(base):
    """(6, 4, 10) whose first two axes cannot merge: no 3-D view around axis 0 or 2."""
    return base.reshape(4, 6, 10).transpose(1, 0, 2)


NON_CONTIGUOUS = {
    "strided": lambda base: base[:, ::2],       # positive strides, not contiguous
    "transposed": lambda base: base.T,          # Fortran order
    "flipped": lambda base: base[::-1, ::-1],   # negative strides: never handed to torch
    "uncollapsible": _uncollapsible,
}


@pytest.mark.parametrize("layout", sorted(NON_CONTIGUOUS))
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
def test_non_contiguous_inputs(tiny_blocks, paths_taken, layout, axis, exclusive, reverse):
    x = NON_CONTIGUOUS[layout](values((24, 10), np.float32))
    normalised = axis % x.ndim
    assert_equal(run_kernel(x, axis, exclusive, reverse), oracle(x, normalised, exclusive, reverse))
    if layout == "flipped":
        assert "torch" not in paths_taken
    if layout == "uncollapsible" and normalised != 1:
        assert paths_taken == ["numpy"]


@pytest.mark.parametrize("dtype, result", [(np.int32, np.int64), (np.bool_, np.int64), (np.float64, np.float32),
                                           (np.float32, np.float64), (np.int64, np.int32), (np.float32, np.float16)])
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
def test_dtype_changes_cast_first_then_sum(tiny_blocks, dtype, result, exclusive, reverse):
    """torch casts to the result dtype first (float64 -> float32 rounds each term), then sums."""
    x = values((6, 20), dtype)
    actual = run_kernel(x, 1, exclusive, reverse, dtype=result)
    if np.dtype(result) == np.float16:
        assert_equal(actual, oracle(x.astype(np.float16), 1, exclusive, reverse))
    else:
        assert_equal(actual, oracle(x, 1, exclusive, reverse, dtype=result))


@pytest.mark.parametrize("shape, axis, path", [((6, 50), 1, "lanes"), ((30, 16), 0, "rows"), ((40, 3), 0, "lanes"),
                                               ((7, 9), 1, "numpy"), ((3, 1), 1, "trivial")])
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
def test_backward_sums_in_float64_then_casts(tiny_blocks, paths_taken, shape, axis, path, exclusive, reverse,
                                            monkeypatch):
    """A float64 grad_y for a float32 x: summed in float64, rounded once to float32 (torch autograd)."""
    if path == "numpy":
        monkeypatch.setattr(tuning, "SMALL_SIZE", 1 << 12)
    grad_y = values(shape, np.float64, seed=1)
    x = np.zeros(shape, np.float32)
    actual = cumsum_backward(grad_y, x, ScanSpec("PyCumSum", axis, exclusive, reverse))
    assert paths_taken == [path]
    assert_equal(actual, oracle(grad_y, axis, exclusive, not reverse).astype(np.float32))


@pytest.mark.parametrize("exclusive, reverse", FLAGS)
def test_backward_in_place_on_grad_y(tiny_blocks, exclusive, reverse):
    grad_y = values((9, 40), np.float32, seed=2)
    expected = oracle(grad_y, 1, exclusive, not reverse)
    actual = cumsum_backward(grad_y, grad_y, ScanSpec("PyCumSum", 1, exclusive, reverse), out=grad_y)
    assert actual is grad_y
    assert_equal(actual, expected)


@pytest.mark.parametrize("shape, axis, reverse", [((4096, 512), 0, False), ((256, 8192), 1, True),
                                                   ((131072, 16), 0, True), ((1024, 2048), 1, False)])
def test_extra_memory_is_one_block_buffer(shape, axis, reverse):
    """numpy allocations during an 8 MB scan (tracemalloc sees them): block buffers and carries only."""
    x = values(shape, np.float32)
    out = np.empty_like(x)
    cumsum_forward(x, ScanSpec("PyCumSum", axis, False, reverse), out=out)  # warm up
    tracemalloc.start()
    cumsum_forward(x, ScanSpec("PyCumSum", axis, False, reverse), out=out)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    bound = tuning.BUFFER_ELEMENTS * 8 + 64 * 1024
    assert peak <= bound, (peak, bound, x.nbytes)


# --- accuracy: float32 relative error <= 1e-7 against float64 on 10^6-long rows and columns, per path
LENGTH = 10 ** 6


@pytest.mark.parametrize("shape, axis, reverse, path", [
    ((2, LENGTH), 1, False, "torch"), ((2, LENGTH), 1, True, "lanes"),
    ((LENGTH, 3), 0, False, "lanes"), ((LENGTH, 3), 0, True, "lanes"),
    ((LENGTH, 1), 0, True, "lanes"),
])
def test_float32_accuracy_on_long_scans(paths_taken, shape, axis, reverse, path):
    x = np.random.RandomState(3).uniform(0.5, 1.5, shape).astype(np.float32)
    actual = run_kernel(x, axis, False, reverse)
    assert paths_taken == [path]
    wide = np.flip(x, axis) if reverse else x
    reference = np.cumsum(wide.astype(np.float64), axis)
    reference = np.flip(reference, axis) if reverse else reference
    assert np.max(np.abs(actual - reference) / reference) <= 1e-7
    assert_equal(actual, oracle(x, axis, False, reverse))


def test_float32_accuracy_on_long_rows_path(monkeypatch, paths_taken):
    monkeypatch.setattr(tuning, "ROWS_MIN_WIDTH", 2)
    monkeypatch.setattr(tuning, "STREAM_CACHE_BYTES", 1024)
    x = np.random.RandomState(4).uniform(0.5, 1.5, (LENGTH, 2)).astype(np.float32)
    actual = run_kernel(x, 0, False, False)
    assert paths_taken == ["rows"]
    reference = np.cumsum(x.astype(np.float64), 0)
    assert np.max(np.abs(actual - reference) / reference) <= 1e-7
    assert_equal(actual, oracle(x, 0, False, False))


# --- the same paths through real Caffe2 nets (default thresholds), forward and gradient
OP_CASES = [  # shape, axis, reverse, forward path, backward path
    ((64, 128), 1, False, "torch", "lanes"),
    ((64, 128), 1, True, "lanes", "torch"),
    ((48, 512), 0, False, "rows", "rows"),
    ((48, 512), 0, True, "rows", "rows"),
    ((32768, 4), 0, False, "torch", "lanes"),
    ((64, 32, 8), 1, False, "torch", "lanes"),
    ((64, 32, 8), 1, True, "lanes", "torch"),
    ((16, 40, 256), 1, False, "rows", "rows"),       # 1 KiB between a lane's elements: aliased
    ((2, 1100, 520), 1, True, "rows", "rows"),
    ((9, 7), 0, True, "numpy", "numpy"),
    ((1, 1), 1, False, "trivial", "trivial"),
    ((3, 700000), 1, False, "torch", "lanes"),
    ((1, 100000, 6), 1, False, "torch", "lanes"),    # one outer slice of 6 lanes (24 bytes)
    ((2, 48, 16384), 1, False, "rows", "rows"),      # wide rows: numpy adds
    ((3000, 40), 0, False, "lanes", "lanes"),        # long lanes, rows of 160 bytes: torch would miss
]


def run_op(x, grad_y, in_place=False, **kwargs):
    """Forward and gradient of net.PyCumSum in a fresh workspace: (y, grad_x)."""
    workspace.ResetWorkspace()
    net = core.Net("kernel_paths")
    y = net.PyCumSum("kp_x", "kp_x" if in_place else "kp_y", **kwargs)
    net.AddExternalInput("kp_y_grad")
    net.AddGradientOperators({y: "kp_y_grad"})
    workspace.FeedBlob("kp_x", x)
    workspace.FeedBlob("kp_y_grad", grad_y)
    workspace.RunNetOnce(net)
    return workspace.FetchBlob(str(y)), workspace.FetchBlob("kp_x_grad")


@pytest.mark.parametrize("shape, axis, reverse, forward_path, backward_path", OP_CASES)
@pytest.mark.parametrize("exclusive", [False, True])
def test_caffe2_op_forward_and_gradient(paths_taken, shape, axis, reverse, forward_path, backward_path, exclusive):
    x, grad_y = values(shape, np.float32), values(shape, np.float32, seed=5)
    y, grad_x = run_op(x, grad_y, axis=axis, exclusive=exclusive, reverse=reverse)
    assert paths_taken == [forward_path, backward_path]
    assert_equal(y, oracle(x, axis, exclusive, reverse))
    assert_equal(grad_x, oracle(grad_y, axis, exclusive, not reverse))


@pytest.mark.parametrize("shape, axis, reverse, forward_path, backward_path", OP_CASES)
def test_caffe2_op_gradient_is_torch_autograds(shape, axis, reverse, forward_path, backward_path):
    x, grad_y = values(shape, np.float32), values(shape, np.float32, seed=7)
    _, grad_x = run_op(x, grad_y, axis=axis, reverse=reverse)
    if not has("torch autograd reversed cumsum by flips"):  # before torch 1.10 autograd cancels (torch_versions):
        assert_equal(grad_x, oracle(grad_y, axis, False, not reverse))  # torch's scan that 1.10's autograd runs
        return
    tx = torch.from_numpy(x).requires_grad_()
    y = torch.cumsum(tx.flip(axis), axis).flip(axis) if reverse else torch.cumsum(tx, axis)
    (expected,) = torch.autograd.grad(y, tx, torch.from_numpy(grad_y))
    assert_equal(grad_x, expected.numpy())


@pytest.mark.parametrize("shape, axis", [((64, 128), 1), ((48, 512), 0), ((32768, 4), 0), ((9, 7), 0)])
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
def test_caffe2_op_in_place(paths_taken, shape, axis, exclusive, reverse):
    x, grad_y = values(shape, np.float32), values(shape, np.float32, seed=6)
    y, grad_x = run_op(x, grad_y, in_place=True, axis=axis, exclusive=exclusive, reverse=reverse)
    assert_equal(y, oracle(x, axis, exclusive, reverse))
    assert_equal(grad_x, oracle(grad_y, axis, exclusive, not reverse))
    assert len(paths_taken) == 2


def test_caffe2_op_rechecks_when_the_input_dtype_or_rank_changes():
    """The op's routes are kept per dtype and shape: a created net fed new dtypes and ranks stays right."""
    workspace.ResetWorkspace()
    net = core.Net("kernel_paths_routes")
    y = net.PyCumSum("kp_x", "kp_y", axis=1)
    net.AddExternalInput("kp_y_grad")
    net.AddGradientOperators({y: "kp_y_grad"})
    workspace.FeedBlob("kp_x", np.zeros((2, 3), np.float32))
    workspace.FeedBlob("kp_y_grad", np.zeros((2, 3), np.float32))
    workspace.CreateNet(net)
    for x in [values((5, 7), np.float32), values((5, 7), np.int32), values((5,), np.float32),
              values((4, 6, 2), np.float64), values((5, 7), np.float32)]:
        workspace.FeedBlob("kp_x", x)
        workspace.FeedBlob("kp_y_grad", values(x.shape, np.float64 if x.dtype == np.float64 else np.float32, 8))
        if x.ndim == 1:
            with pytest.raises(Exception, match="axis=1 is out of range for an input of shape"):
                workspace.RunNet(net.Proto().name)
            continue
        workspace.RunNet(net.Proto().name)
        assert_equal(workspace.FetchBlob("kp_y"), oracle(x, 1, False, False))
        # integer x: the gradient keeps grad_y's dtype (float32 here); float x: its own
        assert_equal(workspace.FetchBlob("kp_x_grad"), oracle(workspace.FetchBlob("kp_y_grad"), 1, False, True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])  # int32 sums into int64: not direct
@pytest.mark.parametrize("shape, axis", [((70000,), 0), ((40, 3000), 1), ((400, 13), 0), ((2, 4543, 1), 1),
                                         ((80, 44, 28), 2)])
def test_caffe2_op_direct_call_is_torchs(paths_taken, shape, axis, dtype):
    """Where the route is torch's one call, the op's forward is one torch.cumsum between the blobs: torch's bits."""
    assert scan_route("cumsum", shape, dtype, axis).call is engine.torch_scan
    workspace.ResetWorkspace()
    net = core.Net("kernel_paths_direct")
    net.PyCumSum("kp_x", "kp_y", axis=axis)
    x = values(shape, dtype)
    workspace.FeedBlob("kp_x", x)
    workspace.RunNetOnce(net)
    assert paths_taken == ["torch"]
    assert_equal(workspace.FetchBlob("kp_y"), oracle(x, axis, False, False))
