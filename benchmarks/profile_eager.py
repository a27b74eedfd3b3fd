"""Where one eager training step's CPU time goes, against the replayed graph of the same step
(issue 35): cProfile of one step on rank 0 of 2, split into kernel / dispatch / autograd /
buckets / optimizer by module, plus CPU time, page faults and arena allocations per step.

    python benchmarks/profile_eager.py [--case gpt_dp|gpt_tp|cnn_dp] [--steps 3] [--tiny]

Counts (calls, frames, faults, allocations) are robust on a loaded machine; CPU times
(time.process_time) are medians of --steps steps, eager and graph alternated.
"""
import argparse
import cProfile
import os
import pstats
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), "tests", "core")]

# where a function's own time is charged, by the file it is defined in (first match wins)
BINS = [("kernel", ("/backends/", "/ops/", "numpy/", "_native", "/kernels", "{method", "{built-in method numpy")),
        ("dispatch", ("/dispatch.py", "/boxing/", "/tensor.py", "/layout.py", "/scope.py", "/registry/")),
        ("autograd", ("/autograd/",)),
        ("buckets", ("/grad_buckets.py", "/data_parallel.py", "/distributed/")),
        ("optimizer", ("/optim/",)),
        ("nn", ("/nn/",))]


def _bin(filename):
    for name, marks in BINS:
        if any(m in filename for m in marks):
            return name
    return "other"


def _setup(case, tiny):
    import globaltensor as gt
    import eager_models as em
    import numpy as np
    mesh = gt.placement("cpu", [0, 1])
    rng = np.random.default_rng(0)
    if case.startswith("gpt"):
        c = em.GPT_TINY if tiny else em.GPT_BENCH
        gpt = em._example("gpt")
        gt.manual_seed(0)
        model = gpt.GPT(c["vocab"], c["d_model"], c["heads"], c["layers"], c["seq"])
        sbp = gpt.lay_out(model, mesh, case[4:])
        n = c["batch"] * c["seq"]
        x, y = (gt.tensor(rng.integers(0, c["vocab"], (c["batch"], c["seq"]))).to_global(mesh, gt.sbp.broadcast)
                .to_global(sbp=sbp) for _ in range(2))

        def loss_of(x, y):
            return gt.nn.functional.cross_entropy(model(x).reshape(n, c["vocab"]), y.reshape(n))
    else:
        c = em.CNN_TINY if tiny else em.CNN_BENCH
        nn = gt.nn
        gt.manual_seed(0)
        w1, w2 = c["widths"]
        layers = []
        for cin, cout in ((3, w1), (w1, w2)):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
        model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(w2, 10))
        model.to_global(mesh, gt.sbp.broadcast)
        x = gt.randn(c["batch"], 3, c["side"], c["side"], placement=mesh, sbp=gt.sbp.split(0))
        y = gt.randint(0, 10, (c["batch"],), placement=mesh, sbp=gt.sbp.split(0))

        def loss_of(x, y):
            return gt.nn.functional.cross_entropy(model(x), y)
    opt = gt.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        loss = loss_of(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    return step, x, y


def worker(case, steps, tiny):
    import globaltensor as gt
    from globaltensor import distributed as dist
    from globaltensor import _native
    eager, x, y = _setup(case, tiny)
    graph = gt.jit.trace(eager)
    for _ in range(2):
        eager(x, y)
        graph(x, y)
    out = {}
    times = {"eager": [], "graph": []}
    threads = {"eager": [], "graph": []}
    faults = {"eager": [], "graph": []}
    for _ in range(steps):  # A/B alternated
        for mode, fn in (("eager", eager), ("graph", graph)):
            dist.barrier()
            flt, allocs = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, _native.numpy_alloc_stats()["arena_allocs"]
            t, tt = time.process_time(), time.thread_time()
            fn(x, y)
            times[mode].append(time.process_time() - t)
            threads[mode].append(time.thread_time() - tt)
            faults[mode].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt)  # bursty: mean below
            out[f"{mode} arena allocs"] = _native.numpy_alloc_stats()["arena_allocs"] - allocs
    for mode in times:
        out[f"{mode} cpu ms"] = 1e3 * statistics.median(times[mode])
        out[f"{mode} main thread cpu ms"] = 1e3 * statistics.median(threads[mode])
        out[f"{mode} faults (mean)"] = statistics.mean(faults[mode])
    for mode, fn in (("eager", eager), ("graph", graph)):
        dist.barrier()
        prof = cProfile.Profile()
        prof.enable()
        fn(x, y)
        prof.disable()
        stats = pstats.Stats(prof)
        bins, calls = {}, 0
        for (filename, _, name), (cc, nc, tt, ct, _) in stats.stats.items():
            b = _bin(filename if filename != "~" else name)
            bins[b] = bins.get(b, 0.0) + tt
            calls += nc
        out[f"{mode} python calls"] = calls
        for b, tt in bins.items():
            out[f"{mode} {b} ms (profiled)"] = 1e3 * tt
        if mode == "eager" and gt.env.get_rank() == 0:
            stats.dump_stats(f"/tmp/prof35_{case}{'_tiny' if tiny else ''}.pstats")
            stats.sort_stats("tottime").print_stats(25)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", default="gpt_dp", choices=["gpt_dp", "gpt_tp", "cnn_dp"])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--tiny", action="store_true")
    args = p.parse_args()
    from globaltensor.distributed import spawn
    res = spawn(worker, args=(args.case, args.steps, args.tiny), nprocs=2, timeout=1800)[0]
    for k in sorted(res):
        print(f"{k:40s} {res[k]:12.1f}")


if __name__ == "__main__":
    main()
