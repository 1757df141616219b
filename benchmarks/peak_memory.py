"""Peak memory of runs of each candidate, measured in this (child) process; prints JSON.

    python benchmarks/peak_memory.py '{"shape": [1024, 1024], "axis": 1, "seed": true}'

tracemalloc cannot see Caffe2's or torch's allocations, so this measures the resident set: before each
run the kernel's peak-RSS mark is reset (``echo 5 > /proc/self/clear_refs``, Linux) and the run's cost
is VmHWM (peak RSS) minus VmRSS before the run. Where the mark cannot be reset, ``ru_maxrss`` growth
is used instead (a lower bound once an earlier run set a higher mark). Each candidate runs once on a
small tensor first, so code and thread pools are in place, and glibc's free memory is returned to the
system (``malloc_trim``) before each run, so reused free memory does not hide a run's allocations.
"""
import ctypes
import json
import resource
import sys

import nets

KIB = 1024


def _status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * KIB
    raise KeyError(field)


def _reset_peak():
    """Reset the peak-RSS mark to the current RSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def _trim():
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def peak_growth(run):
    """Bytes the peak resident set grew by while ``run()`` ran once, and the method used."""
    _trim()
    if _reset_peak():
        before = _status("VmRSS")
        run()
        return _status("VmHWM") - before, "VmHWM after clear_refs"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * KIB
    run()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * KIB - before, "ru_maxrss growth"


def candidates(shape, axis, with_seed):
    """name -> runner, created on freshly fed blobs of ``shape``; the seed last (it frees gigabytes)."""
    x, grad_y = nets.feed(shape)
    runners = {
        "pycumsum_forward": nets.pycumsum(axis),
        "pycumsum_forward_backward": nets.pycumsum(axis, backward=True),
        "torch_forward_backward": nets.torch_forward_backward(x, grad_y, axis),
    }
    if with_seed:
        runners["seed_forward_backward"] = nets.seed(shape[1], backward=True)
    return runners


def main(request):
    """Per candidate: the first run's growth (outputs included) and a second run's (outputs exist: temporaries)."""
    shape, axis = tuple(request["shape"]), request["axis"]
    warm_shape = tuple(min(n, 64) for n in shape)
    for run in candidates(warm_shape, axis, request["seed"]).values():
        run()
    report = {}
    for name, run in candidates(shape, axis, request["seed"]).items():
        report[name], report["method"] = peak_growth(run)
        report[name + "_again"] = peak_growth(run)[0]
    print(json.dumps(report))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
