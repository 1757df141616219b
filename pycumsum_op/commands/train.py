"""``pycumsum-op train``: data-parallel training of the ordinal EMD model over worker processes (Gloo).

    pycumsum-op train --workers N --steps S [--seed K] [--devices D] [--batch B] [--timeout SEC]
                      [--join-timeout SEC] [--deadline SEC] [--interface IF] [--store DIR] [--run-id ID]
                      [--nodes M --node-rank R] [--save PARAMS.npz]

Exit 0 when training finished and (node 0) every rank's parameters are equal to each other and to a
single-process run over the same global batches; 1 when a worker failed, the run passed its deadline or
the check failed; 2 for a configuration that cannot work, with one line on stderr.
"""
import argparse
import sys

from ._common import _BadInput, require_optional, whole_number


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value > 0:
        raise argparse.ArgumentTypeError("expected a positive number, got {!r}".format(text))
    return value


def add_parser(subparsers) -> None:
    """Register ``train`` on the ``pycumsum-op`` subcommand parser."""
    _positive_int = whole_number(1)
    train = subparsers.add_parser(
        "train", help="train the demo's EMD model data-parallel over N processes (Caffe2 data_parallel_model, Gloo)",
        description="Starts N worker processes that train the ordinal EMD model (FC -> tanh -> FC -> softmax -> "
                    "PyCumSum) with synchronous SGD, all-reducing gradients with Gloo after a rendezvous in a store "
                    "directory; checks that every rank ends with the same parameters as a single-process run over "
                    "the same global batches. Exit 0: agreed, 1: failed, 2: bad input.")
    train.add_argument("--workers", type=_positive_int, required=True, help="worker processes on this node")
    train.add_argument("--steps", type=_positive_int, required=True, help="SGD steps")
    train.add_argument("--seed", type=int, default=0, help="seed of the data and the initial parameters "
                                                           "(default: %(default)s)")
    train.add_argument("--devices", type=_positive_int, default=1,
                       help="CPU devices (model replicas) per worker (default: %(default)s)")
    train.add_argument("--batch", type=_positive_int,
                       help="global batch, split evenly over every replica of every node (default: the demo's, 128)")
    train.add_argument("--learning-rate", type=_positive_float, help="SGD learning rate (default: the demo's, 1.0)")
    train.add_argument("--timeout", type=_positive_int, default=30,
                       help="once every rank joined, seconds any Gloo connection or collective may wait for a "
                            "peer (default: %(default)s)")
    train.add_argument("--join-timeout", type=_positive_int, default=300,
                       help="seconds the workers of all nodes wait for each other to start (default: %(default)s)")
    train.add_argument("--deadline", type=_positive_float, default=3600.0,
                       help="seconds after which the whole run is stopped (default: %(default)s)")
    train.add_argument("--interface", default=None,
                       help="network interface Gloo uses (default: lo on one node; the hostname's address "
                            "with --nodes > 1)")
    train.add_argument("--store", help="rendezvous directory; with --nodes > 1 on a filesystem every node shares "
                                       "(default: a temporary directory, removed after a successful run)")
    train.add_argument("--run-id", help="a new name for every run, the same on every node (default: generated)")
    train.add_argument("--nodes", type=_positive_int, default=1, help="machines taking part (default: 1)")
    train.add_argument("--node-rank", type=int, default=0, help="this machine's index, 0..nodes-1 (default: 0)")
    train.add_argument("--save", metavar="PARAMS.npz", help="node 0: write the trained parameters here")
    train.set_defaults(run=run)


def run(args) -> int:
    require_optional("networkx")  # Caffe2's data_parallel_model imports memonger, which needs it
    from ..demo import TRAINING
    from ..training.launcher import launch
    from ..training.rendezvous import TrainingSetupError
    from ..training.run_directory import RunConfig
    config = RunConfig(nodes=args.nodes, workers=args.workers, devices=args.devices, steps=args.steps,
                       seed=args.seed, batch=args.batch or TRAINING["batch"],
                       learning_rate=args.learning_rate or TRAINING["learning_rate"],
                       samples=TRAINING["samples"], features=TRAINING["features"], hidden=TRAINING["hidden"],
                       classes=TRAINING["classes"], timeout=args.timeout, join_timeout=args.join_timeout)
    interface = args.interface if args.interface or args.nodes > 1 else "lo"
    try:
        return launch(config, node_rank=args.node_rank, store=args.store, run_id=args.run_id, interface=interface,
                      deadline_seconds=args.deadline, save=args.save)
    except TrainingSetupError as error:
        raise _BadInput(str(error))
    except KeyboardInterrupt:  # the launcher has stopped the workers on its way out
        print("pycumsum-op train: interrupted; every worker was stopped", file=sys.stderr)
        return 130
