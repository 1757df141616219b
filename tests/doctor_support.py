"""Helpers for the doctor's tests: run a net with its gradient ops, and the torch side of the cumsum idiom."""
import itertools

import numpy as np
import torch
from caffe2.python import core, workspace

_run_ids = itertools.count()


def gradient_ops_work(netdef, losses) -> bool:
    """Caffe2 itself, the oracle: does AddGradientOperators(losses) succeed on a copy of netdef?"""
    try:
        core.Net(netdef).AddGradientOperators(losses)
    except Exception:  # Caffe2 raises plain Exception / RuntimeError from its gradient registry
        return False
    return True


def run_with_gradients(netdef, feeds, wrt, fetch, loss="loss", init_net=None):
    """Feed, run ``init_net``, then a copy of ``netdef`` plus AddGradientOperators([loss]).

    Returns ({blob: value} for ``fetch``, {blob: d loss / d blob} for ``wrt``).
    """
    net = core.Net(netdef)
    net.Proto().name = "doctor_run_{}".format(next(_run_ids))
    gradients = net.AddGradientOperators([loss])
    for name, value in feeds.items():
        workspace.FeedBlob(name, value)
    if init_net is not None:
        workspace.RunNetOnce(init_net)
    workspace.RunNetOnce(net)
    return ({name: workspace.FetchBlob(name) for name in fetch},
            {name: workspace.FetchBlob(str(gradients[name])) for name in wrt})


def add_weighted_loss(net, blob, weights="w", loss="loss"):
    """loss = sum(weights * blob), so d loss / d blob = weights (an arbitrary dense gradient)."""
    net.AddExternalInput(weights)
    return net.SumElements(net.Mul([blob, weights], str(blob) + "_weighted"), loss)


def torch_value_and_gradient(function, x: np.ndarray, w: np.ndarray):
    """(function(x), d sum(w * function(x)) / dx) by torch.autograd."""
    tx = torch.tensor(x, requires_grad=True)
    y = function(tx)
    (y * torch.from_numpy(w)).sum().backward()
    return y.detach().numpy(), tx.grad.numpy()


def torch_scan(exclusive=False, reverse=False, dim=1):
    """torch.cumsum along ``dim``, shifted by one (exclusive: ONNX's CumSum) and/or from the end (reverse)."""
    def function(x):
        values = torch.flip(x, [dim]) if reverse else x
        result = torch.cumsum(values, dim)
        if exclusive:
            result = result - values
        return torch.flip(result, [dim]) if reverse else result
    return function
