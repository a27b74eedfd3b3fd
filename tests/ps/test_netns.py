"""Two hosts in one machine: servers in one network namespace, trainers in another, joined by a veth pair.

Each namespace runs the same launcher command with the job's full --servers / --workers lists and
starts the endpoints whose address is its own. Addresses are link-local (169.254.77.0/30) and exist
only inside the namespaces this test creates (fixed ports are safe there: nothing else lives in
them). The first test's job is tests/ps/ps_roles.py (the launcher's contract across hosts), the second's
the real engine.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(HERE, "ps_roles.py")
SERVER_IP, TRAINER_IP = "169.254.77.1", "169.254.77.2"
pytestmark = pytest.mark.timeout(120)


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


@pytest.fixture
def two_hosts():
    """(server namespace, trainer namespace), deleted afterwards whatever happens."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    tag = f"gt{os.getpid() % 100000}"
    ns_s, ns_t, veth_s, veth_t = f"{tag}s", f"{tag}t", f"{tag}vs", f"{tag}vt"
    made = []
    try:
        for ns in (ns_s, ns_t):
            if _ip("netns", "add", ns, check=False).returncode != 0:
                pytest.skip("`ip netns add` failed here")
            made.append(ns)
        _ip("link", "add", veth_s, "type", "veth", "peer", "name", veth_t)
        for ns, veth, addr in ((ns_s, veth_s, SERVER_IP), (ns_t, veth_t, TRAINER_IP)):
            _ip("link", "set", veth, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", veth)
            _ip("-n", ns, "link", "set", veth, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield ns_s, ns_t
    finally:
        for ns in made:
            _ip("netns", "del", ns, check=False)


def _launch_in(ns, servers, workers, script_and_args):
    env = {**os.environ, "GLOBALTENSOR_SECRET": "5e" * 32, "PYTHONPATH": REPO}
    cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "globaltensor.paddle.distributed.launch",
           f"--servers={servers}", f"--workers={workers}", "--grace_period=1", *script_and_args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _job_on_two_hosts(two_hosts, script_and_args, n_servers=1):
    """Both launchers' (stdout, stderr), each asserted to exit 0; every launcher killed in the end."""
    ns_s, ns_t = two_hosts
    servers = ",".join(f"{SERVER_IP}:{6170 + i}" for i in range(n_servers))
    workers = f"{TRAINER_IP}:6180,{TRAINER_IP}:6181"
    procs = [_launch_in(ns, servers, workers, script_and_args) for ns in (ns_s, ns_t)]
    try:
        outs = [p.communicate(timeout=90) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    return outs


def test_servers_and_trainers_on_two_hosts(two_hosts, tmp_path):
    outs = _job_on_two_hosts(two_hosts, [SCRIPT, str(tmp_path), "zmq"])
    info = {f.stem: json.loads(f.read_text()) for f in tmp_path.glob("*.json")}
    assert sorted(info) == ["server0", "trainer0", "trainer1"]
    assert info["server0"]["POD_IP"] == SERVER_IP and info["trainer1"]["POD_IP"] == TRAINER_IP
    assert info["trainer1"]["PADDLE_TRAINER_ID"] == "1" and info["trainer0"]["PADDLE_TRAINERS_NUM"] == "2"
    assert "trainer 0 talked to 1 servers" in outs[1][0] and "[trainer 1] trainer 1 talked to 1 servers" in outs[1][0]


def test_fleet_ps_example_on_two_hosts(two_hosts):
    """The real engine across the veth: 2 servers on one host, 2 trainers on the other, sync mode;
    both trainers end with the same parameters."""
    example = os.path.join(REPO, "examples", "paddle", "fleet_ps.py")
    out = _job_on_two_hosts(two_hosts, [example, "sync"], n_servers=2)[1][0]
    params = re.findall(r"^(?:\[trainer \d\] )?params (.*)$", out, re.M)
    assert len(params) == 2 and params[0] == params[1]
