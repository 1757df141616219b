"""Brew helper: ``brew.cumsum(model, blob_in, blob_out, axis=...)``.

No ``**kwargs`` on purpose: brew then passes only the arg_scope keywords this
helper names, so scopes such as ``brew.arg_scope([...], order="NCHW")`` are
tolerated and misspelled keywords still fail loudly.
"""
from caffe2.python import brew

from .net_ops import cumsum as _net_cumsum


def cumsum(model, blob_in, blob_out, axis=None, exclusive=False, reverse=False, dtype=None, dim=None):
    """``blob_out = cumsum(blob_in, axis)`` on ``model.net``; returns the output blob."""
    return _net_cumsum(model.net, blob_in, blob_out, axis=axis, exclusive=exclusive,
                       reverse=reverse, dtype=dtype, dim=dim)


def install():
    """Register the helpers with brew (once per process)."""
    if not brew.has_helper(cumsum):
        brew.Register(cumsum)
