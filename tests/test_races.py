"""The checks of a path hold when the path is used: a swapper process exchanges paths with renameat2
(RENAME_EXCHANGE, atomic) in a loop while a door reads or writes through them, at least `SWAPS` times, in a
child process with its address space and time capped. An ONNX model's external data is never read from
outside its folder; a training run never writes outside its run directory. Also: the stores that no other
user may change, and the one line for a store that is no directory."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

from pycumsum_op.cli import main
from pycumsum_op.training.rendezvous import TrainingSetupError, open_store
from pycumsum_op.training.run_directory import RunDirectory
from onnx_support import needs_onnx_backend

SWAPS = 10000
SECONDS = 20.0  # the child's whole run; the loops stop after 6 s (or once SWAPS swaps were made and seen)

CHILD = r'''
import ctypes, json, os, resource, signal, sys, time
spec = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2


def swapper(first, second, counter_path):
    """Exchange ``first`` and ``second`` until killed; the count is written every 1000 swaps."""
    count = 0
    a, b = os.fsencode(first), os.fsencode(second)
    while True:
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            raise OSError(ctypes.get_errno(), "renameat2")
        count += 1
        if count % 1000 == 0:
            with open(counter_path, "w") as handle:
                handle.write(str(count))


def swaps(counter_path):
    try:
        with open(counter_path) as handle:
            return int(handle.read() or 0)
    except (OSError, ValueError):
        return 0


import pycumsum_op  # noqa: E402 (imported before the address space is capped)
from pycumsum_op.training.run_directory import RunDirectory  # noqa: E402
if spec["door"] == "external_data":  # (pycumsum_op.onnx loads on torch >= 1.10 only)
    from pycumsum_op.onnx import load_model

with open("/proc/self/status") as status:
    vm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + 2 ** 30, vm + 2 ** 30))
counter = os.path.join(spec["folder"], "swaps")
# the run directory is opened before the swaps begin: opened while store/run1 may be the symlink, it is refused
run = RunDirectory(spec["store"], "run1") if spec["door"] == "run_directory" else None
pid = os.fork()
if pid == 0:
    try:
        swapper(spec["first"], spec["second"], counter)
    finally:
        os._exit(1)
report = {"outcomes": {}, "reads": []}
start = time.monotonic()
try:
    if spec["door"] == "external_data":
        while time.monotonic() - start < 6 and (swaps(counter) < spec["swaps"] or len(report["reads"]) < 100):
            try:
                model = load_model(spec["model"])
                report["reads"].append(model.graph.initializer[0].raw_data.hex())
            except Exception as error:
                name = type(error).__name__ + ": " + str(error).split(": ", 1)[-1][:120]
                report["outcomes"][name] = report["outcomes"].get(name, 0) + 1
    else:
        index = 0
        while time.monotonic() - start < 6 and (swaps(counter) < spec["swaps"] or index < 100):
            with run.create_log(index) as handle:
                handle.write(b"log of rank %d" % index)
            index += 1
        report["written"] = index
finally:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
report["swaps"] = swaps(counter)
report["seconds"] = time.monotonic() - start
print("REPORT" + json.dumps(report))
'''


def race(**spec):
    spec.setdefault("swaps", SWAPS)
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60, universal_newlines=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.split("REPORT", 1)[1])
    assert report["seconds"] < SECONDS, report
    assert report["swaps"] >= SWAPS, report  # the race was run that many times over
    return report


def external_model(folder, location):
    graph = helper.make_graph([helper.make_node("Relu", ["w"], ["y"])], "external", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])])
    weight = graph.initializer.add(name="w", data_type=TensorProto.FLOAT, dims=[16])
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value=location)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    path = os.path.join(folder, "model.onnx")
    with open(path, "wb") as handle:
        handle.write(model.SerializeToString())
    return path


@needs_onnx_backend
def test_swapping_external_data_for_a_symlink_out_never_reads_outside_the_folder(tmp_path):
    """models/sub (a folder holding the weights w.bin) and models/link (a symlink to a folder outside holding a
    secret w.bin) change places all the time: each load reads the weights or refuses the symlink, never the
    secret (checking the resolved path and then opening it read the secret within tens of loads)."""
    models, outside = tmp_path / "models", tmp_path / "outside"
    (models / "sub").mkdir(parents=True)
    outside.mkdir()
    weights, secret = np.arange(16, dtype=np.float32).tobytes(), b"\xee" * 64
    (models / "sub" / "w.bin").write_bytes(weights)
    (outside / "w.bin").write_bytes(secret)
    os.chmod(str(outside / "w.bin"), 0o600)
    os.symlink(str(outside), str(models / "link"))
    model = external_model(str(models), "sub/w.bin")
    report = race(door="external_data", model=model, folder=str(tmp_path), first=str(models / "sub"),
                  second=str(models / "link"))
    assert set(report["reads"]) == {weights.hex()}, set(report["reads"]) - {weights.hex()}
    assert set(report["outcomes"]) <= {"ExternalDataError: external data location 'sub/w.bin' is a symlink leading "
                                       "out of the model's folder; only files inside it are read"}, report["outcomes"]


def test_swapping_the_run_directory_for_a_symlink_never_writes_outside_it(tmp_path):
    """store/run1 (the run directory, open) and store/elsewhere (a symlink to a folder outside) change places
    all the time while logs are created: every log lands in the run directory, none outside."""
    store, outside = tmp_path / "store", tmp_path / "outside"
    store.mkdir(mode=0o700)
    (outside / "logs").mkdir(parents=True)
    RunDirectory(str(store), "run1").close()
    os.symlink(str(outside), str(store / "elsewhere"))
    report = race(door="run_directory", store=str(store), folder=str(tmp_path), first=str(store / "run1"),
                  second=str(store / "elsewhere"))
    assert os.listdir(str(outside / "logs")) == [] and sorted(os.listdir(str(outside))) == ["logs"]
    real = store / ("run1" if (store / "run1").is_dir() and not (store / "run1").is_symlink() else "elsewhere")
    logs = sorted(os.listdir(str(real / "logs")))
    assert logs == sorted("rank-{}.log".format(index) for index in range(report["written"]))
    assert (real / "logs" / "rank-7.log").read_bytes() == b"log of rank 7"


@pytest.fixture
def other_user(monkeypatch):
    """A user id that is not this process's: as root, "nobody" for real; otherwise this process plays another
    user (its files then belong to someone else)."""
    if os.geteuid() == 0:
        return 65534
    owner = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)
    return owner


def chown(path, uid):
    if os.geteuid() == 0 or uid != os.getuid():
        os.chown(str(path), uid, -1)


def test_a_store_another_user_owns_is_refused_even_sticky_and_world_writable(tmp_path, other_user):
    store = tmp_path / "shared"
    store.mkdir()
    os.chmod(str(store), 0o1777)
    chown(store, other_user)
    with pytest.raises(TrainingSetupError, match=r"store directory '.*shared' \(mode 1777\) belongs to user id "
                                                 r"{}, not to this user".format(other_user)):
        RunDirectory(str(store), "run1")
    assert os.listdir(str(store)) == []


def test_a_store_of_ones_own_others_can_write_is_refused_unless_sticky(tmp_path):
    store = tmp_path / "mine"
    store.mkdir()
    os.chmod(str(store), 0o777)
    with pytest.raises(TrainingSetupError, match=r"\(mode 777\) .* or others can write it"):
        RunDirectory(str(store), "run1")
    os.chmod(str(store), 0o1777)  # sticky: others cannot rename or remove this user's run directory
    RunDirectory(str(store), "run1").close()
    assert os.listdir(str(store)) == ["run1"]


def test_roots_sticky_tmp_is_a_store_and_a_folder_above_others_can_change_is_not(tmp_path):
    os.close(open_store("/tmp"))  # root's, sticky
    above = tmp_path / "open"
    (above / "store").mkdir(parents=True)
    os.chmod(str(above), 0o777)
    with pytest.raises(TrainingSetupError, match=r"a folder above store directory .* \(mode 777, user id \d+\) can be "
                                                 r"changed by other users"):
        open_store(str(above / "store"))


def test_train_with_a_file_as_store_says_it_is_not_a_directory(tmp_path, capsys):
    store = tmp_path / "file"
    store.write_text("")
    status = main(["train", "--workers", "1", "--steps", "1", "--store", str(store), "--run-id", "r"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1, lines
    assert lines[0] == ("pycumsum-op train: error: store directory {!r} is not a directory (it must be a directory "
                        "every worker can read and write: on several machines, a shared filesystem)".format(str(store)))


@needs_onnx_backend
def test_without_openat2_every_symlink_in_a_location_is_refused(tmp_path, monkeypatch):
    """Linux before 5.6 has no openat2: a syscall number the kernel does not know gets the same ENOSYS, and
    then each component is opened with O_NOFOLLOW: a file is read, a symlink (inside or out) is refused."""
    from pycumsum_op.onnx import load_model, model_input

    models = tmp_path / "models"
    (models / "sub").mkdir(parents=True)
    weights = np.arange(16, dtype=np.float32).tobytes()
    (models / "sub" / "w.bin").write_bytes(weights)
    os.symlink("sub", str(models / "link"))
    monkeypatch.setattr(model_input, "_SYS_OPENAT2", 4095)
    assert load_model(external_model(str(models), "sub/w.bin")).graph.initializer[0].raw_data == weights
    os.symlink(os.path.join("sub", "w.bin"), str(models / "w_link.bin"))
    for location, reason in (("link/w.bin", "Not a directory"), ("w_link.bin", "Too many levels of symbolic links")):
        with pytest.raises(model_input.ExternalDataError, match="cannot open external data {!r}: {}".format(
                location, reason)):
            load_model(external_model(str(models), location))
    monkeypatch.undo()  # openat2 follows the symlink that stays inside
    assert load_model(external_model(str(models), "link/w.bin")).graph.initializer[0].raw_data == weights
