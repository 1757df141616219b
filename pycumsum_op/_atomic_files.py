"""Write output files whole or not at all, never through a symlink, each path once per command: the one
module of the package that opens a file for writing (`tests/test_one_writer.py` reads every other module's
source to hold it to that).

`write_atomically` writes into a new temporary file in the target's folder (created with
O_EXCL, never a symlink), flushes it to disk and renames it over the target: a reader sees the
old file or the new one, never half of one, and a failed write leaves the old file and no
temporary behind. A target that is a symlink is refused (the rename would replace the link, a
plain write would follow it), as is a directory. `distinct_outputs` refuses one path given twice
as outputs of one command (the second write would silently replace the first). `create_new` makes a new
file in a folder held open by its descriptor, for files written as they go (a training run's logs, claims
and drafts). Refusals are OSErrors whose ``strerror`` says why, like any other failed write.
"""
import errno
import os
import stat
import tempfile


def check_target(path: str) -> None:
    """OSError if ``path`` exists as a symlink or as anything but a regular file."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(status.st_mode):
        raise OSError(errno.ELOOP, "it is a symbolic link; refusing to write through it", path)
    if not stat.S_ISREG(status.st_mode):
        raise OSError(errno.EISDIR if stat.S_ISDIR(status.st_mode) else errno.EINVAL,
                      "it exists and is not a regular file", path)


def distinct_outputs(paths) -> None:
    """OSError naming the first path (after resolving folders and symlinks) given twice in ``paths``."""
    seen = {}
    for path in paths:
        key = os.path.realpath(path)
        if key in seen:
            raise OSError(errno.EEXIST, "it is given twice as an output (also as {!r}); each output needs its "
                                        "own file".format(seen[key]), path)
        seen[key] = path


def write_atomically(path: str, write) -> None:
    """``write(handle)`` into a temporary file next to ``path`` (binary, opened for writing), then rename
    it to ``path``; the file gets the permissions a new file would (0666 less the umask)."""
    path = os.fspath(path)
    check_target(path)
    folder, name = os.path.split(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(prefix=".{}.".format(name[:100]), suffix=".tmp", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        check_target(path)  # a symlink planted while we wrote is refused too
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def create_new(folder: int, name: str, mode: str = "wb"):
    """A new file ``name`` in the open directory ``folder`` (O_EXCL: never an existing file, O_NOFOLLOW: never
    through a symlink), private (0600), open as ``mode``; FileExistsError if anything (a symlink included) is
    there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(name, flags, 0o600, dir_fd=folder), mode)
