"""The sweep by shape class: PyCumSum and the scan family against torch, with and without the accelerator.

    python benchmarks/classes.py                  # seeds 0 (development) and 1, 2 (never looked at while tuning)
    python benchmarks/classes.py --seeds 5 --count 4

Shapes come from the random sweep's draw (`sweep._draw_case`: rank 1-4, 64K-4M elements, log-uniform lengths and
lanes) and are sorted into four classes (`shape_class`): 1-D, the last axis with many rows (64 lanes or more),
the last axis with few rows, and non-last axes. Each case times, alternately in one process with one thread
(`timing`): PyCumSum forward and forward+backward with the accelerator (``pycumsum_op[fast]``) and without it
(``PYCUMSUM_OP_ACCELERATOR=0``; only where the engine's paths differ), torch.cumsum and torch autograd, the
Python-op floor (`nets.python_floor` making the call PyCumSum makes for the shape, the route's `call`: a bare Caffe2
Python op around the same kernel, so PyCumSum / floor is what the op itself costs and floor / torch what any
Python op making that call costs) and a Copy op (last and non-last axes: with cold caches a scan is close to a
copy of its memory). The family's rows time each scan's forward (cumprod, cummax, cummin,
logcumsumexp) the same way against torch. Every candidate is timed twice (`STATES`): with warm caches (each batch
of calls after an untimed call of the same candidate) and cold ones (every call after the caches are evicted), so
that no candidate gains from what the one before it left. Each class gets one table per seed and cache state and
a summary with the targets (`TARGETS`); seeds after the first are reported apart.
"""
import argparse
import os
import sys
import time

import numpy as np

import nets
import sweep
import timing
from pycumsum_op.kernels import compiled
from pycumsum_op.scans import scan as registered_scan
from timing import median, table

CLASSES = ("1-D", "last axis, many rows", "last axis, few rows", "non-last axes")
MANY_ROWS = 64
#: class -> (median, worst) limits of PyCumSum / torch, forward and forward+backward (and the family's forward).
TARGETS = {"1-D": (1.08, 1.25), "last axis, many rows": (1.08, 1.25), "last axis, few rows": (1.08, 1.25),
           "non-last axes": (0.6, 1.1)}
#: non-last axes: median PyCumSum forward <= this many Copy ops, on inputs of at least COPY_MIN_SIZE elements.
COPY_TARGET, COPY_MIN_SIZE = 2.0, 10 ** 6
#: The cache states each case is timed in (`timing.measure`).
STATES = ("warm", "cold")
FAMILY = ("cumprod", "cummax", "cummin", "logcumsumexp")


def shape_class(shape, axis):
    if len(shape) == 1:
        return "1-D"
    if axis != len(shape) - 1:
        return "non-last axes"
    lanes = int(np.prod(shape)) // shape[axis]
    return "last axis, many rows" if lanes >= MANY_ROWS else "last axis, few rows"


def draw(seed, count):
    """{class: ``count`` (shape, axis, dtype name)} from ``seed`` (float32 and float64 alternate)."""
    rng = np.random.RandomState(seed)
    drawn = {name: [] for name in CLASSES}
    while any(len(cases) < count for cases in drawn.values()):
        case = sweep._draw_case(rng, int(rng.randint(1, 5)))
        if case is not None:
            cases = drawn[shape_class(*case)]
            if len(cases) < count:
                cases.append(case + (("float32", "float64")[len(cases) % 2],))
    return drawn


def switched(run, on):
    """``run`` with the accelerator turned on or off for the call (the switch is read on every scan); ``run``
    itself when ``on`` is None (the paths are the same either way: setting the switch costs ~1-3 µs a call,
    which the candidates it is compared with do not pay)."""
    if on is None:
        return run
    setting = "1" if on else "0"

    def call():
        if os.environ.get(compiled.SWITCH) != setting:  # set only when it changes (putenv costs more)
            os.environ[compiled.SWITCH] = setting
        return run()
    return call


def differs(x, axis):
    """Whether the engine takes other paths (forward or backward) with the accelerator than without."""
    taken = []
    for setting in ("1", "0"):
        os.environ[compiled.SWITCH] = setting
        taken.append(nets.paths(x, axis))
    return taken[0] != taken[1]


def time_cumsum(shape, axis, dtype, budget_s, statistic=median, clock=time.perf_counter):
    x, grad_y = nets.feed(shape, dtype=dtype)
    accelerated = compiled.installed() and differs(x, axis)
    candidates = {"torch_forward": nets.torch_forward(x, axis),
                  "torch_forward_backward": nets.torch_forward_backward(x, grad_y, axis)}
    os.environ[compiled.SWITCH] = "1"
    for on in (True, False) if accelerated else (None,):
        suffix = "" if on is not False else "_plain"
        # created and first run under the setting: the op remembers its direct calls per shape
        candidates["pycumsum_forward" + suffix] = switched(nets.pycumsum(axis), on)
        candidates["pycumsum_forward_backward" + suffix] = switched(nets.pycumsum(axis, backward=True), on)
    if shape_class(shape, axis) != "1-D":  # the memory floor: a scan with cold caches is close to a copy
        candidates["copy"] = nets.copy()
    call = nets.scan_route("cumsum", x, axis, accelerator=True).call  # as PyCumSum makes it
    if call is not None:  # the accelerator's loop runs only when switched on: switched on for it
        candidates["floor"] = switched(nets.python_floor(axis, call), True if accelerated else None)
    os.environ[compiled.SWITCH] = "1"
    entry = {"shape": list(shape), "axis": axis, "dtype": dtype, "size": x.size, "paths": list(nets.paths(x, axis))}
    for state in STATES:
        entry[state] = _timed(candidates, budget_s / len(STATES), statistic, clock, state)
        if not accelerated:  # the same paths either way
            for kind in ("forward", "forward_backward"):
                entry[state]["pycumsum_{}_plain".format(kind)] = entry[state]["pycumsum_" + kind]
    return entry


def _timed(candidates, budget_s, statistic, clock, state):
    """{candidate: ``statistic`` of its rounds} in one cache ``state``."""
    return {name: statistic(times) for name, times in timing.measure(candidates, budget_s, 5, 40, clock, state).items()}


def time_family(scan, shape, axis, dtype, budget_s, statistic=median, clock=time.perf_counter):
    x, _ = nets.feed(shape, 0.99, 1.01, dtype=dtype)
    candidates = {"torch_forward": nets.torch_family_forward(scan, x, axis)}
    os.environ[compiled.SWITCH] = "1"
    accelerated = compiled.installed() and nets.scan_route(scan, x, axis, accelerator=True).path == "compiled"
    for on in (True, False) if accelerated else (None,):
        candidates["forward" if on is not False else "forward_plain"] = switched(nets.family(scan, axis), on)
    os.environ[compiled.SWITCH] = "1"
    entry = {"scan": scan, "shape": list(shape), "axis": axis, "dtype": dtype, "size": x.size}
    for state in STATES:
        entry[state] = _timed(candidates, budget_s / len(STATES), statistic, clock, state)
        entry[state].setdefault("forward_plain", entry[state]["forward"])
    return entry


def run_seed(seed, count, family_count, budget_s, statistic=median, clock=time.perf_counter):
    """{"cumsum": {class: [entries]}, "family": {class: [entries]}} for one seed; each time is ``statistic`` of
    the candidate's alternating rounds, timed by ``clock`` (wall time, or the thread's CPU time)."""
    drawn = draw(seed, count)
    result = {"seed": seed, "cumsum": {}, "family": {}}
    for name in CLASSES:
        result["cumsum"][name] = []
        for shape, axis, dtype in drawn[name]:
            result["cumsum"][name].append(time_cumsum(shape, axis, dtype, budget_s, statistic, clock))
            print("seed {} {}: {} axis {} {}".format(seed, name, shape, axis, dtype), file=sys.stderr)
        result["family"][name] = [time_family(scan, shape, axis, dtype, budget_s / 2, statistic, clock)
                                  for shape, axis, dtype in drawn[name][:family_count] for scan in FAMILY]
    return result


def _ratios(entries, state, numerator, denominator):
    return [entry[state][numerator] / entry[state][denominator] for entry in entries if numerator in entry[state]]


def _stats(ratios):
    return (float(np.median(ratios)), max(ratios)) if ratios else (float("nan"), float("nan"))


def summary(result, state):
    """Per class: (median, worst) of each ratio in cache ``state``, and the targets as (name, passed, detail)."""
    rows, checks = [], []
    for name in CLASSES:
        entries = result["cumsum"][name]
        medium, worst = TARGETS[name]
        row = {"class": name, "cases": len(entries)}
        for kind in ("forward", "forward_backward"):
            for suffix, label in (("", "with"), ("_plain", "without")):
                row[kind + suffix] = _stats(_ratios(entries, state, "pycumsum_" + kind + suffix, "torch_" + kind))
                if label == "with" or not compiled.installed():
                    checks.append(("{}: {} median <= {}x, worst <= {}x torch ({} the accelerator, {})".format(
                        name, kind.replace("_", "+"), medium, worst, label, state),
                        row[kind + suffix][0] <= medium and row[kind + suffix][1] <= worst,
                        "median {:.2f}x, worst {:.2f}x".format(*row[kind + suffix])))
        row["floor"] = _stats(_ratios(entries, state, "floor", "torch_forward"))
        row["over_floor"] = _stats(_ratios(entries, state, "pycumsum_forward", "floor"))
        if name == "non-last axes":
            big = [entry for entry in entries if entry["size"] >= COPY_MIN_SIZE]
            for suffix in ("", "_plain"):
                row["copy" + suffix] = _stats(_ratios(big, state, "pycumsum_forward" + suffix, "copy"))
            checks.append(("{}: forward median <= {}x a Copy op (>= 10^6 elements, with the accelerator, {})".format(
                name, COPY_TARGET, state), row["copy"][0] <= COPY_TARGET,
                "{:.2f}x of {} cases".format(row["copy"][0], len(big))))
        elif name != "1-D":
            row["copy_torch"] = _stats(_ratios(entries, state, "copy", "torch_forward"))
        family = result["family"][name]
        for scan in FAMILY:
            ours = [entry for entry in family if entry["scan"] == scan]
            row[scan] = _stats(_ratios(ours, state, "forward", "torch_forward"))
            row[scan + "_plain"] = _stats(_ratios(ours, state, "forward_plain", "torch_forward"))
            if registered_scan(scan).kernel.loop and ours:  # the scans whose accelerated loop is torch's bit for bit
                checks.append(("{}: {} forward median <= {}x, worst <= {}x torch ({})".format(
                    name, scan, medium, worst, state),
                               row[scan][0] <= medium and row[scan][1] <= worst,
                               "median {:.2f}x, worst {:.2f}x".format(*row[scan])))
        rows.append(row)
    return rows, checks


def _pair(stats):
    return "{:.2f}x / {:.2f}x".format(*stats)


def markdown(result):
    return "".join(_state_markdown(result, state) for state in STATES)


def _state_markdown(result, state):
    rows, checks = summary(result, state)
    where = "seed {}, {} caches".format(result["seed"], state)
    out = ["### Shape classes, {} (PyCumSum / torch: median / worst; with / without the accelerator)".format(where),
           "",
           table(["class", "cases", "forward with", "forward without", "fwd+bwd with", "fwd+bwd without",
                  "floor / torch", "forward / floor",
                  "a Copy op / torch (last axes) or forward / Copy (non-last, >= 10^6; without)"],
                 [[row["class"], row["cases"], _pair(row["forward"]), _pair(row["forward_plain"]),
                   _pair(row["forward_backward"]), _pair(row["forward_backward_plain"]), _pair(row["floor"]),
                   _pair(row["over_floor"]),
                   "{:.2f}x".format(row["copy_torch"][0]) if "copy_torch" in row else
                   "{:.2f}x ({:.2f}x)".format(row["copy"][0], row["copy_plain"][0]) if "copy" in row else "-"]
                  for row in rows]), "",
           "The scan family's forward against torch (median / worst, with / without the accelerator; "
           "logcumsumexp has no compiled kernel):", "",
           table(["class"] + list(FAMILY),
                 [[row["class"]] + ["{} / {}".format(_pair(row[scan]), _pair(row[scan + "_plain"])) for scan in FAMILY]
                  for row in rows]), ""]
    for name in CLASSES:
        out += ["#### {} ({})".format(name, where), "",
                table(["shape", "axis", "dtype", "paths", "torch", "fwd with", "fwd without", "fwd+bwd with",
                       "fwd+bwd without", "floor", "Copy"],
                      [_case_row(e, e[state]) for e in result["cumsum"][name]]), ""]
    out += ["Targets ({}):".format(where), ""]
    out += ["- {}: {} ({})".format(name, "PASS" if passed else "MISS", detail) for name, passed, detail in checks]
    return "\n".join(out) + "\n\n"


def _case_row(entry, times):
    """One case's row of the class tables: its ``times`` in one cache state as ratios."""
    return [tuple(entry["shape"]), entry["axis"], entry["dtype"], "/".join(entry["paths"]),
            timing.duration(times["torch_forward"]),
            "{:.2f}x".format(times["pycumsum_forward"] / times["torch_forward"]),
            "{:.2f}x".format(times["pycumsum_forward_plain"] / times["torch_forward"]),
            "{:.2f}x".format(times["pycumsum_forward_backward"] / times["torch_forward_backward"]),
            "{:.2f}x".format(times["pycumsum_forward_backward_plain"] / times["torch_forward_backward"]),
            "{:.2f}x torch".format(times["floor"] / times["torch_forward"]) if "floor" in times else "-",
            "{:.2f}x torch".format(times["copy"] / times["torch_forward"]) if "copy" in times else "-"]


def run(seeds, count, family_count, budget_s, statistic=median, clock=time.perf_counter):
    """Markdown of every seed, with the thread settings and load averages; and the raw results."""
    started, load = time.time(), os.getloadavg()
    threads = timing.fix_threads()
    results = [run_seed(seed, count, family_count, budget_s, statistic, clock) for seed in seeds]
    head = ["## Shape classes (benchmarks/classes.py)", "",
            "{}; numba {}; times ({}) are the {} of alternating rounds, caches warm (each batch after an untimed "
            "call of the same candidate) and cold (each call after {} MiB written); load average {} at start, {} at "
            "the end; "
            "{:.0f} s. Seed {} is the development seed; seeds {} were not used for tuning.".format(
                threads, _numba_version(), "thread CPU time" if clock is time.thread_time else "wall time",
                statistic.__name__, timing.FLUSH_BYTES >> 20, "/".join("{:.2f}".format(v) for v in load),
                "/".join("{:.2f}".format(v) for v in os.getloadavg()), time.time() - started, seeds[0],
                ", ".join(str(seed) for seed in seeds[1:]) or "none"), ""]
    return "\n".join(head) + "\n" + "\n".join(markdown(result) for result in results), results


def fastest(values):
    """The fastest round: on a loaded machine, the least disturbed by other processes."""
    return float(min(values))


def _numba_version():
    if not compiled.installed():
        return "not installed (the accelerator is off)"
    import numba
    return numba.__version__


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds; the first is the development seed")
    parser.add_argument("--count", type=int, default=6, help="cumsum shapes per class and seed")
    parser.add_argument("--family-count", type=int, default=2, help="of those, shapes timed for the family")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timing per case")
    parser.add_argument("--statistic", choices=("median", "min"), default="median",
                        help="per candidate: the median of its rounds, or the fastest (on a loaded machine)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time, or this thread's CPU time (on a machine shared with other jobs)")
    args = parser.parse_args(argv)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    if min(seeds) < 0 or args.count < 1 or args.family_count < 0 or args.budget <= 0:
        parser.error("seeds must be >= 0, --count >= 1, --family-count >= 0, --budget > 0")
    text, _ = run(seeds, args.count, args.family_count, args.budget, median if args.statistic == "median" else fastest,
                  time.thread_time if args.clock == "cpu" else time.perf_counter)
    print(text)


if __name__ == "__main__":
    main()
