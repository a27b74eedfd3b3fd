"""The engine end to end: server and trainer processes; sync equals one process on the joined batch, async and
GEO converge and every trainer ends with the servers' values."""
import multiprocessing as mp
import os

import numpy as np
import pytest

import ps_workers as W
from globaltensor.ps import DenseSpec, JobSpec, Rule, SparseSpec

CTX = mp.get_context("spawn")
LR = 0.004  # a quarter of 2 / (the largest curvature of the loss, about 2 * D * F): stable in async too


def _job(n_servers, mode, k_steps=0):
    ports = W.free_ports(n_servers)
    return JobSpec(servers=tuple(f"127.0.0.1:{p}" for p in ports), trainers=2, mode=mode, rule=Rule("sgd", LR),
                   dense=(DenseSpec("w", (W.F, W.D)),), sparse=(SparseSpec("emb", W.D, seed=7),),
                   k_steps=k_steps, min_block_size=32, secret=os.urandom(16), timeout=30.0, dead_after=4.0)


def _run(job, tmp_path, steps):
    """Start the servers and two trainers; return ({trainer: npz}, {server: npz}, initial w)."""
    w0 = np.random.default_rng(3).standard_normal((W.F, W.D)).astype(np.float32) * 0.1
    ids = W.vocab_ids()
    servers = [CTX.Process(target=W.run_server, args=(job, i, {"w": w0}, str(tmp_path / f"s{i}.npz"), ids))
               for i in range(len(job.servers))]
    trainers = [CTX.Process(target=W.run_trainer, args=(job, t, steps, str(tmp_path / f"t{t}.npz")))
                for t in range(job.trainers)]
    procs = servers + trainers
    try:
        for p in procs:
            p.start()
        codes = W.wait_all(procs, 60)
    finally:
        W.kill_all(procs)
    errors = [open(f).read() for f in tmp_path.glob("*.error")]
    assert codes == [0] * len(procs), (codes, errors)
    return ({t: np.load(tmp_path / f"t{t}.npz") for t in range(job.trainers)},
            {i: np.load(tmp_path / f"s{i}.npz") for i in range(len(job.servers))}, w0)


def _servers_rows(job, got):
    """The servers' rows of the vocabulary, each id taken from the server that holds it."""
    owner = W.ps_standins.sys.modules["globaltensor.ps.partition"].server_of_ids(W.vocab_ids(), len(job.servers))
    rows = np.zeros((len(owner), W.D), np.float32)
    for i, data in got.items():
        rows[owner == i] = data["sparse_emb"][owner == i]
    return rows


def _servers_w(job, got):
    return np.concatenate([got[i]["dense_w"] for i in sorted(got)]) if len(got) == 1 else _assemble(job, got)


def _assemble(job, got):
    from globaltensor.ps.partition import job_blocks
    w = np.zeros((W.F, W.D), np.float32)
    for b in job_blocks(job):
        w[b.row_start:b.row_end] = got[b.server]["dense_w"]
    return w


@pytest.mark.timeout(90)
@pytest.mark.parametrize("n_servers", [1, 2])
def test_sync_sgd_equals_one_process_on_the_joined_batch(tmp_path, n_servers):
    job = _job(n_servers, "sync")
    trainers, servers, w0 = _run(job, tmp_path, steps=5)
    w_ref, rows_ref = W.reference_sync(w0, trainers[0]["rows0"], 5, 2, LR)
    for t, data in trainers.items():
        np.testing.assert_allclose(data["w"], w_ref, rtol=1e-5, atol=1e-6, err_msg=f"trainer {t} dense")
        np.testing.assert_allclose(data["rows"], rows_ref, rtol=1e-5, atol=1e-6, err_msg=f"trainer {t} sparse")
    np.testing.assert_array_equal(_servers_w(job, servers), trainers[0]["w"])
    np.testing.assert_array_equal(_servers_rows(job, servers), trainers[0]["rows"])


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["async", "geo"])
def test_async_and_geo_converge_and_end_with_the_servers_values(tmp_path, mode):
    job = _job(2, mode, k_steps=3 if mode == "geo" else 0)
    trainers, servers, _ = _run(job, tmp_path, steps=60)  # GEO's deltas count 1 / trainers: it learns slower
    for t, data in trainers.items():
        losses = data["losses"]
        assert losses[-10:].mean() < 0.3 * losses[:5].mean(), (t, losses)  # seen: 0.005 async, 0.06 GEO
        np.testing.assert_array_equal(data["w"], _servers_w(job, servers), err_msg=f"trainer {t}")
        np.testing.assert_array_equal(data["rows"], _servers_rows(job, servers), err_msg=f"trainer {t}")
