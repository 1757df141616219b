"""The benchmark's random sweep draws what it promises (benchmarks/sweep.py); nothing here is timed."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import sweep  # noqa: E402
from engine_support import NEEDS_NUMBA, scan_route  # noqa: E402

SEEDS = range(5)


@pytest.fixture(scope="module")
def sweeps():
    return {seed: sweep.draw_shapes(seed, 48) for seed in SEEDS}


def test_every_case_is_within_the_limits(sweeps):
    for cases in sweeps.values():
        assert len(cases) == 48
        for shape, axis, dtype in cases:
            size, length = int(np.prod(shape)), shape[axis]
            assert 1 <= len(shape) <= 4 and 0 <= axis < len(shape) and min(shape) >= 1
            assert 2 ** 16 <= size <= 2 ** 22, shape
            assert 2 <= length <= 10 ** 6 and 1 <= size // length <= 10 ** 5, shape
            assert dtype in ("float32", "float64")


def test_the_sweeps_reach_every_rank_axis_and_dtype(sweeps):
    cases = [case for cases in sweeps.values() for case in cases]
    assert {(len(shape), axis) for shape, axis, _ in cases} == {(rank, axis) for rank in range(1, 5)
                                                                for axis in range(rank)}
    assert {dtype for _, _, dtype in cases} == {"float32", "float64"}
    for cases_of_one_seed in sweeps.values():
        assert {dtype for _, _, dtype in cases_of_one_seed} == {"float32", "float64"}
        assert {len(shape) for shape, _, _ in cases_of_one_seed} == {1, 2, 3, 4}


def test_the_sweeps_span_lane_counts_and_lengths(sweeps):
    """Narrow and wide (inner lanes), few and many lanes, short and long lanes all come up."""
    cases = [case for cases in sweeps.values() for case in cases]
    lanes = [int(np.prod(shape)) // shape[axis] for shape, axis, _ in cases]
    lengths = [shape[axis] for shape, axis, _ in cases]
    inner = [int(np.prod(shape[axis + 1:])) for shape, axis, _ in cases]
    assert min(lanes) == 1 and max(lanes) >= 10 ** 4
    assert min(lengths) <= 10 and max(lengths) >= 5 * 10 ** 5
    assert any(1 < width < 16 for width in inner) and max(inner) >= 10 ** 4


def test_a_seed_draws_one_sweep_and_another_seed_another(sweeps):
    assert sweep.draw_shapes(3, 48) == sweeps[3]
    assert sweeps[0] != sweeps[1]


@pytest.mark.parametrize("shape, axis, dtype, engines", [
    ((70000,), 0, np.float32, False), ((3, 50, 7), 1, np.float64, False), ((40, 30), 1, np.float32, False),
    ((300, 40, 24), 1, np.float32, True), ((9, 3000, 5), 1, np.float64, True)])
def test_the_python_op_floor_computes_torchs_forward(shape, axis, dtype, engines):
    """The floor the sweeps report is a real scan: its net's output is torch.cumsum's, bit for bit, with torch's
    call and with the one PyCumSum makes for the shape (its route's one call: the accelerator's loop where installed)."""
    import torch
    from caffe2.python import workspace

    import nets
    from pycumsum_op.kernels import engine
    x, _ = nets.feed(shape, dtype=dtype)
    call = scan_route("cumsum", x.shape, x.dtype, axis).call if engines else engine.torch_scan
    if engines and not NEEDS_NUMBA.args[0]:  # the suite's environment has the fast extra (none on CPython 3.6)
        assert call.func is engine.compiled_scan
    nets.python_floor(axis, call)()
    np.testing.assert_array_equal(workspace.FetchBlob("bench_y_floor"), torch.cumsum(torch.from_numpy(x), axis).numpy())


@pytest.mark.parametrize("script, argv, message", [
    ("sweep", ["--count", "0"], "--count: expected a whole number of at least 1"),
    ("sweep", ["--seed", "-1"], "--seed: expected a whole number of at least 0"),
    ("kernels", ["--count", "0"], "--count: expected a whole number of at least 1"),
    ("kernels", ["--seeds", "1,x"], "--seeds: expected a whole number of at least 0")])
def test_bad_sweep_arguments_are_refused_in_words(capsys, script, argv, message):
    """An empty sweep or a seed numpy cannot take ends with a usage error (exit 2), not a traceback."""
    with pytest.raises(SystemExit) as exit_info:
        __import__(script).main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_the_class_sweep_draws_each_class_from_the_shared_draw():
    """benchmarks/classes.py: ``count`` cases per class, each in its class, within the sweep's limits."""
    import classes
    drawn = classes.draw(4, 5)
    assert drawn == classes.draw(4, 5) and drawn != classes.draw(5, 5)
    assert set(drawn) == set(classes.CLASSES)
    for name, cases in drawn.items():
        assert len(cases) == 5
        for shape, axis, dtype in cases:
            lanes = int(np.prod(shape)) // shape[axis]
            expected = ("1-D" if len(shape) == 1 else "non-last axes" if axis < len(shape) - 1 else
                        "last axis, many rows" if lanes >= 64 else "last axis, few rows")
            assert name == expected and classes.shape_class(shape, axis) == name
            assert sweep.MIN_SIZE <= int(np.prod(shape)) <= sweep.MAX_SIZE and dtype in ("float32", "float64")


def test_the_kernel_sweep_draws_rows_of_one_to_fifteen_lanes():
    """benchmarks/kernels.py: ``count`` cases per loop, sums and products on rows of 1-15 lanes, cummax on 4-7, each
    within 64K-4M elements; one seed, one draw."""
    import kernels
    cases = kernels.draw(3, 6)
    assert cases == kernels.draw(3, 6) and cases != kernels.draw(4, 6)
    for loop, widths in kernels.LOOPS:
        ours = [case for case in cases if case[0] == loop]
        assert len(ours) == 6 and {dtype for _, _, dtype in ours} == {"float32", "float64"}
        for _, (outer, length, inner), _ in ours:
            assert inner in widths and length >= 8 and kernels.MIN_SIZE <= outer * length * inner <= kernels.MAX_SIZE



def test_the_before_and_after_comparison_reads_the_class_tables():
    """benchmarks/against.py reads each class's ratios out of the markdown `classes.py` prints."""
    import against
    import classes
    times = {"torch_forward": 2.0, "torch_forward_backward": 4.0, "pycumsum_forward": 3.0,
             "pycumsum_forward_plain": 5.0, "pycumsum_forward_backward": 2.0, "pycumsum_forward_backward_plain": 8.0,
             "copy": 1.0, "floor": 2.5}
    entry = {"shape": [4, 5], "axis": 0, "dtype": "float32", "size": 20, "paths": ["torch", "lanes"],
             "warm": times, "cold": dict(times, torch_forward=1.0)}
    result = {"seed": 7, "cumsum": {name: [entry] for name in classes.CLASSES},
              "family": {name: [] for name in classes.CLASSES}}
    found = against.summaries(classes.markdown(result))
    assert set(found) == {(7, "warm"), (7, "cold")}
    assert set(found[7, "warm"]) == set(classes.CLASSES)
    assert found[7, "warm"]["1-D"] == {"forward with": "1.50x / 1.50x", "forward without": "2.50x / 2.50x",
                                       "fwd+bwd with": "0.50x / 0.50x", "fwd+bwd without": "2.00x / 2.00x"}
    assert found[7, "cold"]["non-last axes"]["forward with"] == "3.00x / 3.00x"


@pytest.mark.parametrize("argv, message", [(["no-such-revision"], "'no-such-revision' names no commit"),
                                           (["HEAD", "--seeds", "1,x"], "--seeds '1,x': comma-separated"),
                                           (["HEAD", "--count", "0"], "--count >= 1")])
def test_the_comparison_refuses_what_it_cannot_run_in_one_line(argv, message, capsys):
    import against
    with pytest.raises(SystemExit) as exit_info:
        against.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
