"""The cumsum idiom users wrote before PyCumSum, a Transpose -> SparseLengthsSum -> Transpose net.

``Transpose → SparseLengthsSum(DATA, triangular INDICES, LENGTHS) → Transpose``
over a (N, C) blob. With lengths 0..C-1 (the usual form) it is an
*exclusive* cumsum along axis 1; with lengths 1..C it is inclusive. It gathers
C·(C±1)/2 rows: O(N·C²) time and memory. Its backward fails with "Gradient of
output …/Transpose is sparse (expected dense)" unless ``ensure_dense=True``
puts an EnsureDense on SparseLengthsSum's DATA input (the real fix).

>>> sparse_lengths_cumsum_constants(3, exclusive=True)
(array([0, 0, 1], dtype=int32), array([0, 1, 2], dtype=int32))
>>> sparse_lengths_cumsum_constants(3, exclusive=False)
(array([0, 0, 1, 0, 1, 2], dtype=int32), array([1, 2, 3], dtype=int32))
"""
import numpy as np
from caffe2.python import workspace


def sparse_lengths_cumsum_constants(columns: int, exclusive: bool = True):
    """(INDICES, LENGTHS) int32 arrays: segment j gathers rows 0..j-1 (exclusive) or 0..j."""
    extra = 0 if exclusive else 1
    indices = np.array([i for length in range(columns) for i in range(length + extra)], dtype=np.int32)
    lengths = np.arange(extra, columns + extra, dtype=np.int32)
    return indices, lengths


def add_sparse_lengths_cumsum(net, blob_in, columns: int, blob_out=None, exclusive: bool = True,
                              ensure_dense: bool = False, init_net=None, prefix: str = None):
    """Append the idiom over (N, ``columns``) blob ``blob_in`` to ``net``; returns the output blob.

    The constant INDICES and LENGTHS blobs are GivenTensorIntFill ops in ``init_net``
    when given, else fed into the current workspace (as an ``as_blob`` helper does).
    """
    prefix = prefix or str(blob_in)
    indices, lengths = sparse_lengths_cumsum_constants(columns, exclusive)
    names = {"indices": prefix + "_cumsum_indices", "lengths": prefix + "_cumsum_lengths"}
    for key, values in (("indices", indices), ("lengths", lengths)):
        if init_net is not None:
            init_net.GivenTensorIntFill([], names[key], values=values.tolist(), shape=list(values.shape))
        else:
            workspace.FeedBlob(names[key], values)
        net.AddExternalInput(names[key])
    data = net.Transpose(blob_in, prefix + "_cumsum_T")
    if ensure_dense:
        data = net.EnsureDense(data, prefix + "_cumsum_T_dense")
    summed = net.SparseLengthsSum([data, names["indices"], names["lengths"]], prefix + "_cumsum_sls")
    return net.Transpose(summed, blob_out or prefix + "_cumsum")
