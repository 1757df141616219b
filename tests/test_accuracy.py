"""float32 accuracy on 10^6-long scans, forward and backward, as accurate as torch.cumsum on CPU.

Relative error, elementwise: max_i |y_i - ref_i| / |ref_i|, where ref is the float64 scan of the
same float32 data. The data are positive (uniform in [0.5, 1.5)), so no ref_i is 0 and a
correctly rounded float32 result is within 2**-24 (about 6e-8) of it. Accumulating in float32
instead (plain ``np.cumsum`` on float32) drifts to about 2e-5 over 10^6 terms; each test shows
that this drifting result fails the same bound, so the bound can catch an op that drifts.
"""
import numpy as np
import pytest
import torch
from caffe2.python import core, workspace

import pycumsum_op  # noqa: F401  (installs net.PyCumSum)

LENGTH = 10 ** 6
BOUND = 1e-7


def relative_error(actual, reference):
    return float(np.max(np.abs(actual.astype(np.float64) - reference) / np.abs(reference)))


def float64_reference_scan(values, axis, reverse):
    values = values.astype(np.float64)
    if reverse:
        return np.flip(np.cumsum(np.flip(values, axis), axis), axis)
    return np.cumsum(values, axis)


def float32_drifting_scan(values, axis, reverse):
    """A scan accumulated in float32: what the bound must reject."""
    if reverse:
        return np.flip(np.cumsum(np.flip(values, axis), axis, dtype=np.float32), axis)
    return np.cumsum(values, axis, dtype=np.float32)


@pytest.mark.parametrize("shape, axis", [((2, LENGTH), 1), ((LENGTH, 2), 0)], ids=["rows", "columns"])
def test_float32_forward_and_backward_stay_within_1e_7(shape, axis, clean_workspace):
    rng = np.random.RandomState(7)
    x = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    w = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    net = core.Net("accuracy")
    y = net.PyCumSum("acc_x", "acc_y", axis=axis)
    grad_map = net.AddGradientOperators({y: "acc_w"})
    net.AddExternalInput("acc_w")
    workspace.FeedBlob("acc_x", x)
    workspace.FeedBlob("acc_w", w)
    workspace.RunNetOnce(net)
    y_value, grad_x = workspace.FetchBlob("acc_y"), workspace.FetchBlob(str(grad_map["acc_x"]))
    assert y_value.dtype == np.float32 and grad_x.dtype == np.float32

    # forward: y = cumsum(x); backward: grad_x = reverse cumsum of w
    for actual, data, reverse in [(y_value, x, False), (grad_x, w, True)]:
        reference = float64_reference_scan(data, axis, reverse)
        assert relative_error(actual, reference) <= BOUND
        assert relative_error(float32_drifting_scan(data, axis, reverse), reference) > 10 * BOUND

    torch_y = torch.cumsum(torch.from_numpy(x), axis).numpy()  # torch meets the bound too
    assert relative_error(torch_y, float64_reference_scan(x, axis, False)) <= BOUND
