"""One training process: ``python -m pycumsum_op.training.worker STORE RUN_ID RANK [--interface IF]``.

Started by the launcher (`pycumsum_op.training.launcher`), never by hand. Reads the run's
configuration from STORE/RUN_ID/config.json, joins the Gloo rendezvous (several processes),
trains the ordinal EMD model data-parallel over its devices for the configured steps on its
share of every global batch, and writes its parameters and losses to STORE/RUN_ID/results.
Rank 0 draws the progress bar on stdout. On any error it prints one line
``rank R: error: ...`` on stderr and exits 1.
"""
import argparse
import sys

import numpy as np

from ..examples import init_params, make_ordinal_data
from ..progress import ProgressBar
from .model import DataParallelEMD
from .rendezvous import file_store_rendezvous
from .run_directory import RunDirectory, RunResult, max_parameter_difference


def _rendezvous_failure(config, interface, error: Exception) -> str:
    """What a failed Gloo set-up means, for the user (Caffe2's message names internal keys)."""
    where = "over interface {} (--interface: the network connecting the nodes)".format(
        interface or "of this host's name")
    if "timeout" in str(error).lower():
        return "the {} ranks started but did not connect within {} s (--timeout): a peer stopped, or is unreachable " \
               "{}. Caffe2: {}".format(config.world_size, config.timeout, where, error)
    return "the {} ranks started but could not connect {}. Caffe2: {}".format(config.world_size, where, error)


def train(store: str, run_id: str, rank: int, interface=None, out=None) -> RunResult:
    """Train this rank's replica; returns (and records) its result."""
    out = out or sys.stdout
    run = RunDirectory(store, run_id)
    config = run.config()
    data = make_ordinal_data(config.samples, config.features, config.classes, config.seed)
    params = init_params(config.features, config.hidden, config.classes, config.seed)
    rendezvous = None
    if config.world_size > 1:
        run.join(rank, config)
        # Gloo's keys inside the private run directory, where no other user can plant one
        rendezvous = file_store_rendezvous(run.path, "gloo", rank, config.world_size, interface)
    try:
        model = DataParallelEMD(params, config.learning_rate, devices=range(config.devices), rendezvous=rendezvous,
                                timeout_seconds=config.timeout)
    except RuntimeError as error:
        if rendezvous is None:
            raise
        raise RuntimeError(_rendezvous_failure(config, interface, error)) from error
    if rank == 0:
        out.write("all {} rank(s) connected; training {} steps, global batch {} ({} rows per device)\n".format(
            config.world_size, config.steps, config.batch, config.batch // (config.world_size * config.devices)))
        out.flush()
    bar = ProgressBar(config.steps, out) if rank == 0 else None
    losses = np.zeros(config.steps)
    for step in range(config.steps):
        rows = config.rows(step, rank)
        try:
            losses[step] = model.step(data.features[rows], data.one_hot[rows])
        except Exception as error:
            raise RuntimeError("at step {}: {}".format(step + 1, error)) from error
        if bar:
            bar.update(step + 1, "rank-0 batch loss {:.4f}".format(losses[step]))
    replicas = model.device_params()
    if max_parameter_difference(*replicas.values()) != 0.0:
        raise RuntimeError("the devices of rank {} ended with different parameters".format(rank))
    result = RunResult(model.params(), losses)
    run.write_result(rank, result)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pycumsum_op.training.worker")
    parser.add_argument("store")
    parser.add_argument("run_id")
    parser.add_argument("rank", type=int)
    parser.add_argument("--interface")
    args = parser.parse_args(argv)
    try:
        train(args.store, args.run_id, args.rank, args.interface)
    except Exception as error:  # one line for the launcher to relay; the traceback would bury Gloo's reason
        reason = " ".join(str(error).split()) or type(error).__name__
        print("rank {}: error: {}: {}".format(args.rank, type(error).__name__, reason), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
