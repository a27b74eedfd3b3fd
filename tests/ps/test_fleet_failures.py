"""Failures of a Fleet PS job under the launcher (tests/ps/fleet_job.py), every wait bounded:

* a process killed (SIGKILL) ends the job: the launcher returns its code (137) and no process is left;
* a silent process (SIGSTOP: what peers on other machines see when its machine dies or is cut off) makes the
  others raise within 10 s naming it: a server -> every trainer names its endpoint; a trainer in sync mode ->
  the servers and the other trainer name it; the launcher returns the first failure's code, nothing is left;
* bad input raises before any step: ids outside a dense table's rows; a trainer count the servers do not share;
* a trainer started before its server waits for it (bounded by the job's timeout) and then trains.
"""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from ps_workers import alive

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "fleet_job.py")
LAUNCH = [sys.executable, "-m", "globaltensor.paddle.distributed.launch"]
pytestmark = pytest.mark.timeout(120)


def wait_for(predicate, limit, what):
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {limit} s"
        time.sleep(0.05)


class Job:
    """The launcher over fleet_job.py in its own process group; pids of every process it started."""

    def __init__(self, out, servers, *args):
        self.out = out
        self.proc = subprocess.Popen(LAUNCH + [f"--server_num={servers}", "--worker_num=2", "--grace_period=1",
                                               "--log_dir", str(out / "logs"), JOB, str(out), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.servers = servers

    def pid(self, role, index):
        path = self.out / (f"server{index}.pid" if role == "server" else f"trainer{index}.step")
        wait_for(path.exists, 60, f"{path.name} appears")
        return int(path.read_text().split()[-1])

    def trained(self, steps=1):
        for t in range(2):
            path = self.out / f"trainer{t}.step"
            wait_for(lambda: path.exists() and int(path.read_text().split()[0]) >= steps, 60, f"trainer {t} trains")

    def pids(self):
        return [self.pid("server", i) for i in range(self.servers)] + [self.pid("trainer", t) for t in range(2)]

    def finish(self, limit=40):
        try:
            _, self.err = self.proc.communicate(timeout=limit)
        finally:
            if self.proc.poll() is None:  # the test failed: leave nothing behind
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.communicate(timeout=10)
        return self.proc.returncode

    def error(self, t):
        stamp, message = (self.out / f"trainer{t}.error").read_text().split("\n", 1)
        return float(stamp), message


@pytest.mark.parametrize("role, index", [("server", 1), ("trainer", 1)])
def test_a_killed_process_ends_the_job_with_its_code(tmp_path, role, index):
    job = Job(tmp_path, 2, "last=400", "pause=0.05")
    job.trained()
    pids = job.pids()
    os.kill(job.pid(role, index), signal.SIGKILL)
    killed = time.monotonic()
    assert job.finish() == 137 and time.monotonic() - killed < 15
    assert f"job failed: {role} {index} " in job.err and "SIGKILL" in job.err, job.err[-2000:]
    wait_for(lambda: not any(alive(p) for p in pids), 5, "every process is gone")


def test_a_silent_server_makes_every_trainer_raise_naming_it(tmp_path):
    job = Job(tmp_path, 2, "last=400", "pause=0.05")
    job.trained()
    pids = job.pids()
    endpoint = (tmp_path / "server1.pid").read_text().split()[0]
    os.kill(job.pid("server", 1), signal.SIGSTOP)
    silenced = time.time()
    code = job.finish()
    # each trainer raises naming the endpoint once it notices; the launcher stops the job at the first one, so
    # the other may be stopped before it notices (tests/ps/test_liveness.py shows every trainer raising alone)
    noticed = [t for t in range(2) if (tmp_path / f"trainer{t}.error").exists()]
    assert noticed, "no trainer raised"
    for t in noticed:
        stamp, message = job.error(t)
        assert f"parameter server {endpoint} (server 1) stopped answering" in message, message
        assert stamp - silenced < 10, stamp - silenced
    assert code == 1 and "PSError" in job.err and "(server 1) stopped answering" in job.err, job.err[-2000:]
    wait_for(lambda: not any(alive(p) for p in pids), 5, "every process is gone (the stopped server too)")


def test_a_silent_trainer_in_sync_mode_makes_the_servers_and_the_other_trainer_raise(tmp_path):
    job = Job(tmp_path, 2, "last=400", "pause=0.05")
    job.trained()
    pids = job.pids()
    os.kill(job.pid("trainer", 1), signal.SIGSTOP)
    silenced = time.time()
    code = job.finish()
    stamp, message = job.error(0)
    assert "trainer 1 stopped answering" in message and stamp - silenced < 10, (message, stamp - silenced)
    assert code == 1, job.err[-2000:]
    logs = [(tmp_path / "logs" / f"serverlog.{i}").read_text() for i in range(2)]
    assert any("PSError" in log and "trainer 1 stopped answering" in log for log in logs) or \
        "trainer 1 stopped answering" in job.err
    wait_for(lambda: not any(alive(p) for p in pids), 5, "every process is gone")


def test_ids_outside_a_dense_table_raise_before_any_step(tmp_path):
    job = Job(tmp_path, 1, "last=3", "bad=1")
    assert job.finish() == 1
    assert "IndexError" in job.err and "index out of range: values in [0, 50] for a dim of size 50" in job.err
    assert not list(tmp_path.glob("trainer*.step"))  # no step ran


def _contract(endpoint, servers, trainers, role, tid=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLE_", "TRAINING_ROLE"))}
    ip, _, port = endpoint.rpartition(":")
    env.update(TRAINING_ROLE=role, PADDLE_PSERVERS_IP_PORT_LIST=",".join(servers), POD_IP=ip, PADDLE_PORT=port,
               PADDLE_TRAINER_ENDPOINTS=",".join(trainers), PADDLE_TRAINERS_NUM=str(len(trainers)),
               GLOBALTENSOR_SECRET="ab" * 16)
    if tid is not None:
        env["PADDLE_TRAINER_ID"] = str(tid)
    return env


def test_a_trainer_count_the_servers_do_not_share_is_refused_before_any_step(tmp_path):
    """Processes started by hand (no launcher): the server's job has 2 trainers, this trainer's has 3."""
    from globaltensor.paddle.distributed.ps_launch import free_endpoints
    eps = free_endpoints("127.0.0.1", 4)
    server = subprocess.Popen([sys.executable, JOB, str(tmp_path)], env=_contract(eps[0], eps[:1], eps[1:3], "PSERVER"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        res = subprocess.run([sys.executable, JOB, str(tmp_path)], env=_contract(eps[1], eps[:1], eps[1:4], "TRAINER", 0),
                             capture_output=True, text=True, timeout=60)
    finally:
        server.kill()
        server.wait(timeout=10)
    assert res.returncode == 1 and "PSError" in res.stderr, res.stderr[-2000:]
    assert f"parameter server {eps[0]} (server 0) refused trainer 0" in res.stderr and "trainers=3 (here 2)" in res.stderr
    assert not list(tmp_path.glob("trainer*.step"))


def test_a_trainer_started_before_its_server_waits_then_trains(tmp_path):
    job = Job(tmp_path, 2, "last=2", "server_delay=3")
    assert job.finish(60) == 0, job.err[-2000:]
    for t in range(2):
        assert len(np.load(tmp_path / f"trainer{t}.npz")["losses"]) == 2


def test_the_wait_for_a_server_is_bounded_by_the_jobs_timeout():
    from globaltensor.paddle.distributed.ps_launch import free_endpoints
    from globaltensor.ps import Client, DenseSpec, JobSpec, PSError, Rule
    endpoint = free_endpoints("127.0.0.1", 1)[0]  # nothing listens there
    job = JobSpec(servers=(endpoint,), trainers=1, mode="sync", rule=Rule("sgd", 0.1), dense=(DenseSpec("w", (4, 2)),),
                  timeout=1.5, dead_after=1.0)
    start = time.monotonic()
    with pytest.raises(PSError, match=rf"no answer to connect from parameter server\(s\) {endpoint} \(server 0\)"):
        Client(job, 0).connect()
    assert time.monotonic() - start < 6
