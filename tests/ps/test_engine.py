"""The engine end to end: server and trainer processes; sync equals one process on the joined batch, async and
GEO converge and every trainer ends with the servers' values."""
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys

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
    from globaltensor.ps.partition import server_of_ids
    owner = server_of_ids(W.vocab_ids(), len(job.servers))
    rows = np.zeros((len(owner), W.D), np.float32)
    for i, data in got.items():
        rows[owner == i] = data["sparse_emb"][owner == i]
    return rows


def _servers_w(job, got):
    """The servers' dense w, each block from the server that holds it."""
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


def _sh(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20)


@pytest.fixture
def two_namespaces():
    """Two network namespaces joined by a veth pair: (name, address) of each; skipped without root."""
    tag = f"{os.getpid() % 100000}"
    a, b = f"gtps_a{tag}", f"gtps_b{tag}"
    if os.geteuid() != 0 or shutil.which("ip") is None or _sh("ip", "netns", "add", a).returncode != 0:
        pytest.skip("needs root and `ip netns` (network namespaces)")
    try:
        steps = [("ip", "netns", "add", b),
                 ("ip", "link", "add", f"va{tag}", "netns", a, "type", "veth", "peer", f"vb{tag}", "netns", b),
                 ("ip", "-n", a, "addr", "add", "10.231.7.1/24", "dev", f"va{tag}"),
                 ("ip", "-n", b, "addr", "add", "10.231.7.2/24", "dev", f"vb{tag}"),
                 ("ip", "-n", a, "link", "set", f"va{tag}", "up"), ("ip", "-n", b, "link", "set", f"vb{tag}", "up"),
                 ("ip", "-n", a, "link", "set", "lo", "up"), ("ip", "-n", b, "link", "set", "lo", "up")]
        for cmd in steps:
            r = _sh(*cmd)
            assert r.returncode == 0, (cmd, r.stderr)
        yield (a, "10.231.7.1"), (b, "10.231.7.2")
    finally:
        _sh("ip", "netns", "del", a)
        _sh("ip", "netns", "del", b)


@pytest.mark.timeout(90)
def test_sync_across_two_network_namespaces(tmp_path, two_namespaces):
    """Server in one namespace bound on its veth address, both trainers in the other: as two machines."""
    (ns_server, ip_server), (ns_trainers, _) = two_namespaces
    w0 = np.random.default_rng(3).standard_normal((W.F, W.D)).astype(np.float32) * 0.1
    spec = {"servers": [f"{ip_server}:{W.free_ports(1)[0]}"], "trainers": 2, "mode": "sync", "lr": LR,
            "secret": os.urandom(16).hex(), "w0": w0.tolist(), "steps": 3}
    (tmp_path / "job.json").write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    script = W.__file__

    def start(ns, role, index, out):
        return subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, script, role, str(index),
                                 str(tmp_path / "job.json"), str(tmp_path / out)], env=env)
    procs = [start(ns_server, "server", 0, "s0.npz")] + [start(ns_trainers, "trainer", t, f"t{t}.npz")
                                                          for t in range(2)]
    try:
        codes = [p.wait(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
    assert codes == [0, 0, 0], (codes, [f.read_text() for f in tmp_path.glob("*.error")])
    t0 = np.load(tmp_path / "t0.npz")
    w_ref, rows_ref = W.reference_sync(w0, t0["rows0"], 3, 2, LR)
    for t in range(2):
        got = np.load(tmp_path / f"t{t}.npz")
        np.testing.assert_allclose(got["w"], w_ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["rows"], rows_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("vocab", [5, 1000, 10 ** 6, 2 ** 63 - 1])
def test_sum_rows_by_id_matches_add_at(vocab):
    from globaltensor.ps.server import sum_rows_by_id
    rng = np.random.default_rng(vocab % 1000)
    ids = rng.integers(-vocab, vocab, 3000)
    rows = rng.standard_normal((3000, 16)).astype(np.float32)
    uniq, sums = sum_rows_by_id(ids, rows)
    np.testing.assert_array_equal(uniq, np.unique(ids))
    ref = np.zeros((len(uniq), 16))
    np.add.at(ref, np.searchsorted(uniq, ids), rows.astype(np.float64))
    np.testing.assert_allclose(sums, ref, rtol=1e-5, atol=1e-5)


def test_geo_remembers_the_last_pulled_rows_of_each_id():
    from globaltensor.ps.geo import _Rows
    store = _Rows(2, "float32")
    store.record(np.array([5, 9]), np.array([[1, 1], [2, 2]], np.float32))
    store.record(np.array([-3, 9, 2 ** 62]), np.array([[3, 3], [4, 4], [5, 5]], np.float32))
    np.testing.assert_array_equal(store.of(np.array([9, -3, 5, 2 ** 62]), "emb"), [[4, 4], [3, 3], [1, 1], [5, 5]])
    with pytest.raises(ValueError, match=r"ids \[7\]\.\.\. were never pulled"):
        store.of(np.array([5, 7]), "emb")
