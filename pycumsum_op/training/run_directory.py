"""One training run's files in the shared store directory: its configuration, node claims and results.

    STORE/RUN_ID/config.json          the run's configuration; every node's launcher must agree with it
    STORE/RUN_ID/nodes/NODE_RANK      created once by that node's launcher: a reused run id fails at once
    STORE/RUN_ID/joined/RANK          created by each worker once it has started, before Gloo's rendezvous
    STORE/RUN_ID/logs/rank-R.log      each worker's stdout/stderr (rank 0's stdout goes to the terminal)
    STORE/RUN_ID/results/rank-R.npz   each rank's final parameters and per-step losses

Gloo's rendezvous keys live inside it, in the file store's own subdirectory (prefix ``gloo``).

The store is opened once (`pycumsum_op.training.rendezvous.open_store`: no other user can change it
or any folder above it), and everything below it is reached through directory descriptors: the run
directory and its subdirectories are opened with O_NOFOLLOW | O_DIRECTORY from their parent's
descriptor, created private (0700), and must be real directories owned by the user running the
launcher and not writable by group or others; anything else (another user's directory planted under
the same run id, a symlink) is refused with `TrainingSetupError`. Every file is created new (O_EXCL)
and never through a symlink (O_NOFOLLOW), in the descriptor of the directory that was checked, so
swapping a path after the check changes nothing this process reads or writes.
"""
import json
import os
import re
import stat
import time
from typing import Dict, List, NamedTuple

import numpy as np

from .._atomic_files import create_new
from ..examples.ordinal_emd import PARAMETERS
from .rendezvous import TrainingSetupError, open_store


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


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SUBDIRECTORIES = ("nodes", "joined", "logs", "results")


def _owned_directory(parent: int, name: str, path: str) -> int:
    """The descriptor of directory ``name`` in the open directory ``parent``, created (0700) unless it exists;
    `TrainingSetupError` unless it is a real directory owned by this user that group and others cannot write
    (``path`` names it)."""
    try:
        os.mkdir(name, 0o700, dir_fd=parent)
    except FileExistsError:
        pass
    try:
        descriptor = os.open(name, _DIRECTORY, dir_fd=parent)
    except OSError as error:  # ELOOP: a symlink; ENOTDIR: some other file
        raise TrainingSetupError("run directory {!r} is not a directory ({}); refusing to use it".format(
            path, "a symlink" if stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode) else error.strerror)) from None
    status = os.fstat(descriptor)
    problem = None
    if status.st_uid != os.geteuid():
        problem = "belongs to user id {}, not to this user ({}); refusing to use it (choose a new --run-id)".format(
            status.st_uid, os.geteuid())
    elif status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = "is writable by group or others (mode {:o}); refusing to use it".format(stat.S_IMODE(status.st_mode))
    if problem:
        os.close(descriptor)
        raise TrainingSetupError("run directory {!r} {}".format(path, problem))
    return descriptor


def _open_file(folder: int, name: str, mode: str = "rb"):
    """File ``name`` of the open directory ``folder`` for reading, never through a symlink."""
    return os.fdopen(os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder), mode)


class RunDirectory:
    """STORE/RUN_ID (see the module docstring), held open: `close` (or garbage collection) releases it."""

    def __init__(self, store_dir: str, run_id: str):
        self._folders = {}
        if not re.match(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$", run_id):
            raise TrainingSetupError("--run-id {!r} must be letters, digits, '.', '_' and '-' (a directory name in the "
                                     "store), not starting with '.'".format(run_id))
        self.store_dir, self.run_id = os.path.abspath(store_dir), run_id
        self.path = os.path.join(self.store_dir, run_id)
        store = open_store(store_dir)
        try:
            self._folders[""] = _owned_directory(store, run_id, self.path)
        finally:
            os.close(store)
        for sub in _SUBDIRECTORIES:
            self._folders[sub] = _owned_directory(self._folders[""], sub, os.path.join(self.path, sub))

    def close(self) -> None:
        for descriptor in self._folders.values():
            os.close(descriptor)
        self._folders = {}

    def __del__(self):
        self.close()

    def _new_file(self, sub: str, name: str, mode: str = "wb"):
        """`create_new` in subdirectory ``sub`` ("" for the run directory); what is already there is
        `TrainingSetupError`."""
        try:
            return create_new(self._folders[sub], name, mode)
        except FileExistsError:
            raise TrainingSetupError("{!r} already exists (a file or symlink left in the run directory); refusing to "
                                     "write it: every run needs a new --run-id".format(
                                         os.path.join(self.path, sub, name))) from None

    def claim(self, node_rank: int) -> None:
        """Mark this node as started; `TrainingSetupError` if this run id already ran on that node."""
        try:
            create_new(self._folders["nodes"], str(node_rank)).close()
        except FileExistsError:
            raise TrainingSetupError(
                "run id {!r} was already used by node {} in store {!r} (left by an earlier run?): every run needs "
                "a new --run-id".format(self.run_id, node_rank, self.store_dir))

    def agree(self, config: RunConfig, node_rank: int) -> None:
        """Record ``config`` as the run's, or check it equals the one another node recorded first."""
        run, draft = self._folders[""], ".config.{}.json".format(node_rank)
        with self._new_file("", draft, "w") as handle:
            json.dump(config._asdict(), handle)
        try:
            os.link(draft, "config.json", src_dir_fd=run, dst_dir_fd=run, follow_symlinks=False)  # the first wins
        except FileExistsError:
            pass
        finally:
            os.unlink(draft, dir_fd=run)
        recorded = self.config()
        if recorded != config:
            different = ", ".join("{}={} (here {})".format(key, value, getattr(config, key))
                                  for key, value in recorded._asdict().items() if value != getattr(config, key))
            raise TrainingSetupError("node {} disagrees with the configuration run {!r} started with: {}".format(
                node_rank, self.run_id, different))

    def config(self) -> RunConfig:
        with _open_file(self._folders[""], "config.json", "r") as handle:
            return RunConfig(**json.load(handle))

    def join(self, rank: int, config: RunConfig) -> None:
        """Announce ``rank`` and wait until every rank of the run has: `TimeoutError` naming the missing ranks
        after ``config.join_timeout`` seconds (Gloo's own rendezvous would only name internal keys)."""
        self._new_file("joined", str(rank)).close()
        deadline = time.monotonic() + config.join_timeout
        while True:
            joined = {int(name) for name in os.listdir(self._folders["joined"])}
            missing = sorted(set(range(config.world_size)) - joined)
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    "rank(s) {} did not join run {!r} within {} s (--join-timeout): a worker or node did not start, "
                    "or the nodes were started with different --nodes/--workers".format(
                        ", ".join(map(str, missing)), self.run_id, config.join_timeout))
            time.sleep(0.05)

    def log_path(self, rank: int) -> str:
        return os.path.join(self.path, "logs", _log_name(rank))

    def create_log(self, rank: int):
        """The new log file of ``rank``, open for writing (binary)."""
        return self._new_file("logs", _log_name(rank))

    def read_log(self, rank: int) -> List[str]:
        """The lines of ``rank``'s log (undecodable bytes replaced)."""
        with _open_file(self._folders["logs"], _log_name(rank), "rb") as handle:
            return handle.read().decode("utf-8", "replace").splitlines()

    def write_result(self, rank: int, result: RunResult) -> None:
        """Write atomically (rename), so a reader never sees half a file."""
        draft = ".rank-{}.npz".format(rank)
        with self._new_file("results", draft) as handle:
            np.savez(handle, losses=result.losses, **result.params)
        results = self._folders["results"]
        os.replace(draft, _result_name(rank), src_dir_fd=results, dst_dir_fd=results)

    def read_results(self, world_size: int, wait_seconds: float) -> List[RunResult]:
        """Every rank's result, waiting up to ``wait_seconds`` for ranks of other nodes (else `TimeoutError`)."""
        deadline = time.monotonic() + wait_seconds
        missing = list(range(world_size))
        while True:
            present = set(os.listdir(self._folders["results"]))
            missing = [rank for rank in missing if _result_name(rank) not in present]
            if not missing:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("no results from rank(s) {} in {} after {:.0f} s".format(
                    ", ".join(map(str, missing)), os.path.join(self.path, "results"), wait_seconds))
            time.sleep(0.1)
        results = []
        for rank in range(world_size):
            with _open_file(self._folders["results"], _result_name(rank)) as handle, np.load(handle) as saved:
                results.append(RunResult({name: saved[name] for name in PARAMETERS}, saved["losses"]))
        return results


def _log_name(rank: int) -> str:
    return "rank-{}.log".format(rank)


def _result_name(rank: int) -> str:
    return "rank-{}.npz".format(rank)
