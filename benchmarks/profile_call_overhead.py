"""What the public small collectives add to the native group's own call: gt.distributed vs _native.Group, 2 ranks, per call.

    python benchmarks/profile_call_overhead.py [--nprocs 2] [--calls 3000] [--rounds 5]

Each rank calls every pair (the public call, then the same bytes through the world's native group with a
preallocated output) `--calls` times after a barrier, `--rounds` times in turn; printed are rank 0's best
rounds per call and the difference (the Python and C++ in front of the collective, plus the output it
allocates or reuses). 4-8 byte messages: the collective itself is as small as it gets.
"""
import argparse
import time

import numpy as np


def work(calls, rounds):
    import globaltensor as gt
    from globaltensor import distributed as dist
    from globaltensor.distributed import collectives
    k = gt.env.get_world_size()
    x, pair, out, one = (np.ones(1, np.float32), np.ones(k, np.float32), np.empty(k, np.float32),
                         np.empty(1, np.float32))
    dist.all_gather(x, sizes=[1] * k)  # the world's native group and its C++ calls exist from here
    native, redop = collectives._world_native, collectives._REDOPS["sum"]
    pairs = {"all_gather": (lambda: dist.all_gather(x, sizes=[1] * k), lambda: native.all_gather(x, out)),
             "reduce_scatter": (lambda: dist.reduce_scatter(pair), lambda: native.reduce_scatter(pair, one, redop)),
             "all_to_all": (lambda: dist.all_to_all(pair, [1] * k, recv_sizes=[1] * k),
                            lambda: native.all_to_all(pair, [4] * k, out, [4] * k)),
             "broadcast": (lambda: dist.broadcast(x, 0), lambda: native.broadcast(x, 0)),
             "all_reduce": (lambda: dist.all_reduce(x), lambda: native.all_reduce(x, x, redop))}
    best = {}
    for _ in range(rounds):
        for op, fns in pairs.items():
            for side, fn in zip(("public", "native"), fns):
                dist.barrier()
                t = time.perf_counter()
                for _ in range(calls):
                    fn()
                us = (time.perf_counter() - t) / calls * 1e6
                best[(op, side)] = min(best.get((op, side), us), us)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nprocs", type=int, default=2)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    from globaltensor.distributed import spawn
    best = spawn(work, args=(args.calls, args.rounds), nprocs=args.nprocs, timeout=600)[0]
    print(f"{'op':16s} {'public':>9s} {'native':>9s} {'added':>9s}  ({args.nprocs} ranks, best of {args.rounds})")
    for op in ("all_gather", "reduce_scatter", "all_to_all", "broadcast", "all_reduce"):
        pub, nat = best[(op, "public")], best[(op, "native")]
        print(f"{op:16s} {pub:8.3f}us {nat:8.3f}us {pub - nat:8.3f}us")


if __name__ == "__main__":
    main()
