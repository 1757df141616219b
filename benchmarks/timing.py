"""What every benchmark shares: fixed thread settings, the alternating timer, and markdown helpers.

`fix_threads` sets ``torch.set_num_threads(1)`` and ``OMP_NUM_THREADS=1`` (for child processes): every ratio is
one thread against one thread, whatever the machine, and `thread_settings` says so in each report.
"""
import functools
import gc
import os
import time

import numpy as np
import torch


def fix_threads() -> str:
    """One torch thread (torch.cumsum and the engine's thread splits follow it) here and in child processes;
    the settings, for reports."""
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    return thread_settings()


def thread_settings() -> str:
    return "torch.get_num_threads() = {}, OMP_NUM_THREADS = {}".format(
        torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS", "unset"))


#: Bytes written between calls for cold caches: more than this machine's last-level cache (32 MiB).
FLUSH_BYTES = 48 << 20
#: How `measure` leaves the caches before a timed call (see there).
CACHE_STATES = (None, "warm", "cold")


@functools.lru_cache(maxsize=1)
def flush_buffer() -> np.ndarray:
    """The buffer `evict` writes: `FLUSH_BYTES` of memory, touched once here and shared by every cold measurement
    of the process (a sweep times hundreds)."""
    return np.ones(FLUSH_BYTES, np.uint8)


def evict(buffer: np.ndarray) -> None:
    """Write all of ``buffer`` (`flush_buffer`): what was in the caches before is gone after."""
    np.add(buffer, 1, out=buffer)


def measure(candidates, budget_s, min_rounds, max_rounds, clock=time.perf_counter, caches=None):
    """{name: per-call seconds of every round} for callables run in an order drawn afresh each round (seeded, so
    runs repeat): no candidate always follows the same one (in a fixed rotation, the candidate after torch's autograd
    call measured 1.2-1.8x its time at another place, its untimed call before the batch notwithstanding).

    ``caches`` says what a timed call finds in the caches:

    - None: each round times a batch of ~1 ms of calls of every candidate in turn, so a batch starts with what the
      candidate before it left;
    - "warm": the same batches, each after an untimed call of the same candidate (its data cached, as in a loop
      that runs one op again and again);
    - "cold": one call at a time, each after `evict` (inputs and outputs come from memory, as for a net whose
      other ops ran in between).

    ``clock`` is wall time, or ``time.thread_time`` (this thread's CPU time: on a machine shared with other jobs,
    the time the OS takes the core away is not counted, though their use of the caches still is)."""
    if caches not in CACHE_STATES:
        raise ValueError("caches: expected one of {}, got {!r}".format(CACHE_STATES, caches))
    buffer = flush_buffer() if caches == "cold" else None
    batch = {}
    for name, run in candidates.items():
        run()  # warm up: outputs allocated, memory touched, pools started
        start = time.perf_counter()
        run()
        batch[name] = 1 if caches == "cold" else max(1, int(1e-3 / max(time.perf_counter() - start, 1e-7)))
    names = list(candidates)
    order = np.random.RandomState(0)
    samples = {name: [] for name in names}
    start = time.perf_counter()
    gc.disable()
    try:
        for index in range(max_rounds):
            if index >= min_rounds and time.perf_counter() - start > budget_s:
                break
            for name in order.permutation(names):
                run, calls = candidates[name], batch[name]
                if caches == "warm":
                    run()
                elif caches == "cold":
                    evict(buffer)
                begin = clock()
                for _ in range(calls):
                    run()
                samples[name].append((clock() - begin) / calls)
    finally:
        gc.enable()
    return samples


def median(values):
    return float(np.median(values))


def duration(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return "{:.1f} µs".format(seconds * 1e6)
    if seconds < 1:
        return "{:.3g} ms".format(seconds * 1e3)
    return "{:.3g} s".format(seconds)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows])
