"""The real-model examples: examples/gpt.py gives the same losses on one process, 2 ranks DP and
TP (Megatron layouts, the vocabulary split), a 2x2 mesh (DP x TP) and 2 pipeline stages (1F1B);
examples/cnn.py (conv blocks with BatchNorm) data-parallel gives one process's losses."""
import importlib.util
import os

import numpy as np
import pytest

from conftest import REPO, run_ranks

EXAMPLES = os.path.join(REPO, "examples")


def _train(layout, steps=6, script="gpt.py"):
    spec = importlib.util.spec_from_file_location(script[:-3] + "_example", os.path.join(EXAMPLES, script))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.train(layout, steps=steps, quiet=True)


@pytest.fixture(scope="module")
def gpt_one_process():
    """examples/gpt.py's losses on one process: the reference of the layouts (computed once)."""
    return run_ranks(_train, 1, "local")[0]


def test_gpt_losses_agree_on_every_layout(gpt_one_process):
    want = gpt_one_process
    assert want[-1] < want[0]
    for layout, nprocs in (("dp", 2), ("tp", 2), ("2d", 4)):
        for got in run_ranks(_train, nprocs, layout):
            np.testing.assert_allclose(got, want, rtol=2e-5, err_msg=layout)


def test_gpt_pipeline_losses_equal_one_process(gpt_one_process):
    """--layout pp: embeddings and the first blocks on rank 0, the rest on rank 1, 4 micro-batches."""
    want = gpt_one_process
    for got in run_ranks(_train, 2, "pp"):
        np.testing.assert_allclose(got, want, rtol=2e-5, err_msg="pp")


def test_cnn_data_parallel_equals_one_process():
    want = run_ranks(_train, 1, "local", 12, "cnn.py")[0]
    assert want[-1] < want[0]
    for got in run_ranks(_train, 2, "dp", 12, "cnn.py"):
        np.testing.assert_allclose(got, want, rtol=2e-5)


def test_gpt_on_the_2x2_mesh_runs_again_alike():
    """Every rank decides alike: three runs of the mixed layout give the same bits (the last one in fresh
    processes: hash seeds that no forked rank had, docs/testing.md)."""
    runs = [run_ranks(_train, 4, "2d", 3, env=env)[0] for env in ({}, {}, {"GLOBALTENSOR_SPAWN_FORKSERVER": "0"})]
    assert runs[0] == runs[1] == runs[2]
