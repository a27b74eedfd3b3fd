"""The launcher: environment, output, logs, failure tear-down, signals, no orphans, two nodes."""
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import TESTS

SCRIPT = os.path.join(TESTS, "scripts", "rank_report.py")
LAUNCH = [sys.executable, "-m", "globaltensor.distributed.launch"]


def launch(args, timeout=60, env=None, **kwargs):
    return subprocess.run(LAUNCH + args, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, **kwargs)


def reports(tmp_path, n):
    out = {}
    for r in range(n):
        with open(tmp_path / f"rank{r}.json") as f:
            out[r] = json.load(f)
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_gone(pids, seconds=5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_help_documents_every_flag():
    out = launch(["--help"]).stdout
    for flag in ["--nproc_per_node", "--nnodes", "--node_rank", "--master_addr", "--master_port", "--log_dir"]:
        assert flag in out


def test_environment_output_and_logs(tmp_path):
    logs = tmp_path / "logs"
    res = launch(["--nproc-per-node", "3", "--log_dir", str(logs), SCRIPT, str(tmp_path), "allreduce"])
    assert res.returncode == 0, res.stderr
    info = reports(tmp_path, 3)
    for r in range(3):
        assert info[r]["RANK"] == info[r]["LOCAL_RANK"] == str(r)
        assert info[r]["WORLD_SIZE"] == info[r]["LOCAL_WORLD_SIZE"] == "3" and info[r]["NODE_RANK"] == "0"
        assert info[r]["MASTER_ADDR"] == "127.0.0.1" and int(info[r]["MASTER_PORT"]) > 0
    assert "hello from rank 0\n" in res.stdout  # rank 0 passes through unprefixed
    assert "[rank 1] hello from rank 1" in res.stdout and "[rank 2] sum=6" in res.stdout
    for r in range(3):
        assert "sum=6" in (logs / f"rank_{r}.log").read_text()


def test_omp_threads_default_to_one_but_are_respected(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    res = subprocess.run(LAUNCH + ["--nproc_per_node", "2", SCRIPT, str(tmp_path), "ok"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and reports(tmp_path, 2)[1]["OMP_NUM_THREADS"] == "1"
    res = launch(["--nproc_per_node", "2", SCRIPT, str(tmp_path), "ok"], env={"OMP_NUM_THREADS": "4"})
    assert reports(tmp_path, 2)[0]["OMP_NUM_THREADS"] == "4"


def test_first_failure_stops_everyone_with_its_exit_code(tmp_path):
    start = time.monotonic()
    res = launch(["--nproc_per_node", "4", "--grace_period", "2", SCRIPT, str(tmp_path), "fail"])
    elapsed = time.monotonic() - start
    assert res.returncode == 3 and elapsed < 10
    report = res.stderr[res.stderr.index("[globaltensor.launch]"):]
    assert report.startswith("[globaltensor.launch] rank 1 (pid")  # the root cause comes first
    assert "exited with code 3" in report and "about to fail" in report
    assert "job failed: rank 1 exited with code 3 (root cause)" in res.stderr
    assert not wait_gone([i["pid"] for i in reports(tmp_path, 4).values()])


def test_rank_killed_by_signal(tmp_path):
    res = launch(["--nproc_per_node", "2", SCRIPT, str(tmp_path), "kill"])
    assert res.returncode == 137 and "rank 1" in res.stderr and "was killed by SIGKILL" in res.stderr


def test_ranks_ignoring_sigterm_are_killed_after_the_grace_period(tmp_path):
    start = time.monotonic()
    res = launch(["--nproc_per_node", "2", "--grace_period", "1", SCRIPT, str(tmp_path), "ignore_term"])
    assert res.returncode == 1 and "rank 1 gives up" in res.stderr
    assert time.monotonic() - start < 8
    assert not wait_gone([reports(tmp_path, 2)[0]["pid"]])


def _start_and_wait_for_reports(tmp_path, n, mode):
    proc = subprocess.Popen(LAUNCH + ["--nproc_per_node", str(n), "--grace_period", "1", SCRIPT, str(tmp_path),
                                      mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(tmp_path.glob("rank*.json"))) < n:
        time.sleep(0.05)
    time.sleep(0.3)
    info = reports(tmp_path, n)
    return proc, [i["pid"] for i in info.values()] + [i["child"] for i in info.values() if "child" in i]


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_to_launcher_stops_all_ranks_and_their_children(tmp_path, signum, code):
    proc, pids = _start_and_wait_for_reports(tmp_path, 2, "fork")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == code and "all ranks were stopped" in err
    assert not wait_gone(pids)


def test_killed_launcher_leaves_no_orphans(tmp_path):
    proc, pids = _start_and_wait_for_reports(tmp_path, 2, "sleep")
    proc.kill()
    proc.wait(timeout=10)
    assert not wait_gone(pids)


def test_normal_exit_reaps_leftover_children(tmp_path):
    script = tmp_path / "leave_child.py"
    script.write_text("import subprocess, sys\n"
                      f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                      f"open(r'{tmp_path}/child' + __import__('os').environ['RANK'], 'w').write(str(p.pid))\n")
    res = launch(["--nproc_per_node", "2", str(script)])
    assert res.returncode == 0
    children = [int((tmp_path / f"child{r}").read_text()) for r in range(2)]
    assert not wait_gone(children)


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_two_nodes_on_one_machine_rendezvous(tmp_path):
    port, secret = _free_port(), secrets.token_hex(32)
    env = {**os.environ, "GLOBALTENSOR_SECRET": secret}
    procs = [subprocess.Popen(LAUNCH + ["--nnodes", "2", "--node_rank", str(node), "--nproc_per_node", "2",
                                        "--master_port", str(port), SCRIPT, str(tmp_path), "allreduce"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for node in (1, 0)]  # node 1 first: its ranks wait for node 0's store
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    info = reports(tmp_path, 4)
    assert [info[r]["NODE_RANK"] for r in range(4)] == ["0", "0", "1", "1"]
    assert {info[r]["WORLD_SIZE"] for r in range(4)} == {"4"}
    assert "sum=10" in outs[0][0] and "sum=10" in outs[1][0]


def test_failure_on_one_node_stops_the_other(tmp_path):
    port, secret = _free_port(), secrets.token_hex(32)
    env = {**os.environ, "GLOBALTENSOR_SECRET": secret}
    start = time.monotonic()
    procs = [subprocess.Popen(LAUNCH + ["--nnodes", "2", "--node_rank", str(node), "--nproc_per_node", "2",
                                        "--master_port", str(port), "--grace_period", "1", SCRIPT, str(tmp_path),
                                        "fail"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for node in (0, 1)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [3, 1] and time.monotonic() - start < 15
    assert "rank 1 on another node failed" in outs[1][1]
    assert not wait_gone([i["pid"] for i in reports(tmp_path, 4).values()])


def test_multi_node_needs_port_and_secret(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "GLOBALTENSOR_SECRET"}
    res = subprocess.run(LAUNCH + ["--nnodes", "2", "--master_port", "1234", SCRIPT], env=env,
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "GLOBALTENSOR_SECRET" in res.stderr
    res = launch(["--nnodes", "2", SCRIPT])
    assert res.returncode == 2 and "--master_port is required" in res.stderr


def test_plain_python_is_a_world_of_one(tmp_path):
    res = subprocess.run([sys.executable, SCRIPT, str(tmp_path), "allreduce"], capture_output=True, text=True,
                         timeout=60, env={k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")})
    assert res.returncode == 0 and "sum=1" in res.stdout


_HALF_LINE = """import os, sys, time
d = sys.argv[1]
if os.environ["RANK"] == "0":
    sys.stdout.write("partial"); sys.stdout.flush()
    open(os.path.join(d, "partial"), "w").close()
    while not os.path.exists(os.path.join(d, "printed")): time.sleep(0.001)
    time.sleep(0.05)
    sys.stdout.write(" end\\n"); sys.stdout.flush()
else:
    while not os.path.exists(os.path.join(d, "partial")): time.sleep(0.001)
    print("other", flush=True)
    open(os.path.join(d, "printed"), "w").close()
"""


def test_other_ranks_lines_do_not_cut_into_rank_0s_line(tmp_path):
    script = tmp_path / "half_line.py"
    script.write_text(_HALF_LINE)
    res = launch(["--nproc_per_node", "2", str(script), str(tmp_path)])
    assert res.returncode == 0, res.stderr
    assert "partial end\n" in res.stdout and "[rank 1] other\n" in res.stdout


def test_an_error_on_every_rank_shows_one_traceback_and_a_line_per_other_rank(tmp_path):
    """The same exception on both ranks: the root cause's traceback once (with its frames), each
    other rank's exception in one line; not three copies of the same traceback."""
    script = tmp_path / "fails.py"
    script.write_text("import signal, time\nimport globaltensor as gt\nfrom globaltensor import distributed as dist\n"
                      "if gt.env.get_rank() == 1:  # fails second, while the launcher stops the job\n"
                      "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                      "dist.barrier()\n"
                      "time.sleep(0.5 * gt.env.get_rank())\n"
                      "raise ValueError(f'bad shapes on rank {gt.env.get_rank()}')\n")
    res = launch(["--nproc_per_node", "2", "--grace_period", "10", str(script)])
    assert res.returncode == 1
    assert res.stderr.count("Traceback (most recent call last):") == 1, res.stderr
    assert "rank 0 (pid" in res.stderr and "ValueError: bad shapes on rank 0" in res.stderr
    assert "[rank 1] ValueError: bad shapes on rank 1" in res.stderr.splitlines()
    assert len(res.stderr.splitlines()) < 15, res.stderr
