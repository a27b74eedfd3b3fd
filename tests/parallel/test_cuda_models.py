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
