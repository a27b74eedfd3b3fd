"""spawn's fork server: a forked rank is set up as a fresh one would be, and dies with its caller."""
import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from globaltensor.distributed import _fork_server, spawn


def _blas_threads():
    """OpenBLAS's thread count in this process (numpy's bundled scipy-openblas), None if not found."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "openblas" in line}
    for path in paths:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads"):
            if hasattr(lib, name):
                return getattr(lib, name)()
    return None


def _probe():
    import globaltensor as gt
    job = set(_fork_server.JOB_KEYS)
    return ({k: v for k, v in os.environ.items() if k not in job}, os.getcwd(), sys.path, sys.argv[0],
            _blas_threads(), float(np.random.rand()), gt.distributed.world._world is not None, os.getpid(),
            hash("a string"))


def test_a_forked_rank_sees_what_a_fresh_one_sees(monkeypatch, tmp_path):
    """Environment (a variable set after the server started, spawn's env=, OMP_NUM_THREADS), cwd, sys.path,
    OpenBLAS's threads and the joined world match a fresh process's; numpy's global seed and the hash seed
    differ between ranks."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GT_PROBE_SET_LATE", "1")
    monkeypatch.setenv("GLOBALTENSOR_SPAWN_FORKSERVER", "1")  # a run of the suite with it off tests it too
    forked = spawn(_probe, nprocs=2, timeout=60, env={"GT_PROBE_EXTRA": "x"})
    monkeypatch.setenv("GLOBALTENSOR_SPAWN_FORKSERVER", "0")
    fresh = spawn(_probe, nprocs=2, timeout=60, env={"GT_PROBE_EXTRA": "x"})
    monkeypatch.delenv("GLOBALTENSOR_SPAWN_FORKSERVER")
    for a, b in zip(forked, fresh):
        env_a, env_b = a[0], dict(b[0])
        assert env_a.pop("GLOBALTENSOR_SPAWN_FORKSERVER") == "1" and env_b.pop("GLOBALTENSOR_SPAWN_FORKSERVER") == "0"
        assert env_a == env_b and env_a["GT_PROBE_SET_LATE"] == "1" and env_a["GT_PROBE_EXTRA"] == "x"
        assert a[1] == b[1] == str(tmp_path)
        assert a[2][0] == b[2][0] and set(a[2]) == set(b[2])
        assert a[3] == b[3] and a[3].endswith("_spawn_child.py")
        assert a[4] == b[4] == 1  # OMP_NUM_THREADS=1 in a job of 2 ranks
        assert a[6] and b[6]
    assert forked[0][5] != forked[1][5] and forked[0][7] != forked[1][7]
    if "PYTHONHASHSEED" not in os.environ:  # the ranks' str hashes differ, as fresh processes' do
        assert forked[0][8] != forked[1][8] and fresh[0][8] != fresh[1][8]


def test_the_import_reads_no_per_job_variable_but_world_size():
    """The server imports globaltensor without the JOB_KEYS; only WORLD_SIZE may be read then (the join
    that _become_child replays): another one read at import would take the server's value."""
    script = textwrap.dedent("""
        import os
        reads = set()
        class Spy(type(os.environ)):
            def __getitem__(self, k):
                reads.add(k); return super().__getitem__(k)
            def get(self, k, d=None):
                reads.add(k); return super().get(k, d)
            def __contains__(self, k):
                reads.add(k); return super().__contains__(k)
        e = os.environ
        os.environ = Spy(e._data, e.encodekey, e.decodekey, e.encodevalue, e.decodevalue)
        os.getenv = lambda k, d=None: os.environ.get(k, d)
        import globaltensor
        from globaltensor.distributed._fork_server import UNREAD
        print(sorted(reads & set(UNREAD)))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split("\n")[-2] == "['WORLD_SIZE']"


def test_a_killed_caller_leaves_no_rank_and_no_server(tmp_path):
    script = textwrap.dedent(f"""
        import os, time
        from globaltensor.distributed import spawn
        def f():
            open(os.path.join({str(tmp_path)!r}, f"pid_{{os.getpid()}}"), "w").close()
            time.sleep(60)
        spawn(f, nprocs=2, timeout=60)
    """)
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, GLOBALTENSOR_SPAWN_FORKSERVER="1"))
    deadline = time.monotonic() + 30
    while len(os.listdir(tmp_path)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    ranks = [int(name[4:]) for name in os.listdir(tmp_path)]
    assert len(ranks) == 2
    server = int(open(f"/proc/{ranks[0]}/stat").read().rsplit(")", 1)[1].split()[1])  # the ranks' parent
    assert server != caller.pid
    caller.send_signal(signal.SIGKILL)
    caller.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in ranks + [server]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in ranks + [server])


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_preload_other_than_torch_raises_before_any_rank_starts():
    with pytest.raises(ValueError, match=r"GLOBALTENSOR_SPAWN_PRELOAD names \['os'\]; it may name \['torch'\]"):
        spawn(print, nprocs=2, env={"GLOBALTENSOR_SPAWN_PRELOAD": "os"})
