"""The CTR model of issue 30's figures, trained by Paddle's Fleet parameter server (static mode).

Run it under Paddle's own launcher (the 3.0.0 wheel: the newest whose PS runs on CPU):

    FLAGS_enable_pir_api=0 python -m paddle.distributed.launch --server_num=1 --worker_num=2 \\
        benchmarks/ps/paddle_ctr.py --mode async --out-dir /tmp/ctr

or in one process without PS: `python benchmarks/ps/paddle_ctr.py --mode local --out-dir /tmp/ctr`.
`ours_ctr.py` runs this very code with globaltensor's Paddle face (the imports changed only).

Model: 26 sparse slots sharing one table (vocabulary 10^6, dimension 16; PaddleRec's
"SparseFeatFactors"), 13 dense features, MLP 400-400-400, one logit, binary cross-entropy with
logits; batch 512; generated data (ids uniform over the vocabulary, labels from a hidden linear rule
of the dense features, so the loss falls). Modes: sync (a_sync=False), async (a_sync=True), geo
(a_sync=True, a_sync_configs={"k_steps": K}), local (one process, no PS: a dense table with
`embedding(is_sparse=True)`).

Every trainer prints and appends to `<out-dir>/trainer_<id>.jsonl` machine-readable lines
`PSBENCH {...}`: {"event": "first_step", "t": wall time after its first step}, then
{"event": "result", "samples_s": median over --windows timed windows of --steps steps,
"rates": [...], "loss_first", "loss_last", "vmhwm_kb"}.
"""
import argparse
import json
import os
import statistics
import sys
import time

SLOTS, VOCAB, DIM, DENSE, HIDDEN = 26, 10 ** 6, 16, 13, (400, 400, 400)


def parse_args(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["sync", "async", "geo", "local"], default="async")
    ap.add_argument("--k-steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=100, help="steps per timed window")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--table", choices=["auto", "sparse_embedding", "embedding"], default="auto",
                    help="auto: sparse_embedding on the servers for sync/async, embedding(is_sparse=True) for geo "
                         "(Paddle's GEO keeps a trainer-side table) and local")
    ap.add_argument("--progress-every", type=int, default=0, help="report a 'step' line every N steps (0: none)")
    ap.add_argument("--out-dir", default=".")
    return ap.parse_args(argv)


def table_kind(args):
    if args.table != "auto":
        return args.table
    return "embedding" if args.mode in ("geo", "local") else "sparse_embedding"


def build(paddle, kind):
    """The static program: (loss, feed names). Optimizer minimized by fleet (PS) or plainly (local)."""
    dense = paddle.static.data(name="dense", shape=[None, DENSE], dtype="float32")
    slots = [paddle.static.data(name=f"C{i}", shape=[None, 1], dtype="int64") for i in range(SLOTS)]
    label = paddle.static.data(name="label", shape=[None, 1], dtype="float32")
    attr = paddle.ParamAttr(name="SparseFeatFactors",
                            initializer=paddle.nn.initializer.Uniform(-0.05, 0.05))
    if kind == "embedding":
        embs = [paddle.static.nn.embedding(s, size=[VOCAB, DIM], is_sparse=True, param_attr=attr) for s in slots]
    else:
        embs = [paddle.static.nn.sparse_embedding(s, size=[VOCAB, DIM], param_attr=attr) for s in slots]
    embs = [paddle.reshape(e, [-1, DIM]) for e in embs]
    h = paddle.concat(embs + [dense], axis=1)
    for width in HIDDEN:
        h = paddle.static.nn.fc(h, size=width, activation="relu")
    logit = paddle.static.nn.fc(h, size=1)
    loss = paddle.mean(paddle.nn.functional.binary_cross_entropy_with_logits(logit, label))
    return loss


def batches(batch, seed):
    """An endless stream of generated feeds (numpy only; the same for both packages)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    w_hidden = np.random.default_rng(12345).standard_normal(DENSE).astype("float32")
    while True:
        dense = rng.standard_normal((batch, DENSE), dtype=np.float32)
        feed = {"dense": dense, "label": (dense @ w_hidden > 0).astype("float32").reshape(batch, 1)}
        ids = rng.integers(0, VOCAB, size=(SLOTS, batch, 1), dtype=np.int64)
        for i in range(SLOTS):
            feed[f"C{i}"] = ids[i]
        yield feed


def vmhwm_kb():
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return None


def report(out_dir, name, record):
    line = "PSBENCH " + json.dumps(record)
    print(line, flush=True)
    with open(os.path.join(out_dir, f"{name}.jsonl"), "a") as f:
        f.write(line + "\n")


def train_loop(paddle, exe, program, loss, args, trainer_id, name):
    stream = batches(args.batch, args.seed * 1000 + trainer_id)
    first = exe.run(program, feed=next(stream), fetch_list=[loss])[0]
    report(args.out_dir, name, {"event": "first_step", "t": time.time(), "trainer": trainer_id})
    for _ in range(args.warmup):
        exe.run(program, feed=next(stream), fetch_list=[loss])
    rates, last, step = [], None, 0
    for _ in range(args.windows):
        t = time.perf_counter()
        for _ in range(args.steps):
            last = exe.run(program, feed=next(stream), fetch_list=[loss])[0]
            step += 1
            if args.progress_every and step % args.progress_every == 0:
                report(args.out_dir, name, {"event": "step", "trainer": trainer_id, "step": step, "t": time.time(),
                                            "loss": float(last)})
        rates.append(args.steps * args.batch / (time.perf_counter() - t))
    report(args.out_dir, name, {"event": "result", "trainer": trainer_id, "mode": args.mode,
                                "samples_s": statistics.median(rates), "rates": rates,
                                "loss_first": float(first), "loss_last": float(last), "vmhwm_kb": vmhwm_kb()})


def main(paddle, fleet, argv=None):
    """The whole job for this process's role (server, trainer, or one local process)."""
    args = parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    paddle.enable_static()
    paddle.seed(args.seed)
    loss = build(paddle, table_kind(args))
    optimizer = paddle.optimizer.SGD(learning_rate=args.lr)
    if args.mode == "local":
        optimizer.minimize(loss)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(paddle.static.default_startup_program())
        train_loop(paddle, exe, paddle.static.default_main_program(), loss, args, 0, "local")
        return
    fleet.init()
    strategy = fleet.DistributedStrategy()
    strategy.a_sync = args.mode != "sync"
    if args.mode == "geo":
        strategy.a_sync_configs = {"k_steps": args.k_steps}
    fleet.distributed_optimizer(optimizer, strategy).minimize(loss)
    # Paddle's PS passes rewrite a clone of the program: the trainer runs loss.block.program (pull and
    # push ops in, optimizer ops out) and the startup program minimize switched to.
    if fleet.is_server():
        report(args.out_dir, f"server_{fleet.server_index()}", {"event": "server_start", "t": time.time()})
        fleet.init_server()
        fleet.run_server()
    elif fleet.is_worker():
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(paddle.static.default_startup_program())
        fleet.init_worker()
        train_loop(paddle, exe, loss.block.program, loss, args, fleet.worker_index(), f"trainer_{fleet.worker_index()}")
        fleet.stop_worker()


if __name__ == "__main__":
    import paddle
    from paddle.distributed import fleet
    main(paddle, fleet, sys.argv[1:])
