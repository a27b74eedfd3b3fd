"""The watchdog of blocking MPI calls between hosts (distributed/mpi_wait.py): started on first use, never at
import; calls shorter than the timeout pass; one armed past it ends the process with exit code 124, naming
the collective, its ranks and the rank (issue 32, s6). No MPI or namespaces needed: a stand-in group."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.timeout(60)

CHILD = """
import threading, time
import globaltensor
from globaltensor.distributed import interhost, mpi_wait
assert threading.active_count() == 1, threading.enumerate()  # no thread at import

class Group:  # what mpi_wait reads of an InterHostGroup
    timeout, rank, armed = 2.0, 5, None  # far above a 0.05 s sleep, even on a loaded machine

    def ended(self, ranks):  # what the job's store knows
        return [(6, "exited with code 0")]

g = Group()
mpi_wait.watch(g)
mpi_wait.watch(Group())  # a second group: still one thread
assert threading.active_count() == 2, threading.enumerate()
for _ in range(20):  # 1 s of calls, each shorter than the timeout and armed afresh: never ended
    g.armed = ["all_reduce", (4, 5)]
    time.sleep(0.05)
    g.armed = None
print("alive", flush=True)
g.armed = ["all_gather", (4, 5, 6)]
time.sleep(20)
print("not ended", flush=True)
"""


def test_a_blocking_call_past_the_timeout_ends_the_process_naming_it():
    done = subprocess.run([sys.executable, "-c", CHILD], env={**os.environ, "PYTHONPATH": REPO},
                          capture_output=True, text=True, timeout=50)
    assert done.returncode == 124, done.stdout + done.stderr
    assert done.stdout.split() == ["alive"], done.stdout + done.stderr
    assert ("all_gather between hosts on ranks [4, 5, 6] (rank 5): not complete after 2 s (GLOBALTENSOR_TIMEOUT)"
            in done.stderr), done.stderr
    assert "rank 5 ends here (exit code 124)" in done.stderr, done.stderr
    assert "\n  rank 6 ended: exited with code 0\n" in done.stderr, done.stderr  # who is missing, from the store
