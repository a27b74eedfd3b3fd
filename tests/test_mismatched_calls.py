"""No hangs: a rank waiting in a collective that its peers never call (they finished the script,
or wait in another collective) raises within seconds on every rank, with the default timeout,
saying what each rank was doing (issue 12, point 5)."""
import os
import subprocess
import sys
import time

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "mismatched_calls.py")
HINT = "print(x), x.numpy(), x.item() and x.tolist() of a global tensor are collectives too"


def _launch(case, nprocs):
    env = {k: v for k, v in os.environ.items() if k != "GLOBALTENSOR_TIMEOUT"}  # the default: 300 s
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", str(nprocs),
                          SCRIPT, case], capture_output=True, text=True, timeout=120, env=env)
    return res, time.monotonic() - start


@pytest.mark.parametrize("nprocs", [2, 4])
@pytest.mark.parametrize("case", ["print_at_end", "print_after_work"])
def test_printing_on_one_rank_fails_fast_and_says_why(case, nprocs):
    res, seconds = _launch(case, nprocs)
    assert res.returncode != 0 and seconds < 30, (seconds, res.stderr[-2000:])
    assert HINT in res.stderr
    assert f"rank 0: in all_gather on ranks {list(range(nprocs))}" in res.stderr
    ended = "exited with code 0" if case == "print_at_end" else "finished the script"
    # every other rank is accounted for; one that has not ended yet is still on its way out
    states = {r: next((line for line in res.stderr.splitlines() if line.strip().startswith(f"rank {r}: ")), "")
              for r in range(1, nprocs)}
    assert all(ended in line or "running" in line for line in states.values()), res.stderr[-2000:]
    assert any(ended in line for line in states.values()), res.stderr[-2000:]


def test_ranks_waiting_in_crossed_collectives_fail_fast_on_every_rank():
    res, seconds = _launch("crossed", 4)
    assert res.returncode != 0 and seconds < 30, (seconds, res.stderr[-2000:])
    assert "deadlock: these ranks wait for each other" in res.stderr and HINT in res.stderr
    assert "rank 0: in all_gather on ranks [0, 1], waiting for rank 1" in res.stderr
    assert "rank 1: in all_gather on ranks [0, 1, 2, 3], waiting for rank 0" in res.stderr
    assert "rank 2: in all_gather on ranks [0, 1, 2, 3], waiting for rank 0" in res.stderr
