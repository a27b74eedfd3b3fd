"""One rank of a two-host job (tests/multinode): `python multinode_job.py KIND OUT_DIR [ARGS]`; writes OUT_DIR/rank_N.json."""
import itertools
import json
import os
import signal
import sys
import time

import numpy as np

import globaltensor as gt
from globaltensor import distributed as dist
from globaltensor import nn

S0, S1, B, P = gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast, gt.sbp.partial_sum
SBPS = [S0, S1, B, P]


def _rank_value(r, shape, dtype):
    return np.asarray(((np.arange(int(np.prod(shape))).reshape(shape) % 7) * (r + 1) - r).astype(dtype))


def collectives():
    """Each collective on groups within, across and interleaving the hosts, against numpy."""
    r, n = gt.env.get_rank(), gt.env.get_world_size()
    checked = 0
    for ranks in ([0, 1, 2, 3], [0, 2], [1, 3], [3, 0, 2, 1], [0, 1, 3]):
        if r not in ranks:
            continue
        g = dist.new_group(ranks)
        for dtype in (np.float32, np.float64, np.int64, np.float16, np.complex64):
            for shape in ((), (5,), (3, 4), (70000,)):
                x = _rank_value(r, shape, dtype)
                want = sum(_rank_value(q, shape, np.float64 if dtype == np.float16 else dtype) for q in ranks)
                got = dist.all_reduce(x.copy(), group=g)
                np.testing.assert_allclose(got, want.astype(dtype), rtol=2e-3 if dtype == np.float16 else 1e-6)
                if dtype != np.complex64:
                    got = dist.all_reduce(x.copy(), op="max", group=g)
                    np.testing.assert_array_equal(got, np.max([_rank_value(q, shape, dtype) for q in ranks], 0))
                checked += 1
        if len(ranks) == 4:  # the sliced path (>= 256 KiB) with a type MPI lacks
            x = _rank_value(r, (150001,), np.float16)
            want = sum(_rank_value(q, x.shape, np.float64) for q in ranks).astype(np.float16)
            np.testing.assert_array_equal(dist.all_reduce(x, group=g), want)
        for src in ranks:
            x = _rank_value(r, (6, 3), np.float32)
            np.testing.assert_array_equal(dist.broadcast(x, src=src, group=g), _rank_value(src, (6, 3), np.float32))
        for i in range(80):  # posted inside a host (64 slots), MPI between: roots go on and rewrite their buffers
            src = ranks[i % len(ranks)]
            y = _rank_value(src, (3,), np.float64) + i if r == src else np.zeros(3)
            dist.broadcast(y, src=src, group=g)
            if r == src:
                y[...] = -1.0
            else:
                np.testing.assert_array_equal(y, _rank_value(src, (3,), np.float64) + i)
        mine = np.full((r + 1, 2), r, np.int32)  # uneven lengths
        np.testing.assert_array_equal(dist.all_gather(mine, group=g),
                                      np.concatenate([np.full((q + 1, 2), q, np.int32) for q in ranks]))
        for rows, again in ((3, False), (3, True), (20000, False), (140000, False)):  # even shares: one Allgather;
            mine = _rank_value(r, (rows, 2), np.float32)  # from 1 MiB a share point to point
            if again:  # the layout's plan is kept: a tuple of sizes and a strided array find it
                mine = np.repeat(mine, 2, axis=1)[:, ::2]
            got = dist.all_gather(mine, group=g, sizes=(tuple if again else list)([rows] * len(ranks)))
            np.testing.assert_array_equal(got, np.concatenate([_rank_value(q, (rows, 2), np.float32) for q in ranks]))
        mine = _rank_value(r, (20000 + r, 2), np.float32)  # uneven and large: the guess fails, redone
        np.testing.assert_array_equal(dist.all_gather(mine, group=g),
                                      np.concatenate([_rank_value(q, (20000 + q, 2), np.float32) for q in ranks]))
        native = g.native("all_gather")
        if getattr(native, "spans_hosts", False):  # the group's own all_gather without counts checks the sizes
            for rows_of in (lambda q: 2, lambda q: q + 1):  # even (the guess holds) and uneven (redone)
                out = np.empty((sum(rows_of(q) for q in ranks), 2), np.int32)
                native.all_gather(np.full((rows_of(r), 2), r, np.int32), out)
                np.testing.assert_array_equal(out, np.concatenate([np.full((rows_of(q), 2), q, np.int32)
                                                                   for q in ranks]))
        big = _rank_value(r, (4 * len(ranks) + 1, 3), np.float32)
        total = sum(_rank_value(q, big.shape, np.float64) for q in ranks)
        got = dist.reduce_scatter(big, group=g)
        pieces = np.array_split(total, len(ranks))
        np.testing.assert_allclose(got, pieces[ranks.index(r)], rtol=1e-6)
        send = [ranks.index(r) + j + 1 for j in range(len(ranks))]
        x = np.concatenate([np.full(s, 100 * r + j, np.float64) for j, s in enumerate(send)])
        got = dist.all_to_all(x, send, group=g)
        i = ranks.index(r)
        want = np.concatenate([np.full(ranks.index(q) + i + 1, 100 * q + i, np.float64) for q in ranks])
        np.testing.assert_array_equal(got, want)
        started = [_rank_value(r, (n,), np.float32) for n in (5, 300, 70000)]
        works = [dist.all_reduce_async(x, group=g) for x in started]  # in flight across hosts
        mine = np.full((2, 2), r, np.int32)  # a later collective on the group waits for them first
        np.testing.assert_array_equal(dist.all_gather(mine, group=g, sizes=[2] * len(ranks)),
                                      np.concatenate([np.full((2, 2), q, np.int32) for q in ranks]))
        for work, x in zip(works, started):
            work.wait()
            np.testing.assert_allclose(x, sum(_rank_value(q, x.shape, np.float32) for q in ranks), rtol=1e-6)
        dist.barrier(group=g)
        checked += 1
    peer = (r + 2) % n  # on the other host
    x = np.full(3, r, np.float32)
    if r < peer:
        dist.send(x, peer)
        np.testing.assert_array_equal(dist.recv(np.empty(3, np.float32), peer), np.full(3, peer, np.float32))
    else:
        np.testing.assert_array_equal(dist.recv(np.empty(3, np.float32), peer), np.full(3, peer, np.float32))
        dist.send(x, peer)
    return checked


def _value(shape):
    return (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * 1.5 - 3).astype(np.float32)


def boxing():
    """Every SBP pair on the 4 ranks (1-D) and on a 2x2 mesh whose rows are the hosts, against numpy."""
    checked = 0
    pl = gt.placement("cpu", [0, 1, 2, 3])
    for shape in ((8, 6), (7, 5), (1, 1)):
        full = _value(shape)
        for src, dst in itertools.product(SBPS, SBPS):
            y = gt.tensor(full, placement=pl, sbp=src).to_global(sbp=dst)
            np.testing.assert_array_equal(y.numpy(), full, err_msg=f"{shape} {src}->{dst}")
            checked += 1
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])  # row i = host i
    full = _value((5, 7))
    for src, dst in itertools.product(itertools.product(SBPS, repeat=2), repeat=2):
        y = gt.tensor(full, placement=mesh, sbp=src).to_global(sbp=dst)
        np.testing.assert_array_equal(y.numpy(), full, err_msg=f"{src}->{dst}")
        checked += 1
    return checked


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1, self.relu, self.net2 = nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 16)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def toy(mode, steps=5):
    """ToyModel's losses: "local" (one process), "dp" over 4 ranks, "2d" (hosts x tensor parallel)."""
    gt.manual_seed(0)
    model = ToyModel()
    kwargs = {}
    if mode == "dp":
        pl = gt.placement("cpu", [0, 1, 2, 3])
        model.to_global(pl, B)
        kwargs = {"placement": pl, "sbp": S0}
    elif mode == "2d":
        mesh = gt.placement("cpu", [[0, 1], [2, 3]])
        model.to_global(mesh, (B, B))
        model.net1.weight = nn.Parameter(model.net1.weight.to_global(sbp=(B, S0)))
        model.net1.bias = nn.Parameter(model.net1.bias.to_global(sbp=(B, S0)))
        model.net2.weight = nn.Parameter(model.net2.weight.to_global(sbp=(B, S1)))
        kwargs = {"placement": mesh, "sbp": (S0, B)}
    opt = gt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(steps):
        x, y = gt.randn(40, 10, **kwargs), gt.randn(40, 16, **kwargs)
        loss = nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def checkpoint(path):
    """ToyModel, tensor parallel over the 4 ranks: saved gathered by rank 0 and sharded (each rank its pieces)."""
    gt.manual_seed(3)
    model = ToyModel()
    pl = gt.placement("cpu", [0, 1, 2, 3])
    model.to_global(pl, B)
    model.net1.weight = nn.Parameter(model.net1.weight.to_global(sbp=S0))
    model.net2.weight = nn.Parameter(model.net2.weight.to_global(sbp=S1))
    gt.save(model.state_dict(), os.path.join(path, "whole.pt"), global_dst_rank=0)
    gt.save(model.state_dict(), os.path.join(path, "sharded"), sharded=True)
    return {k: v.numpy().tolist() for k, v in model.state_dict().items()}


WIDTHS = [6, 16, 16, 3]


def _mlp_reference(params, x, y):
    """The MSE loss of the unpipelined MLP (Linear, ReLU, Linear, ReLU, Linear) in numpy."""
    h = x
    for i in range(len(WIDTHS) - 1):
        h = h @ params[f"{2 * i}.weight"].T + params[f"{2 * i}.bias"]
        h = np.maximum(h, 0) if i < len(WIDTHS) - 2 else h
    return float(np.mean((h - y) ** 2))


def pipeline(schedule):
    """Two stages, one a host (rows of a 2x2 mesh), data parallel inside each: loss vs numpy's."""
    gt.manual_seed(0)
    layers = []
    for i in range(len(WIDTHS) - 1):
        layers += [nn.Linear(WIDTHS[i], WIDTHS[i + 1])] + ([nn.ReLU()] if i < len(WIDTHS) - 2 else [])
    model = nn.Sequential(*layers)
    mesh = gt.placement("cpu", [[0, 1], [2, 3]])
    stages = [model[0:2], model[2:5]]
    for stage, row in zip(stages, (mesh[0], mesh[1])):
        stage.to_global(row, B)
    pipe = gt.pipeline.Pipeline(stages, schedule=schedule, micro_batches=3, loss_fn=nn.MSELoss())
    params = {k: v.numpy() for k, v in pipe.state_dict().items()}
    rng = np.random.default_rng(7)
    xn, yn = rng.standard_normal((11, WIDTHS[0])).astype(np.float32), rng.standard_normal((11, 3)).astype(np.float32)
    x = gt.tensor(xn).to_global(mesh, (B, B)).to_global(sbp=(B, S0))
    y = gt.tensor(yn).to_global(mesh, (B, B)).to_global(sbp=(B, S0))
    loss = pipe.step(x, target=y)
    return {"loss": float(loss.numpy()), "numpy": _mlp_reference(params, xn, yn)}


def mismatch():
    """Host A's ranks call all_reduce, host B's barrier: every rank must raise (not hang)."""
    x = np.ones(4, np.float32)
    dist.all_reduce(x)
    try:
        if gt.env.get_rank() < 2:
            dist.all_reduce(x)
        else:
            dist.barrier()
    except RuntimeError as exc:
        return str(exc)
    return "no error"


def gather_lie():
    """Rank 3's array disagrees with the sizes every rank passes: rank 3 raises before it communicates,
    the others time out (between hosts the sizes are not exchanged): every rank must raise."""
    r = gt.env.get_rank()
    dist.all_gather(np.full((2, 2), r, np.int32), sizes=[2] * 4)  # a correct one first
    try:
        dist.all_gather(np.full((3 if r == 3 else 2, 2), r, np.int32), sizes=[2] * 4)
    except (RuntimeError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def direct(expect):
    """The small all_gather / all_reduce called from C++ (mpi_direct.py; expect "on") or through mpi4py ("off"):
    values against numpy for each dtype and op, in place and not; a kept output is written again only when
    nothing holds it."""
    r, ranks = gt.env.get_rank(), [0, 1, 2, 3]
    checked = 0
    for g in (None, dist.new_group([3, 0, 2, 1])):
        members = ranks if g is None else [3, 0, 2, 1]
        for dtype in (np.float32, np.float64, np.int32, np.int64, np.float16):
            for op, fold in (("sum", np.sum), ("max", np.max), ("min", np.min)):
                values = [_rank_value(q, (3, 5), dtype) for q in members]
                want = fold(np.stack([v.astype(np.float64) for v in values]), 0).astype(dtype)
                x = _rank_value(r, (3, 5), dtype)
                np.testing.assert_array_equal(dist.all_reduce(x, op=op, group=g), want)
                out = np.empty_like(x)
                np.testing.assert_array_equal(dist.all_reduce(_rank_value(r, (3, 5), dtype), op=op, group=g, out=out), want)
                checked += 1
        native = dist.collectives._native_of(g, "all_reduce")
        pieces = [_rank_value(q, (4, 3), np.float32) for q in members]
        want = np.concatenate(pieces)
        held = dist.all_gather(pieces[members.index(r)], group=g, sizes=[4] * 4)
        second = dist.all_gather(pieces[members.index(r)] + 1, group=g, sizes=(4, 4, 4, 4))
        view = second[1:]
        address = second.ctypes.data
        del second
        third = dist.all_gather(np.repeat(pieces[members.index(r)] + 2, 2, axis=1)[:, ::2], group=g, sizes=np.array([4] * 4))
        assert third.ctypes.data != address  # a view holds second
        address = third.ctypes.data
        del third
        fourth = dist.all_gather(pieces[members.index(r)] + 3, group=g, sizes=[4] * 4)
        assert fourth.ctypes.data == address  # nothing held third: written again
        np.testing.assert_array_equal(held, want)
        np.testing.assert_array_equal(view, (want + 1)[1:])
        np.testing.assert_array_equal(fourth, want + 3)
        names = (type(native.__dict__.get("all_reduce")).__name__, type(native.__dict__.get("gather_rows")).__name__)
        assert names == (("MpiAllreduceFast", "MpiGatherRows") if expect == "on" else ("NoneType", "NoneType")), names
        checked += 1
    return checked


def die(victim):
    """Rank `victim` kills itself after a first collective; the others keep calling collectives."""
    x = np.ones(4, np.float32)
    dist.all_reduce(x)
    if gt.env.get_rank() == int(victim):
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        dist.all_reduce(x)
        time.sleep(0.01)
    return "not stopped"


def main():
    kind, out_dir, *rest = sys.argv[1:]
    result = {"collectives": collectives, "boxing": boxing, "toy": toy, "die": die, "checkpoint": checkpoint,
              "pipeline": pipeline, "mismatch": mismatch, "gather_lie": gather_lie, "direct": direct}[kind](*rest)
    with open(os.path.join(out_dir, f"rank_{gt.env.get_rank()}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
