"""The rendezvous store: operations, timeouts, barriers and authentication."""
import socket
import threading
import time

import pytest

from globaltensor.distributed.store import StoreClient, StoreError, StoreServer

SECRET = bytes(range(32))


@pytest.fixture
def server():
    s = StoreServer("127.0.0.1", 0, SECRET)
    yield s
    s.close()


def test_set_get_add_check_delete(server):
    c = StoreClient("127.0.0.1", server.port, SECRET, timeout=5)
    c.set("a", b"\x00\x01binary")
    assert c.get("a") == b"\x00\x01binary"
    assert c.add("n") == 1 and c.add("n", 5) == 6 and c.get("n") == b"6"
    assert c.check(["a", "missing", "n"]) == [True, False, True]
    c.delete("a")
    assert c.check(["a"]) == [False]


def test_get_waits_for_a_later_set(server):
    c1 = StoreClient("127.0.0.1", server.port, SECRET, timeout=5)
    c2 = StoreClient("127.0.0.1", server.port, SECRET, timeout=5)
    threading.Timer(0.2, lambda: c2.set("late", b"x")).start()
    start = time.monotonic()
    assert c1.get("late") == b"x" and time.monotonic() - start >= 0.15


def test_get_times_out_with_the_key(server):
    c = StoreClient("127.0.0.1", server.port, SECRET, timeout=5)
    with pytest.raises(StoreError, match="'never'"):
        c.get("never", timeout=0.2)


def test_barrier_names_missing_ranks(server):
    clients = [StoreClient("127.0.0.1", server.port, SECRET, timeout=5) for _ in range(3)]
    errors = []

    def arrive(rank):
        try:
            clients[rank].barrier("b", rank, 3, timeout=0.5)
        except StoreError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=arrive, args=(r,)) for r in (0, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 2 and all("rank(s) [1] did not arrive" in e for e in errors)
    ok = [threading.Thread(target=clients[r].barrier, args=("c", r, 3)) for r in range(3)]
    for t in ok:
        t.start()
    for t in ok:
        t.join(timeout=5)
    assert not any(t.is_alive() for t in ok)


def test_wrong_secret_is_rejected(server):
    with pytest.raises(StoreError, match="refused"):
        StoreClient("127.0.0.1", server.port, b"wrong" * 6, timeout=2)
    assert server.rejected == 1
    good = StoreClient("127.0.0.1", server.port, SECRET, timeout=2)
    good.set("still", b"works")
    assert good.get("still") == b"works"


def test_garbage_before_authentication_is_dropped(server):
    raw = socket.create_connection(("127.0.0.1", server.port))
    raw.recv(36)
    raw.sendall(b"\x80\x04\x95" + b"A" * 61)  # a pickle header, then junk: never unpickled
    assert raw.recv(100) == b""  # the server closed the connection
    raw.close()
    assert server.rejected == 1


def test_client_refuses_an_impostor_server():
    impostor = StoreServer("127.0.0.1", 0, b"other-secret-but-same-protocol!!")
    try:
        with pytest.raises(StoreError):
            StoreClient("127.0.0.1", impostor.port, SECRET, timeout=2)
    finally:
        impostor.close()


def test_unreachable_store_gives_a_clear_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(StoreError, match="could not reach the rendezvous store"):
        StoreClient("127.0.0.1", port, SECRET, timeout=0.5)


def test_a_rank_that_never_joins_is_named_with_the_timeout_setting(tmp_path):
    """WORLD_SIZE=2 with rank 1 never started: rank 0's first collective fails within the timeout,
    naming the missing rank and GLOBALTENSOR_TIMEOUT (how to wait longer)."""
    import os
    import subprocess
    import sys
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "GLOBALTENSOR_TIMEOUT": "2",
           "GLOBALTENSOR_SECRET": SECRET.hex(), "GLOBALTENSOR_JOB_ID": f"neverjoins{os.getpid()}"}
    env.pop("GLOBALTENSOR_STORE_HOSTED", None)
    script = "import globaltensor as gt\nfrom globaltensor import distributed as dist\ndist.barrier()\n"
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60,
                         cwd=tmp_path)
    assert res.returncode != 0
    assert "GLOBALTENSOR_TIMEOUT" in res.stderr and "rank 1" in res.stderr, res.stderr[-2000:]
