"""The PS launcher: Paddle's flags and environment contract, roles, supervision, no orphans (real processes)."""
import json
import os
import subprocess
import sys
import time

import pytest

from ps_workers import alive

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "ps_roles.py")
LAUNCH = [sys.executable, "-m", "globaltensor.paddle.distributed.launch"]
pytestmark = pytest.mark.timeout(90)


def launch(args, timeout=60, env=None):
    return subprocess.run(LAUNCH + args, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def reports(tmp_path):
    return {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}


def wait_gone(pids, seconds=5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_environment_contract_and_roles(tmp_path):
    logs = tmp_path / "logs"
    res = launch(["--server_num=2", "--worker_num=2", "--log_dir", str(logs), SCRIPT, str(tmp_path), "zmq"])
    assert res.returncode == 0, res.stderr
    info = reports(tmp_path)
    assert sorted(info) == ["server0", "server1", "trainer0", "trainer1"]
    servers = info["server0"]["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")
    trainers = info["server0"]["PADDLE_TRAINER_ENDPOINTS"].split(",")
    assert len(servers) == 2 and len(trainers) == 2 and len(set(servers + trainers)) == 4
    for name, i in info.items():
        role, index = name[:-1], int(name[-1])
        assert i["TRAINING_ROLE"] == i["PADDLE_ROLE"] == ("PSERVER" if role == "server" else "TRAINER")
        assert i["PADDLE_PSERVERS_IP_PORT_LIST"] == ",".join(servers)
        assert i["PADDLE_TRAINER_ENDPOINTS"] == ",".join(trainers) and i["PADDLE_TRAINERS_NUM"] == "2"
        mine = (servers if role == "server" else trainers)[index]
        assert f"{i['POD_IP']}:{i['PADDLE_PORT']}" == i["PADDLE_CURRENT_ENDPOINT"] == mine
        assert i["PADDLE_TRAINER_ID"] == (str(index) if role == "trainer" else None)
        assert len(bytes.fromhex(i["GLOBALTENSOR_SECRET"])) == 32 and i["RANK"] is None
        assert i["GLOBALTENSOR_JOB_ID"] == info["server0"]["GLOBALTENSOR_JOB_ID"]
        assert i["GLOBALTENSOR_SECRET"] == info["server0"]["GLOBALTENSOR_SECRET"]
    assert "trainer 0 talked to 2 servers\n" in res.stdout  # trainer 0 passes through unprefixed
    assert "[trainer 1] trainer 1 talked to 2 servers" in res.stdout
    assert sorted(os.listdir(logs)) == ["serverlog.0", "serverlog.1", "workerlog.0", "workerlog.1"]
    assert "talked to 2 servers" in (logs / "workerlog.1").read_text()


def test_fleet_reads_the_contract_under_the_launcher(tmp_path):
    """--trainer_num (Paddle 3's spelling) and the fleet queries in every process."""
    env = {"GLOBALTENSOR_SECRET": "ab" * 16}
    res = launch(["--server_num", "1", "--trainer_num", "2", SCRIPT, str(tmp_path), "zmq_fleet"], env=env)
    assert res.returncode == 0, res.stderr
    info = reports(tmp_path)
    s, t0, t1 = info["server0"], info["trainer0"], info["trainer1"]
    assert s["GLOBALTENSOR_SECRET"] == "ab" * 16
    assert (s["is_server"], s["is_worker"], s["server_index"], s["worker_num"], s["server_num"]) == (True, False, 0, 2, 1)
    assert (t1["is_server"], t1["is_worker"], t1["worker_index"], t1["is_first_worker"]) == (False, True, 1, False)
    assert t0["is_first_worker"] and t0["servers"] == s["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")


def test_explicit_endpoint_lists(tmp_path):
    from globaltensor.paddle.distributed.ps_launch import free_endpoints
    servers, trainers = free_endpoints("127.0.0.1", 1), free_endpoints("127.0.0.1", 2)
    res = launch([f"--servers={servers[0]}", "--workers", ",".join(trainers), "--run_mode=ps", SCRIPT,
                  str(tmp_path), "zmq"])
    assert res.returncode == 0, res.stderr
    info = reports(tmp_path)
    assert info["server0"]["PADDLE_CURRENT_ENDPOINT"] == servers[0]
    assert [info[f"trainer{i}"]["PADDLE_CURRENT_ENDPOINT"] for i in range(2)] == trainers


def test_first_failure_stops_everyone_with_its_exit_code(tmp_path):
    start = time.monotonic()
    res = launch(["--server_num=2", "--worker_num=2", "--grace_period", "2", SCRIPT, str(tmp_path), "fail"])
    assert res.returncode == 3 and time.monotonic() - start < 20
    report = res.stderr[res.stderr.index("[globaltensor.launch]"):]
    assert report.startswith("[globaltensor.launch] trainer 1 (pid") and "about to fail" in report
    assert "job failed: trainer 1 exited with code 3 (root cause)" in res.stderr
    assert not wait_gone([i["pid"] for i in reports(tmp_path).values()])


def test_server_failure_shows_its_traceback(tmp_path):
    res = launch(["--server_num=1", "--worker_num=2", "--grace_period", "2", SCRIPT, str(tmp_path), "server_fail"])
    assert res.returncode == 1
    assert "[globaltensor.launch] server 0 (pid" in res.stderr and "RuntimeError: server 0 broke" in res.stderr
    assert not wait_gone([i["pid"] for i in reports(tmp_path).values()])


def test_servers_left_running_after_the_trainers_end_are_stopped(tmp_path):
    """A script that never calls stop_worker: the launcher stops the servers and exits 0, saying why."""
    res = launch(["--server_num=1", "--worker_num=1", "--grace_period", "1", SCRIPT, str(tmp_path), "no_stop"])
    assert res.returncode == 0, res.stderr
    assert "every trainer here ended well; stopping server 0" in res.stderr
    assert not wait_gone([i["pid"] for i in reports(tmp_path).values()])


@pytest.mark.parametrize("args, message", [
    (["--server_num=2", "--servers=127.0.0.1:6001"], "--server_num=2 disagrees with --servers"),
    (["--worker_num=0"], "at least 1"),
    (["--servers=127.0.0.1"], "is not ip:port"),
    (["--servers=127.0.0.1:6001,127.0.0.1:6001"], "appears twice"),
    (["--server_num=1", "--nproc_per_node=2"], "collective flags"),
])
def test_bad_flags_are_refused_before_anything_starts(tmp_path, args, message):
    res = launch(args + [SCRIPT, str(tmp_path), "zmq"], env={"GLOBALTENSOR_SECRET": "00" * 16})
    assert res.returncode == 2 and message in res.stderr and not reports(tmp_path)


def _plan(monkeypatch, servers, workers, local=("127.0.0.1",)):
    """plan_job with this host's addresses given (no traffic: nothing here connects anywhere)."""
    from argparse import Namespace
    from globaltensor.paddle.distributed import ps_launch
    monkeypatch.setattr(ps_launch, "is_local_address", lambda host: host in local)
    return ps_launch.plan_job(Namespace(servers=servers, workers=workers, server_num=None, worker_num=None))


def test_plan_starts_only_this_hosts_endpoints(monkeypatch):
    plan = _plan(monkeypatch, "127.0.0.1:6001,198.51.100.7:6001", "198.51.100.7:6002,127.0.0.1:6002")
    assert [(p.role, p.index, p.endpoint) for p in plan.local] == [("server", 0, "127.0.0.1:6001"),
                                                                    ("trainer", 1, "127.0.0.1:6002")]
    assert plan.multi_host


def test_a_host_with_no_endpoint_or_no_secret_is_refused(monkeypatch):
    from globaltensor.paddle.distributed import ps_launch
    with pytest.raises(ValueError, match="no endpoint of the job is an address of this host"):
        _plan(monkeypatch, "198.51.100.7:6001", "198.51.100.8:6002")
    with pytest.raises(ValueError, match="give --servers as well"):
        _plan(monkeypatch, None, "198.51.100.8:6002,127.0.0.1:6002")
    plan = _plan(monkeypatch, "127.0.0.1:6001", "198.51.100.8:6002")
    monkeypatch.delenv("GLOBALTENSOR_SECRET", raising=False)
    with pytest.raises(ValueError, match="set GLOBALTENSOR_SECRET to the same hex string on every host"):
        ps_launch._secret(plan)
    monkeypatch.setenv("GLOBALTENSOR_SECRET", "not hex")
    with pytest.raises(ValueError, match="must be a hex string"):
        ps_launch._secret(plan)


def test_every_process_of_the_job_starts(tmp_path):
    """One server and two trainers each run the script (launch speed is benchmarks/bench_ps.py's first-step
    column, not a timed test: CI machines run beside other work)."""
    script = tmp_path / "hello.py"
    script.write_text("import os\nprint('up', os.environ['TRAINING_ROLE'], flush=True)\n")
    res = launch(["--server_num=1", "--worker_num=2", str(script)])
    assert res.returncode == 0 and res.stdout.count("up ") == 3
    assert res.stdout.count("up PSERVER") == 1 and res.stdout.count("up TRAINER") == 2, res.stdout


def test_signal_to_the_launcher_stops_every_process(tmp_path):
    import signal
    proc = subprocess.Popen(LAUNCH + ["--server_num=1", "--worker_num=2", "--grace_period=1", SCRIPT, str(tmp_path),
                                      "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(reports(tmp_path)) < 3:
            time.sleep(0.05)
        time.sleep(0.2)
        pids = [i["pid"] for i in reports(tmp_path).values()]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 143 and "every process was stopped" in err and len(pids) == 3
    assert not wait_gone(pids)
