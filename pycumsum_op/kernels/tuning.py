"""Every tuning constant of the scan engine (`engine`) and the accelerator's loops (`compiled`), in one place.

Each value changes speed only, never results: every path adds a lane's elements in the same order. The
numbers behind each value are dated in benchmarks/RESULTS.md (2-core AMD EPYC VM, one torch thread).
`engine` reads these names at call time (tests scale them down to reach every path on small arrays);
`compiled`'s loops read theirs when numba compiles them.
"""

#: Inputs smaller than this take the ``numpy`` path (a torch call costs more than it saves).
SMALL_SIZE = 1 << 12

#: A model of the cache torch's strided loop runs in: 64 sets of 16 ways of 64-byte lines (64 KiB, the L1
#: and what the L2 adds: torch's loop kept pace on lanes of up to 1005 rows of 720-1440 bytes and fell behind,
#: 0.41-0.77x through the `lanes` buffer, from 1398 rows on; with 8 ways, lanes of 237-1028 rows took that
#: buffer at 1.29-1.76x torch). The loop sweeps one lane, then its neighbour, which reads the same lines
#: again: fast only while one lane's lines stay cached. A stride that is a multiple of a line maps them to
#: fewer sets.
CACHE_LINE = 64
CACHE_SETS = 64
CACHE_WAYS = 16
#: Rows narrower than a line share lines between lanes; the sweeps stream from memory once the lines of a
#: lane sweep no longer fit in this much cache (an L3 share).
STREAM_CACHE_BYTES = 1 << 23

#: Without the accelerator, where torch's loop misses the cache: rows of at least this many lanes take the
#: ``rows`` path (a numpy call per row pays off), narrower ones the ``lanes`` path ...
ROWS_MIN_WIDTH = 512
#: ... and so do rows of at least this many whose byte stride is a multiple of `ALIASED_STRIDE` (torch's
#: strided loop then maps a lane to few cache sets and misses: 4-7 ns an element, not 1.5).
ROWS_MIN_ALIASED_WIDTH = 128
ALIASED_STRIDE = 1024
#: Elements in the ``lanes`` / ``rows`` paths' block buffer (512 KiB of float64).
BUFFER_ELEMENTS = 1 << 16
#: Fewest rows per block on those paths (wider rows are better, but the carry costs a row).
ROWS_MIN_BLOCK = 4

#: With the accelerator, a forward sum or product off the last axis takes its compiled loop wherever rows (the
#: lanes side by side) are `COMPILED_NARROW` lanes wide or more, at any lane length (kernel time, compiled / torch:
#: 0.09-0.45x from 16 elements on, 0.42-0.63x at 2-13), and on narrower rows of `COMPILED_FEW_LANES` lanes or more
#: where lanes are at least this long: sums of every dtype and products (four lanes' chains: 0.3-0.9x torch's
#: strided loop; on lanes of 9-15 elements 0.85-1.15x, of 2-7 0.95-1.6x: torch's chains are short there).
COMPILED_CHAINS_MIN_LENGTH = 16
#: cummax / cummin take the compiled loop where rows are at least this many lanes wide, lanes of any length: rows of
#: 4-7 lanes (C-contiguous) four lanes at a time (`compiled._extremum_chains`: 0.33-0.83x torch's strided loop; on
#: 1-3 lanes 0.85-1.9x, torch's loop keeps its branches predicted there) ...
COMPILED_EXTREMUM_MIN_WIDTH = 4
#: ... wider ones by row loops (`compiled._row_maximum`: 0.14-0.63x torch's from 8 lanes on, also on lanes of 2
#: elements; the element loop before them 1.3-2.4x at 2-4 lanes).
COMPILED_EXTREMUM_CHAINS_WIDTH = 8
#: The compiled loop takes rows narrower than `COMPILED_NARROW` lanes and `COMPILED_NARROW_BYTES` bytes lane by
#: lane, four lanes at a time, each lane's running sum (product) a chain of adds in a register (`compiled._chains`,
#: C-contiguous rows; views with gaps go by the row loops), where torch's loop waits on one add after another
#: (3-4 cycles each); wider rows by whole-row loops, which LLVM vectorises (against the chains: 0.2-0.7x on float32
#: rows of 16-32 lanes; on float64 rows 0.3-0.8x from 12 lanes, 1.0-1.5x at 8-11; again with the row loops inlined,
#: one random draw: float32 0.25-1.1x at 16-32 lanes, 0.57-2.2x at 4-15; float64 0.18-1.5x at 12-32, 0.51-3.3x at
#: 4-11, medians on the same sides of the limits) ...
COMPILED_NARROW = 16
COMPILED_NARROW_BYTES = 96
#: Rows narrower than `COMPILED_FEW_LANES` lanes have a rule of their own: the last axis is rows of one lane, and
#: the four lanes of a group lie far apart. Floating sums and every product (an integer add takes one cycle: no
#: chain to break) win (kernel time against torch's, caches warm: 0.45-0.85x; inputs and outputs fetched from
#: memory: 0.38-0.91x) where a lane's elements span this many bytes or more (with the inner lanes beside them); on
#: shorter runs the four runs a group reads do not keep the memory prefetch going (cold: 1.14-1.75x at 0.5-2 KiB) ...
COMPILED_FEW_LANES = 4
COMPILED_CHAINS_MIN_BYTES = 4096
#: ... where there are this many lanes or more (one lane is one chain either way; two run as a pair: 0.51-0.83x torch
#: warm, 0.60-0.89x cold) ...
COMPILED_CHAINS_MIN_LANES = 2
#: ... and lanes do not start a multiple of this many bytes apart (float64 lanes 64 and 128 KiB apart measured
#: 1.6-2.8x with some placements of input and output: their lines meet in the same cache sets).
COMPILED_CHAINS_ALIASED_SPAN = 1 << 16
#: Row loops go in blocks of this many lanes, so that the accumulator block stays in the L1 cache.
COMPILED_BLOCK = 1024
