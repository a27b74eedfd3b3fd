"""Pipeline parallelism on 2 ranks (issue 15): globaltensor's schedules against the ideal and
against torch.distributed.pipelining, in one run.

    python benchmarks/bench_pipeline.py [--rounds 3] [--batch 256] [--json out.json]

The model: 4 blocks of Linear(1024, 1024) + ReLU, batch 256 (or --batch), MSE loss; 2 stages of 2 blocks
(one rank each, one thread each); "interleaved" cuts 4 stages of one block, on ranks 0, 1, 0, 1
(the bubble (p-1)/(v*m+p-1) with v = 2). For m in {2, 4, 8, 16} micro-batches: the step time (forward
and backward of every micro-batch, no optimizer), the ideal step time (one-stage time / 2
stretched by the schedule's bubble, (p-1)/(m+p-1); "ideal(m)" starts from the one-stage time of
the m micro-batches run in turn, since small micro-batches make slower matmuls), the measured
bubble (1 - half that one-stage time / the step time), and the peak RSS per rank. torch's ScheduleGPipe,
Schedule1F1B and ScheduleInterleaved1F1B (gloo, the same model and micro-batches) run beside it. Rounds alternate the
systems; each figure is the median over the rounds of each round's median.
"""
import argparse
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import print_table, run_torch_peer, write_json  # noqa: E402

WIDTH, BLOCKS = 1024, 4
BATCH = int(os.environ.get("GT_BENCH_PIPELINE_BATCH", 256))
MICRO_BATCHES = [2, 4, 8, 16]
SCHEDULES = ["gpipe", "1f1b", "interleaved"]
ITERS = 8


def _median_seconds(step, barrier, iters=ITERS):
    step()
    times = []
    for _ in range(iters):
        barrier()
        t = time.perf_counter()
        step()
        barrier()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _gt_model():
    import globaltensor.nn as nn
    layers = []
    for _ in range(BLOCKS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    return nn.Sequential(*layers)


def one_stage_worker():
    """The whole model on one rank, one thread: {m: seconds of forward and backward of the whole
    batch, cut into m micro-batches run one after the other} (m = 1: the batch at once)."""
    import globaltensor as gt
    import globaltensor.nn as nn
    gt.manual_seed(0)
    model = _gt_model()
    out = {}
    for m in [1] + MICRO_BATCHES:
        pairs = [(gt.randn(BATCH // m, WIDTH), gt.randn(BATCH // m, WIDTH)) for _ in range(m)]

        def step():
            for x, y in pairs:
                (nn.MSELoss()(model(x), y) * (1 / m)).backward()
            model.zero_grad()

        out[m] = _median_seconds(step, lambda: None)
    return out


def gt_worker(schedule):
    """{m: (step seconds, peak RSS MiB)} of gt.pipeline on 2 ranks."""
    import globaltensor as gt
    import globaltensor.nn as nn
    from globaltensor import distributed as dist
    gt.manual_seed(0)
    model = _gt_model()
    n_stages = 4 if schedule == "interleaved" else 2  # interleaved: one block a stage, on ranks 0, 1, 0, 1
    per = len(model) // n_stages
    stages = [model[s * per:(s + 1) * per] for s in range(n_stages)]
    for s, stage in enumerate(stages):
        stage.to_global(gt.placement("cpu", [s % 2]), gt.sbp.broadcast)
    both = gt.placement("cpu", [0, 1])
    x = gt.randn(BATCH, WIDTH, placement=both, sbp=gt.sbp.broadcast)
    y = gt.randn(BATCH, WIDTH, placement=both, sbp=gt.sbp.broadcast)
    out = {}
    for m in MICRO_BATCHES:
        pipe = gt.pipeline.Pipeline(stages, schedule=schedule, micro_batches=m, loss_fn=nn.MSELoss())

        def step():
            pipe.step(x, target=y)
            for stage in stages:
                stage.zero_grad()

        out[m] = (_median_seconds(step, dist.barrier), _peak_rss_mib())
    return out


def torch_worker(schedule, port):
    """{m: (step seconds, peak RSS MiB)} of torch.distributed.pipelining on 2 ranks (gloo)."""
    import torch
    import torch.distributed as tdist
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleaved1F1B)
    torch.set_num_threads(1)
    os.environ["MASTER_PORT"] = str(port)
    rank = int(os.environ["RANK"])
    tdist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    layers = []
    for _ in range(BLOCKS):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
    n_stages = 4 if schedule == "interleaved" else 2
    per = len(layers) // n_stages
    mine = [s for s in range(n_stages) if s % 2 == rank]
    modules = [torch.nn.Sequential(*layers[s * per:(s + 1) * per]) for s in mine]
    x, y = torch.randn(BATCH, WIDTH), torch.randn(BATCH, WIDTH)
    out = {}
    try:
        for m in MICRO_BATCHES:
            stages = [PipelineStage(mod, s, n_stages, torch.device("cpu")) for mod, s in zip(modules, mine)]
            if schedule == "interleaved":
                sched = ScheduleInterleaved1F1B(stages, m, loss_fn=torch.nn.MSELoss())
            else:
                sched = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule](stages[0], m, loss_fn=torch.nn.MSELoss())

            def step():
                if rank == 0:
                    sched.step(x)
                else:
                    sched.step(target=y, losses=[])
                for mod in modules:
                    mod.zero_grad()

            out[m] = (_median_seconds(step, tdist.barrier), _peak_rss_mib())
    finally:
        tdist.destroy_process_group()
    return out


def _round():
    from globaltensor.distributed import spawn
    r = {"one stage": spawn(one_stage_worker, nprocs=1, timeout=900, env={"OMP_NUM_THREADS": "1",
                                                                          "OPENBLAS_NUM_THREADS": "1"})[0]}
    for schedule in SCHEDULES:
        per_rank = spawn(gt_worker, args=(schedule,), nprocs=2, timeout=900)
        r[f"gt {schedule}"] = {m: (per_rank[0][m][0], max(p[m][1] for p in per_rank)) for m in MICRO_BATCHES}
        try:
            figures, _ = run_torch_peer(torch_worker, (schedule,))
            r[f"torch {schedule}"] = figures or "torch not importable"
        except Exception as exc:  # noqa: BLE001 - report where torch's schedule fails or hangs
            r[f"torch {schedule}"] = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
    return r


def main():
    global BATCH
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--json", default=None, help="default: benchmarks/results/pipeline_batch<BATCH>.json")
    args = ap.parse_args()
    BATCH = args.batch
    os.environ["GT_BENCH_PIPELINE_BATCH"] = str(args.batch)  # the spawned workers read it
    args.json = args.json or os.path.join(os.path.dirname(__file__), "results", f"pipeline_batch{args.batch}.json")
    rounds = [_round() for _ in range(args.rounds)]
    one = {m: statistics.median(r["one stage"][m] for r in rounds) for m in [1] + MICRO_BATCHES}
    rows, data = [], {"one stage s": one, "rounds": rounds}
    for schedule in SCHEDULES:
        for m in MICRO_BATCHES:
            step = statistics.median(r[f"gt {schedule}"][m][0] for r in rounds)
            rss = max(r[f"gt {schedule}"][m][1] for r in rounds)
            bubble = 1 / ((2 if schedule == "interleaved" else 1) * m + 1)  # (p-1)/(v*m+p-1), p = 2
            ideal = one[1] / 2 / (1 - bubble)  # the issue's: the whole batch's one-stage time, halved, plus bubble
            ideal_m = one[m] / 2 / (1 - bubble)  # the same from the time of m micro-batches run in turn
            torch_steps = [r[f"torch {schedule}"][m][0] for r in rounds if isinstance(r[f"torch {schedule}"], dict)]
            torch_text = f"{statistics.median(torch_steps) * 1e3:.1f}" if torch_steps else \
                str(rounds[-1][f"torch {schedule}"])[:40]
            ratio = f"{statistics.median(torch_steps) / step:.2f}x" if torch_steps else "-"
            rows.append([schedule, m, f"{step * 1e3:.1f}", f"{ideal * 1e3:.1f}", f"{step / ideal:.2f}",
                         f"{ideal_m * 1e3:.1f}", f"{step / ideal_m:.2f}", f"{1 - one[m] / 2 / step:.1%}",
                         f"{bubble:.1%}", f"{rss:.0f}", torch_text, ratio])
            data[f"{schedule}/{m}"] = {"step s": step, "ideal s": ideal, "ideal from m micro-batches s": ideal_m,
                                       "peak rss MiB": rss,
                                       "torch step s": statistics.median(torch_steps) if torch_steps else None}
    print(f"one stage (whole model, one rank, one thread), ms per step of batch {BATCH} cut into m micro-batches: " +
          ", ".join(f"m={m}: {t * 1e3:.1f}" for m, t in one.items()))
    print_table(f"pipeline on 2 ranks, 4 x Linear(1024) + ReLU, batch {BATCH} (ms per step; median of rounds)",
                ["schedule", "m", "gt step", "ideal", "gt/ideal", "ideal(m)", "gt/ideal(m)", "bubble",
                 "formula", "RSS MiB", "torch step", "torch/gt"], rows)
    write_json(args.json, data)


if __name__ == "__main__":
    main()
