"""Every tuning constant of the scans' routes (`route`) and the accelerator's loops (`compiled`), in one place.

Each value changes speed only, never results: every path adds a lane's elements in the same order. Each says
why it exists and the benchmark that re-derives it (from the repository's root, with the package's venv); the
measurements behind the values are in benchmarks/RESULTS.md. A route reads these names when it is made (tests
scale them down to reach every path on small arrays).

- ``classes``: ``.venv/bin/python benchmarks/run.py --only-classes --clock cpu --statistic min`` (PyCumSum against
  torch by shape class, with and without the accelerator);
- ``kernels``: ``.venv/bin/python benchmarks/run.py --only-kernels`` (the accelerator's loops on rows of 1-15 lanes
  against torch's call, caches warm and cold);
- ``sweep``: ``.venv/bin/python benchmarks/run.py --seed N`` (the random sweep of shapes, every path).
"""

#: Inputs smaller than this take the ``numpy`` path: a torch call costs more than it saves. Re-derive: sweep.
SMALL_SIZE = 1 << 12

#: A model of the cache torch's strided loop runs in (sets x ways of lines): the loop sweeps one lane, then its
#: neighbour, which reads the same lines again, so it keeps pace only while one lane's lines stay cached; a stride
#: that is a multiple of a line maps them to fewer sets. Re-derive: sweep (torch against ``lanes`` by lane length).
CACHE_LINE = 64
CACHE_SETS = 64
CACHE_WAYS = 16
#: Rows narrower than a line share lines between lanes: the sweeps stream from memory once one lane sweep's lines
#: no longer fit in this much cache (an L3 share). Re-derive: sweep.
STREAM_CACHE_BYTES = 1 << 23

#: Without the accelerator, where torch's loop misses the cache, rows of at least this many lanes take the
#: ``rows`` path (a numpy call per row pays off), narrower ones the ``lanes`` path. Re-derive: sweep.
ROWS_MIN_WIDTH = 512
#: ... and so do rows of at least this many lanes whose byte stride is a multiple of `ALIASED_STRIDE` (torch's loop
#: then maps a lane to few cache sets). Re-derive: sweep.
ROWS_MIN_ALIASED_WIDTH = 128
ALIASED_STRIDE = 1024
#: Elements in the ``lanes`` / ``rows`` paths' block buffer: cache-sized, so that the copies stay in cache.
#: Re-derive: sweep.
BUFFER_ELEMENTS = 1 << 16
#: Fewest rows per block on those paths: wider rows are better, but the carry costs a row. Re-derive: sweep.
ROWS_MIN_BLOCK = 4

#: With the accelerator, forward sums and products off the last axis take its row loops on rows of at least this
#: many lanes, at any lane length: a row is then wide enough for LLVM's vectors. Re-derive: classes, kernels.
COMPILED_NARROW = 16
#: ... and C-contiguous rows narrower than this many bytes go lane by lane in chains of four (`loops.sum_chains`),
#: where float64 row loops would not fill a vector. Re-derive: kernels.
COMPILED_NARROW_BYTES = 96
#: Rows of `COMPILED_FEW_LANES` lanes or more take the chains where lanes are at least this long: on shorter lanes
#: torch's own chains are short too. Re-derive: kernels.
COMPILED_CHAINS_MIN_LENGTH = 16
#: Rows narrower than this have a rule of their own (the last axis is rows of one lane, and a group's four lanes
#: lie far apart): floating sums and every product take the chains (an integer add takes one cycle: no chain to
#: break) where ... Re-derive: kernels.
COMPILED_FEW_LANES = 4
#: ... a lane's elements span this many bytes or more (on shorter runs the four runs a group reads do not keep the
#: memory prefetch going) ... Re-derive: kernels (cold caches).
COMPILED_CHAINS_MIN_BYTES = 4096
#: ... there are this many lanes or more (one lane is one chain either way) ... Re-derive: kernels.
COMPILED_CHAINS_MIN_LANES = 2
#: ... and lanes do not start a multiple of this many bytes apart (their lines meet in the same cache sets with
#: some placements of input and output). Re-derive: kernels.
COMPILED_CHAINS_ALIASED_SPAN = 1 << 16
#: cummax / cummin take the accelerator where rows are at least this many lanes wide, lanes of any length: on
#: narrower rows torch's loop keeps its branches predicted. Re-derive: kernels, classes.
COMPILED_EXTREMUM_MIN_WIDTH = 4
#: ... four lanes at a time (`loops.extremum_chains`) below this width, by row loops from it. Re-derive: kernels.
COMPILED_EXTREMUM_CHAINS_WIDTH = 8
#: Row loops go in blocks of this many lanes, so that the accumulator block stays in the L1 cache. Re-derive:
#: classes (wide rows).
COMPILED_BLOCK = 1024
