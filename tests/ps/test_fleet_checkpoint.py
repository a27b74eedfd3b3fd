"""Checkpoints through Fleet under the launcher: trainer 0's fleet.save_persistables with 2 servers, then
fleet.init_server(dirname) with 1 and with 3 servers: the first pulled values are the saved ones (dense
blocks re-sliced, sparse rows re-hashed) and sync training goes on equal to an unbroken run; the dense
part loads into a dygraph nn.Layer (checkpoint.load_dense) whose forward gives the unbroken run's loss."""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "fleet_job.py")
LAUNCH = [sys.executable, "-m", "globaltensor.paddle.distributed.launch"]
pytestmark = pytest.mark.timeout(300)
SAVE_AT, STEPS = 3, 6


def launch(out, servers, *args):
    os.makedirs(out, exist_ok=True)
    res = subprocess.run(LAUNCH + [f"--server_num={servers}", "--worker_num=2", "--grace_period=1", JOB, str(out),
                                   *args], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    return [dict(np.load(os.path.join(out, f"trainer{t}.npz"))) for t in range(2)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet_ckpt")
    ckpt = str(root / "ckpt")
    got = {"ckpt": ckpt, "whole": launch(root / "whole", 2, f"last={STEPS}"),
           "saved": launch(root / "saved", 2, f"last={SAVE_AT}", f"save={ckpt}")}
    for servers in (1, 3):
        got[servers] = launch(root / f"resumed{servers}", servers, f"first={SAVE_AT}", f"last={STEPS}", f"load={ckpt}")
    return got


def _part(record, prefix):
    return {k[len(prefix):]: v for k, v in record.items() if k.startswith(prefix)}


@pytest.mark.parametrize("servers", [1, 3])
def test_the_first_pulled_values_are_the_saved_ones(runs, servers):
    saved, first = _part(runs["saved"][0], "last/"), _part(runs[servers][0], "first/")
    assert sorted(saved) == sorted(first) and "dense/fc_0.w_0" in saved
    for key in saved:  # dense parameters (fc_0.w_0 in 2 blocks before, 1 or 3 now) and the sparse rows
        np.testing.assert_array_equal(first[key], saved[key], err_msg=key)
    assert np.count_nonzero(np.abs(saved["rows"]).sum(1)) > 20  # rows the first run created and trained


@pytest.mark.parametrize("servers", [1, 3])
def test_training_goes_on_as_an_unbroken_run(runs, servers):
    for t in range(2):
        whole, resumed = runs["whole"][t], runs[servers][t]
        np.testing.assert_allclose(resumed["losses"], whole["losses"][SAVE_AT:], rtol=1e-6)
        for key in _part(whole, "param/"):
            np.testing.assert_allclose(resumed["param/" + key], whole["param/" + key], rtol=1e-6, atol=1e-7,
                                       err_msg=key)
    whole, resumed = _part(runs["whole"][0], "last/"), _part(runs[servers][0], "last/")  # trainer 0 probed the end
    for key in whole:
        np.testing.assert_allclose(resumed[key], whole[key], rtol=1e-6, atol=1e-7, err_msg=key)


def test_the_manifests_name_two_servers_and_the_blocks(runs):
    from globaltensor.ps.checkpoint import read_manifests
    manifests = read_manifests(runs["ckpt"])
    assert [m["servers"] for m in manifests] == [2, 2]
    blocks = sorted(e["block_name"] for m in manifests for e in m["dense"] if e["name"] == "fc_0.w_0")
    assert blocks == ["fc_0.w_0.block0", "fc_0.w_0.block1"]


def test_the_dense_part_serves_in_a_dygraph_layer(runs):
    """The documented recipe: checkpoint.load_dense per parameter into the Layer's set_state_dict; its forward
    equals numpy's on the values the servers held at the save."""
    import globaltensor.paddle as paddle
    from globaltensor.ps.checkpoint import load_dense, read_manifests

    class CTR(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.slot_emb = paddle.nn.Embedding(50, 4)
            self.fc1, self.fc2 = paddle.nn.Linear(220, 128), paddle.nn.Linear(128, 1)

        def forward(self, x, rows, slot):
            feats = paddle.concat([x, rows.reshape([-1, 16]), self.slot_emb(slot).reshape([-1, 4])], axis=1)
            return self.fc2(paddle.nn.functional.relu(self.fc1(feats)))

    names = sorted({e["name"] for m in read_manifests(runs["ckpt"]) for e in m["dense"]})
    assert names == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0", "slot_emb"]
    model = CTR()
    static_names = {"slot_emb.weight": "slot_emb", "fc1.weight": "fc_0.w_0", "fc1.bias": "fc_0.b_0",
                    "fc2.weight": "fc_1.w_0", "fc2.bias": "fc_1.b_0"}
    model.set_state_dict({key: load_dense(runs["ckpt"], name) for key, name in static_names.items()})
    np.testing.assert_array_equal(model.fc1.weight.numpy(), runs["saved"][0]["last/dense/fc_0.w_0"])
    saved = _part(runs["saved"][0], "last/dense/")
    trained = np.flatnonzero(np.abs(runs["saved"][0]["last/rows"]).sum(1))  # probe rows the servers hold
    rng = np.random.default_rng(5)
    xs = rng.random((16, 200), np.float32)
    rows = runs["saved"][0]["last/rows"][rng.choice(trained, (16, 2))]
    slot = rng.integers(0, 50, (16, 1))
    pred = model(paddle.to_tensor(xs), paddle.to_tensor(rows), paddle.to_tensor(slot)).numpy()
    feats = np.concatenate([xs, rows.reshape(-1, 16), saved["slot_emb"][slot[:, 0]]], axis=1)  # numpy's forward
    want = np.maximum(feats @ saved["fc_0.w_0"] + saved["fc_0.b_0"], 0) @ saved["fc_1.w_0"] + saved["fc_1.b_0"]
    np.testing.assert_allclose(pred, want, rtol=1e-5, atol=1e-6)
