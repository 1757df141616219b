"""Lowered PyCumSum on the values that break sums: ±inf, NaN, -0.0 and running sums past the float range.

torch's CPU cumsum adds the entries one after another (float32 in a float64 accumulator, cast back), so a NaN
or inf reaches only the positions at and after it, a float32 running sum past 3.4e38 is inf there and finite
again once later entries bring it back, and no sum is -0.0. Both targets must give exactly torch's non-finite
values and zero signs, and elsewhere torch's values within a float sum's error bound: forward, the net's
gradient op lowered, and AddGradientOperators on the lowered net. The scan lengths reach every path of the
portable form: empty, one entry, short lanes, lengths around the block sizes (whole blocks, padded blocks,
block totals scanned directly and blocked again), on every axis of rank 0-3 with empty and size-1 dimensions.
"""
import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import given, settings

from pycumsum_op.lowering import portable
from pycumsum_op.torch_versions import has
from test_gradient import torch_gradient
from test_lower import TARGETS, lower_and_run, run_lowered_gradient

#: Scan lengths: empty, 1, 2, a short lane, around `portable.DIRECT_SMALL` (these inputs are smaller than
#: `portable.DIRECT_FROM`), blocks of 16 (512: 32 block totals, the most summed directly; 528: 33, blocked again), a
#: divisor of 20 (1100: 55 totals in blocks of 11) and lengths with no divisor in `portable.BLOCK_SIZES` (37, 67:
#: padded to whole blocks; on a last axis, every length not a multiple of `portable.BLOCK` is).
LENGTHS = (0, 1, 2, 5, portable.DIRECT_SMALL - 1, portable.DIRECT_SMALL, portable.DIRECT_SMALL + 1, 37, 67, 256,
           portable.BLOCK * portable.DIRECT_SMALL, portable.BLOCK * (portable.DIRECT_SMALL + 1), 1100)


def special_values(dtype):
    """±inf, NaN, -0.0 and, for float32, ±max and ±max/2. float64 sums in float64 (no wider accumulator in
    Caffe2), so where a running sum passes 1.8e308 and comes back, the order of additions decides: not drawn."""
    values = [np.inf, -np.inf, np.nan, -0.0]
    big = np.finfo(np.float32).max
    return values + [big, -big, big / 2, -big / 2] if dtype == np.float32 else values


def scales(dtype):
    """Entries' magnitudes: 1, and for float32 ones whose running sums pass float32's range; float64 lanes of
    at most 2^11 entries stay within its range."""
    big = np.finfo(dtype).max
    return [1.0, big / 4, big] if dtype == np.float32 else [1.0, big / 2 ** 12]


@st.composite
def nonfinite_cases(draw, length):
    """(x, w, axis, exclusive, reverse): x and the output gradient w of a dtype, rank 1-3 with ``length`` entries
    along the axis (rank 0 when None), finite values scaled so that float32 running sums may overflow, with a
    few entries (of x, of w) set to `special_values`."""
    dtype = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    rank = 0 if length is None else draw(st.integers(1, 3))
    shape = [draw(st.integers(0, 3)) for _ in range(rank)]
    axis = draw(st.integers(-rank, rank - 1)) if rank else draw(st.sampled_from([0, -1]))
    if rank:
        shape[axis] = length
        if length > 100:  # long lanes: few of them
            shape = [size if position % rank == axis % rank else min(size, 2) for position, size in enumerate(shape)]
    rng = np.random.RandomState(draw(st.integers(0, 2 ** 16)))
    arrays = []
    for _ in range(2):
        scale = draw(st.sampled_from(scales(dtype)))
        values = np.asarray(rng.uniform(-1, 1, shape) * scale, dtype)
        flat = values.reshape(-1)
        if flat.size:
            for special in draw(st.lists(st.sampled_from(special_values(dtype)), max_size=4)):
                flat[rng.randint(flat.size)] = special
        arrays.append(values)
    return arrays[0], arrays[1], axis, draw(st.booleans()), draw(st.booleans())


def assert_matches_torch(actual, reference, summed, axis, zero_signs):
    """torch's non-finite values exactly (and its zero signs if ``zero_signs``), the rest within
    2·(ceil(log2 n) + 1)·eps·sum(|finite entries| of the lane ``summed``)."""
    assert actual.dtype == reference.dtype and actual.shape == reference.shape, (actual.dtype, actual.shape)
    assert np.array_equal(np.isnan(actual), np.isnan(reference))
    infinite = np.isinf(reference)
    np.testing.assert_array_equal(actual[infinite], reference[infinite])
    if zero_signs:
        zeros = reference == 0
        np.testing.assert_array_equal(np.signbit(actual[zeros]), np.signbit(reference[zeros]))
    finite = np.isfinite(reference)
    # (long double: float64 lanes of values near the float64 maximum sum past its range)
    magnitude = np.abs(np.where(np.isfinite(summed), summed, 0).astype(np.longdouble)).reshape(reference.shape)
    length = 1
    if reference.ndim:
        length = reference.shape[axis]
        magnitude = np.sum(magnitude, axis=axis, keepdims=True) * np.ones(reference.shape)
    bound = 2 * (np.ceil(np.log2(max(length, 1))) + 1) * np.finfo(reference.dtype).eps * magnitude
    error = np.abs(actual[finite].astype(np.longdouble) - reference[finite])
    assert np.all(error <= bound[finite]), np.max(error - bound[finite])


def refused_at_run_time(target, x, axis, exclusive):
    """aten's exclusive scan of an empty axis fails when the net runs (test_lower asserts it)."""
    return target == "aten" and exclusive and x.ndim and x.shape[axis] == 0


@pytest.mark.slow  # 14 x 15 lowered nets, lanes up to 1100 long
@pytest.mark.parametrize("length", (None,) + LENGTHS)
@settings(max_examples=15, deadline=None)
@given(data=st.data(), target=st.sampled_from(TARGETS))
def test_forward_matches_torch_on_nonfinite_values(length, data, target, torch_scan):
    x, _, axis, exclusive, reverse = data.draw(nonfinite_cases(length))
    if refused_at_run_time(target, x, axis, exclusive):
        return
    actual = lower_and_run(x, target, "arguments", axis=axis, exclusive=exclusive, reverse=reverse)
    reference = torch_scan(torch.from_numpy(x), axis, exclusive, reverse).numpy()
    assert_matches_torch(actual, reference, x, axis, zero_signs=True)


@pytest.mark.slow  # 14 x 10 lowered nets with gradients
@pytest.mark.parametrize("length", (None,) + LENGTHS)
@settings(max_examples=10, deadline=None)
@given(data=st.data(), target=st.sampled_from(TARGETS), lowered_gradient_ops=st.booleans())
def test_gradient_matches_torch_on_nonfinite_values(length, data, target, lowered_gradient_ops, torch_scan):
    """The output gradient w holds the non-finite values (the gradient of a sum does not read x); zero signs
    are not compared: torch's cumsum backward passes a lane of one entry through as it is, -0.0 included."""
    x, w, axis, exclusive, reverse = data.draw(nonfinite_cases(length))
    if refused_at_run_time(target, x, axis, exclusive):
        return
    y, actual = run_lowered_gradient(x, w, target, lowered_gradient_ops, axis=axis, exclusive=exclusive,
                                     reverse=reverse)
    assert_matches_torch(y, torch_scan(torch.from_numpy(x), axis, exclusive, reverse).numpy(), x, axis,
                         zero_signs=True)
    if has("torch autograd reversed cumsum by flips"):
        reference = torch_gradient(torch_scan, x, w, axis, exclusive, reverse)
    else:  # autograd's reversed cumsum is total - cumsum + w there (inf - inf: NaN): torch's scan the other way
        reference = torch_scan(torch.from_numpy(w), axis, exclusive, not reverse).numpy()
    assert_matches_torch(actual, reference, w, axis, zero_signs=False)


@pytest.mark.parametrize("target", TARGETS + ["portable, slices widened alone"])
@pytest.mark.parametrize("shape, axis", [((2, 5), 1), ((2, 40), 1), ((40, 3), 0), ((3, 200), 1), ((300,), 0),
                                         ((3, 1100, 2), 1), ((2, 70, 3), 1), ((64, 1100), 0), ((1100, 60), 1)])
def test_one_nonfinite_entry_reaches_only_the_positions_after_it(target, shape, axis, monkeypatch, clean_workspace,
                                                                 torch_scan):
    """One inf, -inf or NaN in the middle of every lane, and a lane that overflows float32 and comes back; the
    portable form also with each slice widened on its own (as large inputs' are); lanes of up to `portable.DIRECT`
    entries without blocks in inputs of `portable.DIRECT_FROM` entries or more."""
    if target == "portable, slices widened alone":
        monkeypatch.setattr(portable, "WIDENED_ALONE_FROM", 0)
        target = "portable"
    rng = np.random.RandomState(len(shape))
    for special in (np.inf, -np.inf, np.nan):
        x = rng.uniform(-1, 1, shape).astype(np.float32)
        np.moveaxis(x, axis, -1)[..., shape[axis] // 2] = special
        for reverse in (False, True):
            actual = lower_and_run(x, target, "workspace", axis=axis, reverse=reverse)
            reference = torch_scan(torch.from_numpy(x), axis, False, reverse).numpy()
            assert np.isfinite(reference).any() and not np.isfinite(reference).all()
            assert_matches_torch(actual, reference, x, axis, zero_signs=True)
    x = np.zeros(shape, np.float32)
    lanes = np.moveaxis(x, axis, -1)
    lanes[..., :3] = [3e38, 3e38, -3e38]  # float32 running sums: 3e38, inf, 3e38 in torch (float64 inside)
    actual = lower_and_run(x, target, "workspace", axis=axis)
    reference = torch_scan(torch.from_numpy(x), axis, False, False).numpy()
    assert np.isinf(np.moveaxis(reference, axis, -1)[..., 1]).all()
    assert np.isfinite(np.moveaxis(reference, axis, -1)[..., 2]).all()
    assert_matches_torch(actual, reference, x, axis, zero_signs=True)
