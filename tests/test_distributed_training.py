"""``pycumsum-op train`` as users run it: worker processes training over Gloo on the loopback interface.

Every run here is bounded twice: by the command's own --timeout (Gloo) and --deadline, and by the
test's process timeouts; stores are fresh temporary directories. The parameters a run saves are
checked against the PyTorch twin trained on the same global batches (not against the command's
own single-process check, which is checked too).
"""
import contextlib
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from pycumsum_op.cli import main
from pycumsum_op.demo import TRAINING
from pycumsum_op.examples import TorchOrdinalEMD, init_params, make_ordinal_data
from pycumsum_op.examples.ordinal_emd import PARAMETERS
from pycumsum_op.training.run_directory import RunConfig

pytestmark = pytest.mark.slow  # worker processes over Gloo, seconds each

CLI = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")
LOOPBACK = ["--interface", "lo", "--timeout", "20", "--join-timeout", "60", "--deadline", "120"]


def train(*args, timeout=120):
    return subprocess.run([CLI, "train"] + [str(arg) for arg in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)


def start(*args):
    """The command in the background, its output readable line by line."""
    return subprocess.Popen([CLI, "train"] + [str(arg) for arg in args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True)


def read_until(process, pattern, seconds=60):
    """The lines of ``process`` up to the first matching ``pattern`` (fails after ``seconds``)."""
    lines, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        assert line, "the command ended before printing {!r}:\n{}".format(pattern, "".join(lines))
        lines.append(line)
        if re.search(pattern, line):
            return lines
    raise AssertionError("no {!r} within {} s:\n{}".format(pattern, seconds, "".join(lines)))


def train_in_process(capsys, *args):
    """``main(["train", ...])`` in this process, for errors caught before any worker starts: (status, out, err)."""
    status = main(["train"] + [str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def worker_pids(lines):
    return {int(rank): int(pid) for rank, pid in re.findall(r"rank (\d+): pid (\d+)", "".join(lines))}


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/{}/stat".format(pid)) as stat:  # a zombie (not yet reaped by init) is gone too
        return stat.read().split(")")[-1].split()[0] != "Z"


def wait_gone(pids, seconds=15):
    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def torch_twin_params(steps, world_size, seed=0):
    """The PyTorch twin after ``steps`` SGD steps on the same global batches as the command."""
    config = RunConfig(nodes=1, workers=world_size, devices=1, steps=steps, seed=seed, batch=TRAINING["batch"],
                       learning_rate=TRAINING["learning_rate"], samples=TRAINING["samples"],
                       features=TRAINING["features"], hidden=TRAINING["hidden"], classes=TRAINING["classes"],
                       timeout=5, join_timeout=5)
    data = make_ordinal_data(config.samples, config.features, config.classes, seed)
    twin = TorchOrdinalEMD(init_params(config.features, config.hidden, config.classes, seed), config.learning_rate)
    for step in range(steps):
        twin.step(data.features[config.global_rows(step)], data.one_hot[config.global_rows(step)])
    return {name: value.detach().numpy() for name, value in twin.params.items()}


@pytest.mark.timeout(150)
def test_two_nodes_sharing_a_store_directory_train_as_one_world(tmp_path):
    common = ["--workers", 1, "--devices", 2, "--steps", 20, "--nodes", 2, "--store", tmp_path, "--run-id",
              "two-nodes"] + LOOPBACK  # Gloo all-reduces the two local replicas of each process in one op
    node1 = start(*common, "--node-rank", 1)
    node0 = train(*common, "--node-rank", 0)
    node1_output = node1.communicate(timeout=60)[0]
    assert node0.returncode == 0, node0.stdout + node0.stderr
    assert "node 0 of 2: ranks 0..0 of 2, 2 CPU device(s) each" in node0.stdout
    assert "all 2 rank(s) connected; training 20 steps, global batch 128 (32 rows per device)" in node0.stdout
    assert "parameters of ranks 0..1: equal (max difference 0)" in node0.stdout
    assert re.search(r"single-process run over the same global batches: max difference \S+ \(tolerance \S+\): "
                     r"agree", node0.stdout)
    assert node1.returncode == 0, node1_output
    assert "node 1: ranks 1..1 finished; node 0 checks the parameters" in node1_output


@pytest.mark.timeout(150)
def test_a_killed_worker_fails_the_others_and_the_command_quickly_with_its_name(tmp_path):
    process = start("--workers", 2, "--steps", 10 ** 7, "--store", tmp_path, *LOOPBACK)
    try:
        pids = worker_pids(read_until(process, r"all 2 rank\(s\) connected"))
        time.sleep(0.5)  # well inside the training loop
        os.kill(pids[1], signal.SIGKILL)
        killed = time.monotonic()
        output = process.communicate(timeout=60)[0]
    finally:
        process.kill()
    assert time.monotonic() - killed < 15  # Gloo sees the reset connection at once; the grace period is 3 s
    assert process.returncode == 1, output
    assert "rank 1 (pid {}) was killed by SIGKILL".format(pids[1]) in output
    assert re.search(r"rank 0 \(pid {}\) failed: RuntimeError: at step \d+: .*(Connection reset by peer|Connection "
                     r"closed by peer|Broken pipe)".format(pids[0]), output), output  # it noticed by itself
    assert "training FAILED" in output
    assert wait_gone(pids.values()) == []


@pytest.mark.timeout(150)
def test_a_hung_worker_is_given_up_on_after_the_gloo_timeout(tmp_path):
    """SIGSTOP: the peer's connections stay open, so only Gloo's --timeout can tell that it stopped."""
    process = start("--workers", 2, "--steps", 10 ** 7, "--store", tmp_path, "--interface", "lo", "--timeout", 2)
    try:
        pids = worker_pids(read_until(process, r"all 2 rank\(s\) connected"))
        time.sleep(0.5)
        os.kill(pids[1], signal.SIGSTOP)
        stopped = time.monotonic()
        output = process.communicate(timeout=60)[0]
    finally:
        process.kill()  # its workers get SIGTERM from the kernel; a stopped one acts on it once continued
        with contextlib.suppress(NameError, ProcessLookupError):
            os.kill(pids[1], signal.SIGCONT)
    assert time.monotonic() - stopped < 20  # 2 s Gloo timeout, 3 s grace, then SIGTERM (with SIGCONT)
    assert process.returncode == 1, output
    assert re.search(r"rank 0 \(pid {}\) failed: RuntimeError: at step \d+: .*timeout".format(pids[0]), output,
                     re.IGNORECASE), output
    assert "rank 1 (pid {}) was stopped by the launcher".format(pids[1]) in output
    assert wait_gone(pids.values()) == []


@pytest.mark.timeout(150)
def test_after_an_earlier_run_died_in_the_store_two_processes_train_equal_to_one_over_the_global_batch(tmp_path,
                                                                                                    capsys):
    earlier = start("--workers", 2, "--steps", 10 ** 7, "--store", tmp_path, "--run-id", "earlier", *LOOPBACK)
    try:
        pids = worker_pids(read_until(earlier, r"all 2 rank\(s\) connected"))
        earlier.kill()  # the launcher dies hard: its workers get SIGTERM from the kernel; the store stays behind
        earlier.communicate(timeout=30)
    finally:
        earlier.kill()
    assert wait_gone(pids.values()) == []
    assert os.path.exists(tmp_path / "earlier" / "config.json")
    status, out, err = train_in_process(capsys, "--workers", 2, "--steps", 5, "--store", tmp_path, "--run-id",
                                        "earlier", *LOOPBACK)
    assert (status, out) == (2, "")
    assert err == ("pycumsum-op train: error: run id 'earlier' was already used by node 0 in store '{}' (left by an "
                   "earlier run?): every run needs a new --run-id\n".format(tmp_path))

    result = train("--workers", 2, "--steps", 40, "--save", tmp_path / "params.npz", "--store", tmp_path, *LOOPBACK)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all 2 rank(s) connected; training 40 steps" in result.stdout
    assert "parameters of ranks 0..1: equal (max difference 0)" in result.stdout
    difference = float(re.search(r"single-process run over the same global batches: max difference (\S+) "
                                 r"\(tolerance \S+\): agree", result.stdout).group(1))
    assert difference < 1e-5
    twin = torch_twin_params(steps=40, world_size=2)
    with np.load(str(tmp_path / "params.npz")) as saved:
        assert sorted(saved.files) == sorted(PARAMETERS)
        for name in PARAMETERS:
            np.testing.assert_allclose(saved[name], twin[name], rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.timeout(150)
def test_a_rank_that_never_joins_is_a_bounded_clear_error(tmp_path, capsys):
    """Node 1 of 2 never starts (or disagrees about the world size): node 0 gives up after --timeout."""
    common = ["--workers", 1, "--steps", 5, "--nodes", 2, "--store", tmp_path, "--run-id", "alone",
              "--interface", "lo", "--join-timeout", "2"]
    began = time.monotonic()
    node0 = start(*common, "--node-rank", 0)
    try:
        read_until(node0, r"rank 0: pid")
        wrong = train_in_process(capsys, *common, "--node-rank", 1, "--workers", 2)  # another world size: refused
        output = node0.communicate(timeout=60)[0]
    finally:
        node0.kill()
    assert wrong == (2, "", "pycumsum-op train: error: node 1 disagrees with the configuration run 'alone' started "
                            "with: workers=1 (here 2)\n")
    assert node0.returncode == 1, output
    assert time.monotonic() - began < 45
    assert re.search(r"rank 0 \(pid \d+\) failed: TimeoutError: rank\(s\) 1 did not join run 'alone' within 2 s "
                     r"\(--join-timeout\): a worker or node did not start, or the nodes were started with different "
                     r"--nodes/--workers\n", output)


@pytest.mark.timeout(150)
def test_the_deadline_stops_a_run_that_takes_too_long(tmp_path):
    began = time.monotonic()
    result = train("--workers", 1, "--devices", 2, "--steps", 10 ** 7, "--store", tmp_path, "--deadline", 2)
    assert time.monotonic() - began < 30
    assert result.returncode == 1
    assert "the run passed its deadline of 2 s (--deadline); stopping every worker" in result.stdout
    pid = worker_pids(result.stdout.splitlines(True))[0]
    assert "rank 0 (pid {}) was stopped by the launcher\ntraining FAILED".format(pid) in result.stdout
    assert wait_gone([pid]) == []


@pytest.mark.parametrize("args, message", [
    (["--workers", 3], "--batch 128 does not split evenly over 3 replicas (1 node(s) x 3 worker(s) x 1 device(s)); "
                       "use a multiple of 3"),
    (["--workers", 1, "--interface", "no-such-if0"], "network interface 'no-such-if0' does not exist on "),
    (["--workers", 1, "--nodes", 2], "--nodes 2 needs --store (a directory shared by every node) and --run-id"),
    (["--workers", 1, "--store", "/no/such/store"], "store directory '/no/such/store' does not exist"),
])
def test_bad_input_is_one_line_and_exit_status_2(capsys, args, message):
    status, out, err = train_in_process(capsys, "--steps", 1, *args)
    assert (status, out) == (2, "")
    assert err.startswith("pycumsum-op train: error: " + message) and err.count("\n") == 1, err
