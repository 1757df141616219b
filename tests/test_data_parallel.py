"""The ordinal EMD model trained by Caffe2's data_parallel_model over several CPU devices of one process,
checked against its PyTorch twin trained on the whole global batch; and the run directory's checks.

Several processes and machines (Gloo) are in tests/test_distributed_training.py.
"""
import numpy as np
import pytest

from pycumsum_op.examples import TorchOrdinalEMD, init_params, make_ordinal_data
from pycumsum_op.examples.ordinal_emd import PARAMETERS
from pycumsum_op.training import DataParallelEMD, TrainingSetupError, file_store_rendezvous
from pycumsum_op.training.launcher import check_config
from pycumsum_op.training.run_directory import RunConfig, RunDirectory

pytestmark = pytest.mark.usefixtures("clean_workspace")
SAMPLES, FEATURES, HIDDEN, CLASSES, BATCH, LEARNING_RATE, STEPS = 192, 5, 12, 4, 48, 1.0, 20
CONFIG = RunConfig(nodes=1, workers=2, devices=3, steps=STEPS, seed=3, batch=BATCH, learning_rate=LEARNING_RATE,
                   samples=SAMPLES, features=FEATURES, hidden=HIDDEN, classes=CLASSES, timeout=5,
                   join_timeout=5)


def batches(data):
    for step in range(STEPS):
        rows = CONFIG.global_rows(step)
        yield data.features[rows], data.one_hot[rows]


@pytest.mark.slow  # trains 2 and 4 replicas
@pytest.mark.parametrize("devices", [[0, 1], [0, 1, 2, 3]])
def test_devices_of_one_process_take_the_torch_twin_s_steps_over_the_global_batch(devices):
    data = make_ordinal_data(SAMPLES, FEATURES, CLASSES, seed=3)
    params = init_params(FEATURES, HIDDEN, CLASSES, seed=3)
    parallel, twin = DataParallelEMD(params, LEARNING_RATE, devices=devices), TorchOrdinalEMD(params, LEARNING_RATE)
    for features, one_hot in batches(data):
        loss = parallel.step(features, one_hot)
        assert loss == pytest.approx(twin.step(features, one_hot).loss, rel=1e-5)
    replicas = parallel.device_params()
    assert sorted(replicas) == devices
    for name in PARAMETERS:
        for device in devices:  # the all-reduce gives every replica the same bits
            np.testing.assert_array_equal(replicas[device][name], replicas[devices[0]][name])
        np.testing.assert_allclose(replicas[devices[0]][name], twin.params[name].detach().numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    assert not np.allclose(replicas[devices[0]]["fc1_w"], params["fc1_w"])  # it did train


def test_the_replicas_differentiate_through_pycumsum_and_all_reduce_their_gradients():
    params = init_params(FEATURES, HIDDEN, CLASSES, seed=0)
    parallel = DataParallelEMD(params, LEARNING_RATE, devices=[0, 1])
    ops = parallel.model.net.Proto().op
    python_ops = [op for op in ops if op.type == "Python"]
    assert sorted(op.output[0] for op in python_ops) == ["cpu_0/cdf", "cpu_0/target_cdf", "cpu_1/cdf",
                                                         "cpu_1/target_cdf"]
    summed = {op.input[0] for op in ops if op.type == "Sum"}
    assert summed == {"cpu_0/{}_grad".format(name) for name in PARAMETERS}


def test_a_batch_that_does_not_split_over_the_devices_is_refused():
    data = make_ordinal_data(SAMPLES, FEATURES, CLASSES, seed=0)
    parallel = DataParallelEMD(init_params(FEATURES, HIDDEN, CLASSES, seed=0), LEARNING_RATE, devices=[0, 1, 2])
    with pytest.raises(TrainingSetupError, match=r"a batch of 10 rows cannot be split evenly over 3 devices"):
        parallel.step(data.features[:10], data.one_hot[:10])


def test_the_global_batch_is_split_over_ranks_in_order():
    assert [CONFIG.rows(0, rank) for rank in range(2)] == [slice(0, 24), slice(24, 48)]
    assert CONFIG.global_rows(5) == slice(48, 96)  # 192 samples = 4 batches, cycled


@pytest.mark.parametrize("change, message", [
    (dict(batch=50), r"--batch 50 does not split evenly over 6 replicas \(1 node\(s\) x 2 worker\(s\) x 3 device"),
    (dict(batch=384), r"--batch 384 is larger than the data set \(192 samples\)"),
])
def test_sizes_that_cannot_work_are_named(change, message):
    with pytest.raises(TrainingSetupError, match=message):
        check_config(CONFIG._replace(**change), node_rank=0)
    with pytest.raises(TrainingSetupError, match=r"--node-rank 2 is out of range for --nodes 2 \(0..1\)"):
        check_config(CONFIG._replace(nodes=2), node_rank=2)


def test_a_run_id_runs_once_per_node_and_every_node_must_agree_on_the_configuration(tmp_path):
    run = RunDirectory(str(tmp_path), "run-1")
    run.claim(0)
    with pytest.raises(TrainingSetupError, match=r"run id 'run-1' was already used by node 0 .*new --run-id"):
        RunDirectory(str(tmp_path), "run-1").claim(0)
    run.claim(1)
    run.agree(CONFIG, node_rank=0)
    run.agree(CONFIG, node_rank=1)
    with pytest.raises(TrainingSetupError, match=r"node 1 disagrees .* nodes=1 \(here 2\), workers=2 \(here 3\)"):
        run.agree(CONFIG._replace(nodes=2, workers=3), node_rank=1)
    assert run.config() == CONFIG
    with pytest.raises(TrainingSetupError, match=r"--run-id '../elsewhere' must be letters, digits"):
        RunDirectory(str(tmp_path), "../elsewhere")


def test_workers_wait_for_every_rank_to_join_and_name_the_missing_ones(tmp_path):
    run, config = RunDirectory(str(tmp_path), "run-2"), CONFIG._replace(join_timeout=0)
    with pytest.raises(TimeoutError, match=r"rank\(s\) 0 did not join run 'run-2' within 0 s \(--join-timeout\)"):
        run.join(1, config)
    run.join(0, config)  # rank 1 is there already


def test_the_rendezvous_checks_what_would_abort_caffe2(tmp_path):
    with pytest.raises(TrainingSetupError, match=r"store directory '.*missing' does not exist"):
        file_store_rendezvous(str(tmp_path / "missing"), "r", rank=0, world_size=2)
    with pytest.raises(TrainingSetupError, match=r"network interface 'no-such-if0' does not exist on .* lo"):
        file_store_rendezvous(str(tmp_path), "r", rank=0, world_size=2, interface="no-such-if0")
    with pytest.raises(TrainingSetupError, match=r"rank 2 is out of range for a world of 2 processes \(0..1\)"):
        file_store_rendezvous(str(tmp_path), "r", rank=2, world_size=2)
    rendezvous = file_store_rendezvous(str(tmp_path), "r", rank=1, world_size=2, interface="lo")
    assert {key: rendezvous[key] for key in ("shard_id", "num_shards", "engine", "interface")} == dict(
        shard_id=1, num_shards=2, engine="GLOO", interface="lo")
