"""Process bodies for the parameter-server tests: a server, and trainers of a small linear model (numpy)."""
import os
import socket
import sys
import time
import traceback

import numpy as np

from globaltensor.ps import Client, PSError, Server
from globaltensor.ps.geo import GeoCommunicator

F, D, SLOTS, VOCAB, BATCH = 16, 4, 3, 40, 8
BIG = np.int64(2 ** 62 + 12345)  # ids may be any int64


def alive(pid):
    """Whether process pid runs (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def vocab_ids():
    return np.r_[np.arange(VOCAB, dtype=np.int64), BIG]


def batch(step, trainer, seed=0):
    """(x, ids, y) of one trainer's share of a step: ids from a small vocabulary plus one huge id."""
    rng = np.random.default_rng([seed, step, trainer])
    x = rng.standard_normal((BATCH, F)).astype(np.float32)
    ids = rng.integers(0, VOCAB, (BATCH, SLOTS)).astype(np.int64)
    ids[0, 0] = BIG
    true_w = np.random.default_rng(99).standard_normal((F, D)).astype(np.float32) * 0.3
    y = (x @ true_w).sum(1).astype(np.float32)
    return x, ids, y


def forward_grads(w, rows, x, y):
    """loss = mean((sum_d (x @ w + sum_slots rows)_d - y)^2); (loss, dw, drows of shape rows.shape)."""
    h = x @ w + rows.sum(1)
    err = h.sum(1) - y
    dh = np.repeat((2.0 * err / len(y))[:, None], w.shape[1], axis=1).astype(np.float32)
    drows = np.repeat(dh[:, None, :], rows.shape[1], axis=1)
    return float(np.mean(err ** 2)), (x.T @ dh).astype(np.float32), drows


def run_server(job, index, initial, out, ids):
    code = 0
    try:
        srv = Server(job, index, initial=initial)
        srv.serve()
    except PSError as e:
        with open(out + ".error", "w") as f:
            f.write(f"{time.time()}\n{e}")
        code = 3
    except BaseException:
        traceback.print_exc()
        os._exit(4)
    dense = {n: b.value for n, b in srv.dense.items()}
    rows = {t: tab.pull(ids, is_test=True) for t, tab in srv.sparse.items()}
    np.savez(out, **{f"dense_{n}": v for n, v in dense.items()}, **{f"sparse_{t}": r for t, r in rows.items()})
    os._exit(code)


def _finish(client, out, losses, extra=None):
    client.barrier()
    final = client.pull_dense()["w"]
    rows = client.pull_sparse("emb", vocab_ids(), is_test=True)
    client.stop()
    client.close()
    np.savez(out, w=final, rows=rows, losses=np.array(losses), **(extra or {}))


def run_trainer(job, tid, steps, out, mode_body="step"):
    try:
        client = Client(job, tid).connect()
        extra = {}
        if tid == 0:
            extra["rows0"] = client.pull_sparse("emb", vocab_ids())  # created on first pull
        client.barrier()
        losses = (_geo_body if job.mode == "geo" else _step_body)(client, tid, steps)
        _finish(client, out, losses, extra)
    except PSError as e:
        with open(out + ".error", "w") as f:
            f.write(str(e))
        os._exit(3)
    except BaseException:
        traceback.print_exc()
        os._exit(4)
    os._exit(0)


def _step_body(client, tid, steps):
    losses = []
    for step in range(steps):
        x, ids, y = batch(step, tid)
        rows = client.pull_sparse("emb", ids)
        w = client.pull_dense()["w"]
        loss, dw, drows = forward_grads(w, rows, x, y)
        client.push_dense({"w": dw})
        client.push_sparse("emb", ids, drows.reshape(-1, D))
        losses.append(loss)
    return losses


def _geo_body(client, tid, steps):
    """Local SGD; every k_steps the GeoCommunicator pushes local - last pulled and pulls the servers' values."""
    geo = GeoCommunicator(client)
    lr = np.float32(client.job.rule.lr)
    w = geo.pull_dense()["w"]
    keys = vocab_ids()  # sorted
    local = geo.pull_sparse("emb", keys)
    losses = []
    for step in range(steps):
        x, ids, y = batch(step, tid)
        pos = np.searchsorted(keys, ids)
        loss, dw, drows = forward_grads(w, local[pos], x, y)
        w = w - lr * dw
        np.subtract.at(local, pos.reshape(-1), lr * drows.reshape(-1, D))
        losses.append(loss)
        last = step == steps - 1
        fresh = geo.sync({"w": w}, {"emb": (keys, local)}) if last else geo.step({"w": w}, {"emb": (keys, local)})
        if fresh is not None:
            w, local = fresh[0]["w"], fresh[1]["emb"]
    return losses


def reference_sync(w0, rows0, steps, trainers, lr):
    """One process on the joined batch: the same model, mean loss over all trainers' shares, SGD."""
    w = w0.astype(np.float64)
    table = dict(zip(vocab_ids().tolist(), rows0.astype(np.float64)))
    for step in range(steps):
        parts = [batch(step, t) for t in range(trainers)]
        x = np.concatenate([p[0] for p in parts]).astype(np.float64)
        ids = np.concatenate([p[1] for p in parts])
        y = np.concatenate([p[2] for p in parts]).astype(np.float64)
        rows = np.stack([table[i] for i in ids.reshape(-1).tolist()]).reshape(ids.shape + (D,))
        h = x @ w + rows.sum(1)
        dh = np.repeat((2.0 * (h.sum(1) - y) / len(y))[:, None], D, axis=1)
        w = w - lr * (x.T @ dh)
        for i, g in zip(ids.reshape(-1).tolist(), np.repeat(dh[:, None, :], SLOTS, axis=1).reshape(-1, D)):
            table[i] = table[i] - lr * g
    return w, np.stack([table[i] for i in vocab_ids().tolist()])


def wait_all(procs, timeout):
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.1, deadline - time.monotonic()))
    return [p.exitcode for p in procs]


def kill_all(procs):
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(5)


def run_liveness_trainer(job, tid, out, hold):
    """One sync step, then write `out`.ready; trainer 1 (hold) then sleeps until killed, trainer 0 goes on."""
    try:
        client = Client(job, tid).connect()
        x, ids, y = batch(0, tid)
        _, dw, drows = forward_grads(client.pull_dense()["w"], client.pull_sparse("emb", ids), x, y)
        client.push_dense({"w": dw})
        client.push_sparse("emb", ids, drows.reshape(-1, D))
        open(out + ".ready", "w").close()
        if hold:
            time.sleep(120)
        while True:  # step 1 waits for trainer 1, which never comes
            client.pull_dense()
            client.push_dense({"w": dw})
    except PSError as e:
        with open(out + ".error", "w") as f:
            f.write(f"{time.time()}\n{e}")
        os._exit(3)
    except BaseException:
        traceback.print_exc()
        os._exit(4)


def job_from_json(path):
    """A JobSpec of the linear model from a JSON file (processes started by a command line, not by spawn)."""
    import json
    from globaltensor.ps import DenseSpec, JobSpec, Rule, SparseSpec
    d = json.load(open(path))
    return JobSpec(servers=tuple(d["servers"]), trainers=d["trainers"], mode=d["mode"], rule=Rule("sgd", d["lr"]),
                   dense=(DenseSpec("w", (F, D)),), sparse=(SparseSpec("emb", D, seed=7),), min_block_size=32,
                   secret=bytes.fromhex(d["secret"]), timeout=30.0, dead_after=4.0), d


if __name__ == "__main__":  # python ps_workers.py server|trainer INDEX JOB.json OUT
    role, index, path, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    job, d = job_from_json(path)
    if role == "server":
        run_server(job, index, {"w": np.array(d["w0"], np.float32)}, out, vocab_ids())
    else:
        run_trainer(job, index, d["steps"], out)
