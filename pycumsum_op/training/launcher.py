"""Start and supervise this node's worker processes; on node 0, check the trained parameters.

`launch` starts one `pycumsum_op.training.worker` process per local rank and watches them:

- a worker that dies (a signal, an error) stops the run: the other workers see the broken
  connection through Gloo at once, or a hung peer through Gloo's timeout; those still running
  `GRACE_SECONDS` after the first failure are terminated, and the launcher names the rank that
  failed first and why;
- a run that outlives ``deadline_seconds`` is stopped;
- workers receive SIGTERM when the launcher itself dies (Linux), so none is left behind.

When every worker succeeded, node 0 collects every rank's parameters from the run directory and
checks that they are equal to each other (exactly: Gloo's all-reduce gives every rank the same
bits) and to a single-process run of `Caffe2OrdinalEMD` over the same global batches, within
`REFERENCE_TOLERANCE`; only then does ``save`` write rank 0's parameters (atomically, never through
a symlink).
"""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import secrets
import tempfile
import time
from typing import List, NamedTuple, Optional

import numpy as np

from .._atomic_files import check_target, write_atomically
from .run_directory import RunConfig, RunDirectory, RunResult, max_parameter_difference
from .rendezvous import TrainingSetupError, check_interface

EXIT_OK, EXIT_FAILED = 0, 1  # bad input (exit 2) is raised as TrainingSetupError
GRACE_SECONDS = 3.0       # after the first failure, how long the others get to notice it themselves
# Replicas sum float32 gradient shards in another order than one process summing the whole batch: a few
# ulp per step (~1e-7 relative), which SGD carries along; 1e-5 x (1 + max |parameter|) leaves >10x margin
# over the differences measured up to 1000 steps and 8 replicas (README, "Data-parallel training").
REFERENCE_TOLERANCE = 1e-5


class Worker(NamedTuple):
    rank: int
    process: subprocess.Popen
    log: str
    run: RunDirectory


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the launcher dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:  # not glibc Linux: the Gloo timeouts still end orphaned workers
        pass


def _interrupt(signum, frame):
    """SIGTERM to the launcher ends it like Ctrl-C: the workers are stopped on the way out."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def new_run_id() -> str:
    """The date and 128 random bits: no one can guess a run's directory to plant files there first."""
    return "{}-{}".format(time.strftime("%Y%m%d-%H%M%S"), secrets.token_hex(16))


def check_config(config: RunConfig, node_rank: int) -> None:
    """`TrainingSetupError` for sizes that cannot work, naming the options and their values."""
    replicas = config.world_size * config.devices
    if not 0 <= node_rank < config.nodes:
        raise TrainingSetupError("--node-rank {} is out of range for --nodes {} (0..{})".format(
            node_rank, config.nodes, config.nodes - 1))
    if config.batch % replicas:
        raise TrainingSetupError(
            "--batch {} does not split evenly over {} replicas ({} node(s) x {} worker(s) x {} device(s)); "
            "use a multiple of {}".format(config.batch, replicas, config.nodes, config.workers, config.devices,
                                          replicas))
    if config.batch > config.samples:
        raise TrainingSetupError("--batch {} is larger than the data set ({} samples)".format(
            config.batch, config.samples))


def _start(run: RunDirectory, rank: int, interface: Optional[str]) -> Worker:
    log = run.log_path(rank)
    command = [sys.executable, "-m", "pycumsum_op.training.worker", run.store_dir, run.run_id, str(rank)]
    if interface:
        command += ["--interface", interface]
    with run.create_log(rank) as handle:  # rank 0 draws the progress bar on our stdout; everything else to its log
        process = subprocess.Popen(command, stdout=None if rank == 0 else handle, stderr=handle,
                                   stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    return Worker(rank, process, log, run)


def _stop(workers: List[Worker]) -> None:
    """SIGTERM the workers still running, SIGKILL those that ignore it for 3 s."""
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.terminate()
            worker.process.send_signal(signal.SIGCONT)  # a stopped (SIGSTOP, ^Z) worker acts on it at once
    for worker in workers:
        try:
            worker.process.wait(3)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()


def _reason(worker: Worker) -> str:
    """Why a worker ended: its signal, or the one-line error it printed."""
    status = worker.process.returncode
    if status < 0:
        return "was killed by {}".format(signal.Signals(-status).name)
    errors = [line.strip() for line in worker.run.read_log(worker.rank)
              if line.startswith("rank {}: error:".format(worker.rank))]
    return "failed: {}".format(errors[-1].split("error: ", 1)[1] if errors else "exit status {}".format(status))


def supervise(workers: List[Worker], deadline_seconds: float, out) -> bool:
    """Wait for the workers; True when all succeeded. Never waits past the deadline."""
    start, first_failure = time.monotonic(), None
    while any(worker.process.poll() is None for worker in workers):
        now = time.monotonic()
        if first_failure is None and any(worker.process.returncode not in (None, 0) for worker in workers):
            first_failure = now
        if first_failure is not None and now - first_failure > GRACE_SECONDS:
            break
        if now - start > deadline_seconds:
            out.write("pycumsum-op train: the run passed its deadline of {:.0f} s (--deadline); stopping "
                      "every worker\n".format(deadline_seconds))
            break
        time.sleep(0.05)
    still_running = [worker for worker in workers if worker.process.poll() is None]
    _stop(still_running)
    failed = sorted((worker for worker in workers if worker not in still_running and worker.process.returncode),
                    key=lambda worker: worker.process.returncode >= 0)  # a killed worker is the likely cause: first
    for worker in failed:
        out.write("rank {} (pid {}) {}\n".format(worker.rank, worker.process.pid, _reason(worker)))
    for worker in still_running:
        out.write("rank {} (pid {}) was stopped by the launcher\n".format(worker.rank, worker.process.pid))
    return not failed and not still_running


def _reference(config: RunConfig) -> RunResult:
    """The single-process run of the same model over the same global batches."""
    from caffe2.python import workspace
    from ..examples import Caffe2OrdinalEMD, init_params, make_ordinal_data
    data = make_ordinal_data(config.samples, config.features, config.classes, config.seed)
    caller_workspace = workspace.CurrentWorkspace()
    workspace.SwitchWorkspace("pycumsum_op_training_reference", True)  # leave the caller's blobs alone
    try:
        model = Caffe2OrdinalEMD(init_params(config.features, config.hidden, config.classes, config.seed),
                                 config.learning_rate)
        losses = [model.step(data.features[config.global_rows(step)],
                             data.one_hot[config.global_rows(step)]).loss for step in range(config.steps)]
        result = RunResult(model.params(), np.array(losses))
        workspace.ResetWorkspace()
    finally:
        workspace.SwitchWorkspace(caller_workspace)
    return result


def check_results(results: List[RunResult], config: RunConfig, out) -> bool:
    """Print and check: ranks equal to each other, and to the single-process run within tolerance."""
    between_ranks = max_parameter_difference(*(result.params for result in results))
    reference = _reference(config)
    to_reference = max_parameter_difference(reference.params, *(result.params for result in results))
    scale = 1.0 + max(float(np.abs(value).max()) for value in reference.params.values())
    tolerance = REFERENCE_TOLERANCE * scale
    global_losses = np.mean([result.losses for result in results], axis=0)
    out.write("loss over each global batch: {:.4f} (step 1) -> {:.4f} (step {}); single-process run: "
              "{:.4f} -> {:.4f}\n".format(global_losses[0], global_losses[-1], config.steps, reference.losses[0],
                                          reference.losses[-1]))
    equal = between_ranks == 0.0
    agree = to_reference <= tolerance
    out.write("parameters of ranks 0..{}: {} (max difference {:.3g})\n".format(
        len(results) - 1, "equal" if equal else "DIFFERENT", between_ranks))
    out.write("vs a single-process run over the same global batches: max difference {:.3g} (tolerance {:.1g}): "
              "{}\n".format(to_reference, tolerance, "agree" if agree else "DISAGREE"))
    return equal and agree


def launch(config: RunConfig, node_rank: int = 0, store: Optional[str] = None, run_id: Optional[str] = None,
           interface: Optional[str] = None, deadline_seconds: float = 3600.0, save: Optional[str] = None,
           out=None) -> int:
    """Run this node's share of a training run; 0 when it (and on node 0, the check) succeeded, 1 when
    it failed, 2 for a configuration that cannot work (`TrainingSetupError`, printed as one line)."""
    out = out or sys.stdout
    check_config(config, node_rank)
    check_interface(interface)
    if config.nodes > 1 and (store is None or run_id is None):
        raise TrainingSetupError("--nodes {} needs --store (a directory shared by every node) and --run-id (the "
                                 "same new name on every node)".format(config.nodes))
    if save:
        try:
            check_target(save if save.endswith(".npz") else save + ".npz")
        except OSError as error:
            raise TrainingSetupError("--save {!r}: {}".format(save, error.strerror))
    temporary = store is None
    store = tempfile.mkdtemp(prefix="pycumsum-train-") if temporary else store
    run_id = run_id or new_run_id()
    workers: List[Worker] = []
    succeeded = False
    previous_handler = signal.signal(signal.SIGTERM, _interrupt)
    try:
        run = RunDirectory(store, run_id)
        run.claim(node_rank)
        run.agree(config, node_rank)
        ranks = range(node_rank * config.workers, (node_rank + 1) * config.workers)
        out.write("pycumsum-op train: run {} (store {}), node {} of {}: ranks {}..{} of {}, {} CPU device(s) "
                  "each, Gloo timeout {} s\n".format(run_id, store, node_rank, config.nodes, ranks[0], ranks[-1],
                                                    config.world_size, config.devices, config.timeout))
        out.flush()
        for rank in ranks:
            workers.append(_start(run, rank, interface))
            out.write("  rank {}: pid {}, log {}\n".format(rank, workers[-1].process.pid, workers[-1].log))
        out.flush()
        if not supervise(workers, deadline_seconds, out):
            out.write("training FAILED; the workers' logs are in {}\n".format(os.path.dirname(workers[0].log)))
            return EXIT_FAILED
        if node_rank != 0:
            out.write("node {}: ranks {}..{} finished; node 0 checks the parameters\n".format(
                node_rank, ranks[0], ranks[-1]))
            succeeded = True
            return EXIT_OK
        try:
            results = run.read_results(config.world_size, wait_seconds=config.timeout)
        except TimeoutError as error:
            out.write("training FAILED: {}\n".format(error))
            return EXIT_FAILED
        succeeded = True
        if not check_results(results, config, out):
            if save:
                out.write("not saving the parameters to {}: the check failed\n".format(save))
            return EXIT_FAILED
        if save:
            save = save if save.endswith(".npz") else save + ".npz"  # as np.savez names it
            try:
                write_atomically(save, lambda handle: np.savez(handle, **results[0].params))
            except OSError as error:
                out.write("could not save the parameters to {}: {}\n".format(save, error.strerror or error))
                return EXIT_FAILED
            out.write("saved rank 0's parameters to {}\n".format(save))
        return EXIT_OK
    finally:
        _stop(workers)
        signal.signal(signal.SIGTERM, previous_handler)
        if temporary and (succeeded or not workers):  # after a failure, keep the logs
            shutil.rmtree(store, ignore_errors=True)
