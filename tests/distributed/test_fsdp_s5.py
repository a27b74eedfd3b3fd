"""fully_shard (ZeRO-3) on 2 ranks: a step's peak of live array bytes under the stage-3 bound, and
torch 2.13's fully_shard surface (mp_policy, offload_policy, FSDPModule's methods) against torch FSDP2."""
import numpy as np
import pytest

import globaltensor as gt
import globaltensor.nn as nn
from conftest import run_ranks

WIDTH, UNITS, BATCH = 256, 6, 8  # per rank: a unit's weight 256 KB, its shard 128 KB, an activation 8 KB


def _peak_of_a_step():
    """(P: the model's bytes, U: a unit's, bytes at rest before step 2, peak of step 2's forward and
    backward, peak of its optimizer step), in arena bytes: every array of 4 KB or more (deterministic)."""
    gt.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU()) for _ in range(UNITS)])
    pl = gt.placement("cpu", [0, 1])
    model.to_global(pl, gt.sbp.broadcast)
    whole = sum(p._local.nbytes for p in model.parameters())
    unit = sum(p._local.nbytes for p in model[0].parameters())
    for block in model:
        gt.distributed.fully_shard(block)
    gt.distributed.fully_shard(model)
    opt = gt.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):  # the first step makes AdamW's states
        x = gt.randn(2 * BATCH, WIDTH, placement=pl, sbp=gt.sbp.split(0))
        rest = gt.memory_allocated()
        gt.reset_peak_memory_stats()
        loss = model(x).square().mean()
        loss.backward()
        backward = gt.max_memory_allocated()
        gt.reset_peak_memory_stats()
        opt.step()
        opt.zero_grad()
        step = gt.max_memory_allocated()
        del loss
    return whole, unit, rest, backward, step


def test_a_stage3_step_stays_under_the_bound():
    """N ranks, P model bytes, U a unit's bytes, A one activation's: at rest a rank holds its shards
    of the parameters and of AdamW's two states (3P/N) and the batch; forward and backward add the
    gradient shards (P/N), at most two whole units (a unit's gathered parameters with its full
    gradients, or those gradients with their packed copy for the reduce-scatter) and the
    activations (two saved a unit and two by the loss, two gradients in flight). Before: every unit's gathered
    parameters and full gradients lived until the end of backward (3P/N + 2P/N more here)."""
    for whole, unit, rest, backward, step in run_ranks(_peak_of_a_step, 2, timeout=120,
                                                       env={"GLOBALTENSOR_NUMPY_MIN_BYTES": "4096"}):
        act = BATCH * WIDTH * 4
        assert rest <= 3 * whole // 2 + 2 * act, (rest, whole)
        bound = 4 * whole // 2 + 2 * unit + (2 * UNITS + 4) * act
        assert backward <= bound, (backward, bound, whole, unit)
        assert step <= bound, (step, bound)


# torch 2.13's surface against torch FSDP2 over gloo: each option trains the same MLP on both for 2 steps.
OPTIONS = ("offload", "mp_bf16", "mp_fp32_reduce", "no_sync", "unshard_reshard")  # offload: the plain run


def _mlp(nn_):
    return nn_.Sequential(nn_.Sequential(nn_.Linear(8, 16), nn_.ReLU()), nn_.Sequential(nn_.Linear(16, 16), nn_.ReLU()),
                          nn_.Linear(16, 4))


def _train(lib, option, model, fully_shard, opt, steps):
    """Losses of 2 steps (each a list of micro-batches: in `no_sync` 2, the first without gradient sync;
    in `unshard_reshard` 2, block 0 unshard()ed before the first, every unit resharded before the step)."""
    fsdp = {"gt": gt.distributed.fsdp}.get(lib)
    if fsdp is None:
        import torch.distributed.fsdp as fsdp
    kw, root_kw = {}, {}
    if option.startswith("mp"):  # blocks hand bf16 on to the root, which returns float32
        dt = {"gt": gt}.get(lib) or __import__("torch")
        reduce = dt.float32 if option == "mp_fp32_reduce" else None
        kw["mp_policy"] = fsdp.MixedPrecisionPolicy(param_dtype=dt.bfloat16, reduce_dtype=reduce)
        root_kw["mp_policy"] = fsdp.MixedPrecisionPolicy(param_dtype=dt.bfloat16, reduce_dtype=reduce,
                                                         output_dtype=dt.float32)
    if option == "offload":
        kw["offload_policy"] = root_kw["offload_policy"] = fsdp.CPUOffloadPolicy(pin_memory=False)
    for block in (model[0], model[1]):
        fully_shard(block, **kw)
    fully_shard(model, **root_kw)
    assert isinstance(model, fsdp.FSDPModule) and isinstance(model[0], fsdp.FSDPModule)
    if option == "unshard_reshard":
        model.set_modules_to_forward_prefetch([model[1]])
        model[1].set_modules_to_backward_prefetch([model[0]])
        model.set_reshard_after_backward(False)
    optimizer = opt(model.parameters())
    losses, counts = [], []
    for micro in steps:
        for i, (xm, ym) in enumerate(micro):
            if option == "no_sync":
                model.set_requires_gradient_sync(i == len(micro) - 1)
            if option == "unshard_reshard" and i == 0:
                handle = model[0].unshard(async_op=True)
                handle.wait()
                model.set_is_last_backward(True)
            with _counted(lib) as forward:
                loss = ((model(xm) - ym) ** 2).mean() / len(micro)
            with _counted(lib) as backward:
                loss.backward()
            counts.append((dict(forward), dict(backward)))
            losses.append(float(loss.item()) if lib == "gt" else _mean_over_ranks(loss))
        if option == "unshard_reshard":  # not recursive: each unit's own (torch's use before a step)
            for m in (model, model[0], model[1]):
                m.reshard()
        optimizer.step()
        optimizer.zero_grad()
    return losses, counts, [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().float().numpy()
                    for p in model.parameters()]


def _counted(lib):
    import contextlib
    return gt.debug.count_collectives() if lib == "gt" else contextlib.nullcontext({})


def _mean_over_ranks(loss):
    """torch's loss (a rank's mean) averaged over the ranks: gt's global mean."""
    import torch.distributed as dist
    t = loss.detach().float().clone()
    dist.all_reduce(t)
    return float(t.item()) / dist.get_world_size()


def _both(port):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard as torch_fully_shard
    from globaltensor.env import get_rank
    rank = get_rank()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        init_device_mesh("cpu", (2,))
        rng = np.random.default_rng(0)
        batches = [(rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32))
                   for _ in range(2)]
        pl = gt.placement("cpu", [0, 1])
        out = {}
        for option in OPTIONS:
            gt.manual_seed(0)
            model = _mlp(nn)
            state = {k: v.numpy() for k, v in model.state_dict().items()}
            model.to_global(pl, gt.sbp.broadcast)
            micro = [np.arange(8)] if option not in ("no_sync", "unshard_reshard") else [
                np.arange(8).reshape(2, 2, 2)[:, i].reshape(-1) for i in range(2)]  # micro i: 2 of each rank's 4 rows
            steps = [[tuple(a[rows] for a in b) for rows in micro] for b in batches]
            gsteps = [[tuple(gt.tensor(a).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0)) for a in m)
                       for m in step] for step in steps]
            mine = _train("gt", option, model, gt.distributed.fully_shard,
                          lambda ps: gt.optim.AdamW(ps, lr=0.01), gsteps)
            tmodel = _mlp(torch.nn)
            tmodel.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
            tsteps = [[tuple(torch.tensor(np.array_split(a, 2)[rank]) for a in m) for m in step] for step in steps]
            theirs = _train("torch", option, tmodel, torch_fully_shard,
                            lambda ps: torch.optim.AdamW(ps, lr=0.01), tsteps)
            out[option] = (mine, theirs)
        return out
    finally:
        dist.destroy_process_group()


def test_torch_fully_shard_options_train_as_torch_fsdp2():
    """mp_policy (bf16 gathers and compute, fp32 outputs, reduce in bf16 or fp32), CPUOffloadPolicy,
    set_requires_gradient_sync (micro-batches), unshard/reshard, set_reshard_after_backward,
    prefetch lists, set_is_last_backward: losses and parameters against torch FSDP2 on 2 ranks.
    torch's local mean loss averaged over ranks is gt's global mean: the same gradients."""
    pytest.importorskip("torch")
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for got in run_ranks(_both, 2, port, timeout=240):
        counts = {option: mine[1] for option, (mine, _) in got.items()}
        # the root keeps its gathers for backward, the 2 blocks gather again; one reduce_scatter a unit
        assert counts["offload"][0] == ({"all_gather": 3}, {"all_gather": 2, "reduce_scatter": 3}), counts["offload"]
        assert counts["no_sync"][0][1] == {"all_gather": 2}  # gradient sync off: no reduce_scatter
        assert counts["no_sync"][1][1] == {"all_gather": 2, "reduce_scatter": 3}
        # block 0 unshard()ed before the first micro-batch: its forward gathers the root and block 1;
        # every unit kept gathered after backward (set_reshard_after_backward(False)): the second
        # micro-batch's forward gathers nothing (the blocks still free theirs after forward)
        assert counts["unshard_reshard"][:2] == [({"all_gather": 2}, {"all_gather": 2, "reduce_scatter": 3}),
                                                 ({}, {"all_gather": 2, "reduce_scatter": 3})], counts["unshard_reshard"]
        for option, ((losses, _, params), (t_losses, _, t_params)) in got.items():
            np.testing.assert_allclose(losses, t_losses, rtol=1e-5, err_msg=option)
            # bf16 gradients: a kernel's rounding of a gradient element (bias sums, matmul order) moves
            # AdamW's update of that element by up to ~1e-4 of lr; the losses agree to 1e-5 all the same
            tol = dict(rtol=1e-3, atol=1e-4) if option.startswith("mp") else dict(rtol=1e-5, atol=1e-6)
            for a, b in zip(params, t_params):
                np.testing.assert_allclose(a, b, err_msg=option, **tol)


def test_bad_policies_and_switches_are_refused_before_any_move():
    from globaltensor.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy
    model = _mlp(nn)
    model.to_global(gt.placement("cpu", [0]), gt.sbp.broadcast)
    sbps = [tuple(p.sbp) for p in model.parameters()]
    with pytest.raises(TypeError, match="MixedPrecisionPolicy"):
        gt.distributed.fully_shard(model, mp_policy={"param_dtype": gt.bfloat16})
    with pytest.raises(TypeError, match="param_dtype"):
        gt.distributed.fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=gt.int32))
    with pytest.raises(TypeError, match="OffloadPolicy"):
        gt.distributed.fully_shard(model, offload_policy="cpu")
    assert [tuple(p.sbp) for p in model.parameters()] == sbps and not isinstance(model, FSDPModule)
    gt.distributed.fully_shard(model[0], offload_policy=CPUOffloadPolicy())
    gt.distributed.fully_shard(model)
    assert type(model).__name__ == "FSDPSequential" and isinstance(model, nn.Sequential)
    with pytest.raises(TypeError, match="bool"):
        model.set_requires_gradient_sync("no")
    with pytest.raises(ValueError, match="FSDPModule"):
        model.set_modules_to_forward_prefetch([model[1]])  # not fully_shard-ed


def _prefetched_steps(batches):
    """3 SGD steps of 3 fully_shard blocks under a root: each step's loss and the gathers an Ahead served."""
    from globaltensor import fsdp_group
    gt.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(6, 6), nn.ReLU()) for _ in range(3)])
    start = [p.numpy().copy() for p in model.parameters()]
    pl = gt.placement("cpu", [0, 1])
    model.to_global(pl, gt.sbp.broadcast)
    for block in model:
        gt.distributed.fully_shard(block)
    gt.distributed.fully_shard(model)
    opt = gt.optim.SGD(model.parameters(), lr=0.1)
    losses, served = [], []
    for x in batches:
        before = fsdp_group.taken[0]
        loss = model(gt.tensor(x).to_global(pl, gt.sbp.broadcast).to_global(sbp=gt.sbp.split(0))).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.item()))
        served.append(fsdp_group.taken[0] - before)
    return start, losses, served


def test_the_next_units_gather_starts_while_this_one_computes():
    """Forward prefetch (torch FSDP2's implicit one): from the second step on, block i starts block
    i+1's all_gather on the group's worker thread before it computes (2 of 3 blocks' gathers served
    ahead); the losses are torch's on the joined batch, step after step (no stale gather)."""
    from lazy_torch import torch
    batches = [np.random.default_rng(s).standard_normal((4, 6)).astype(np.float32) for s in range(3)]
    for start, losses, served in run_ranks(_prefetched_steps, 2, batches, timeout=120):
        assert served == [0, 2, 2], served
        ws = [torch.tensor(a, requires_grad=True) for a in start]
        for x, got in zip(batches, losses):
            h = torch.tensor(x)
            for i in range(3):
                h = torch.relu(h @ ws[2 * i].T + ws[2 * i + 1])
            loss = h.square().mean()
            loss.backward()
            np.testing.assert_allclose(got, loss.item(), rtol=1e-5)
            with torch.no_grad():
                for w in ws:
                    w -= 0.1 * w.grad
                    w.grad = None
