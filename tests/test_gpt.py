"""examples/gpt.py: the same losses on one process, 2 ranks DP and TP (Megatron layouts, the
vocabulary split) and a 2x2 mesh (DP x TP), and the loss falls."""
import importlib.util
import os

import numpy as np

from conftest import run_ranks

GPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "gpt.py")


def _train(layout, steps=6):
    spec = importlib.util.spec_from_file_location("gpt_example", GPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.train(layout, steps=steps, quiet=True)


def test_gpt_losses_agree_on_every_layout():
    want = run_ranks(_train, 1, "local")[0]
    assert want[-1] < want[0]
    for layout, nprocs in (("dp", 2), ("tp", 2), ("2d", 4)):
        for got in run_ranks(_train, nprocs, layout):
            np.testing.assert_allclose(got, want, rtol=2e-5, err_msg=layout)
