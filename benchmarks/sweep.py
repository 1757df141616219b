"""A seeded random sweep of shapes: PyCumSum against torch where a fixed grid would not look.

    python benchmarks/sweep.py --seed 7          # one sweep alone (make bench runs it after the grid)

`draw_shapes` draws ``count`` cases: rank 1-4, 64K-4M elements, every axis, lanes (the
product of the other axes) from 1 to 10^5 and lengths (the scanned axis) from 2 to 10^6,
float32 and float64. Lengths and lane counts are log-uniform, and the lanes are split
log-uniformly between the axes before and after the scanned one, so narrow and wide
inner strides, short and long lanes, middle axes and 1-D tensors all come up. Each case
times PyCumSum forward and forward+backward (Caffe2 nets) against torch.cumsum and torch
autograd, alternately in one process (`timing.measure`), and reports every ratio, the worst
and the median, and each shape over 1.0x. It also times the Python-op floor
(`nets.python_floor`: the least a Caffe2 Python op computing torch's forward does), which shows
how much of a ratio is the Python op's own cost and not the engine's.
"""
import argparse
import math
import os
import sys

import numpy as np

import nets
import timing
from pycumsum_op.commands._common import whole_number

MIN_SIZE, MAX_SIZE = 1 << 16, 1 << 22
MAX_LANES, MAX_LENGTH = 10 ** 5, 10 ** 6
DTYPES = (np.float32, np.float64)
WORST_TARGET, MEDIAN_TARGET = 1.1, 0.8
KINDS = ("forward", "forward_backward")


def _log_uniform(rng, low, high):
    """An integer drawn log-uniformly from [low, high]."""
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def _factor(rng, total, parts):
    """``parts`` positive integers whose product is close to ``total``, split log-uniformly."""
    if parts == 0:
        return []
    cuts = np.sort(rng.uniform(0.0, math.log(total), parts - 1))
    logs = np.diff(np.concatenate([[0.0], cuts, [math.log(total)]]))
    return [max(1, int(round(math.exp(value)))) for value in logs]


def _draw_case(rng, rank):
    """(shape, axis) of ``rank`` drawn as the module doc says, or None when rounding left the limits."""
    size = _log_uniform(rng, MIN_SIZE, MAX_LENGTH if rank == 1 else MAX_SIZE)
    axis = int(rng.randint(rank))
    if rank == 1:
        return (size,), axis
    length = _log_uniform(rng, max(2, -(-size // MAX_LANES)), min(MAX_LENGTH, size // 2))
    lanes = max(1, size // length)
    after = rank - 1 - axis  # the axes before the scanned one hold the outer lanes, those after the inner
    outer = _log_uniform(rng, 1, lanes) if axis and after else (lanes if axis else 1)
    inner = max(1, lanes // outer)
    shape = tuple(_factor(rng, outer, axis)) + (length,) + tuple(_factor(rng, inner, after))
    total = int(np.prod(shape))
    return (shape, axis) if MIN_SIZE <= total <= MAX_SIZE and total // length <= MAX_LANES else None


def draw_shapes(seed, count):
    """``count`` (shape, axis, dtype name) cases from ``seed``; see the module doc."""
    rng = np.random.RandomState(seed)
    cases = []
    while len(cases) < count:
        rank = int(rng.randint(1, 5))
        case = None
        while case is None:  # redraw until the rounded shape fits, keeping the rank (ranks stay uniform)
            case = _draw_case(rng, rank)
        cases.append(case + (np.dtype(DTYPES[len(cases) % len(DTYPES)]).name,))
    return cases


def time_cases(cases, budget_s, measure, median):
    """Per case: the paths taken, medians of PyCumSum and torch, forward and forward+backward."""
    results = []
    for shape, axis, dtype in cases:
        x, grad_y = nets.feed(shape, dtype=dtype)
        candidates = {
            "pycumsum_forward": nets.pycumsum(axis),
            "torch_forward": nets.torch_forward(x, axis),
            "pycumsum_forward_backward": nets.pycumsum(axis, backward=True),
            "torch_forward_backward": nets.torch_forward_backward(x, grad_y, axis),
            "floor_forward": nets.python_floor(axis),
        }
        samples = measure(candidates, budget_s, 5, 40)
        entry = {"shape": list(shape), "axis": axis, "dtype": dtype, "paths": list(nets.paths(x, axis))}
        entry.update({name: median(times) for name, times in samples.items()})
        for kind in KINDS:
            entry["ratio_" + kind] = entry["pycumsum_" + kind] / entry["torch_" + kind]
        entry["ratio_floor"] = entry["floor_forward"] / entry["torch_forward"]
        results.append(entry)
        print("sweep {} axis {} {}: {:.2f}x / {:.2f}x".format(shape, axis, dtype, entry["ratio_forward"],
                                                              entry["ratio_forward_backward"]), file=sys.stderr)
    return results


def summary(results):
    """{kind: {"worst", "median", "over": [cases over 1.0x]}} for forward and forward+backward."""
    out = {}
    for kind in KINDS + ("floor",):
        ratios = [entry["ratio_" + kind] for entry in results]
        out[kind] = {"worst": max(ratios), "median": float(np.median(ratios)),
                     "over": [entry for entry in results if entry["ratio_" + kind] > 1.0]}
    return out


def targets(results, seed):
    """(name, passed, detail) for the sweep's targets: worst <= 1.1x and median <= 0.8x torch."""
    checks = []
    numbers_by_kind = summary(results)
    for kind in KINDS:
        numbers = numbers_by_kind[kind]
        label = kind.replace("_", "+")
        checks.append(("sweep (seed {}): worst {} <= {}x torch".format(seed, label, WORST_TARGET),
                       numbers["worst"] <= WORST_TARGET, "{:.2f}x".format(numbers["worst"])))
        checks.append(("sweep (seed {}): median {} <= {}x torch".format(seed, label, MEDIAN_TARGET),
                       numbers["median"] <= MEDIAN_TARGET, "{:.2f}x".format(numbers["median"])))
    return checks


def markdown(results, seed, table):
    """The sweep's section of the report: worst, median, shapes over 1.0x and every case."""
    numbers = summary(results)
    lines = ["### Random sweep (seed {}, {} shapes; ratio = PyCumSum / torch, medians of alternating runs)".format(
        seed, len(results)), ""]
    for kind in KINDS:
        over = numbers[kind]["over"]
        lines.append("- {}: worst {:.2f}x, median {:.2f}x; over 1.0x: {}".format(
            kind.replace("_", "+"), numbers[kind]["worst"], numbers[kind]["median"],
            ", ".join("{} axis {} {} {:.2f}x".format(tuple(e["shape"]), e["axis"], e["dtype"], e["ratio_" + kind])
                      for e in over) or "none"))
    floor = numbers["floor"]
    lines.append("- the Python-op floor (`nets.python_floor`: size the output, one torch.cumsum(out=)): worst {:.2f}x, "
                 "median {:.2f}x; over {}x on {} of {} shapes".format(
                     floor["worst"], floor["median"], WORST_TARGET,
                     sum(e["ratio_floor"] > WORST_TARGET for e in results), len(results)))
    lines += ["", table(["shape", "axis", "dtype", "paths (fwd/bwd)", "forward", "vs torch", "floor vs torch",
                         "fwd+bwd", "vs torch"],
                        [[tuple(e["shape"]), e["axis"], e["dtype"], "/".join(e["paths"]),
                          "{:.1f} µs".format(e["pycumsum_forward"] * 1e6), "{:.2f}x".format(e["ratio_forward"]),
                          "{:.2f}x".format(e["ratio_floor"]),
                          "{:.1f} µs".format(e["pycumsum_forward_backward"] * 1e6),
                          "{:.2f}x".format(e["ratio_forward_backward"])] for e in results]), ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=whole_number(0), default=0, help="draws another sweep")
    parser.add_argument("--count", type=whole_number(1), default=48, help="shapes in the sweep")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timing per shape")
    args = parser.parse_args(argv)
    load, threads = os.getloadavg()[0], timing.fix_threads()
    results = time_cases(draw_shapes(args.seed, args.count), args.budget, timing.measure, timing.median)
    print("{}; load average {:.2f} at start, {:.2f} at the end\n".format(threads, load, os.getloadavg()[0]))
    print(markdown(results, args.seed, timing.table))
    for name, passed, detail in targets(results, args.seed):
        print("{}: {} ({})".format(name, "PASS" if passed else "MISS", detail))


if __name__ == "__main__":
    main()
