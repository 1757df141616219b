"""Gloo rendezvous through a shared directory: Caffe2's ``FileStoreHandlerCreate``, checked first.

Caffe2's file store aborts the whole process (a glog CHECK, not an exception) when its
directory does not exist or cannot be written, so `file_store_rendezvous` checks both, and the
network interface, before creating it, and raises `TrainingSetupError` naming the bad value.

The store is opened once (`open_store`) and used through its descriptor; it must be a directory that
no other user can change: owned by this user and writable by no one else, or root's with the sticky bit
(like /tmp: others cannot rename or remove what this user creates there), and so must every folder above
it (owned by root or this user, writable by no one else unless sticky). Caffe2's file store reads and
writes Gloo's keys by path (``realpath`` once, then strings), so the whole chain is what keeps those
paths this user's.

Every run keys its entries under its own ``run_id`` (a subdirectory of the store), so entries
left in the directory by an earlier run are never read by a new one.

>>> file_store_rendezvous("/no/such/store", "run-1", rank=0, world_size=2)
Traceback (most recent call last):
...
pycumsum_op.training.rendezvous.TrainingSetupError: store directory '/no/such/store' does not exist (it must be a directory every worker can read and write: on several machines, a shared filesystem)
"""
import fcntl
import os
import socket
import stat
import struct
from typing import Optional

from caffe2.python import core, workspace

_STORE_HANDLER = "pycumsum_train_store_handler"


class TrainingSetupError(ValueError):
    """A training configuration that cannot work (bad store, interface, sizes); the message names it."""


def interfaces():
    """The names of this machine's network interfaces (``lo``, ``eth0``, ...)."""
    return sorted(name for _, name in socket.if_nameindex())


def has_address(interface: str) -> bool:
    """Whether ``interface`` has an IPv4 or IPv6 address (Gloo binds to one); True where Linux's ways to
    ask are missing."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:  # SIOCGIFADDR: the interface's IPv4 address
            fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", interface[:15].encode()))
            return True
        except OSError:
            pass
    try:
        with open("/proc/net/if_inet6") as table:
            return any(line.split()[-1] == interface for line in table)
    except OSError:
        return True


def check_interface(interface: Optional[str]) -> None:
    """Raise `TrainingSetupError` unless ``interface`` is None (Gloo's default: the hostname's address)
    or one of this machine's interfaces with an address."""
    if interface is None:
        return
    if interface not in interfaces():
        raise TrainingSetupError("network interface {!r} does not exist on {}; its interfaces are: {}".format(
            interface, socket.gethostname(), ", ".join(interfaces())))
    if not has_address(interface):
        raise TrainingSetupError("network interface {!r} on {} has no IP address (down or not configured); Gloo "
                                 "needs one".format(interface, socket.gethostname()))


_ADVICE = "it must be a directory every worker can read and write: on several machines, a shared filesystem"


def _others_cannot_change(status) -> bool:
    """Whether only the owner may add, rename or remove entries of a directory of this ``status``."""
    return not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or bool(status.st_mode & stat.S_ISVTX)


def _check_folders_above(store: int, store_dir: str) -> None:
    """`TrainingSetupError` unless every folder above the open directory ``store`` is root's or this user's
    and `_others_cannot_change` it."""
    current = os.dup(store)
    try:
        while True:
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=current)
            os.close(current)
            current = parent
            status = os.fstat(current)
            if status.st_uid not in (0, os.geteuid()) or not _others_cannot_change(status):
                raise TrainingSetupError(
                    "a folder above store directory {!r} (mode {:o}, user id {}) can be changed by other users, "
                    "who could swap the store for their own; use a store whose every parent folder is root's or "
                    "yours and writable only by its owner (or sticky, like /tmp)".format(
                        store_dir, stat.S_IMODE(status.st_mode), status.st_uid))
            if os.path.samestat(status, os.stat("/")):
                return
    finally:
        os.close(current)


def open_store(store_dir: str) -> int:
    """The store directory's descriptor, opened once; `TrainingSetupError` unless it is a directory this
    user can write that no other user can change (see the module)."""
    try:
        store = os.open(store_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TrainingSetupError("store directory {!r} does not exist ({})".format(store_dir, _ADVICE)) from None
    except NotADirectoryError:
        raise TrainingSetupError("store directory {!r} is not a directory ({})".format(store_dir, _ADVICE)) from None
    except OSError as error:
        raise TrainingSetupError("store directory {!r} cannot be opened: {} ({})".format(
            store_dir, error.strerror, _ADVICE)) from None
    try:
        status = os.fstat(store)
        owner = status.st_uid == os.geteuid() and _others_cannot_change(status)
        if not owner and not (status.st_uid == 0 and status.st_mode & stat.S_ISVTX):
            raise TrainingSetupError(
                "store directory {!r} (mode {:o}) belongs to user id {}, not to this user ({}), or others can write "
                "it; use a directory of your own, or a sticky one of root's like /tmp".format(
                    store_dir, stat.S_IMODE(status.st_mode), status.st_uid, os.geteuid()))
        if not os.access(store_dir, os.R_OK | os.W_OK | os.X_OK):
            raise TrainingSetupError("store directory {!r} is not writable by this user ({})".format(
                store_dir, _ADVICE))
        _check_folders_above(store, store_dir)
    except BaseException:
        os.close(store)
        raise
    return store


def check_store_directory(store_dir: str) -> None:
    """`open_store`'s checks, the descriptor closed."""
    os.close(open_store(store_dir))


def file_store_rendezvous(store_dir: str, run_id: str, rank: int, world_size: int,
                          interface: Optional[str] = None, transport: str = "tcp") -> dict:
    """Create the file store handler in the workspace; returns the ``rendezvous`` dict for
    ``data_parallel_model.Parallelize`` (engine Gloo).

    ``run_id`` must be the same for every rank of one run and new for every run.
    """
    if not 0 <= rank < world_size:
        raise TrainingSetupError("rank {} is out of range for a world of {} processes (0..{})".format(
            rank, world_size, world_size - 1))
    check_store_directory(store_dir)
    check_interface(interface)
    workspace.RunOperatorOnce(core.CreateOperator(
        "FileStoreHandlerCreate", [], [_STORE_HANDLER], path=os.path.abspath(store_dir), prefix=run_id))
    rendezvous = dict(kv_handler=_STORE_HANDLER, shard_id=rank, num_shards=world_size, engine="GLOO",
                      transport=transport, exit_nets=None)
    if interface is not None:
        rendezvous["interface"] = interface
    return rendezvous
