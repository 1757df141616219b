"""Brew helper: ``brew.cumsum(model, blob_in, blob_out, axis=...)``.

brew hands a helper the keywords of every ``brew.arg_scope`` that lists it, unfiltered
(``brew.arg_scope([brew.cumsum, brew.fc], order="NCHW")`` passes ``order``), and, to a
helper that takes ``**kwargs``, the model's own ``arg_scope``. The helper ignores
exactly those scope keywords; any other unknown keyword (a typo) still fails loudly.
"""
from caffe2.python import brew
from caffe2.python.helpers.arg_scope import get_current_scope

from .net_ops import cumsum as _net_cumsum


def _check_scope_keywords(model, keywords) -> None:
    """Refuse keywords that neither the model's arg_scope nor an active brew.arg_scope supplied."""
    from_scopes = set(model.arg_scope) | set(get_current_scope().get(cumsum.__name__, {}))
    unknown = sorted(set(keywords) - from_scopes)
    if unknown:
        raise TypeError("PyCumSum (brew.cumsum): unexpected keyword argument(s) {}".format(
            ", ".join(unknown)))


def cumsum(model, blob_in, blob_out, axis=None, exclusive=False, reverse=False, dtype=None, dim=None,
           **scope_keywords):
    """``blob_out = cumsum(blob_in, axis)`` on ``model.net``; returns the output blob."""
    _check_scope_keywords(model, scope_keywords)
    return _net_cumsum(model.net, blob_in, blob_out, axis=axis, exclusive=exclusive,
                       reverse=reverse, dtype=dtype, dim=dim)


def install():
    """Register the helpers with brew (once per process)."""
    if not brew.has_helper(cumsum):
        brew.Register(cumsum)
