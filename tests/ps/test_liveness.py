"""No hangs: a killed server makes a waiting trainer raise naming its endpoint; a killed trainer in sync mode makes
the server and the other trainer raise naming it; all within 10 s (dead_after=2)."""
import multiprocessing as mp
import os
import threading
import time

import numpy as np
import pytest

import ps_workers as W
from globaltensor.ps import Client, DenseSpec, JobSpec, PSError, Rule, Server, SparseSpec

CTX = mp.get_context("spawn")


def _job(trainers, n_servers=1, mode="sync"):
    ports = W.free_ports(n_servers)
    return JobSpec(servers=tuple(f"127.0.0.1:{p}" for p in ports), trainers=trainers, mode=mode,
                   rule=Rule("sgd", 0.01), dense=(DenseSpec("w", (W.F, W.D)),), sparse=(SparseSpec("emb", W.D),),
                   secret=os.urandom(16), timeout=30.0, dead_after=2.0)


def _wait_for(path, limit):
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} did not appear within {limit} s"
        time.sleep(0.05)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_killed_server_makes_a_waiting_trainer_raise_naming_it(tmp_path, mode):
    job = _job(trainers=2, n_servers=2, mode=mode)  # sync: trainer 1 never comes, trainer 0's step-1 pull waits
    w0 = np.zeros((W.F, W.D), np.float32)
    servers = [CTX.Process(target=W.run_server, args=(job, i, {"w": w0}, str(tmp_path / f"s{i}"), W.vocab_ids()))
               for i in range(2)]
    client = Client(job, 0)
    try:
        for p in servers:
            p.start()
        client.connect()
        client.pull_dense()
        client.push_dense({"w": np.ones((W.F, W.D), np.float32)})
        killed = []
        threading.Timer(1.0, lambda: (servers[1].kill(), killed.append(time.monotonic()))).start()
        with pytest.raises(PSError, match=rf"parameter server {job.servers[1]} \(server 1\) stopped answering"):
            while not killed or time.monotonic() - killed[0] < 10:  # sync: the first pull waits until it raises
                client.pull_dense()
                client.push_dense({"w": np.ones((W.F, W.D), np.float32)})
                client.pull_sparse("emb", np.arange(20))
        assert time.monotonic() - killed[0] < 10
        with pytest.raises(PSError, match=job.servers[1]):  # and every later call
            client.pull_sparse("emb", [1, 2])
    finally:
        client.close()
        W.kill_all(servers)


@pytest.mark.timeout(60)
def test_a_killed_trainer_in_sync_mode_makes_the_server_and_the_other_trainer_raise(tmp_path):
    job = _job(trainers=2)
    w0 = np.zeros((W.F, W.D), np.float32)
    server = CTX.Process(target=W.run_server, args=(job, 0, {"w": w0}, str(tmp_path / "s0"), W.vocab_ids()))
    trainers = [CTX.Process(target=W.run_liveness_trainer, args=(job, t, str(tmp_path / f"t{t}"), t == 1))
                for t in range(2)]
    procs = [server] + trainers
    try:
        for p in procs:
            p.start()
        for t in range(2):
            _wait_for(str(tmp_path / f"t{t}.ready"), 30)
        trainers[1].kill()
        killed = time.time()
        codes = W.wait_all([server, trainers[0]], 15)
    finally:
        W.kill_all(procs)
    assert codes == [3, 3], codes
    for name in ("s0", "t0"):
        stamp, message = open(tmp_path / f"{name}.error").read().split("\n", 1)
        assert "trainer 1 stopped answering" in message, message
        assert float(stamp) - killed < 10, (name, float(stamp) - killed)


@pytest.mark.timeout(30)
def test_in_async_mode_the_others_finish_and_serve_then_names_the_dead_trainer():
    job = _job(trainers=2, mode="async")
    server = Server(job, 0)
    failures = []

    def serve():
        try:
            server.serve()
        except PSError as e:
            failures.append((time.monotonic(), str(e)))
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    survivor, dying = Client(job, 0).connect(), Client(job, 1).connect()
    try:
        dying.close()  # no stop(): its pings end, as when the process is killed
        gone = time.monotonic()
        survivor.push_dense({"w": np.ones((W.F, W.D), np.float32)})
        survivor.pull_dense()
        survivor.stop()
    finally:
        survivor.close()
        thread.join(15)
    assert not thread.is_alive() and failures, failures
    assert "trainer 1 stopped answering" in failures[0][1] and failures[0][0] - gone < 10
