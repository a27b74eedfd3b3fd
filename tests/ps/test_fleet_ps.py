"""Fleet's PS example end to end under the launcher (examples/paddle/fleet_ps.py): sync equals one process
on the joined batch; async and GEO end with every trainer holding the servers' parameters. Runs once the
engine (globaltensor.ps) and the static glue (globaltensor.paddle.static.ps) are in the tree."""
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "paddle", "fleet_ps.py")
LAUNCH = [sys.executable, "-m", "globaltensor.paddle.distributed.launch"]
pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(
    importlib.util.find_spec("globaltensor.ps") is None or importlib.util.find_spec("globaltensor.ps.client") is None
    or importlib.util.find_spec("globaltensor.paddle.static.ps") is None,
    reason="needs the PS engine (globaltensor.ps) and the static glue (paddle.static.ps)")]


def _run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=100)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def _params(out):
    """{trainer: parameters printed at the end} (trainer 0's lines are unprefixed)."""
    found = {}
    for line in out.splitlines():
        m = re.match(r"(?:\[trainer (\d+)\] )?params (.*)", line)
        if m:
            found[int(m.group(1) or 0)] = np.array(m.group(2).split(), float)
    return found


@pytest.mark.parametrize("servers", [1, 2])
def test_sync_equals_one_process_on_the_joined_batch(servers):
    got = _params(_run(LAUNCH + [f"--server_num={servers}", "--worker_num=2", EXAMPLE, "sync"]))
    want = _params(_run([sys.executable, EXAMPLE, "sync", "2"]))[0]
    assert sorted(got) == [0, 1]
    for t in got:
        np.testing.assert_allclose(got[t], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["async", "geo"])
def test_async_and_geo_end_with_the_servers_parameters(mode):
    got = _params(_run(LAUNCH + ["--server_num=2", "--worker_num=2", EXAMPLE, mode]))
    assert sorted(got) == [0, 1] and np.isfinite(got[0]).all()
    np.testing.assert_array_equal(got[0], got[1])
