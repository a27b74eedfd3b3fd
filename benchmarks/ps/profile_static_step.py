"""CPU time of one static step of issue 30's CTR model in one process (no PS), with its profile.

    python benchmarks/ps/profile_static_step.py --steps 20 --windows 3 [--profile] [--dense]

The model of paddle_ctr.py, its 26 slots looked up by one embedding call over a [batch, 26] id input
(the same rows and gradient as 26 calls on one shared table). Prints the CPU time (process_time) per
step, the numpy floor (the MLP's matmuls alone at the same shapes), and with --profile cProfile's top.
"""
import argparse
import cProfile
import pstats
import time

import numpy as np

SLOTS, VOCAB, DIM, DENSE, HIDDEN = 26, 10 ** 6, 16, 13, (400, 400, 400)


def build(paddle, batch, sparse):
    dense = paddle.static.data(name="dense", shape=[None, DENSE], dtype="float32")
    ids = paddle.static.data(name="ids", shape=[None, SLOTS], dtype="int64")
    label = paddle.static.data(name="label", shape=[None, 1], dtype="float32")
    attr = paddle.ParamAttr(name="SparseFeatFactors", initializer=paddle.nn.initializer.Uniform(-0.05, 0.05))
    emb = paddle.static.nn.embedding(ids, size=[VOCAB, DIM], is_sparse=sparse, param_attr=attr)
    h = paddle.concat([paddle.reshape(emb, [-1, SLOTS * DIM]), dense], axis=1)
    for width in HIDDEN:
        h = paddle.static.nn.fc(h, size=width, activation="relu")
    logit = paddle.static.nn.fc(h, size=1)
    return paddle.mean(paddle.nn.functional.binary_cross_entropy_with_logits(logit, label))


def feeds(batch, n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        dense = rng.standard_normal((batch, DENSE), dtype=np.float32)
        out.append({"dense": dense, "label": (dense[:, :1] > 0).astype("float32"),
                    "ids": rng.integers(0, VOCAB, size=(batch, SLOTS), dtype=np.int64)})
    return out


def floor(batch, steps):
    """CPU seconds per step of the MLP's matmuls alone (forward, both backward products)."""
    rng = np.random.default_rng(0)
    widths = [SLOTS * DIM + DENSE, *HIDDEN, 1]
    ws = [rng.standard_normal((a, b), dtype=np.float32) for a, b in zip(widths, widths[1:])]
    x = rng.standard_normal((batch, widths[0]), dtype=np.float32)
    t = time.process_time()
    for _ in range(steps):
        hs = [x]
        for w in ws:
            hs.append(hs[-1] @ w)
        g = np.ones_like(hs[-1])
        for h, w in zip(reversed(hs[:-1]), reversed(ws)):
            _ = h.T @ g
            g = g @ w.T
    return (time.process_time() - t) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--dense", action="store_true", help="is_sparse=False (the dense table gradient)")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    import globaltensor.paddle as paddle
    paddle.enable_static()
    paddle.seed(0)
    loss = build(paddle, args.batch, not args.dense)
    paddle.optimizer.SGD(learning_rate=0.01).minimize(loss)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    main_program = paddle.static.default_main_program()
    data = feeds(args.batch, args.steps + 3)
    for f in data[:3]:
        exe.run(main_program, feed=f, fetch_list=[loss])
    steps, floors = [], []
    for _ in range(args.windows):  # interleaved, the least of each: other processes share the cores
        t = time.process_time()
        for f in data[3:]:
            last = exe.run(main_program, feed=f, fetch_list=[loss])[0]
        steps.append((time.process_time() - t) / args.steps)
        floors.append(floor(args.batch, args.steps))
    step, least = min(steps), min(floors)
    print(f"step {step * 1e3:.1f} ms CPU ({args.batch / step:.0f} samples per CPU second), loss {float(last):.4f}; "
          f"numpy matmul floor {least * 1e3:.1f} ms (CPU time: process_time, least of {args.windows} windows)")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for f in data[3:]:
            exe.run(main_program, feed=f, fetch_list=[loss])
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)

if __name__ == "__main__":
    main()
