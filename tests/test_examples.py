"""The OneFlow-tutorial-style scripts and the demo run under the launcher."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = [sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", "2"]


def _run(script, cwd):
    res = subprocess.run(LAUNCH + [os.path.join(ROOT, "examples", script)], cwd=cwd, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_tutorial_scripts_train_save_and_reload(tmp_path):
    dp = _run("oneflow_tutorial_dp.py", tmp_path)
    mp = _run("oneflow_tutorial_mp.py", tmp_path)
    dp_losses = re.findall(r"step \d+ loss ([0-9.]+)", dp)
    mp_losses = re.findall(r"step \d+ loss ([0-9.]+)", mp)
    assert len(dp_losses) == 10 and dp_losses == mp_losses  # the same model, data and seed
    assert "rank 1: reloaded 4 tensors" in dp and "split(dim=0)" in mp
    assert (tmp_path / "toy_model_dp" / "tree.json").exists()


@pytest.mark.parametrize("script", ["demo.py", "train.py"])
def test_demo_loss_falls(tmp_path, script):
    out = _run(script, tmp_path)
    losses = [float(v) for v in re.findall(r"loss ([0-9.e+-]+)", out)]
    assert len(losses) >= 5 and losses[-1] < losses[0] / 3
    alone = subprocess.run([sys.executable, os.path.join(ROOT, "examples", script)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert [float(v) for v in re.findall(r"loss ([0-9.e+-]+)", alone.stdout)] == losses  # as one process
