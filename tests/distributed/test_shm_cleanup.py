"""No /dev/shm segment outlives a job, also when a process is killed with SIGKILL: a
rank's arena has no name once created (peers open /proc/<pid>/fd/<fd>), a group's segment loses
its name when its last member maps it, and the launcher removes what a crash left."""
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

RANK_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import globaltensor as gt
    import globaltensor.distributed as dist
    stage = sys.argv[1]
    a = np.ones(1 << 20)  # in the arena when WORLD_SIZE > 1
    if stage == "joined":
        dist.all_reduce(a)
    print("ready", flush=True)
    time.sleep(60)
""")


def _lines(proc):
    """proc's stdout lines through a queue: `.get(timeout=...)` fails a test instead of hanging it."""
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    return lines


def _kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _segments(job):
    return sorted(p for p in os.listdir("/dev/shm") if p.startswith(f"gt_{job}_"))


def _wait_gone(pids, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes {alive} still running")


def test_a_solo_process_killed_leaves_nothing(tmp_path):
    script = tmp_path / "solo.py"
    script.write_text("import time, globaltensor as gt\n"
                      "gt.distributed.world.world()\nprint('ready', flush=True)\ntime.sleep(60)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "GLOBALTENSOR_JOB_ID")}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert _lines(proc).get(timeout=60).strip() == "ready"
        assert _segments(f"solo{proc.pid}") == []  # nameless from the start
    finally:
        proc.kill()
        proc.wait()
    assert _segments(f"solo{proc.pid}") == []


@pytest.mark.parametrize("stage", ["before_joining", "joined"])
def test_the_launcher_killed_leaves_nothing(tmp_path, stage):
    """SIGKILL the launcher itself (nobody left to clean up): its ranks die with it, and no
    segment of the job is left, whether the ranks had joined (groups made) or not."""
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    job = f"cleanup{os.getpid()}{stage[:3]}"
    env = {**os.environ, "GLOBALTENSOR_JOB_ID": job}
    proc = subprocess.Popen([sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", "2",
                             str(script), stage], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env, start_new_session=True)
    ranks = []
    try:
        lines = _lines(proc)
        for _ in range(2):
            assert "ready" in lines.get(timeout=60)
        ranks = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                                text=True).stdout.split()]
        assert len(ranks) == 2
        if stage == "joined":  # the group's segment has lost its name once both ranks mapped it
            assert _segments(job) == []
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        _wait_gone(ranks)
    finally:  # whatever failed: neither the launcher nor its ranks (its process group) outlive the test
        _kill([proc.pid] + ranks)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert _segments(job) == []


def test_a_rank_killed_leaves_nothing(tmp_path):
    script = tmp_path / "rank.py"
    killed = RANK_SCRIPT.replace('print("ready", flush=True)\n',
                                 'if int(os.environ["RANK"]) == 1:\n    os.kill(os.getpid(), 9)\nprint("ready", flush=True)\n')
    assert killed != RANK_SCRIPT
    script.write_text(killed)
    job = f"cleanup{os.getpid()}rank"
    res = subprocess.run([sys.executable, "-m", "globaltensor.distributed.launch", "--nproc_per_node", "2",
                          str(script), "joined"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "GLOBALTENSOR_JOB_ID": job})
    assert res.returncode == 137 and "SIGKILL" in res.stderr
    assert _segments(job) == []
