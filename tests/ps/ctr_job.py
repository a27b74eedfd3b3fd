"""A process of tests/ps/test_ctr_ps.py: benchmarks/ps/paddle_ctr.py's CTR model scaled down (3 slots sharing
one table, vocabulary 50, dim 4, MLP 8) trained on Fleet's PS under the launcher, or in one process (`one`).

    python ctr_job.py MODE TABLE [one]      MODE: sync | async | geo; TABLE: sparse_embedding | embedding

Every trainer feeds its half of the joined batch of 16 (one process: all of it) for STEPS steps, then prints
one JSON line `CTRJOB {...}`: the losses, the dense parameters, the table's rows of the ids seen (sync), the
job's sparse and dense names."""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks", "ps"))
import paddle_ctr  # noqa: E402

paddle_ctr.SLOTS, paddle_ctr.VOCAB, paddle_ctr.DIM, paddle_ctr.HIDDEN = 3, 50, 4, (8,)
STEPS, BATCH, TRAINERS = 5, 16, 2
TABLE = "SparseFeatFactors"


def _feeds(steps):
    stream = paddle_ctr.batches(BATCH, 0)
    return [next(stream) for _ in range(steps)]


def _seen(feeds):
    return np.unique(np.concatenate([f[f"C{i}"].reshape(-1) for f in feeds for i in range(paddle_ctr.SLOTS)]))


def main(mode, kind, one):
    import globaltensor.paddle as paddle
    from globaltensor.paddle.distributed import fleet
    from globaltensor.paddle.distributed.fleet import ps_runtime
    paddle.enable_static()
    paddle.seed(0)
    loss = paddle_ctr.build(paddle, kind)
    program = loss.block.program
    optimizer = paddle.optimizer.SGD(learning_rate=0.1)
    steps = STEPS if mode == "sync" else 40
    feeds = _feeds(steps)
    out = {"losses": []}
    exe = paddle.static.Executor(paddle.CPUPlace())
    if one:
        optimizer.minimize(loss)
        exe.run(paddle.static.default_startup_program())
        for feed in feeds:
            out["losses"].append(float(exe.run(program, feed=feed, fetch_list=[loss])[0]))
        table = program.sparse_tables.get(TABLE)
        out["rows"] = (table.local.pull(_seen(feeds), is_test=True) if table is not None else
                       np.asarray(program.var(TABLE)._local)[_seen(feeds)]).tolist()
    else:
        fleet.init()
        strategy = fleet.DistributedStrategy()
        strategy.a_sync = mode != "sync"
        if mode == "geo":
            strategy.a_sync_configs = {"k_steps": 3}
        fleet.distributed_optimizer(optimizer, strategy).minimize(loss)
        job = ps_runtime._ps["job"]
        out["sparse"], out["dense"] = [s.name for s in job.sparse], [d.name for d in job.dense]
        if fleet.is_server():
            fleet.init_server()
            fleet.run_server()
            return
        exe.run(paddle.static.default_startup_program())
        fleet.init_worker()
        t, half = fleet.worker_index(), BATCH // TRAINERS
        for feed in feeds:
            part = {k: v[t * half:(t + 1) * half] for k, v in feed.items()}
            out["losses"].append(float(exe.run(program, feed=part, fetch_list=[loss])[0]))
        if mode == "sync":
            out["rows"] = np.asarray(ps_runtime._ps["client"].pull_sparse(TABLE, _seen(feeds), is_test=True)).tolist()
        fleet.stop_worker()
        out["trainer"] = t
    out["params"] = {p.name: np.asarray(p._local).tolist() for p in program.parameters}
    out["n_params_named"] = sum(p.name == TABLE for p in program.parameters)
    print("CTRJOB " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], len(sys.argv) > 3 and sys.argv[3] == "one")
