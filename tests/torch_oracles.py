"""The scan oracle shared by the tests (conftest's `torch_scan` fixture) and their child processes:
torch.<scan>(x, axis) with exclusive / reverse built from torch ops, and where this torch lacks an exact
torch.<scan> (cummax / cummin before 1.5, logcumsumexp before 1.9) one built from each prefix with torch's
max / min / exp / log. Imports torch only (no pytest, no Caffe2), so a child process may import it."""
from functools import partial

import torch

from pycumsum_op.torch_versions import has


def _prefix_logcumsumexp(x, dim):
    """logcumsumexp from torch's elementwise ops, one prefix at a time (the oracle where torch's logcumsumexp
    is missing, before 1.6, or NaN after a leading -inf, before 1.9): log(sum(exp(prefix - m))) + m, m the
    prefix's maximum held constant (0 where infinite); differentiable, so autograd gives its gradient."""
    if x.numel() == 0:
        return x.clone()
    results = []
    for end in range(1, x.shape[dim] + 1):
        prefix = x.narrow(dim, 0, end)
        top = prefix.max(dim, keepdim=True)[0].detach()
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        results.append(torch.log(torch.exp(prefix - top).sum(dim)) + top.squeeze(dim))
    return torch.stack(results, dim)


def _prefix_extremum(maximum, x, dim):
    """cummax / cummin (values, indices) from each prefix's torch.max / torch.min (the oracle before torch 1.5):
    the index is the last position holding the prefix's extremum (a tie goes to the later element; NaN wins)."""
    if x.numel() == 0:
        return x.clone(), torch.zeros(x.shape, dtype=torch.int64)
    values, indices = [], []
    for end in range(1, x.shape[dim] + 1):
        prefix = x.narrow(dim, 0, end)
        value = (prefix.max(dim, keepdim=True) if maximum else prefix.min(dim, keepdim=True))[0].detach()
        nan = value != value
        hits = (prefix.detach() == value) | (nan & (prefix.detach() != prefix.detach()))
        positions = torch.arange(end).reshape((-1,) + (1,) * (x.dim() - dim - 1))
        last = torch.where(hits, positions.expand_as(prefix), torch.full_like(positions, -1).expand_as(prefix))
        last = last.max(dim, keepdim=True)[0]
        values.append(prefix.gather(dim, last).squeeze(dim))  # the gradient goes to the winner
        indices.append(last.squeeze(dim))
    return torch.stack(values, dim), torch.stack(indices, dim)


def _flip(tensor, dim):
    """tensor.flip(dim); bool through uint8 (torch < 1.5 has no bool flip)."""
    return tensor.to(torch.uint8).flip(dim).to(torch.bool) if tensor.dtype == torch.bool else tensor.flip(dim)


#: scan name -> (torch function, the identity an exclusive scan starts with; None: no exclusive form).
TORCH_SCANS = {
    "cumsum": (torch.cumsum, 0),
    "cumprod": (torch.cumprod, 1),
    "logcumsumexp": (torch.logcumsumexp if has("torch.logcumsumexp -inf") else _prefix_logcumsumexp, -float("inf")),
    "cummax": (torch.cummax if has("torch.cummax") else partial(_prefix_extremum, True), None),
    "cummin": (torch.cummin if has("torch.cummax") else partial(_prefix_extremum, False), None),
}


def torch_scan(x, axis, exclusive=False, reverse=False, dtype=None, scan="cumsum"):
    """The oracle: torch.<scan>(x, axis[, dtype]), with ONNX/TensorFlow's flags built from torch ops.

    reverse = flip -> scan -> flip (cummax/cummin indices mapped back to positions in x); exclusive =
    the inclusive result shifted by one along ``axis`` behind the scan's identity (0, 1 or -inf).
    A 0-d tensor scans as a 1-element vector (torch accepts dim 0/-1). Works on tensors that
    require grad, so torch.autograd gives the gradient oracle too. cummax/cummin return
    (values, indices).
    """
    function, identity = TORCH_SCANS[scan]
    flat = x.reshape(1) if x.dim() == 0 else x
    dim = axis % flat.dim()
    if reverse:
        flat = _flip(flat, dim)
    result = function(flat, dim) if dtype is None else function(flat, dim, dtype=dtype)
    if identity is None:  # values and indices
        values, indices = result
        if reverse:
            values, indices = _flip(values, dim), (flat.shape[dim] - 1) - _flip(indices, dim)
        return values.reshape(x.shape), indices.reshape(x.shape)
    if exclusive and result.shape[dim] > 0:  # (torch 1.4 cannot differentiate an empty narrow)
        leading = torch.full_like(result.narrow(dim, 0, min(1, result.shape[dim])), identity)
        result = torch.cat([leading, result.narrow(dim, 0, max(result.shape[dim] - 1, 0))], dim)
    if reverse:
        result = _flip(result, dim)
    return result.reshape(x.shape)


#: The scans whose oracle here is a prefix-by-prefix one (this torch lacks an exact torch.<scan>): quadratic.
PREFIX_ORACLES = frozenset(name for name, (function, _) in TORCH_SCANS.items()
                           if function in (_prefix_logcumsumexp,) or isinstance(function, partial))


def float64_reference(x, axis, exclusive=False, reverse=False, scan="cumsum"):
    """The oracle's values in float64, rounded once to x's dtype: the reference for a scan whose oracle here is
    built from prefixes (`PREFIX_ORACLES`: the prefix sums round differently from any sequential kernel, so the
    comparison is within rounding, not bit for bit)."""
    result = torch_scan(x.double(), axis, exclusive, reverse, scan=scan)
    return (result[0] if isinstance(result, tuple) else result).to(x.dtype)
