"""Paddle's Fleet parameter-server example in static mode (only the imports changed): a regression
with a sparse feature. Every process runs this script; fleet.is_server() says which part it plays.

    python -m globaltensor.paddle.distributed.launch --server_num=1 --worker_num=2 examples/paddle/fleet_ps.py sync
    python examples/paddle/fleet_ps.py sync 2      # one process on the 2 trainers' joined batches (the reference)

Arguments: the mode (sync | async | geo), and for the one-process run the trainers' count to join.
"""
import os
import sys

import numpy as np
import globaltensor.paddle as paddle
import globaltensor.paddle.distributed.fleet as fleet

paddle.enable_static()
MODE = sys.argv[1] if len(sys.argv) > 1 else "sync"
JOIN = int(sys.argv[2]) if len(sys.argv) > 2 else 1
STEPS, BATCH = 5, 8

fleet.init()  # the launcher's environment: a PS job; without it, one process
paddle.seed(1)
x = paddle.static.data(name="x", shape=[None, 13], dtype="float32")
ids = paddle.static.data(name="ids", shape=[None, 1], dtype="int64")
y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
emb = paddle.static.nn.sparse_embedding(ids, size=[1000, 4])
hidden = paddle.static.nn.fc(paddle.concat([x, paddle.reshape(emb, [-1, 4])], axis=1), 8, activation="relu")
pred = paddle.static.nn.fc(hidden, 1)
loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, y))

strategy = fleet.DistributedStrategy()
strategy.a_sync = MODE != "sync"
if MODE == "geo":
    strategy.a_sync_configs = {"k_steps": 2}
optimizer = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.05), strategy)
optimizer.minimize(loss)


def batch(step, trainer):
    rng = np.random.default_rng([step, trainer])
    xs = rng.random((BATCH, 13), np.float32)
    return {"x": xs, "ids": rng.integers(0, 1000, (BATCH, 1)), "y": xs.sum(1, keepdims=True).astype(np.float32)}


if fleet.is_server():
    fleet.init_server()
    fleet.run_server()
else:
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    trainers = range(JOIN) if fleet.server_num() == 0 else [fleet.worker_index()]
    if fleet.server_num():
        fleet.init_worker()
    for step in range(STEPS):
        feeds = [batch(step, t) for t in trainers]
        feed = {k: np.concatenate([f[k] for f in feeds]) for k in feeds[0]}
        print(f"step {step} loss = {float(exe.run(feed=feed, fetch_list=[loss])[0]):.6f}", flush=True)
    if fleet.server_num():
        fleet.stop_worker()
    params = paddle.static.default_main_program().all_parameters()
    print("params", " ".join(f"{v:.7e}" for p in params for v in np.asarray(p.numpy()).ravel()[:6]), flush=True)
