"""`make bench`: PyCumSum in a Caffe2 net against torch.cumsum, numpy.cumsum, a Copy op and the seed net.

For float32 shapes (1,1), (64,10), (1024,1024), (4096,1024), (16,262144), (262144,16), (64,64,64), at every
axis, it times PyCumSum forward and forward+backward (one ``workspace.RunNet`` of a created net), torch.cumsum
and torch autograd (``torch.autograd.grad``, same process, ``torch.get_num_threads()`` threads), numpy.cumsum,
a net with one Copy op of the same tensor (the memory-bandwidth bound) and, where it fits in memory, the
seed's Transpose -> EnsureDense -> SparseLengthsSum -> Transpose net. Candidates run in rounds, each round
in a rotated order, each sample a batch of calls lasting about a millisecond; the table shows medians.
A seeded random sweep of shapes (benchmarks/sweep.py; ``--seed`` draws another) follows the grid.
Peak memory comes from child processes (benchmarks/peak_memory.py: peak resident set growth), accuracy
from 10^6-long float32 rows and columns against float64, and every target of the issue gets PASS or MISS.

Output: markdown tables on stdout, the same in benchmarks/results/latest.md, raw numbers in
benchmarks/results/latest.json. Timings are only as quiet as the machine: the load average is reported.
"""
import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import torch

import nets
import sweep
from pycumsum_op.kernels import engine

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [(1, 1), (64, 10), (1024, 1024), (4096, 1024), (16, 262144), (262144, 16), (64, 64, 64)]
TORCH_TARGET_MIN_SIZE = 1 << 16   # PyCumSum <= 1.0x torch on every shape and axis of >= 64K elements
COPY_TARGET_MIN_SIZE = 10 ** 6    # PyCumSum <= 2.5x the copy at >= 10^6 elements
COPY_TARGET = 2.5
OVERHEAD_TARGET_US = 6.0
ACCURACY_TARGET = 1e-7
ACCURACY_LENGTH = 10 ** 6
MIB = 1 << 20


def measure(candidates, budget_s, min_rounds, max_rounds):
    """{name: per-call seconds of every round} for callables run in rotating order, batched to ~1 ms."""
    batch = {}
    for name, run in candidates.items():
        run()  # warm up: outputs allocated, memory touched, pools started
        start = time.perf_counter()
        run()
        batch[name] = max(1, int(1e-3 / max(time.perf_counter() - start, 1e-7)))
    names = list(candidates)
    samples = {name: [] for name in names}
    start = time.perf_counter()
    gc.disable()
    try:
        for index in range(max_rounds):
            if index >= min_rounds and time.perf_counter() - start > budget_s:
                break
            for name in names[index % len(names):] + names[:index % len(names)]:
                run, calls = candidates[name], batch[name]
                begin = time.perf_counter()
                for _ in range(calls):
                    run()
                samples[name].append((time.perf_counter() - begin) / calls)
    finally:
        gc.enable()
    return samples


def median(values):
    return float(np.median(values))


def time_case(shape, axis, budget_s, seed_budget):
    """Medians (seconds) for one shape and axis, and the paths PyCumSum takes."""
    x, grad_y = nets.feed(shape)
    candidates = {
        "pycumsum_forward": nets.pycumsum(axis),
        "pycumsum_forward_backward": nets.pycumsum(axis, backward=True),
        "torch_forward": nets.torch_forward(x, axis),
        "torch_forward_backward": nets.torch_forward_backward(x, grad_y, axis),
        "numpy_forward": nets.numpy_forward(x, axis),
        "copy": nets.copy(),
    }
    result = {"shape": list(shape), "axis": axis, "size": x.size, "paths": list(nets.paths(x, axis))}
    samples = measure(candidates, budget_s, 5, 60)
    result.update({name: median(times) for name, times in samples.items()})
    result["spread"] = {name: {"min": min(times), "quartiles": [float(q) for q in np.percentile(times, [25, 75])],
                               "rounds": len(times)} for name, times in samples.items()}
    seed_need = nets.seed_bytes(shape, axis)
    result["seed_bytes_estimate"] = seed_need
    if seed_need is not None and seed_need <= seed_budget:
        seed = {"seed_forward": nets.seed(shape[1]), "seed_forward_backward": nets.seed(shape[1], backward=True)}
        result.update({name: median(times) for name, times in measure(seed, budget_s / 2, 3, 20).items()})
    return result


def time_overhead(budget_s):
    """Per-call overhead: a 1-element PyCumSum net minus a one-Copy-op net, medians of paired rounds."""
    nets.feed((1, 1))
    candidates = {"pycumsum": nets.pycumsum(1), "copy": nets.copy(), "python_noop": nets.python_noop(),
                  "pycumsum_forward_backward": nets.pycumsum(1, backward=True)}
    samples = measure(candidates, budget_s, 50, 2000)
    paired = [p - c for p, c in zip(samples["pycumsum"], samples["copy"])]
    noop = [p - c for p, c in zip(samples["python_noop"], samples["copy"])]
    return {"pycumsum_us": median(samples["pycumsum"]) * 1e6, "copy_us": median(samples["copy"]) * 1e6,
            "pycumsum_forward_backward_us": median(samples["pycumsum_forward_backward"]) * 1e6,
            "overhead_us": median(paired) * 1e6, "python_noop_overhead_us": median(noop) * 1e6,
            "rounds": len(paired)}


def relative_error(actual, reference):
    return float(np.max(np.abs(actual.astype(np.float64) - reference) / np.abs(reference)))


def float64_scan(values, axis, reverse):
    """The float64 reference: torch.cumsum of the values in double (flipped for a reverse scan)."""
    values = torch.from_numpy(values.astype(np.float64))
    return (values.flip(axis).cumsum(axis).flip(axis) if reverse else values.cumsum(axis)).numpy()


def accuracy():
    """Max relative error of float32 forward and gradient against float64, on 10^6-long rows and columns."""
    from caffe2.python import workspace
    report = []
    for shape, axis in [((4, ACCURACY_LENGTH), 1), ((ACCURACY_LENGTH, 4), 0)]:
        x, grad_y = nets.feed(shape, low=0.5, high=1.5)  # no reference value near 0
        nets.pycumsum(axis, backward=True)()
        forward, backward = float64_scan(x, axis, False), float64_scan(grad_y, axis, True)
        (torch_grad,) = nets.torch_forward_backward(x, grad_y, axis)()
        report.append({
            "shape": list(shape), "axis": axis, "paths": list(nets.paths(x, axis)),
            "pycumsum_forward": relative_error(workspace.FetchBlob("bench_y_fb"), forward),
            "pycumsum_backward": relative_error(workspace.FetchBlob(nets.X + "_grad"), backward),
            "torch_forward": relative_error(nets.torch_forward(x, axis)().numpy(), forward),
            "torch_backward": relative_error(torch_grad.numpy(), backward),
            "float32_numpy_forward": relative_error(np.cumsum(x, axis), forward),
        })
    return report


def peak_memory(shape, axis, with_seed):
    """Peak-RSS growth of one run of each candidate, from a child process (see peak_memory.py)."""
    request = json.dumps({"shape": list(shape), "axis": axis, "seed": with_seed})
    child = subprocess.run([sys.executable, os.path.join(HERE, "peak_memory.py"), request], cwd=HERE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
    if child.returncode != 0:
        return {"error": child.stderr.strip().splitlines()[-1:]}
    return json.loads(child.stdout.strip().splitlines()[-1])


def memory_extra(entry, kind, outputs):
    """Bytes beyond the outputs: the first run's growth less the outputs, or a later run's, whichever is more."""
    first = entry[kind] - outputs * int(np.prod(entry["shape"])) * 4
    return max(first, entry[kind + "_again"])


def memory_allowance():
    """Extra bytes PyCumSum may use besides its outputs: a block buffer and a carry row per thread, 1 MiB slack."""
    return torch.get_num_threads() * engine.BUFFER_ELEMENTS * 8 * 2 + MIB


def evaluate(cases, overhead, accuracy_report, memory):
    """PASS/MISS for every target of the issue, with the number behind each."""
    targets = []

    def add(name, passed, detail):
        targets.append({"target": name, "status": "PASS" if passed else "MISS", "detail": detail})

    for case in cases:
        label = "{} axis {}".format(tuple(case["shape"]), case["axis"])
        if case["size"] >= TORCH_TARGET_MIN_SIZE:
            for kind in ("forward", "forward_backward"):
                ratio = case["pycumsum_" + kind] / case["torch_" + kind]
                add("{} <= 1.0x torch, {}".format(kind.replace("_", "+"), label), ratio <= 1.0,
                    "{:.2f}x".format(ratio))
        if case["size"] >= COPY_TARGET_MIN_SIZE:
            ratio = case["pycumsum_forward"] / case["copy"]
            add("forward <= {}x copy, {}".format(COPY_TARGET, label), ratio <= COPY_TARGET, "{:.2f}x".format(ratio))
            ratio = case["pycumsum_forward_backward"] / (2 * case["copy"])
            add("forward+backward <= {}x two copies, {}".format(COPY_TARGET, label), ratio <= COPY_TARGET,
                "{:.2f}x".format(ratio))
    add("per-call overhead <= {} us".format(OVERHEAD_TARGET_US), overhead["overhead_us"] <= OVERHEAD_TARGET_US,
        "{:.2f} us (a Python op that does nothing: {:.2f} us)".format(
            overhead["overhead_us"], overhead["python_noop_overhead_us"]))
    for entry in memory:
        if "error" in entry:
            add("memory, {} axis {}".format(tuple(entry["shape"]), entry["axis"]), False,
                "measurement failed: {}".format(entry["error"]))
        for kind, outputs in (("pycumsum_forward", 1), ("pycumsum_forward_backward", 2)):
            if kind in entry:
                extra = memory_extra(entry, kind, outputs)
                add("memory: {} <= {} output(s) + buffers, {} axis {}".format(
                    kind.replace("pycumsum_", "").replace("_", "+"), outputs, tuple(entry["shape"]),
                    entry["axis"]), extra <= memory_allowance(),
                    "{:.2f} MiB beyond the outputs (allowance {:.2f} MiB)".format(
                        extra / MIB, memory_allowance() / MIB))
    for entry in accuracy_report:
        worst = max(entry["pycumsum_forward"], entry["pycumsum_backward"])
        add("float32 relative error <= {:g}, {} axis {}".format(ACCURACY_TARGET, tuple(entry["shape"]),
                                                                  entry["axis"]),
            worst <= ACCURACY_TARGET, "{:.2e}".format(worst))
    return targets


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


def report_markdown(result):
    cases, overhead = result["cases"], result["overhead"]
    memory = {(tuple(entry["shape"]), entry["axis"]): entry for entry in result["memory"]}
    ratio = "{:.2f}x".format
    parts = ["## PyCumSum benchmark", "",
             "torch {torch}, numpy {numpy}, {threads} torch threads, {cpu}; load average {load_start} at start, "
             "{load_end} at the end (anything above ~0.3 means other work shared the cores).".format(
                 **result["environment"]), "",
             "### Forward (float32)", "",
             table(["shape", "axis", "path", "PyCumSum", "torch", "vs torch", "numpy (f32 sum)", "Copy op",
                    "vs copy"],
                   [[c["shape"], c["axis"], c["paths"][0], duration(c["pycumsum_forward"]),
                     duration(c["torch_forward"]), ratio(c["pycumsum_forward"] / c["torch_forward"]),
                     duration(c["numpy_forward"]), duration(c["copy"]), ratio(c["pycumsum_forward"] / c["copy"])]
                    for c in cases]), "",
             "### Forward + backward (float32)", "",
             table(["shape", "axis", "backward path", "PyCumSum", "torch autograd", "vs torch", "vs two copies"],
                   [[c["shape"], c["axis"], c["paths"][1], duration(c["pycumsum_forward_backward"]),
                     duration(c["torch_forward_backward"]),
                     ratio(c["pycumsum_forward_backward"] / c["torch_forward_backward"]),
                     ratio(c["pycumsum_forward_backward"] / (2 * c["copy"]))] for c in cases]), "",
             "### The seed net (Transpose -> EnsureDense -> SparseLengthsSum -> Transpose, axis 1 of 2-D)", "",
             table(["shape", "forward", "vs PyCumSum", "forward+backward", "vs PyCumSum", "peak memory (f+b)"],
                   [[c["shape"], duration(c.get("seed_forward")),
                     ratio(c["seed_forward"] / c["pycumsum_forward"]) if "seed_forward" in c else "-",
                     duration(c.get("seed_forward_backward")),
                     ratio(c["seed_forward_backward"] / c["pycumsum_forward_backward"])
                     if "seed_forward_backward" in c else "-",
                     "{:.1f} MiB".format(memory[(tuple(c["shape"]), c["axis"])]["seed_forward_backward"] / MIB)
                     if "seed_forward_backward" in memory.get((tuple(c["shape"]), c["axis"]), {}) else
                     "needs ~{:.1f} GiB: not run".format(c["seed_bytes_estimate"] / (1 << 30))
                     if "seed_forward" not in c else "-"]
                    for c in cases if c["seed_bytes_estimate"] is not None]), "",
             "### Peak memory (growth of the peak resident set in a run, {}; first run / a later run)".format(
                 next((e.get("method") for e in result["memory"] if "method" in e), "n/a")), "",
             "A first run allocates the outputs; a later run reuses them, so it shows the temporaries alone. "
             "'Beyond outputs' is the larger of (first run - outputs) and the later run.", "",
             table(["shape", "axis", "output", "PyCumSum fwd", "beyond output", "PyCumSum fwd+bwd",
                    "beyond outputs", "torch fwd+bwd"],
                   [[e["shape"], e["axis"], "{:.1f} MiB".format(np.prod(e["shape"]) * 4 / MIB),
                     "{:.2f} / {:.2f} MiB".format(e["pycumsum_forward"] / MIB, e["pycumsum_forward_again"] / MIB),
                     "{:.2f} MiB".format(memory_extra(e, "pycumsum_forward", 1) / MIB),
                     "{:.2f} / {:.2f} MiB".format(e["pycumsum_forward_backward"] / MIB,
                                                  e["pycumsum_forward_backward_again"] / MIB),
                     "{:.2f} MiB".format(memory_extra(e, "pycumsum_forward_backward", 2) / MIB),
                     "{:.1f} / {:.1f} MiB".format(e["torch_forward_backward"] / MIB,
                                                  e["torch_forward_backward_again"] / MIB)]
                    for e in result["memory"] if "error" not in e]), "",
             "### Per-call overhead (1-element tensor)", "",
             "PyCumSum net {:.2f} µs, one-Copy-op net {:.2f} µs: overhead {:.2f} µs (median of {} paired "
             "rounds); a Python op that does nothing costs {:.2f} µs over the Copy net; PyCumSum forward+backward "
             "net {:.2f} µs.".format(overhead["pycumsum_us"], overhead["copy_us"], overhead["overhead_us"],
                                     overhead["rounds"], overhead["python_noop_overhead_us"],
                                     overhead["pycumsum_forward_backward_us"]), "",
             "### Accuracy (float32, max relative error against float64, data in [0.5, 1.5))", "",
             table(["shape", "axis", "paths", "PyCumSum fwd", "PyCumSum bwd", "torch fwd", "torch bwd",
                    "numpy f32 fwd"],
                   [[a["shape"], a["axis"], "/".join(a["paths"])] +
                    ["{:.2e}".format(a[k]) for k in ("pycumsum_forward", "pycumsum_backward", "torch_forward",
                                                       "torch_backward", "float32_numpy_forward")]
                    for a in result["accuracy"]]), "",
             sweep.markdown(result["sweep"], result["sweep_seed"], table),
             "### Targets", "",
             table(["target", "status", "measured"], [[t["target"], t["status"], t["detail"]]
                                                       for t in result["targets"]]), ""]
    missed = [t for t in result["targets"] if t["status"] == "MISS"]
    parts.append("{} of {} targets met.".format(len(result["targets"]) - len(missed), len(result["targets"])))
    return "\n".join(parts) + "\n"


def environment():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "threads": torch.get_num_threads(), "cpu": "{} ({} cores)".format(cpu, os.cpu_count()),
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
            "load_start": "{:.2f}".format(os.getloadavg()[0])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=4.0, help="seconds of timing per shape and axis")
    parser.add_argument("--seed-budget-gib", type=float, default=3.0, help="run the seed net only below this")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random sweep of shapes")
    parser.add_argument("--sweep-count", type=int, default=48, help="shapes in the random sweep")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "latest"),
                        help="writes OUTPUT.json and OUTPUT.md")
    args = parser.parse_args(argv)
    started = time.time()
    result = {"environment": environment()}
    seed_budget = args.seed_budget_gib * (1 << 30)
    cases = []
    for shape in SHAPES:
        for axis in range(len(shape)):
            cases.append(time_case(shape, axis, args.budget, seed_budget))
            print("timed {} axis {}".format(shape, axis), file=sys.stderr)
    result["cases"] = cases
    result["sweep_seed"] = args.seed
    result["sweep"] = sweep.time_cases(sweep.draw_shapes(args.seed, args.sweep_count), args.budget / 4, measure, median)
    result["overhead"] = time_overhead(args.budget * 2)
    result["accuracy"] = accuracy()
    result["memory"] = [] if args.no_memory else [
        dict(peak_memory(c["shape"], c["axis"], "seed_forward" in c), shape=c["shape"], axis=c["axis"])
        for c in cases if c["size"] >= COPY_TARGET_MIN_SIZE or "seed_forward" in c]
    result["targets"] = evaluate(cases, result["overhead"], result["accuracy"], result["memory"])
    result["targets"] += [{"target": name, "status": "PASS" if passed else "MISS", "detail": detail}
                          for name, passed, detail in sweep.targets(result["sweep"], args.seed)]
    result["environment"]["load_end"] = "{:.2f}".format(os.getloadavg()[0])
    result["environment"]["seconds"] = round(time.time() - started, 1)
    markdown = report_markdown(result)
    print(markdown)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output + ".json", "w") as out:
        json.dump(result, out, indent=1)
    with open(args.output + ".md", "w") as out:
        out.write(markdown)
    print("wrote {0}.json and {0}.md in {1:.0f} s".format(args.output, time.time() - started), file=sys.stderr)


if __name__ == "__main__":
    main()
