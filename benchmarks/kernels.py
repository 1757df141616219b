"""Kernel time of the engine's choice against torch's call, caches warm and cold, on rows of 1-15 lanes.

    python benchmarks/kernels.py                 # seeds 0 (development) and 1, 2 (never looked at while tuning)
    python benchmarks/kernels.py --seeds 5 --count 12

Rows of 1-15 lanes (the last axis among them) are where the accelerator runs four lanes' add chains at once
(`compiled._chains`; float64 rows of 12-15 lanes take its row loops), and rows of 4-7 lanes where cummax / cummin
do (`compiled._extremum_chains`); the engine takes them only where `engine.compiled_wins` says so (`tuning`: on
rows of 4 lanes or more, lanes of 16 elements or more; on 1-3 lanes, lanes spanning 4 KiB, three lanes or more,
not a multiple of 64 KiB apart). This sweep checks that rule on
shapes it was not tuned on: seeded random (outer, length, inner) of 64K-4M elements, lanes log-uniform, float32
and float64 alternating. Each case times, one thread, no Caffe2 op around them (the op's own cost is
`classes.py`'s floor column):

- torch's call into a kept output (``torch.cumsum(out=)``, ``torch.cumprod(out=)``, ``torch.cummax(out=)``);
- the loop the engine picks for it (``engine`` column: the accelerator's, or torch's call again where the rule says
  no);
- the accelerator's loop alone, also where the rule says no (what the rule turned down);

each twice: warm (the arrays in cache from the call before) and cold (`timing.evict` between calls, so inputs and
outputs come from memory, as for a net whose other ops ran in between). A ratio is the median
over rounds of the candidate's time over torch's, below 1 faster.
"""
import argparse
import math
import sys
import time

import numpy as np
import torch

import timing
from pycumsum_op.commands._common import whole_number
from nets import scan_route
from pycumsum_op.kernels import compiled, engine, tuning
from timing import table

MIN_SIZE, MAX_SIZE = 1 << 16, 1 << 22
#: (loop, widths): the chains of sums and products take rows of 1-15 lanes, cummax's rows of 4-7.
LOOPS = (("sum", tuple(range(1, 16))), ("product", tuple(range(1, 16))), ("extremum", (4, 5, 6, 7)))
#: loop -> a scan whose kernel takes it (cummax for the extremum loop).
SCANS = {"sum": "cumsum", "product": "cumprod", "extremum": "cummax"}


def _log_uniform(rng, low, high):
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def draw(seed, count):
    """``count`` cases (loop, (outer, length, inner), dtype name) per loop from ``seed``."""
    rng = np.random.RandomState(seed)
    cases = []
    for loop, widths in LOOPS:
        drawn = 0
        while drawn < count:
            inner = int(rng.choice(widths))
            size = _log_uniform(rng, MIN_SIZE, MAX_SIZE)
            length = _log_uniform(rng, 8, size // inner)
            outer = max(1, size // (length * inner))
            if MIN_SIZE <= outer * length * inner <= MAX_SIZE:
                cases.append((loop, (outer, length, inner), ("float32", "float64")[drawn % 2]))
                drawn += 1
    return cases


def _calls(loop, x):
    """({name: callable}, whether the engine takes the accelerator) for one case: torch's call, the engine's choice
    (`route.route`, which the scans ask), the accelerator's loop alone (the routed variant)."""
    found = scan_route(SCANS[loop], x, 1, accelerator=True)
    taken, chains = found.path == "compiled", found.chains
    if loop == "extremum":
        values, indices = torch.empty_like(torch.from_numpy(x)), torch.empty(x.shape, dtype=torch.int64)
        tensor = torch.from_numpy(x)

        def accelerator():
            compiled.extremum_rows(x, values.numpy(), indices.numpy(), True, chains)

        def torch_call():
            torch.cummax(tensor, 1, out=(values, indices))
    else:
        out = np.empty_like(x)
        source, target = torch.from_numpy(x), torch.from_numpy(out)
        scan = engine.torch_product if loop == "product" else engine.torch_scan

        def accelerator():
            compiled.scan_rows(x, out, found.kernel, False, False, chains)

        def torch_call():
            scan(source, target, 1)
    return {"torch": torch_call, "engine": accelerator if taken else torch_call, "accelerator": accelerator}, taken


def _median_ratios(calls, rounds, flush):
    """{name: median over ``rounds`` of its time / torch's}, each round timing every call once (after
    `timing.evict` of ``flush`` when given: the cold runs)."""
    ratios = {name: [] for name in calls if name != "torch"}
    for _ in range(rounds):
        times = {}
        for name, call in calls.items():
            if flush is not None:
                timing.evict(flush)
            start = time.perf_counter()
            call()
            times[name] = time.perf_counter() - start
        for name in ratios:
            ratios[name].append(times[name] / times["torch"])
    return {name: float(np.median(values)) for name, values in ratios.items()}


def time_case(loop, shape, dtype, rounds, flush):
    x = np.random.RandomState(1).uniform(0.99, 1.01, shape).astype(dtype)
    calls, taken = _calls(loop, x)
    for call in calls.values():
        call()  # compiled, memory touched
    entry = {"loop": loop, "shape": list(shape), "dtype": dtype, "taken": taken}
    for state, buffer in (("warm", None), ("cold", flush)):
        for name, ratio in _median_ratios(calls, rounds, buffer).items():
            entry["{}_{}".format(name, state)] = ratio
    return entry


def _summary(entries, key):
    values = [entry[key] for entry in entries]
    return "{:.2f}x / {:.2f}x".format(np.median(values), max(values)) if values else "-"


def markdown(seed, entries):
    lines = ["### Rows of 1-15 lanes, seed {} (kernel time / torch's call: median / worst)".format(seed), ""]
    rows = []
    for loop, _ in LOOPS:
        ours = [entry for entry in entries if entry["loop"] == loop]
        taken, declined = [e for e in ours if e["taken"]], [e for e in ours if not e["taken"]]
        rows.append([loop, len(taken), _summary(taken, "engine_warm"), _summary(taken, "engine_cold"), len(declined),
                     _summary(declined, "accelerator_warm"), _summary(declined, "accelerator_cold")])
    lines.append(table(["loop", "taken", "engine, warm", "engine, cold", "declined", "accelerator there, warm",
                        "accelerator there, cold"], rows))
    lines += ["", table(["loop", "(outer, length, inner)", "dtype", "taken", "accelerator warm", "accelerator cold"],
                        [[e["loop"], tuple(e["shape"]), e["dtype"], "yes" if e["taken"] else "no",
                          "{:.2f}x".format(e["accelerator_warm"]), "{:.2f}x".format(e["accelerator_cold"])]
                         for e in entries])]
    return "\n".join(lines) + "\n"


def run(seeds, count, rounds):
    """Markdown for every seed (the first is the development seed) and the raw entries."""
    threads = timing.fix_threads()
    if not compiled.enabled():
        return "## Rows of 1-15 lanes: the accelerator is off or not installed; nothing to time.\n", []
    flush = timing.flush_buffer()
    started = time.time()
    results = [(seed, [time_case(*case, rounds, flush) for case in draw(seed, count)]) for seed in seeds]
    head = ["## Rows of 1-15 lanes (benchmarks/kernels.py)", "",
            "{}; {:.0f} s; medians of {} rounds; tuning: chains on rows of 4 lanes or more with lanes of {} elements "
            "or more, on rows of 1-3 lanes with lanes of {} bytes or more, {} lanes or more. "
            "Seed {} is the development seed; seeds {} were not used for tuning.".format(
                threads, time.time() - started, rounds, tuning.COMPILED_CHAINS_MIN_LENGTH,
                tuning.COMPILED_CHAINS_MIN_BYTES, tuning.COMPILED_CHAINS_MIN_LANES, seeds[0],
                ", ".join(str(s) for s in seeds[1:]) or "none"), ""]
    return "\n".join(head) + "\n" + "\n".join(markdown(seed, entries) for seed, entries in results), results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seed_list, default="0,1,2",
                        help="comma-separated seeds; the first is the development seed")
    parser.add_argument("--count", type=whole_number(1), default=8, help="shapes per loop and seed")
    parser.add_argument("--rounds", type=whole_number(1), default=7, help="timed rounds per case, warm and cold each")
    args = parser.parse_args(argv)
    text, _ = run(args.seeds, args.count, args.rounds)
    print(text)


def seed_list(text):
    """An argparse ``type``: comma-separated whole numbers (numpy's seeds), refused in words."""
    return [whole_number(0)(part) for part in text.split(",")]


if __name__ == "__main__":
    sys.exit(main())
