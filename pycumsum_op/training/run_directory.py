"""One training run's files in the shared store directory: its configuration, node claims and results.

    STORE/RUN_ID/config.json          the run's configuration; every node's launcher must agree with it
    STORE/RUN_ID/nodes/NODE_RANK      created once by that node's launcher: a reused run id fails at once
    STORE/RUN_ID/joined/RANK          created by each worker once it has started, before Gloo's rendezvous
    STORE/RUN_ID/logs/rank-R.log      each worker's stdout/stderr (rank 0's stdout goes to the terminal)
    STORE/RUN_ID/results/rank-R.npz   each rank's final parameters and per-step losses

Gloo's rendezvous keys live inside it, in the file store's own subdirectory (prefix ``gloo``).

The run directory and its subdirectories are created private (0700) and must be real directories
owned by the user running the launcher and not writable by group or others; anything else
(another user's directory planted under the same run id, a symlink) is refused with
`TrainingSetupError`. Every file is created new (O_EXCL) and never through a symlink (O_NOFOLLOW).
"""
import json
import os
import re
import stat
import time
from typing import Dict, List, NamedTuple

import numpy as np

from ..examples.ordinal_emd import PARAMETERS
from .rendezvous import TrainingSetupError, check_store_directory


def max_parameter_difference(*param_sets: Dict[str, np.ndarray]) -> float:
    """max |a - b| over every parameter of every set against the first set (0.0 when all equal)."""
    first = param_sets[0]
    return max((float(np.abs(params[name] - first[name]).max()) for params in param_sets[1:] for name in first),
               default=0.0)


class RunConfig(NamedTuple):
    """What every rank of a run must agree on: the world's shape and the training problem."""
    nodes: int
    workers: int            # worker processes per node
    devices: int            # CPU devices per worker
    steps: int
    seed: int
    batch: int              # global batch: rows per step over all ranks and devices
    learning_rate: float
    samples: int
    features: int
    hidden: int
    classes: int
    timeout: int            # seconds, every Gloo operation
    join_timeout: int       # seconds the ranks wait for each other to start

    @property
    def world_size(self) -> int:
        return self.nodes * self.workers

    def rows(self, step: int, rank: int) -> slice:
        """The rows of the data set that ``rank`` trains on at ``step`` (the global batch cycles through them)."""
        start = (step % (self.samples // self.batch)) * self.batch
        share = self.batch // self.world_size
        return slice(start + rank * share, start + (rank + 1) * share)

    def global_rows(self, step: int) -> slice:
        """The rows of the global batch at ``step``."""
        return slice(self.rows(step, 0).start, self.rows(step, self.world_size - 1).stop)


class RunResult(NamedTuple):
    """One rank's final parameters and its per-step mean loss over its own rows."""
    params: Dict[str, np.ndarray]
    losses: np.ndarray


def _owned_directory(path: str) -> None:
    """Create ``path`` (0700) unless it exists; `TrainingSetupError` unless it is a real directory owned by
    this user that group and others cannot write."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    status = os.lstat(path)
    if not stat.S_ISDIR(status.st_mode):
        raise TrainingSetupError("run directory {!r} is not a directory ({}); refusing to use it".format(
            path, "a symlink" if stat.S_ISLNK(status.st_mode) else "some other file"))
    if status.st_uid != os.geteuid():
        raise TrainingSetupError("run directory {!r} belongs to user id {}, not to this user ({}); refusing to use "
                                 "it (choose a new --run-id)".format(path, status.st_uid, os.geteuid()))
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise TrainingSetupError("run directory {!r} is writable by group or others (mode {:o}); refusing to use "
                                 "it".format(path, stat.S_IMODE(status.st_mode)))


def _create_file(path: str, mode: str = "wb"):
    """A new file (O_EXCL: never an existing file, O_NOFOLLOW: never through a symlink), open as ``mode``;
    FileExistsError if anything (a symlink included) is there."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), mode)


def _new_file(path: str, mode: str = "wb"):
    """`_create_file`; what is already there is `TrainingSetupError`."""
    try:
        return _create_file(path, mode)
    except FileExistsError:
        raise TrainingSetupError("{!r} already exists (a file or symlink left in the run directory); refusing to "
                                 "write it: every run needs a new --run-id".format(path)) from None


class RunDirectory:
    """STORE/RUN_ID (see the module docstring)."""

    def __init__(self, store_dir: str, run_id: str):
        if not re.match(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$", run_id):
            raise TrainingSetupError("--run-id {!r} must be letters, digits, '.', '_' and '-' (a directory name in the "
                                     "store), not starting with '.'".format(run_id))
        check_store_directory(store_dir)
        self.store_dir, self.run_id = os.path.abspath(store_dir), run_id
        self.path = os.path.join(self.store_dir, run_id)
        for path in [self.path] + [os.path.join(self.path, sub) for sub in ("nodes", "joined", "logs", "results")]:
            _owned_directory(path)

    def claim(self, node_rank: int) -> None:
        """Mark this node as started; `TrainingSetupError` if this run id already ran on that node."""
        try:
            _create_file(os.path.join(self.path, "nodes", str(node_rank))).close()
        except FileExistsError:
            raise TrainingSetupError(
                "run id {!r} was already used by node {} in store {!r} (left by an earlier run?): every run needs "
                "a new --run-id".format(self.run_id, node_rank, self.store_dir))

    def agree(self, config: RunConfig, node_rank: int) -> None:
        """Record ``config`` as the run's, or check it equals the one another node recorded first."""
        target = os.path.join(self.path, "config.json")
        draft = os.path.join(self.path, ".config.{}.json".format(node_rank))
        with _new_file(draft, "w") as handle:
            json.dump(config._asdict(), handle)
        try:
            os.link(draft, target)  # atomic: the first node's configuration wins
        except FileExistsError:
            pass
        finally:
            os.unlink(draft)
        recorded = self.config()
        if recorded != config:
            different = ", ".join("{}={} (here {})".format(key, value, getattr(config, key))
                                  for key, value in recorded._asdict().items() if value != getattr(config, key))
            raise TrainingSetupError("node {} disagrees with the configuration run {!r} started with: {}".format(
                node_rank, self.run_id, different))

    def config(self) -> RunConfig:
        with open(os.path.join(self.path, "config.json")) as handle:
            return RunConfig(**json.load(handle))

    def join(self, rank: int, config: RunConfig) -> None:
        """Announce ``rank`` and wait until every rank of the run has: `TimeoutError` naming the missing ranks
        after ``config.join_timeout`` seconds (Gloo's own rendezvous would only name internal keys)."""
        joined = os.path.join(self.path, "joined")
        _new_file(os.path.join(joined, str(rank))).close()
        deadline = time.monotonic() + config.join_timeout
        while True:
            missing = sorted(set(range(config.world_size)) - {int(name) for name in os.listdir(joined)})
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    "rank(s) {} did not join run {!r} within {} s (--join-timeout): a worker or node did not start, "
                    "or the nodes were started with different --nodes/--workers".format(
                        ", ".join(map(str, missing)), self.run_id, config.join_timeout))
            time.sleep(0.05)

    def log_path(self, rank: int) -> str:
        return os.path.join(self.path, "logs", "rank-{}.log".format(rank))

    def create_log(self, rank: int):
        """The new log file of ``rank``, open for writing (binary)."""
        return _new_file(self.log_path(rank))

    def _result_path(self, rank: int) -> str:
        return os.path.join(self.path, "results", "rank-{}.npz".format(rank))

    def write_result(self, rank: int, result: RunResult) -> None:
        """Write atomically (rename), so a reader never sees half a file."""
        draft = os.path.join(self.path, "results", ".rank-{}.npz".format(rank))
        with _new_file(draft) as handle:
            np.savez(handle, losses=result.losses, **result.params)
        os.replace(draft, self._result_path(rank))

    def read_results(self, world_size: int, wait_seconds: float) -> List[RunResult]:
        """Every rank's result, waiting up to ``wait_seconds`` for ranks of other nodes (else `TimeoutError`)."""
        deadline = time.monotonic() + wait_seconds
        missing = list(range(world_size))
        while True:
            missing = [rank for rank in missing if not os.path.exists(self._result_path(rank))]
            if not missing:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("no results from rank(s) {} in {} after {:.0f} s".format(
                    ", ".join(map(str, missing)), os.path.join(self.path, "results"), wait_seconds))
            time.sleep(0.1)
        results = []
        for rank in range(world_size):
            with np.load(self._result_path(rank)) as saved:
                results.append(RunResult({name: saved[name] for name in PARAMETERS}, saved["losses"]))
        return results
