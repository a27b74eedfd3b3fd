# %% [markdown]
# # 13 · Parameter-server training (Paddle's Fleet PS)
#
# A CTR model's embedding table is too big for one process and mostly cold: each batch touches a
# few thousand of its rows. In a parameter-server (PS) job **servers** hold the parameters (dense
# ones cut in row blocks, the sparse table hash-partitioned by id) and run the optimizer;
# **trainers** run forward and backward, push gradients and pull the rows and blocks they need.
# Paddle's Fleet PS scripts run here with their imports changed, started by the same launcher line:
#
# ```
# python -m globaltensor.paddle.distributed.launch --server_num=2 --worker_num=2 train.py
# ```
#
# This notebook writes such a script, launches real jobs (servers and trainers are separate
# processes talking over ZeroMQ), and walks through the modes, the programs Paddle's
# `DistributeTranspiler` prints, a checkpoint reloaded with another number of servers, and a
# server that dies. The reference for everything here is `docs/parameter_server.md`.

# %%
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

WORK = tempfile.mkdtemp(prefix="gt_ps_")
LAUNCH = [sys.executable, "-m", "globaltensor.paddle.distributed.launch", "--grace_period=1"]

# %% [markdown]
# ## The training script
#
# Plain Paddle static mode: `sparse_embedding` puts the id features' table on the servers (rows
# created on first sight, from a seeded initializer, so a row's first value depends only on its id),
# the `fc` layers are dense parameters. `fleet.is_server()` says which part a process plays. The
# script's arguments: the mode, and where to save / load a checkpoint.

# %%
SCRIPT = r'''
import sys, time
import numpy as np
import globaltensor.paddle as paddle                          # import paddle
import globaltensor.paddle.distributed.fleet as fleet         # from paddle.distributed import fleet

mode, first, last, save, load = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
paddle.enable_static()
fleet.init(fleet.PaddleCloudRoleMaker())                      # the launcher's environment
paddle.seed(1)
dense = paddle.static.data(name="dense", shape=[None, 13], dtype="float32")
ids = paddle.static.data(name="ids", shape=[None, 3], dtype="int64")
click = paddle.static.data(name="click", shape=[None, 1], dtype="float32")
emb = paddle.static.nn.sparse_embedding(ids, size=[10**9, 8], param_attr=paddle.ParamAttr(name="emb"))
h = paddle.static.nn.fc(paddle.concat([dense, paddle.reshape(emb, [-1, 24])], axis=1), 16, activation="relu")
loss = paddle.mean(paddle.nn.functional.square_error_cost(paddle.static.nn.fc(h, 1), click))

strategy = fleet.DistributedStrategy()
strategy.a_sync = mode != "sync"                              # sync, or async (Paddle's default)
if mode == "geo":
    strategy.a_sync_configs = {"k_steps": 4}                  # GEO: local steps, deltas every 4
fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.05), strategy).minimize(loss)

def batch(step, trainer):
    rng = np.random.default_rng([step, trainer])
    x = rng.random((32, 13), dtype=np.float32)
    return {"dense": x, "ids": rng.zipf(1.3, (32, 3)) % 10**9,
            "click": (x[:, :3].sum(1, keepdims=True) > 1.5).astype(np.float32)}

if fleet.is_server():
    if mode == "die" and fleet.server_index() == 1:           # a server whose machine vanishes after 1 s
        import os, signal, threading
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGSTOP)).start()
    fleet.init_server(load or None)                           # from a checkpoint, if given
    fleet.run_server()                                        # returns once every trainer stopped
else:
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    fleet.init_worker()
    losses = [float(exe.run(feed=batch(s, fleet.worker_index()), fetch_list=[loss])[0]) for s in range(first, last)
              if mode != "die" or not time.sleep(0.2)]
    if save:
        fleet.save_persistables(exe, save)                    # trainer 0: every server saves its part
    fleet.stop_worker()
    w = paddle.static.default_main_program().all_parameters()[0].numpy()
    print(f"trainer {fleet.worker_index()}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, fc_0.w_0[:2, 0] = {w[:2, 0]}")
'''
path = os.path.join(WORK, "ctr.py")
with open(path, "w") as f:
    f.write(SCRIPT)


def launch(servers, mode, first=0, last=12, save="", load=""):
    start = time.monotonic()
    res = subprocess.run(LAUNCH + [f"--server_num={servers}", "--worker_num=2", path, mode, str(first), str(last),
                                   save, load], capture_output=True, text=True, timeout=120, cwd=WORK)
    print(res.stdout.strip())
    print(f"({servers} server(s), 2 trainers, {mode}: exit code {res.returncode}, {time.monotonic() - start:.1f} s)")
    return res


# %% [markdown]
# ## Sync, async, GEO
#
# * **sync** (`a_sync=False`): each server sums the trainers' gradients of a step and applies their
#   mean once every trainer pushed; the trainers' next pull waits for it. The job equals one
#   process on the joined batch, and both trainers end with the same parameters.
# * **async** (`a_sync=True`): every push is applied on arrival; trainers never wait for each
#   other. `stop_worker()` waits for both and hands each the servers' final values.
# * **GEO** (`a_sync_configs={"k_steps": k}`): trainers train locally and every `k` steps send
#   `local - last pulled` (the servers add the mean delta), then pull. Fewest messages; the
#   trainers drift apart between exchanges.

# %%
for mode in ("sync", "async", "geo"):
    res = launch(2, mode, save=os.path.join(WORK, "ckpt") if mode == "sync" else "")
    assert res.returncode == 0, res.stderr

# %% [markdown]
# ## What Paddle's `DistributeTranspiler` prints
#
# fluid's older door into the same engine: `transpile()` turns a program into a trainer program
# (the update replaced by `send` of the gradients, barriers, `recv` of the parameters) and one
# program per server (`listen_and_serv` and one optimize block per parameter block it holds:
# in sync mode the trainers' gradients summed and scaled by 1/trainers, then `sgd`). Nothing is
# sent here: printing needs no server.

# %%
import globaltensor.paddle as paddle
import globaltensor.paddle.fluid as fluid

paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data(name="x", shape=[None, 13], dtype="float32")
    y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
    avg_loss = paddle.mean(paddle.nn.functional.square_error_cost(paddle.static.nn.fc(x, 1), y))
    paddle.optimizer.SGD(0.01).minimize(avg_loss)
t = fluid.DistributeTranspiler()
t.transpile(0, program=main, pservers="127.0.0.1:6170,127.0.0.1:6171", trainers=2, startup_program=startup)
trainer_text = str(t.get_trainer_program())
print("\n".join(line for line in trainer_text.splitlines() if re.search(r"= (send|recv|\w+_barrier)\(", line)))
print(t.get_pserver_program("127.0.0.1:6171"))
paddle.disable_static()

# %% [markdown]
# ## A checkpoint, reloaded with another number of servers
#
# The sync run above ended with `fleet.save_persistables(exe, dirname)`: trainer 0 asked each of the
# 2 servers to save its dense blocks and sparse rows (safetensors) and a manifest. A new job of
# **1** server loads it with `fleet.init_server(dirname)`: dense blocks are re-sliced, rows
# re-hashed to their new server, and sync training goes on exactly as if never stopped (the job
# below trains steps 12..17; `tests/ps/test_fleet_checkpoint.py` checks it equals an unbroken run
# with 1 and 3 servers). The dense part is plain arrays: `load_dense` gives a whole parameter,
# ready for a dygraph `nn.Layer`'s `set_state_dict` to serve it.

# %%
from globaltensor.ps.checkpoint import load_dense, read_manifests

ckpt = os.path.join(WORK, "ckpt")
print(sorted(os.listdir(ckpt)), [m["servers"] for m in read_manifests(ckpt)])
layer = paddle.nn.Linear(13 + 24, 16)
layer.set_state_dict({"weight": load_dense(ckpt, "fc_0.w_0"), "bias": load_dense(ckpt, "fc_0.b_0")})
print("served fc_0.w_0[:2, 0] =", layer.weight.numpy()[:2, 0])
res = launch(1, "sync", first=12, last=18, load=ckpt)
assert res.returncode == 0, res.stderr

# %% [markdown]
# ## When a server dies
#
# Here server 1 freezes 1 s into its start (`SIGSTOP`: what the trainers see when its machine
# vanishes or the network cuts it off). Each trainer pings every server each second; after
# `dead_after` seconds of silence (5 s) every call raises `PSError` naming the server's endpoint,
# a call already waiting included: no hang. The launcher shows the first failure's traceback, stops
# every other process (the frozen one too) and exits with that failure's code. A server that
# simply exits on this machine is seen by the launcher at once (exit code 137 for SIGKILL). In
# sync mode a silent trainer is named the same way, by the servers and the other trainer.

# %%
res = launch(2, "die", last=100)
print("\n".join(line for line in res.stderr.splitlines() if "PSError" in line or "job failed" in line)[:1200])
assert res.returncode == 1 and "(server 1) stopped answering" in res.stderr
