"""The Paddle face's DataParallel MLP step by phase (issue 35, issue 28's MLP figure): per step
and rank, CPU time (time.process_time) and page faults of forward, backward, optimizer step and
clear_grad, on 2 ranks (spawn), medians over the steps.

    python benchmarks/profile_dp_step.py [--steps 8] [--opt sgd|adamw] [--rows 128] [--hidden 4096]
"""
import argparse
import resource
import statistics
import sys
import time

PHASES = ("forward", "backward", "step", "clear_grad")


def worker(steps, opt_name, rows, hidden, cprofile=False, sum_then_divide=False):
    if sum_then_divide:  # A/B: the buckets' mean as a sum, then a division pass (before all_reduce_mean)
        from globaltensor.distributed import collectives
        collectives.all_reduce_mean = lambda *args, **kwargs: None
    import globaltensor.paddle as paddle
    import globaltensor.paddle.distributed as dist
    import globaltensor.paddle.nn as nn
    import globaltensor.paddle.optimizer as opt
    dist.init_parallel_env()
    paddle.seed(2023)
    layer = nn.Sequential(nn.Linear(1024, hidden), nn.ReLU(), nn.Linear(hidden, 1024))
    model = paddle.DataParallel(layer)
    loss_fn = nn.MSELoss()
    optimizer = (opt.SGD(learning_rate=0.01, parameters=model.parameters()) if opt_name == "sgd"
                 else opt.AdamW(learning_rate=0.001, parameters=model.parameters()))
    x, y = paddle.randn([rows, 1024], "float32"), paddle.randn([rows, 1024], "float32")
    out = {}

    def phases():
        out["loss"] = loss_fn(model(x), y)
        yield
        out["loss"].backward()
        yield
        optimizer.step()
        yield
        optimizer.clear_grad()
        yield

    table, losses = [], []
    if cprofile:
        import cProfile
        import pstats
        for _ in range(3):
            for _ in phases():
                pass
        prof = cProfile.Profile(time.process_time)  # CPU time: the load of other processes left out
        prof.enable()
        for _ in range(steps):
            for _ in phases():
                pass
        prof.disable()
        if dist.get_rank() == 0:
            pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
        return [], []
    for i in range(steps + 2):
        it = phases()
        row = []
        while True:
            f, t = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
            try:
                next(it)
            except StopIteration:
                break
            row.append((1e3 * (time.process_time() - t), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f))
        losses.append(float(out["loss"]))
        if i >= 2:
            table.append(row)
    return table, losses


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--opt", default="sgd", choices=["sgd", "adamw"])
    p.add_argument("--rows", type=int, default=128)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--cprofile", action="store_true", help="cProfile of rank 0's steps instead (top 25 by own time)")
    p.add_argument("--sum-then-divide", action="store_true", help="A/B: reduce the buckets' sum, then divide")
    args = p.parse_args()
    from globaltensor.distributed import spawn
    results = spawn(worker, args=(args.steps, args.opt, args.rows, args.hidden, args.cprofile, args.sum_then_divide),
                    nprocs=2, timeout=1800)
    if args.cprofile:
        return
    print("rank  " + "  ".join(f"{ph:>16}" for ph in PHASES) + "      total ms")
    for rank, (table, losses) in enumerate(results):
        cells = [f"{statistics.median(r[k][0] for r in table):8.1f}ms {statistics.median(r[k][1] for r in table):5.0f}f"
                 for k in range(len(PHASES))]
        total = statistics.median(sum(c[0] for c in r) for r in table)
        print(f"{rank:4d}  " + "  ".join(cells) + f"  {total:10.1f}")
    print("losses (rank 0):", " ".join(f"{v:.9g}" for v in results[0][1]))


if __name__ == "__main__":
    main()
