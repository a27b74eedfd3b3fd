"""The real models and graph mode on cuda placements: examples/gpt.py (dp, tp, pp) and
examples/cnn.py (dp) give the cpu run's losses, and a traced training step replays eager mode's
losses, with 2 ranks sharing one GPU (the IPC path) or simulated (GLOBALTENSOR_CUDA_SIMULATE=1,
within float32 rounding)."""
import importlib.util
import os

import numpy as np
import pytest

from conftest import REPO, run_ranks
from test_cuda_placement import MODES
from test_graph import _both

EXAMPLES = os.path.join(REPO, "examples")


def _train(script, layout, device, steps):
    spec = importlib.util.spec_from_file_location(script[:-3] + "_example", os.path.join(EXAMPLES, script))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.train(layout, steps=steps, quiet=True, device=device)


@pytest.mark.parametrize("env", MODES)
@pytest.mark.parametrize("script,layout", [("gpt.py", "dp"), ("gpt.py", "tp"), ("gpt.py", "pp"), ("cnn.py", "dp")])
def test_real_models_on_cuda_give_the_cpu_losses(script, layout, env):
    want = run_ranks(_train, 2, script, layout, "cpu", 4)[0]
    got = run_ranks(_train, 2, script, layout, "cuda", 4, env=env, timeout=300)
    for losses in got:
        # GPU kernels sum in another order than numpy: float32 rounding, grown over 4 steps
        np.testing.assert_allclose(losses, want, rtol=1e-6 if env else 2e-4, err_msg=f"{script} {layout}")


@pytest.mark.parametrize("env", MODES)
@pytest.mark.parametrize("mode", ["dp", "tp"])
def test_graph_replays_eager_on_cuda(mode, env):
    """The traced step's losses and parameters equal eager mode's bitwise on cuda too."""
    for rank, (eager, graph) in enumerate(run_ranks(_both, 2, mode, "sgd", 0.0, 40, "cuda", env=env, timeout=300)):
        assert eager[0] == graph[0], f"{mode} rank {rank}: losses differ: {eager[0]} vs {graph[0]}"
        for k in eager[1]:
            assert eager[1][k].tobytes() == graph[1][k].tobytes(), f"{mode} rank {rank}: parameter {k} differs"


def _transfers_per_step(traced, through_ipc):
    """Host <-> device moves of one MLP training step on simulated cuda, after two warm-up steps."""
    import globaltensor as gt
    import globaltensor.nn as nn
    from globaltensor.backends import simulated_cupy
    if through_ipc:  # the gradients' all_reduce on the IPC transport (its host twin), as on a GPU
        from globaltensor.distributed import device_collectives, ipc_allreduce
        device_collectives.transport = lambda ranks: "ipc"
        ipc_allreduce.CudaDevice = ipc_allreduce.HostDevice
    pl = gt.placement("cuda", list(range(gt.env.get_world_size())))
    gt.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)).to_global(pl, gt.sbp.broadcast)
    opt, loss_fn = gt.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss()
    x = gt.randn(16, 8, placement=pl, sbp=gt.sbp.split(0))
    y = gt.randn(16, 4, placement=pl, sbp=gt.sbp.split(0))

    def train_step(x, y):  # forward, backward and SGD: eager, or captured once and replayed (gt.jit.trace)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    run = gt.jit.trace(train_step) if traced else train_step
    step = lambda: run(x, y)  # noqa: E731
    losses = [step().numpy() for _ in range(2)]
    simulated_cupy.transfers.clear()
    loss = step()
    moved = dict(simulated_cupy.transfers)
    return moved, [float(v) for v in losses + [loss.numpy()]]


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("nprocs", [1, 2])
def test_a_training_step_on_cuda_moves_nothing_between_host_and_device(nprocs, traced):
    """On a GPU each upload or download waits for the stream, so a step with one cannot overlap
    the host's work with the GPU's (loss.backward()'s seed of ones was uploaded every step)."""
    results = run_ranks(_transfers_per_step, nprocs, traced, nprocs > 1, env={"GLOBALTENSOR_CUDA_SIMULATE": "1"})
    for moved, losses in results:
        assert moved == {}, moved
        assert losses[2] < losses[0], losses
