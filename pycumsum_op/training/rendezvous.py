"""Gloo rendezvous through a shared directory: Caffe2's ``FileStoreHandlerCreate``, checked first.

Caffe2's file store aborts the whole process (a glog CHECK, not an exception) when its
directory does not exist or cannot be written, so `file_store_rendezvous` checks both, and the
network interface, before creating it, and raises `TrainingSetupError` naming the bad value.

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


def check_store_directory(store_dir: str) -> None:
    """Raise `TrainingSetupError` unless ``store_dir`` is an existing directory this process can write."""
    advice = "it must be a directory every worker can read and write: on several machines, a shared filesystem"
    if not os.path.isdir(store_dir):
        raise TrainingSetupError("store directory {!r} does not exist ({})".format(store_dir, advice))
    if not os.access(store_dir, os.R_OK | os.W_OK | os.X_OK):
        raise TrainingSetupError("store directory {!r} is not writable by this user ({})".format(store_dir, advice))


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
