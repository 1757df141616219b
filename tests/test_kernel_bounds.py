"""Every loop of the accelerator (pycumsum_op/kernels/loops.py) run with numba's bounds checks on
(``NUMBA_BOUNDSCHECK=1``, in a child process with its own kernel cache), on small shapes that reach each loop's
branches (row loops in blocks, chains of one lane, pairs, groups of three and four, neighbours, reversed,
exclusive, in place), each result against torch; and a call with a wrong shape fails with IndexError, so the
checks are on. An index out of range here would otherwise corrupt memory silently."""
import os
import subprocess
import sys

from engine_support import NEEDS_NUMBA

CHILD = r"""
import numpy as np, torch
from numba.core import config
from pycumsum_op.kernels import compiled, tuning
from pycumsum_op.kernels.cumprod import KERNEL as CUMPROD
from pycumsum_op.kernels.cumsum import KERNEL as CUMSUM
from torch_oracles import torch_scan  # torch.cummax / torch.cummin, or from each prefix before torch 1.5
assert config.BOUNDSCHECK == 1
tuning.COMPILED_BLOCK = 3

def oracle(x, exclusive, reverse, product):
    t = torch.from_numpy(x.copy())
    t = t.flip(1) if reverse else t
    t = (torch.cumprod if product else torch.cumsum)(t, 1)
    if exclusive:
        t = torch.cat([torch.full_like(t[:, :1], 1 if product else 0), t[:, :-1]], 1)
    return (t.flip(1) if reverse else t).numpy()

runs = 0
for dtype in (np.float64,):  # the loops' code is the same for every dtype
    for outer, length, inner in [(1, 5, 1), (2, 4, 1), (5, 3, 1), (1, 6, 3), (2, 5, 3), (3, 2, 5), (1, 3, 8)]:
        x = (np.arange(outer * length * inner) % 5 - 2).astype(dtype).reshape(outer, length, inner)
        for kernel in (CUMSUM, CUMPROD):
            for exclusive in (False, True):
                for reverse in (False, True):
                    for chains, in_place in ((True, False), (True, True), (False, False), (False, True)):
                        y = x.copy() if in_place else np.empty_like(x)
                        compiled.scan_rows(y if in_place else x, y, kernel, exclusive, reverse, chains)
                        assert np.array_equal(y, oracle(x, exclusive, reverse, kernel is CUMPROD))
                        runs += 1
        wide = np.concatenate([x, x], 2)[:, :, ::2]  # a view with gaps: the row loops
        y = np.empty_like(wide)
        compiled.scan_rows(wide, y, CUMSUM, False, True, False)
        assert np.array_equal(y, oracle(wide, False, True, False))
        for maximum in (True, False):
            for chains in (True, False):
                values, indices = np.empty_like(x), np.empty(x.shape, np.int64)
                compiled.extremum_rows(x, values, indices, maximum, chains)
                expected = torch_scan(torch.from_numpy(x), 1, scan="cummax" if maximum else "cummin")
                assert np.array_equal(values, expected[0].numpy()) and np.array_equal(indices, expected[1].numpy())
                runs += 1
x = np.zeros((2, 3, 4))
try:
    compiled._loops().extremum_chains(x.reshape(-1), x.reshape(-1), np.zeros(24, np.int64), 2, 3, 5, True)
except IndexError:
    print(runs, "checked; out of range raises IndexError")
"""


@NEEDS_NUMBA
def test_every_loop_stays_in_bounds(tmp_path):
    tests = os.path.dirname(os.path.abspath(__file__))  # the child imports torch_oracles from here
    path = os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", PYCUMSUM_OP_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=path)
    env.pop("PYCUMSUM_OP_ACCELERATOR", None)
    child = subprocess.run([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, env=env, timeout=600)
    assert child.returncode == 0, child.stderr
    assert child.stdout == "{} checked; out of range raises IndexError\n".format(7 * 2 * 2 * 2 * 4 + 7 * 4)
