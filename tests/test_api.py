"""The public ways to add PyCumSum to a net: net.PyCumSum, pycumsum_op.cumsum, brew.cumsum,
and the token form net.Python(cumsum_fwd, grad_f=cumsum_bwd) from the user's design card."""
import numpy as np
import pytest
import torch
from caffe2.python import brew, core, model_helper, workspace

import pycumsum_op
from scan_family_support import RUN_ERROR

X = np.array([[1., -2., 3., 0.5], [4., 5., -6., 2.]], np.float32)
W = np.array([[1., 2., 3., 4.], [-1., 0.5, 2., -3.]], np.float32)


def torch_value_and_gradient(axis, x=X, w=W):
    """torch.cumsum(x, axis) and d/dx sum(w * cumsum(x, axis))."""
    x_tensor = torch.tensor(x, requires_grad=True)
    y = torch.cumsum(x_tensor, axis)
    (y * torch.from_numpy(w)).sum().backward()
    return y.detach().numpy(), x_tensor.grad.numpy()


def run_with_gradient(net, y, x_name, feeds, w=W):
    """Add gradient ops with d(loss)/dy = w to ``net``, run it; returns (y, grad of x_name)."""
    grad_map = net.AddGradientOperators({y: "api_w_in"})
    net.AddExternalInput("api_w_in")
    for name, value in dict(feeds, api_w_in=w).items():
        workspace.FeedBlob(name, value)
    workspace.RunNetOnce(net)
    return workspace.FetchBlob(str(y)), workspace.FetchBlob(str(grad_map[x_name]))


def assert_matches_torch(y, grad_x, axis):
    torch_y, torch_grad = torch_value_and_gradient(axis)
    np.testing.assert_allclose(y, torch_y, rtol=1e-6)
    np.testing.assert_allclose(grad_x, torch_grad, rtol=1e-6)


def test_public_names_are_plain_module_attributes():
    """CPython 3.6 never calls a module ``__getattr__`` (PEP 562): each public name, every registered scan's
    function among them, must be an attribute of the module itself."""
    from pycumsum_op.scans import SCANS

    assert set(pycumsum_op.__all__) == set(pycumsum_op._NAMES) | set(SCANS)
    assert [name for name in pycumsum_op.__all__ if name not in vars(pycumsum_op)] == []
    assert "__getattr__" not in vars(pycumsum_op)


def test_token_form_from_the_design_card(clean_workspace):
    """net.Python(cumsum_fwd, grad_f=cumsum_bwd)(["x"], ["y"]): last axis, inclusive, with gradient."""
    net = core.Net("token_form")
    y = net.Python(pycumsum_op.cumsum_fwd, grad_f=pycumsum_op.cumsum_bwd)(["x"], ["y"])
    assert_matches_torch(*run_with_gradient(net, y, "x", {"x": X}), axis=-1)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_net_method_with_gradient(axis, clean_workspace):
    net = core.Net("net_method")
    y = net.PyCumSum("api_x", "api_y", axis=axis)
    assert_matches_torch(*run_with_gradient(net, y, "api_x", {"api_x": X}), axis=axis)


def test_function_form_returns_the_output_blob(clean_workspace):
    net = core.Net("function_form")
    named = pycumsum_op.cumsum(net, "api_x", "api_named", axis=1)
    assert isinstance(named, core.BlobReference) and str(named) == "api_named"
    unnamed = pycumsum_op.cumsum(net, named, axis=0)
    assert isinstance(unnamed, core.BlobReference)
    assert [list(op.output) for op in net.Proto().op] == [["api_named"], [str(unnamed)]]
    workspace.FeedBlob("api_x", X)
    workspace.RunNetOnce(net)
    expected = torch.cumsum(torch.cumsum(torch.from_numpy(X), 1), 0).numpy()
    np.testing.assert_allclose(workspace.FetchBlob(unnamed), expected, rtol=1e-6)


def test_dim_is_an_alias_for_axis(clean_workspace):
    net = core.Net("dim_alias")
    y = net.PyCumSum("api_x", "api_y", dim=-2)
    assert_matches_torch(*run_with_gradient(net, y, "api_x", {"api_x": X}), axis=-2)
    net.PyCumSum("api_x", "api_same", axis=1, dim=1)  # the same value twice is fine


def test_axis_is_required():
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: axis is required.*dim"):
        core.Net("no_axis").PyCumSum("api_x", "api_y")
    with pytest.raises(RUN_ERROR, match="axis is required"):
        pycumsum_op.cumsum(core.Net("no_axis_fn"), "api_x")


def test_axis_and_dim_must_agree():
    with pytest.raises(RUN_ERROR, match=r"PyCumSum: got both axis=1 and dim=0"):
        core.Net("conflict").PyCumSum("api_x", "api_y", axis=1, dim=0)


def test_brew_helper_in_a_model_helper_with_gradient(clean_workspace):
    model = model_helper.ModelHelper(name="brew_cumsum")
    y = brew.cumsum(model, "api_x", "api_y", axis=1)
    assert str(y) == "api_y"
    assert_matches_torch(*run_with_gradient(model.net, y, "api_x", {"api_x": X}), axis=1)


def test_brew_helper_inside_an_arg_scope_shared_with_fc(clean_workspace):
    """brew.py merges every arg_scope keyword unfiltered into the helper's call, so
    brew.cumsum receives order="NCHW" here and must ignore it."""
    model = model_helper.ModelHelper(name="brew_scope")
    with brew.arg_scope([brew.cumsum, brew.fc], order="NCHW"):
        hidden = brew.fc(model, "scope_x", "scope_hidden", dim_in=4, dim_out=3)
        y = brew.cumsum(model, hidden, "scope_y", axis=1)
    workspace.RunNetOnce(model.param_init_net)
    weight, bias = workspace.FetchBlob("scope_hidden_w"), workspace.FetchBlob("scope_hidden_b")
    w = W[:, :3].copy()
    y_value, grad_x = run_with_gradient(model.net, y, "scope_x", {"scope_x": X}, w)

    x_tensor = torch.tensor(X, requires_grad=True)
    torch_y = torch.cumsum(x_tensor @ torch.from_numpy(weight).T + torch.from_numpy(bias), 1)
    (torch_y * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(y_value, torch_y.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad_x, x_tensor.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_brew_helper_still_refuses_misspelled_keywords():
    model = model_helper.ModelHelper(name="brew_typo")
    with pytest.raises(TypeError, match=r"PyCumSum \(brew.cumsum\).*axs"):
        brew.cumsum(model, "api_x", "api_y", axs=1)
