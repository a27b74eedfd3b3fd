"""No hangs: a rank waiting in a collective that its peers never call (they finished the script,
or wait in another collective) raises within seconds on every rank, with the default timeout,
saying what each rank was doing."""
import os
import subprocess
import sys
import time

import pytest
from conftest import TESTS

SCRIPT = os.path.join(TESTS, "scripts", "mismatched_calls.py")
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


def _two_program_threads():
    """A correct program whose rank 0 makes collectives from two threads: rank 1's wait on rank 0
    in [0, 1, 2] is answered by rank 0's second thread 3 s later. That thread met the others in a
    collective before, so rank 0's waits are not followed and no deadlock is reported."""
    import threading
    import numpy as np
    import globaltensor as gt
    from globaltensor import distributed as dist
    rank = gt.env.get_rank()
    pair, trio = dist.new_group([0, 1]), dist.new_group([0, 1, 2])
    dist.barrier()
    if rank == 0:
        def later():
            dist.all_reduce(np.ones(2), group=trio)  # one more thread that waits in collectives
            time.sleep(3.0)
            dist.all_reduce(np.ones(2), group=trio)
        helper = threading.Thread(target=later)
        helper.start()
        dist.all_reduce(np.ones(2), group=pair)
        helper.join()
    elif rank == 1:
        dist.all_reduce(np.ones(2), group=trio)
        dist.all_reduce(np.ones(2), group=trio)
        dist.all_reduce(np.ones(2), group=pair)
    else:
        dist.all_reduce(np.ones(2), group=trio)
        dist.all_reduce(np.ones(2), group=trio)
    return "ok"


def test_collectives_from_two_threads_of_a_rank_are_not_a_deadlock():
    from conftest import run_ranks
    assert run_ranks(_two_program_threads, 3, timeout=60) == ["ok"] * 3


def _crossed_and_caught():
    """Every rank catches its error and reports how long it took: the ranks on the cycle and the
    ones waiting for them all raise within seconds, though none of the processes exits."""
    import numpy as np
    import globaltensor as gt
    from globaltensor import distributed as dist
    rank = gt.env.get_rank()
    pair, everyone = dist.new_group([0, 1]), dist.new_group([0, 1, 2, 3])
    dist.all_reduce(np.ones(2), group=everyone)
    if rank < 2:
        dist.all_reduce(np.ones(2), group=pair)
    start = time.monotonic()
    try:
        if rank != 1:
            dist.all_reduce(np.ones(2), group=pair) if rank == 0 else None
        dist.all_reduce(np.ones(2), group=everyone)
    except dist.CollectiveError as exc:
        return time.monotonic() - start, str(exc).splitlines()[0]
    return None


def test_every_rank_raises_when_the_others_catch_the_error():
    from conftest import run_ranks
    env = {k: v for k, v in os.environ.items() if k == "GLOBALTENSOR_TIMEOUT"}
    results = run_ranks(_crossed_and_caught, 4, timeout=90, env={"GLOBALTENSOR_TIMEOUT": "300", **env})
    assert all(r is not None and r[0] < 15 for r in results), results
    assert any("deadlock" in r[1] for r in results[:2]), results
