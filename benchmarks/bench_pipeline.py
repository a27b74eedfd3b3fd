"""Pipeline parallelism on 2 ranks (issue 15): globaltensor's schedules against the ideal and
against torch.distributed.pipelining, in one run.

    python benchmarks/bench_pipeline.py [--rounds 3] [--batch 256] [--json out.json]

The model: 4 blocks of Linear(1024, 1024) + ReLU, batch 256 (or --batch), MSE loss; 2 stages of 2 blocks
(one rank each, one thread each); "interleaved" cuts 4 stages of one block, on ranks 0, 1, 0, 1
(the bubble (p-1)/(v*m+p-1) with v = 2). For m in {2, 4, 8, 16} micro-batches: the step time (forward
and backward of every micro-batch, no optimizer), the ideal step time (one-stage time / 2
stretched by the schedule's bubble, (p-1)/(m+p-1); "ideal(m)" starts from the one-stage time of
the m micro-batches run in turn, since small micro-batches make slower matmuls), the measured
bubble (1 - half that one-stage time / the step time), and the peak RSS per rank (each (schedule, m)
in processes of its own). torch's ScheduleGPipe,
Schedule1F1B and ScheduleInterleaved1F1B (gloo, the same model and micro-batches) run beside it. Rounds alternate the
systems; each figure is the median over the rounds of each round's median.
"""
import argparse
import os
import resource
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_seconds, print_table, run_torch_peer, write_json  # noqa: E402

WIDTH, BLOCKS = 1024, 4
MICRO_BATCHES = [2, 4, 8, 16]
SCHEDULES = ["gpipe", "1f1b", "interleaved"]
ITERS = 8


def _peak_rss_mib():
    """This process's peak RSS (each (schedule, m) runs in processes of its own)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _gt_model():
    import globaltensor.nn as nn
    layers = []
    for _ in range(BLOCKS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    return nn.Sequential(*layers)


def one_stage_worker(batch):
    """The whole model on one rank, one thread: {m: seconds of forward and backward of the whole
    batch, cut into m micro-batches run one after the other} (m = 1: the batch at once)."""
    import globaltensor as gt
    import globaltensor.nn as nn
    gt.manual_seed(0)
    model = _gt_model()
    out = {}
    for m in [1] + MICRO_BATCHES:
        pairs = [(gt.randn(batch // m, WIDTH), gt.randn(batch // m, WIDTH)) for _ in range(m)]

        def step():
            for x, y in pairs:
                (nn.MSELoss()(model(x), y) * (1 / m)).backward()
            model.zero_grad()

        out[m] = median_seconds(step, ITERS, lambda: None, warmup=1)
    return out


def _stages_of(layers, schedule):
    """Stage s's layers: 2 stages of 2 blocks, or for interleaved 4 of one block (ranks 0, 1, 0, 1)."""
    n_stages = 4 if schedule == "interleaved" else 2
    per = len(layers) // n_stages
    return [layers[s * per:(s + 1) * per] for s in range(n_stages)]


def gt_worker(schedule, m, batch):
    """(step seconds, peak RSS MiB) of gt.pipeline on 2 ranks."""
    import globaltensor as gt
    import globaltensor.nn as nn
    from globaltensor import distributed as dist
    gt.manual_seed(0)
    stages = _stages_of(_gt_model(), schedule)
    for s, stage in enumerate(stages):
        stage.to_global(gt.placement("cpu", [s % 2]), gt.sbp.broadcast)
    both = gt.placement("cpu", [0, 1])
    x = gt.randn(batch, WIDTH, placement=both, sbp=gt.sbp.broadcast)
    y = gt.randn(batch, WIDTH, placement=both, sbp=gt.sbp.broadcast)
    pipe = gt.pipeline.Pipeline(stages, schedule=schedule, micro_batches=m, loss_fn=nn.MSELoss())

    def step():
        pipe.step(x, target=y)
        for stage in stages:
            stage.zero_grad()

    return median_seconds(step, ITERS, dist.barrier, warmup=1), _peak_rss_mib()


def torch_worker(schedule, m, batch, port):
    """(step seconds, peak RSS MiB) of torch.distributed.pipelining on 2 ranks (gloo)."""
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
    cut = _stages_of(layers, schedule)
    mine = [s for s in range(len(cut)) if s % 2 == rank]
    modules = [torch.nn.Sequential(*cut[s]) for s in mine]
    x, y = torch.randn(batch, WIDTH), torch.randn(batch, WIDTH)
    try:
        stages = [PipelineStage(mod, s, len(cut), torch.device("cpu")) for mod, s in zip(modules, mine)]
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

        return median_seconds(step, ITERS, tdist.barrier, warmup=1), _peak_rss_mib()
    finally:
        tdist.destroy_process_group()


def _round(batch):
    """One round: every system once per (schedule, m), each in fresh processes (so the peak RSS
    is that configuration's)."""
    from globaltensor.distributed import spawn
    r = {"one stage": spawn(one_stage_worker, args=(batch,), nprocs=1, timeout=900,
                            env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})[0]}
    for schedule in SCHEDULES:
        for m in MICRO_BATCHES:
            per_rank = spawn(gt_worker, args=(schedule, m, batch), nprocs=2, timeout=900)
            r[f"gt {schedule}/{m}"] = (per_rank[0][0], max(rss for _, rss in per_rank))
            try:
                figures, _ = run_torch_peer(torch_worker, (schedule, m, batch))
                r[f"torch {schedule}/{m}"] = figures or "torch not importable"
            except Exception as exc:  # noqa: BLE001 - report where torch's schedule fails or hangs
                r[f"torch {schedule}/{m}"] = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--json", default=None, help="default: benchmarks/results/pipeline_batch<BATCH>.json")
    args = ap.parse_args()
    if any(args.batch % m for m in MICRO_BATCHES):
        ap.error(f"--batch must be a multiple of every m in {MICRO_BATCHES} (the one-stage runs cut it evenly)")
    from globaltensor.pipeline.schedules import bubble_formula
    json_path = args.json or os.path.join(os.path.dirname(__file__), "results", f"pipeline_batch{args.batch}.json")
    rounds = [_round(args.batch) for _ in range(args.rounds)]
    one = {m: statistics.median(r["one stage"][m] for r in rounds) for m in [1] + MICRO_BATCHES}
    rows, data = [], {"one stage s": one, "rounds": rounds}
    for schedule in SCHEDULES:
        for m in MICRO_BATCHES:
            step = statistics.median(r[f"gt {schedule}/{m}"][0] for r in rounds)
            rss = max(r[f"gt {schedule}/{m}"][1] for r in rounds)
            bubble = bubble_formula(schedule, 2, m, v=2 if schedule == "interleaved" else 1)
            ideal = one[1] / 2 / (1 - bubble)  # the issue's: the whole batch's one-stage time, halved, plus bubble
            ideal_m = one[m] / 2 / (1 - bubble)  # the same from the time of m micro-batches run in turn
            torch_runs = [r[f"torch {schedule}/{m}"] for r in rounds if isinstance(r[f"torch {schedule}/{m}"], tuple)]
            torch_step = statistics.median(t for t, _ in torch_runs) if torch_runs else None
            torch_rss = max(rss for _, rss in torch_runs) if torch_runs else None
            rows.append([schedule, m, f"{step * 1e3:.1f}", f"{ideal * 1e3:.1f}", f"{step / ideal:.2f}",
                         f"{ideal_m * 1e3:.1f}", f"{step / ideal_m:.2f}", f"{1 - one[m] / 2 / step:.1%}",
                         f"{bubble:.1%}", f"{rss:.0f}",
                         f"{torch_step * 1e3:.1f}" if torch_runs else str(rounds[-1][f"torch {schedule}/{m}"])[:40],
                         f"{torch_rss:.0f}" if torch_runs else "-",
                         f"{torch_step / step:.2f}x" if torch_runs else "-"])
            data[f"{schedule}/{m}"] = {"step s": step, "ideal s": ideal, "ideal from m micro-batches s": ideal_m,
                                       "peak rss MiB": rss, "torch step s": torch_step, "torch peak rss MiB": torch_rss}
    print(f"one stage (whole model, one rank, one thread), ms per step of batch {args.batch} cut into m "
          "micro-batches: " + ", ".join(f"m={m}: {t * 1e3:.1f}" for m, t in one.items()))
    print_table(f"pipeline on 2 ranks, 4 x Linear(1024) + ReLU, batch {args.batch} (ms per step; median of rounds; "
                "peak RSS per rank, each (schedule, m) in processes of its own)",
                ["schedule", "m", "gt step", "ideal", "gt/ideal", "ideal(m)", "gt/ideal(m)", "bubble",
                 "formula", "RSS MiB", "torch step", "torch RSS", "torch/gt"], rows)
    write_json(json_path, data)


if __name__ == "__main__":
    main()
