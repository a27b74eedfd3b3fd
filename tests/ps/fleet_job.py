"""A Fleet PS training script for the checkpoint and failure tests, run under the launcher:
python fleet_job.py OUTDIR [key=value ...]. A CTR-like static model: a dense fc over 200 features
(sliced in blocks over the servers), a sparse_embedding on the servers and a dense embedding; sync SGD.

keys: first, last (steps [first, last)), save=DIR (trainer 0 saves after the last step), load=DIR (servers
start from it), mode (sync | async | geo), pause (seconds each trainer sleeps after each step), bad (feed ids
outside the dense embedding at step `first`), server_delay (seconds a server waits before it starts).
Each trainer writes OUTDIR/trainer<i>.npz (probe before training, probe after, losses, final parameters),
OUTDIR/trainer<i>.step (the last step done, with its pid), servers OUTDIR/server<i>.pid (endpoint and pid) and, on a PSError, OUTDIR/trainer<i>.error.
"""
import os
import sys
import time

import numpy as np
import globaltensor.paddle as paddle
import globaltensor.paddle.distributed.fleet as fleet
from globaltensor.ps import PSError

OUT = sys.argv[1]
ARGS = dict(a.split("=", 1) for a in sys.argv[2:])
FIRST, LAST = int(ARGS.get("first", 0)), int(ARGS.get("last", 4))
MODE = ARGS.get("mode", "sync")
FEATURES, HIDDEN, DENSE_VOCAB, BATCH = 200, 128, 50, 16
PROBE_IDS = np.arange(0, 4000, 7, dtype=np.int64)  # covers every id the batches use, and unseen ones

paddle.enable_static()
fleet.init(fleet.PaddleCloudRoleMaker())
paddle.seed(7)
x = paddle.static.data(name="x", shape=[None, FEATURES], dtype="float32")
ids = paddle.static.data(name="ids", shape=[None, 2], dtype="int64")
slot = paddle.static.data(name="slot", shape=[None, 1], dtype="int64")
y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
emb = paddle.static.nn.sparse_embedding(ids, size=[10 ** 6, 8], param_attr=paddle.ParamAttr(name="emb"))
slot_emb = paddle.static.nn.embedding(slot, size=[DENSE_VOCAB, 4], param_attr=paddle.ParamAttr(name="slot_emb"))
feats = paddle.concat([x, paddle.reshape(emb, [-1, 16]), paddle.reshape(slot_emb, [-1, 4])], axis=1)
hidden = paddle.static.nn.fc(feats, HIDDEN, activation="relu")
pred = paddle.static.nn.fc(hidden, 1)
loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, y))
strategy = fleet.DistributedStrategy()
strategy.a_sync = MODE != "sync"
if MODE == "geo":
    strategy.a_sync_configs = {"k_steps": 2}
fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.005), strategy).minimize(loss)


def batch(step, trainer):
    rng = np.random.default_rng([step, trainer])
    xs = rng.random((BATCH, FEATURES), np.float32)
    feed = {"x": xs, "ids": rng.integers(0, 4000, (BATCH, 2)) // 7 * 7, "slot": rng.integers(0, DENSE_VOCAB, (BATCH, 1)),
            "y": xs[:, :10].sum(1, keepdims=True).astype(np.float32)}
    if ARGS.get("bad") and step == FIRST:
        feed["slot"][3, 0] = DENSE_VOCAB  # one id past the dense embedding's rows
    return feed


def probe():
    """What the servers hold now: every dense parameter and the rows of PROBE_IDS (is_test: creates nothing)."""
    from globaltensor.paddle.distributed.fleet import ps_runtime
    client = ps_runtime._ps["client"]
    return {**{f"dense/{k}": v for k, v in client.pull_dense().items()},
            "rows": client.pull_sparse("emb", PROBE_IDS, is_test=True)}


def write(name, text):
    with open(os.path.join(OUT, name + ".tmp"), "w") as f:
        f.write(text)
    os.replace(os.path.join(OUT, name + ".tmp"), os.path.join(OUT, name))


if fleet.is_server():
    write(f"server{fleet.server_index()}.pid", f"{os.environ['POD_IP']}:{os.environ['PADDLE_PORT']} {os.getpid()}")
    time.sleep(float(ARGS.get("server_delay", 0)))
    fleet.init_server(ARGS.get("load"))
    fleet.run_server()
else:
    me = fleet.worker_index()
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    try:
        fleet.init_worker()
        record = {f"first/{k}": v for k, v in probe().items()} if me == 0 else {}
        fleet.barrier_worker()  # no trainer's first pull creates rows before trainer 0 has probed
        losses = []
        for step in range(FIRST, LAST):
            losses.append(float(exe.run(feed=batch(step, me), fetch_list=[loss])[0]))
            write(f"trainer{me}.step", f"{step} {os.getpid()}")
            time.sleep(float(ARGS.get("pause", 0)))
        if me == 0:
            record.update({f"last/{k}": v for k, v in probe().items()})
            if "save" in ARGS:
                fleet.save_persistables(exe, ARGS["save"])
        fleet.stop_worker()
    except PSError as e:
        write(f"trainer{me}.error", f"{time.time()}\n{e}")
        raise
    params = paddle.static.default_main_program().all_parameters()
    record.update({f"param/{p.name}": np.asarray(p.numpy()) for p in params}, losses=np.array(losses))
    np.savez(os.path.join(OUT, f"trainer{me}.npz"), **record)
    print(f"trainer {me} done: losses {' '.join(f'{v:.6f}' for v in losses)}", flush=True)
