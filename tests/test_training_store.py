"""The training store is owned: a run directory of another user, one that group or others can write, or a
symlink is refused; files are created new and never through a symlink (a planted log symlink's target never
appears); --save writes only after the ranks were compared and agree; default run ids cannot be guessed."""
import os
import re

import numpy as np
import pytest

from pycumsum_op.cli import main
from pycumsum_op.training import launcher
from pycumsum_op.training.run_directory import RunDirectory, RunResult

LOOPBACK = ["--interface", "lo", "--timeout", "20", "--join-timeout", "60", "--deadline", "120"]


def train_in_process(capsys, *args):
    status = main(["train"] + [str(arg) for arg in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_refused(status, err, *words):
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("pycumsum-op train: error:"), err
    for word in words:
        assert word in lines[0], lines[0]


def run_dir(store, run_id="run1", mode=0o700):
    path = store / run_id
    path.mkdir()
    for sub in ("nodes", "joined", "logs", "results"):
        (path / sub).mkdir(mode=0o700)
    path.chmod(mode)
    return path


def test_a_run_directory_of_another_user_is_refused(tmp_path, capsys, monkeypatch):
    path = run_dir(tmp_path)
    if os.geteuid() == 0:  # as root: give it to "nobody" for real
        os.chown(str(path), 65534, 65534)
        owner = 65534
    else:  # otherwise this process plays another user
        owner = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: owner + 1)
    status, _, err = train_in_process(capsys, "--workers", 1, "--steps", 1, "--store", tmp_path, "--run-id", "run1",
                                      *LOOPBACK)
    assert_refused(status, err, "belongs to user id {}".format(owner), "refusing to use it")
    assert sorted(os.listdir(str(path / "nodes"))) == []  # not even claimed


@pytest.mark.parametrize("mode", [0o770, 0o702, 0o777])
def test_a_run_directory_others_can_write_is_refused(tmp_path, capsys, mode):
    run_dir(tmp_path, mode=mode)
    status, _, err = train_in_process(capsys, "--workers", 1, "--steps", 1, "--store", tmp_path, "--run-id", "run1",
                                      *LOOPBACK)
    assert_refused(status, err, "writable by group or others (mode {:o})".format(mode))


def test_a_symlinked_run_directory_is_refused(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    store = tmp_path / "store"
    store.mkdir()
    os.symlink(str(elsewhere), str(store / "run1"))
    status, _, err = train_in_process(capsys, "--workers", 1, "--steps", 1, "--store", store, "--run-id", "run1",
                                      *LOOPBACK)
    assert_refused(status, err, "is not a directory (a symlink)")
    assert os.listdir(str(elsewhere)) == []


def test_a_planted_log_symlink_is_refused_and_its_target_never_appears(tmp_path, capsys):
    """The store's own files are created with O_EXCL | O_NOFOLLOW: a symlink left where rank 0's log goes
    stops the run before any worker starts."""
    path = run_dir(tmp_path)
    marker = tmp_path / "marker"
    os.symlink(str(marker), str(path / "logs" / "rank-0.log"))
    status, _, err = train_in_process(capsys, "--workers", 1, "--steps", 1, "--store", tmp_path, "--run-id", "run1",
                                      *LOOPBACK)
    assert_refused(status, err, "rank-0.log' already exists (a file or symlink left in the run directory)")
    assert not marker.exists()


def test_save_refuses_a_symlink_before_training(tmp_path, capsys):
    marker, link = tmp_path / "marker.npz", tmp_path / "params.npz"
    os.symlink(str(marker), str(link))
    status, _, err = train_in_process(capsys, "--workers", 1, "--steps", 1, "--save", link, *LOOPBACK)
    assert_refused(status, err, "--save", "symbolic link")
    assert not marker.exists()


def test_save_writes_only_after_the_ranks_agree(tmp_path, monkeypatch, capsys):
    """A results file swapped after the workers wrote it (here: rank 0's parameters shifted by 1 when read)
    makes the check fail, and --save then writes nothing."""
    read_results = RunDirectory.read_results

    def swapped(self, world_size, wait_seconds):
        results = read_results(self, world_size, wait_seconds)
        results[0] = RunResult({name: value + 1 for name, value in results[0].params.items()}, results[0].losses)
        return results

    monkeypatch.setattr(RunDirectory, "read_results", swapped)
    save = tmp_path / "params.npz"
    status, out, _ = train_in_process(capsys, "--workers", 2, "--steps", 2, "--save", save, *LOOPBACK)
    assert status == 1, out
    assert "parameters of ranks 0..1: DIFFERENT (max difference 1)" in out
    assert "not saving the parameters to {}: the check failed".format(save) in out
    assert not save.exists()


def test_default_run_ids_carry_128_random_bits():
    ids = [launcher.new_run_id() for _ in range(200)]
    randoms = [re.fullmatch(r"\d{8}-\d{6}-([0-9a-f]{32})", run_id).group(1) for run_id in ids]
    assert len(set(randoms)) == len(randoms)
    # every hex digit position varies: not a counter, not a clock
    assert all(len({value[i] for value in randoms}) > 4 for i in range(32))
    bits = np.unpackbits(np.frombuffer(bytes.fromhex("".join(randoms)), dtype=np.uint8))
    assert 0.45 < bits.mean() < 0.55
