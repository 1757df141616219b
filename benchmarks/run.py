"""`make bench`: PyCumSum in a Caffe2 net against torch.cumsum, numpy.cumsum, a Copy op and the seed net.

For float32 shapes (1,1), (64,10), (1024,1024), (4096,1024), (16,262144), (262144,16), (64,64,64), at every
axis, it times PyCumSum forward and forward+backward (one ``workspace.RunNet`` of a created net), torch.cumsum
and torch autograd (``torch.autograd.grad``, same process, one thread: `timing` fixes the settings), numpy.cumsum,
a net with one Copy op of the same tensor (the memory-bandwidth bound) and, where it fits in memory, the
seed's Transpose -> EnsureDense -> SparseLengthsSum -> Transpose net. Candidates run in rounds, each round
in an order drawn afresh (seeded), each sample a batch of calls lasting about a millisecond; the table shows
medians.
A seeded random sweep of shapes (benchmarks/sweep.py; ``--seed`` draws another) follows the grid.
Peak memory comes from child processes (benchmarks/peak_memory.py: peak resident set growth), accuracy
from 10^6-long float32 rows and columns against float64, and every target gets PASS or MISS.

``--only-lowering`` (also run at the end of a full run) times the nets `pycumsum_op.lower` makes — targets "aten"
and "portable", forward and forward+backward — against torch and PyCumSum on the grid plus seeded random shapes,
and the seed net at 1024x1024 (`lowering_rows`); then the portable target alone against torch on the sweep's
seeded random cases (``--lowering-seed``: rank 1-4, every axis, float32 and float64), and the ratios of the grid and
those cases by axis class: first, middle or last axis (1-D apart), scan lengths summed without blocks
(`portable.direct_limit`) or longer (`portable_classes`).

The scan family (cumprod, cummax, cummin, logcumsumexp) is timed against torch on a fixed grid and seeded
random shapes of 64K-1M elements (``--family-only`` runs just those rows).

Real-size models imported from ONNX (benchmarks/models.py: ResNet-18/50, MobileNetV3, ResNeXt, BERT-base's shape,
RoBERTa, GPT-NeoX, T5, ViT) against onnxruntime with and without its optimizations and torch eager, one thread
and every thread, and ``prepare`` against onnxruntime's session creation, end a full run (``--only-models``,
``--models a,b``).

The sweep by shape class (benchmarks/classes.py: 1-D, last axis with many / few rows, non-last axes; cumsum and
the family, with and without the accelerator; ``--class-seeds``) and the kernels of rows of 1-15 lanes, warm and
cold (benchmarks/kernels.py) end a full run; ``--only-classes`` and ``--only-kernels`` run just one.

Output: markdown tables on stdout, the same in benchmarks/results/latest.md, raw numbers in
benchmarks/results/latest.json. Timings are only as quiet as the machine: the load average is reported.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
import torch

import classes
import kernels
import models
import nets
import sweep
import timing
from pycumsum_op.commands._common import whole_number
from pycumsum_op.kernels import tuning
from pycumsum_op.lowering import portable
from timing import duration, measure, median, table

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [(1, 1), (64, 10), (1024, 1024), (4096, 1024), (16, 262144), (262144, 16), (64, 64, 64)]
TORCH_TARGET_MIN_SIZE = 1 << 16   # PyCumSum <= 1.0x torch on every shape and axis of >= 64K elements
COPY_TARGET_MIN_SIZE = 10 ** 6    # PyCumSum <= 2.5x the copy at >= 10^6 elements
COPY_TARGET = 2.5
OVERHEAD_TARGET_US = 5.0
ACCURACY_TARGET = 1e-7
ACCURACY_LENGTH = 10 ** 6
MIB = 1 << 20


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


#: The scan family's fixed grid (shape, axis): rows and columns of a matrix, long rows, tall columns, a cube.
FAMILY_GRID = [((1024, 1024), 0), ((1024, 1024), 1), ((16, 65536), 1), ((65536, 16), 0), ((64, 64, 64), 1)]
FAMILY_SCANS = ("cumprod", "cummax", "cummin", "logcumsumexp")


def family_shapes(seed=11, count=2):
    """FAMILY_GRID plus ``count`` seeded random (shape, axis) of 64K-1M elements, rank 2-3."""
    rng = np.random.RandomState(seed)
    cases = list(FAMILY_GRID)
    while len(cases) < len(FAMILY_GRID) + count:
        shape = tuple(int(side) for side in 2 ** rng.uniform(2, 12, size=rng.randint(2, 4)))
        if TORCH_TARGET_MIN_SIZE <= np.prod(shape) <= 1 << 20:
            cases.append((shape, int(rng.randint(len(shape)))))
    return cases


def time_family(budget_s):
    """The scan family against torch, forward and forward+backward, float32 values in [0.99, 1.01)
    (products stay normal numbers); medians of rounds, as `time_case`."""
    rows = []
    for shape, axis in family_shapes():
        x, grad_y = nets.feed(shape, 0.99, 1.01)
        for scan in FAMILY_SCANS:
            candidates = {"forward": nets.family(scan, axis), "forward_backward": nets.family(scan, axis, True),
                          "torch_forward": nets.torch_family_forward(scan, x, axis),
                          "torch_forward_backward": nets.torch_family_forward_backward(scan, x, grad_y, axis)}
            samples = measure(candidates, budget_s, 3, 40)
            row = {"scan": scan, "shape": list(shape), "axis": axis, "size": x.size}
            row.update({name: median(times) for name, times in samples.items()})
            rows.append(row)
            print("timed {} {} axis {}".format(scan, shape, axis), file=sys.stderr)
    return rows


def family_markdown(rows):
    """The scan family's table and its targets (<= 1.0x torch at >= 64K elements)."""
    ratio = "{:.2f}x".format
    met = sum(row[kind] <= row["torch_" + kind] for row in rows for kind in ("forward", "forward_backward"))
    return "\n".join([
        "### The scan family vs torch (float32, values in [0.99, 1.01))", "",
        table(["op", "shape", "axis", "forward", "torch", "vs torch", "forward+backward", "torch autograd",
               "vs torch"],
              [[row["scan"], row["shape"], row["axis"], duration(row["forward"]), duration(row["torch_forward"]),
                ratio(row["forward"] / row["torch_forward"]), duration(row["forward_backward"]),
                duration(row["torch_forward_backward"]),
                ratio(row["forward_backward"] / row["torch_forward_backward"])] for row in rows]), "",
        "{} of {} family targets (<= 1.0x torch, forward and forward+backward, >= 64K elements) met.".format(
            met, 2 * len(rows)), ""])


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
    """Extra bytes PyCumSum may use besides its outputs: a block buffer and a carry row, 1 MiB slack."""
    return tuning.BUFFER_ELEMENTS * 8 * 2 + MIB


def evaluate(cases, overhead, accuracy_report, memory):
    """PASS/MISS for every target of the grid, with the number behind each."""
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


def report_markdown(result):
    cases, overhead = result["cases"], result["overhead"]
    memory = {(tuple(entry["shape"]), entry["axis"]): entry for entry in result["memory"]}
    ratio = "{:.2f}x".format
    parts = ["## PyCumSum benchmark", "",
             "torch {torch}, numpy {numpy}, {threads}, {cpu}; load average {load_start} at start, "
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


# --- Lowered PyCumSum (pycumsum_op.lower): C++ operators against torch, PyCumSum and the seed net -------------

LOWERING_TARGETS = ("aten", "portable")
ATEN_TARGET, PORTABLE_TARGET, PORTABLE_VS_SEED_TARGET = 1.2, 5.0, 50.0
LOWERING_KINDS = ("forward", "forward_backward")


def lowering_shapes(seed=9, count=3):
    """The fixed grid plus ``count`` seeded random 2-D shapes of 2^10 to 2^20 elements."""
    rng = np.random.RandomState(seed)
    drawn = []
    for _ in range(count):
        size = 2 ** rng.randint(10, 21)
        rows = 2 ** rng.randint(0, int(np.log2(size)) + 1)
        drawn.append((int(rows), int(size // rows)))
    return SHAPES + drawn


def time_lowering_case(shape, axis, budget_s):
    """Medians (seconds) of torch, PyCumSum and both lowered targets, forward and forward+backward."""
    x, grad_y = nets.feed(shape)
    candidates = {"torch_forward": nets.torch_forward(x, axis),
                  "torch_forward_backward": nets.torch_forward_backward(x, grad_y, axis),
                  "pycumsum_forward": nets.pycumsum(axis),
                  "pycumsum_forward_backward": nets.pycumsum(axis, backward=True)}
    for target in LOWERING_TARGETS:
        candidates[target + "_forward"] = nets.lowered(axis, target)
        candidates[target + "_forward_backward"] = nets.lowered(axis, target, backward=True)
    if tuple(shape) == (1024, 1024) and axis == 1:  # the question's net, with the EnsureDense fix
        candidates["seed_forward"] = nets.seed(shape[1])
        candidates["seed_forward_backward"] = nets.seed(shape[1], backward=True)
    result = {"shape": list(shape), "axis": axis, "size": x.size}
    result.update({name: median(times) for name, times in measure(candidates, budget_s, 5, 60).items()})
    return result


def lowering_targets(rows):
    """PASS/MISS for the lowered nets' targets, from ratios measured in the same process."""
    targets = []

    def add(name, ratio, limit, faster=False):
        passed = ratio >= limit if faster else ratio <= limit
        targets.append({"target": name, "status": "PASS" if passed else "MISS", "detail": "{:.2f}x".format(ratio)})

    for row in rows:
        label = "{} axis {}".format(tuple(row["shape"]), row["axis"])
        if row["size"] >= TORCH_TARGET_MIN_SIZE:
            add("aten forward <= {}x torch, {}".format(ATEN_TARGET, label),
                row["aten_forward"] / row["torch_forward"], ATEN_TARGET)
            add("portable forward <= {}x torch, {}".format(PORTABLE_TARGET, label),
                row["portable_forward"] / row["torch_forward"], PORTABLE_TARGET)
        for kind in LOWERING_KINDS:
            if "seed_" + kind in row:
                add("portable {} >= {}x faster than the seed net, {}".format(
                    kind.replace("_", "+"), PORTABLE_VS_SEED_TARGET, label),
                    row["seed_" + kind] / row["portable_" + kind], PORTABLE_VS_SEED_TARGET, faster=True)
    return targets


def lowering_markdown(rows, targets):
    ratio = "{:.2f}x".format
    parts = ["## Lowered PyCumSum (pycumsum_op.lower), float32", "",
             "torch {} threads (OMP_NUM_THREADS={}), load average {:.2f} at the end. Ratios against torch measured "
             "in the same process in alternating rounds; 'aten' = Caffe2's ATen op, 'portable' = one Add per entry "
             "in blocks (Split, Add, Concat; float32 in float64). Seeded random shapes follow the fixed grid.".format(
                 torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS", "unset"), os.getloadavg()[0]), ""]
    for kind in LOWERING_KINDS:
        title = "torch autograd" if kind == "forward_backward" else "torch"
        parts += ["### {}".format(kind.replace("_", " + ").capitalize()), "",
                  table(["shape", "axis", title, "PyCumSum", "aten", "aten vs torch", "portable",
                         "portable vs torch", "seed net vs portable"],
                        [[r["shape"], r["axis"], duration(r["torch_" + kind]), duration(r["pycumsum_" + kind]),
                          duration(r["aten_" + kind]), ratio(r["aten_" + kind] / r["torch_" + kind]),
                          duration(r["portable_" + kind]), ratio(r["portable_" + kind] / r["torch_" + kind]),
                          ratio(r["seed_" + kind] / r["portable_" + kind]) if "seed_" + kind in r else "-"]
                         for r in rows]), ""]
    missed = [t for t in targets if t["status"] == "MISS"]
    parts += ["### Targets (lowering)", "",
              table(["target", "status", "measured"], [[t["target"], t["status"], t["detail"]] for t in targets]),
              "", "{} of {} targets met.".format(len(targets) - len(missed), len(targets))]
    return "\n".join(parts) + "\n"


def lowering_rows(budget_s, seed, count):
    """Every lowering shape and axis, then the portable target by axis class (`portable_classes`); returns
    (rows, the portable target's drawn rows, targets, markdown)."""
    rows = []
    for shape in lowering_shapes():
        for axis in range(len(shape)):
            rows.append(time_lowering_case(shape, axis, budget_s))
            print("timed lowering {} axis {}".format(shape, axis), file=sys.stderr)
    targets = lowering_targets(rows)
    classes_rows, classes_markdown = portable_classes(seed, count, budget_s / 4)
    return rows, classes_rows, targets, lowering_markdown(rows, targets) + "\n" + classes_markdown


#: The portable target's goal: at most this many times torch's time, forward, on every axis class.
PORTABLE_CLASS_TARGET = 2.0


def axis_class(shape, axis):
    """The class of a scanned axis: its position (1-D, first, middle, last) and its length (short: summed without
    blocks, at most `portable.direct_limit` long; long: blocked)."""
    rank = len(shape)
    position = ("1-D" if rank == 1 else "first axis" if axis == 0 else "last axis" if axis == rank - 1
                else "middle axis")
    short = shape[axis] <= portable.direct_limit(int(np.prod(shape)))
    return "{}, {}".format(position, "short" if short else "long")


def time_portable_case(shape, axis, dtype, budget_s):
    """Medians (seconds of this thread's CPU time: the machine may be shared) of torch and the portable target,
    forward and forward+backward, one case."""
    x, grad_y = nets.feed(shape, dtype=dtype)
    candidates = {"torch_forward": nets.torch_forward(x, axis),
                  "torch_forward_backward": nets.torch_forward_backward(x, grad_y, axis),
                  "portable_forward": nets.lowered(axis, "portable"),
                  "portable_forward_backward": nets.lowered(axis, "portable", backward=True)}
    result = {"shape": list(shape), "axis": axis, "dtype": dtype, "size": x.size}
    samples = measure(candidates, budget_s, 3, 40, clock=time.thread_time)
    result.update({name: median(times) for name, times in samples.items()})
    return result


def portable_classes(seed, count, budget_s):
    """The portable target against torch on the lowering grid (float32, every axis) and on
    `sweep.draw_shapes(seed, count)`, by axis class; returns (rows, markdown)."""
    cases = [(shape, axis, "float32") for shape in lowering_shapes() for axis in range(len(shape))]
    rows = []
    for shape, axis, dtype in cases + sweep.draw_shapes(seed, count):
        rows.append(time_portable_case(shape, axis, dtype, budget_s))
        print("timed portable {} axis {} {}".format(tuple(shape), axis, dtype), file=sys.stderr)
    classes = {}
    for row in rows:
        if row["size"] >= TORCH_TARGET_MIN_SIZE:  # smaller ones: each op's own cost, listed below
            classes.setdefault(axis_class(row["shape"], row["axis"]), []).append(row)
    ratio = "{:.2f}x".format
    summary, targets = [], []
    for name, members in sorted(classes.items()):
        cells = [name, len(members)]
        for kind in LOWERING_KINDS:
            ratios = [row["portable_" + kind] / row["torch_" + kind] for row in members]
            worst = members[int(np.argmax(ratios))]
            cells += [ratio(median(ratios)), "{} ({} axis {} {})".format(
                ratio(max(ratios)), tuple(worst["shape"]), worst["axis"], worst["dtype"])]
        summary.append(cells)
        worst_forward = max(row["portable_forward"] / row["torch_forward"] for row in members)
        targets.append(["portable forward <= {}x torch, {}".format(PORTABLE_CLASS_TARGET, name),
                        "PASS" if worst_forward <= PORTABLE_CLASS_TARGET else "MISS", ratio(worst_forward)])
    markdown = "\n".join([
        "### The portable target by axis class (the grid and seed {}'s {} cases)".format(seed, count), "",
        "Forward: the lowered net; forward + backward: the net with PyCumSum's gradient op, lowered, against torch "
        "autograd. This thread's CPU time, medians of rounds run alternately in one process; median and worst "
        "ratio per class of the cases of at least {} entries (all cases below).".format(TORCH_TARGET_MIN_SIZE), "",
        table(["class", "cases", "forward median", "forward worst", "fwd+bwd median", "fwd+bwd worst"], summary), "",
        table(["shape", "axis", "dtype", "class", "torch", "portable", "vs torch", "fwd+bwd vs torch autograd"],
              [[tuple(row["shape"]), row["axis"], row["dtype"], axis_class(row["shape"], row["axis"]),
                duration(row["torch_forward"]), duration(row["portable_forward"]),
                ratio(row["portable_forward"] / row["torch_forward"]),
                ratio(row["portable_forward_backward"] / row["torch_forward_backward"])] for row in rows]), "",
        table(["target", "status", "measured"], targets), ""])
    return rows, markdown


def environment():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "threads": timing.thread_settings(), "cpu": "{} ({} cores)".format(cpu, os.cpu_count()),
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
            "load_start": "{:.2f}".format(os.getloadavg()[0])}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=4.0, help="seconds of timing per shape and axis")
    parser.add_argument("--seed-budget-gib", type=float, default=3.0, help="run the seed net only below this")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    parser.add_argument("--family-only", action="store_true", help="time only the scan family's rows")
    parser.add_argument("--seed", type=whole_number(0), default=0, help="seed of the random sweep of shapes")
    parser.add_argument("--sweep-count", type=whole_number(1), default=48, help="shapes in the random sweep")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "latest"),
                        help="writes OUTPUT.json and OUTPUT.md")
    parser.add_argument("--only-lowering", action="store_true", help="time only the lowered nets (pycumsum_op.lower)")
    parser.add_argument("--lowering-seed", type=whole_number(0), default=5,
                        help="seed of the random cases the portable target is timed on by axis class")
    parser.add_argument("--lowering-count", type=whole_number(1), default=16,
                        help="random cases the portable target is timed on by axis class")
    parser.add_argument("--only-classes", action="store_true",
                        help="time only the sweep by shape class, with and without the accelerator (classes.py)")
    parser.add_argument("--class-seeds", default="0,1,2", help="seeds of the shape-class sweep (first: development)")
    parser.add_argument("--only-kernels", action="store_true",
                        help="time only the kernels of rows of 1-15 lanes, warm and cold (kernels.py; --class-seeds)")
    parser.add_argument("--only-models", action="store_true",
                        help="time only the real-size models imported from ONNX against onnxruntime (models.py)")
    parser.add_argument("--models", default=",".join(models.MODELS),
                        help="the models of --only-models and of a full run, by name (default: all)")
    args = parser.parse_args(argv)
    started = time.time()
    threads = timing.fix_threads()
    print(threads, file=sys.stderr)
    result = {"environment": environment()}
    class_seeds = [int(seed) for seed in args.class_seeds.split(",")]
    if args.only_classes:
        markdown, result["classes"] = classes.run(class_seeds, 6, 2, args.budget / 12)
        result["environment"]["load_end"] = "{:.2f}".format(os.getloadavg()[0])
        return write_report(result, markdown, args.output + "_classes", started)
    if args.only_kernels:
        markdown, result["kernels"] = kernels.run(class_seeds, 8, 7)
        result["environment"]["load_end"] = "{:.2f}".format(os.getloadavg()[0])
        return write_report(result, markdown, args.output + "_kernels", started)
    if args.only_lowering:
        result["lowering"], result["portable_classes"], result["lowering_targets"], markdown = lowering_rows(
            args.budget, args.lowering_seed, args.lowering_count)
        result["environment"]["load_end"] = "{:.2f}".format(os.getloadavg()[0])
        return write_report(result, markdown, args.output, started)
    model_names = [name for name in args.models.split(",") if name]
    unknown = sorted(set(model_names) - set(models.MODELS))
    if unknown:
        parser.error("--models: unknown {}; known: {}".format(", ".join(unknown), ", ".join(models.MODELS)))
    if args.only_models:
        result["models"], markdown = models.run(model_names, args.budget, [1, os.cpu_count() or 1])
        result["environment"]["load_end"] = "{:.2f}".format(os.getloadavg()[0])
        return write_report(result, markdown, args.output + "_models", started)
    if args.family_only:
        result["family"] = time_family(args.budget / 4)
        result["environment"]["load_end"] = "{:.2f}".format(os.getloadavg()[0])
        return write_report(result, family_markdown(result["family"]), args.output + "_family", started)
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
    result["lowering"], result["portable_classes"], result["lowering_targets"], lowering_markdown_text = lowering_rows(
        args.budget, args.lowering_seed, args.lowering_count)
    result["family"] = time_family(args.budget / 4)
    classes_markdown, result["classes"] = classes.run(class_seeds, 6, 2, args.budget / 12)
    kernels_markdown, result["kernels"] = kernels.run(class_seeds, 8, 7)
    result["models"], models_markdown = models.run(model_names, args.budget, [1, os.cpu_count() or 1])
    result["environment"]["load_end"] = "{:.2f}".format(os.getloadavg()[0])
    return write_report(result, "\n".join([report_markdown(result), lowering_markdown_text,
                                           family_markdown(result["family"]), classes_markdown, kernels_markdown,
                                           models_markdown]),
                        args.output, started)


def write_report(result, markdown, output, started):
    """Print the markdown; write OUTPUT.json (raw numbers) and OUTPUT.md."""
    result["environment"]["seconds"] = round(time.time() - started, 1)
    print(markdown)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    with open(output + ".json", "w") as out:
        json.dump(result, out, indent=1)
    with open(output + ".md", "w") as out:
        out.write(markdown)
    print("wrote {0}.json and {0}.md in {1:.0f} s".format(output, time.time() - started), file=sys.stderr)


if __name__ == "__main__":
    main()
