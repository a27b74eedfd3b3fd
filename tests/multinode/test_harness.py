"""The two-host harness: separate /dev/shm and hostnames, reachable only over the veth, nothing left behind."""
import os
import subprocess
import sys

import pytest

from globaltensor.distributed import netns

pytestmark = pytest.mark.timeout(90)
ok, why = netns.available()
if not ok:
    pytest.skip(why, allow_module_level=True)


def test_hosts_are_apart_and_linked():
    with netns.TwoHosts() as hosts:
        name = f"gt_probe_{os.getpid()}"
        made = hosts.run(0, ["sh", "-c", f"echo a > /dev/shm/{name} && hostname && ls /dev/shm"])
        assert made.returncode == 0, made.stderr
        assert made.stdout.split()[0] == "gt-host-a"
        seen_b = hosts.run(1, ["sh", "-c", "hostname; ls -A /dev/shm"])
        assert seen_b.stdout.split() == ["gt-host-b"], seen_b.stdout  # B's /dev/shm is empty
        assert not os.path.exists(f"/dev/shm/{name}")  # nor is it the machine's
        again = hosts.run(0, ["cat", f"/dev/shm/{name}"])  # the host's view persists across commands
        assert again.stdout.strip() == "a"
        server = hosts.popen(1, [sys.executable, "-c", (
            "import socket; s = socket.socket(); s.bind(('0.0.0.0', 29111)); s.listen(1); c, _ = s.accept(); "
            "c.sendall(b'pong'); c.close()")])
        client = ("import socket, time\nfor _ in range(100):\n  try:\n    s = socket.create_connection(('%s', 29111), 1)"
                  "\n    break\n  except OSError:\n    time.sleep(0.05)\nprint(s.recv(4).decode())" % hosts.addrs[1])
        got = hosts.run(0, [sys.executable, "-c", client], timeout=30)
        assert got.stdout.strip() == "pong", got.stderr
        server.wait(timeout=10)
        addrs = hosts.run(0, ["ip", "-o", "-4", "addr"]).stdout  # the veth is the only way out
        assert sorted(line.split()[3] for line in addrs.splitlines()) == ["127.0.0.1/8", f"{hosts.addrs[0]}/30"]
        assert "default" not in hosts.run(0, ["ip", "route"]).stdout
        tag = hosts.tag
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert tag not in listed
    assert not os.path.exists(os.path.join(netns.RUN_DIR, tag))


def test_stale_runs_are_swept():
    probe = subprocess.run([sys.executable, "-c", (
        "import os\nfrom globaltensor.distributed import netns\nh = netns.TwoHosts().__enter__()\n"
        "print(h.tag, flush=True)\nos._exit(0)")], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()})
    tag = probe.stdout.strip()
    assert tag.startswith(netns.PREFIX), probe.stderr
    assert tag in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    netns.sweep_stale()
    assert tag not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not os.path.exists(os.path.join(netns.RUN_DIR, tag))
