"""The Paddle face's DataParallel LinearNet step by part (issue 28): CPU time per step and rank of
forward, loss, backward (all_reduce apart), optimizer step and clear_grad; Python calls per part.

    python benchmarks/profile_linearnet_step.py [--steps 2000] [--cprofile] [--calls]

LinearNet = the DataParallel seed's (Linear 10-10, Linear 10-1, 10 rows per rank, MSELoss, Adam lr
0.001), 2 ranks (spawn), 1 thread each. CPU time is time.process_time (all threads of the rank),
summed over the steps and divided: the load of other processes is left out.
"""
import argparse
import os
import sys
import time

PARTS = ("forward", "loss", "backward", "all_reduce", "step", "clear_grad")


def _model():
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    import globaltensor.paddle.nn as nn
    import globaltensor.paddle.optimizer as opt
    dist.init_parallel_env()
    paddle.seed(2023)
    model = paddle.DataParallel(nn.Sequential(nn.Linear(10, 10), nn.Linear(10, 1)))
    loss_fn = nn.MSELoss()
    optimizer = opt.Adam(learning_rate=0.001, parameters=model.parameters())
    x, y = paddle.randn([10, 10], "float32"), paddle.randn([10, 1], "float32")
    return dist, model, loss_fn, optimizer, x, y


def _timed_all_reduce(acc, clock_fn):
    """Wrap the collectives' all_reduce entry points so their CPU time lands in acc['all_reduce']."""
    from globaltensor.distributed import collectives
    for name in ("all_reduce", "all_reduce_mean"):
        fn = getattr(collectives, name, None)
        if fn is None:
            continue

        def timed(*a, _fn=fn, **k):
            t = clock_fn()
            try:
                return _fn(*a, **k)
            finally:
                acc["all_reduce"] += clock_fn() - t
        setattr(collectives, name, timed)


def worker(steps, mode, clock="process"):
    clock_fn = time.thread_time if clock == "thread" else time.process_time
    acc = dict.fromkeys(PARTS, 0.0)
    if mode == "parts":
        _timed_all_reduce(acc, clock_fn)
    dist, model, loss_fn, optimizer, x, y = _model()
    box = {}
    parts = [("forward", lambda: box.__setitem__("out", model(x))),
             ("loss", lambda: box.__setitem__("loss", loss_fn(box["out"], y))),
             ("backward", lambda: box["loss"].backward()),
             ("step", optimizer.step), ("clear_grad", optimizer.clear_grad)]
    for _ in range(20):
        for _, fn in parts:
            fn()
    dist.barrier()
    if mode == "cprofile":
        import cProfile
        import pstats
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        for _ in range(steps):
            for _, fn in parts:
                fn()
        prof.disable()
        dist.barrier()
        if dist.get_rank() == 0:
            pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(40)
            if os.environ.get("GT_PROFILE_DUMP"):  # the raw stats, for pstats' callers/callees views
                prof.dump_stats(os.environ["GT_PROFILE_DUMP"])
        return None
    if mode == "calls":
        counts = dict.fromkeys(PARTS, 0)
        for _ in range(steps):
            for name, fn in parts:
                n = [0]

                def count(frame, event, arg):
                    if event == "call":
                        n[0] += 1
                sys.setprofile(count)
                fn()
                sys.setprofile(None)
                counts[name] += n[0]
        dist.barrier()
        return {k: v / steps for k, v in counts.items()}
    t0, w0 = clock_fn(), time.perf_counter()
    for _ in range(steps):
        for name, fn in parts:
            t = clock_fn()
            fn()
            acc[name] += clock_fn() - t
    total, wall = clock_fn() - t0, time.perf_counter() - w0
    dist.barrier()
    acc["backward"] -= acc["all_reduce"]  # the gradient all_reduce runs inside backward
    out = {k: 1e6 * v / steps for k, v in acc.items()}
    out["total"], out["wall"] = 1e6 * total / steps, 1e6 * wall / steps
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--cprofile", action="store_true", help="cProfile (CPU time) of rank 0, top 40 by own time")
    p.add_argument("--calls", action="store_true", help="Python calls per part (sys.setprofile counter)")
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--clock", default="process", choices=["process", "thread"],
                   help="process: CPU time of all the rank's threads (its collectives' worker too); thread: the main one's")
    args = p.parse_args()
    from globaltensor.distributed import spawn
    mode = "cprofile" if args.cprofile else "calls" if args.calls else "parts"
    results = spawn(worker, args=(args.steps, mode, args.clock), nprocs=args.nprocs, timeout=900)
    if mode == "cprofile":
        return
    unit = "calls" if mode == "calls" else "CPU us"
    keys = [k for k in PARTS if mode == "parts" or k != "all_reduce"] + (["total", "wall"] if mode == "parts" else [])
    print(f"rank  ({unit} per step) " + " ".join(f"{k:>10}" for k in keys))
    for rank, row in enumerate(results):
        total = sum(row[k] for k in keys) if mode == "calls" else None
        print(f"{rank:4d}  {'':16}" + " ".join(f"{row[k]:10.1f}" for k in keys) + (f"  sum {total:.0f}" if total else ""))


if __name__ == "__main__":
    main()
