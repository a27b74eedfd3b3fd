"""Wire framing: arrays round-trip bit-exact without pickle; a bad MAC, an unlisted dtype or a frame of the wrong
size is refused; a live server drops a forged message and keeps serving; connect names the missing servers."""
import json
import os
import logging
import threading

import ml_dtypes
import numpy as np
import pytest
import zmq

import ps_workers as W
from globaltensor.ps import Client, DenseSpec, JobSpec, PSError, Rule, Server, SparseSpec, wire

SECRET = b"job-secret"


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "float16", ml_dtypes.bfloat16])
def test_arrays_round_trip_bit_exact(dtype):
    a = (np.arange(24).reshape(2, 3, 4) - 7).astype(dtype)
    header, arrays = wire.unpack(SECRET, wire.pack(SECRET, {"op": "x", "step": 3}, [a, a[:, 1:]]))
    assert header == {"op": "x", "step": 3}
    np.testing.assert_array_equal(arrays[0], a)
    np.testing.assert_array_equal(arrays[1], a[:, 1:])
    assert arrays[0].dtype == a.dtype and arrays[0].tobytes() == a.tobytes()


def test_a_contiguous_array_is_sent_without_a_copy():
    a = np.ones((256, 256), np.float32)
    frames = wire.pack(SECRET, {}, [a])
    assert np.shares_memory(frames[1], a)
    assert json.loads(frames[0]) == {"arrays": [["float32", [256, 256]]]}


def test_a_bad_mac_is_refused():
    frames = wire.pack(SECRET, {"op": "push_dense"}, [np.ones(3, np.float32)])
    with pytest.raises(wire.WireError, match="MAC does not match"):
        wire.unpack(b"another secret", frames)
    tampered = frames[:1] + [np.zeros(3, np.float32).view(np.uint8)] + frames[2:]
    with pytest.raises(wire.WireError, match="MAC does not match"):
        wire.unpack(SECRET, tampered)


def test_frame_boundaries_and_nonces_are_authenticated():
    frames = wire.pack(SECRET, {"op": "x"}, [np.arange(4, dtype=np.float32)])
    joined = bytes(frames[0]) + bytes(frames[1])
    shifted = [joined[:len(frames[0]) + 4], joined[len(frames[0]) + 4:], frames[2]]  # same bytes, cut elsewhere
    with pytest.raises(wire.WireError, match="MAC does not match"):
        wire.unpack(SECRET, shifted)
    again = wire.pack(SECRET, {"op": "x"}, [np.arange(4, dtype=np.float32)])
    assert bytes(again[2][:wire.NONCE_SIZE]) != bytes(frames[2][:wire.NONCE_SIZE])  # a fresh one-time key each
    other_nonce = again[2][:wire.NONCE_SIZE] + frames[2][wire.NONCE_SIZE:]
    with pytest.raises(wire.WireError, match="MAC does not match"):
        wire.unpack(SECRET, frames[:2] + [other_nonce])
    with pytest.raises(wire.WireError, match="MAC does not match"):
        wire.unpack(SECRET, frames[:2] + [frames[2][:-1]])


def _signed(header_bytes, *bufs):
    frames = [header_bytes, *bufs]
    return frames + [wire._mac(SECRET, frames)]


def test_unlisted_dtypes_and_wrong_sizes_are_refused():
    with pytest.raises(wire.WireError, match="not one of"):
        wire.pack(SECRET, {}, [np.ones(2, np.complex64)])
    obj = json.dumps({"arrays": [["object", [1]]]}).encode()
    with pytest.raises(wire.WireError, match="not one of"):
        wire.unpack(SECRET, _signed(obj, b"\0" * 8))
    short = json.dumps({"arrays": [["float32", [4]]]}).encode()
    with pytest.raises(wire.WireError, match="bytes"):
        wire.unpack(SECRET, _signed(short, b"\0" * 12))
    with pytest.raises(wire.WireError, match="lists"):
        wire.unpack(SECRET, _signed(short))


def _job(**kw):
    port, = W.free_ports(1)
    kw = {"timeout": 10.0, "dead_after": 3.0, **kw}
    return JobSpec(servers=(f"127.0.0.1:{port}",), trainers=1, mode="async", rule=Rule("sgd", 0.5),
                   dense=(DenseSpec("w", (4, 2)),), sparse=(SparseSpec("emb", 3),), secret=SECRET, **kw)


@pytest.mark.timeout(30)
def test_a_server_drops_a_forged_message_and_keeps_serving(caplog):
    job = _job()
    server = Server(job, 0, initial={"w": np.ones((4, 2), np.float32)})
    assert server.sock.getsockopt(zmq.LAST_ENDPOINT).decode() == f"tcp://{job.servers[0]}"  # that interface only
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    ctx = zmq.Context()
    forger = ctx.socket(zmq.DEALER)
    forger.setsockopt(zmq.LINGER, 0)
    forger.connect(f"tcp://{job.servers[0]}")
    client = Client(job, 0)
    try:
        with caplog.at_level(logging.WARNING, logger="globaltensor.ps"):
            forged = {"op": "set_dense", "trainer": 0, "step": 0, "req": 1, "names": ["w"]}
            wire.send(forger, b"guessed", forged, [np.full((4, 2), 99, np.float32)])
            assert forger.poll(1000) == 0  # no answer to a forged message
        assert any("MAC does not match" in r.getMessage() for r in caplog.records)
        client.connect()
        np.testing.assert_array_equal(client.pull_dense()["w"], np.ones((4, 2), np.float32))
        client.push_dense({"w": np.ones((4, 2), np.float32)})
        np.testing.assert_array_equal(client.pull_dense()["w"], np.full((4, 2), 0.5, np.float32))
        rows = client.pull_sparse("emb", np.array([[5, 9], [5, 2 ** 63 - 1]]))
        assert rows.shape == (2, 2, 3) and np.array_equal(rows[0, 0], rows[1, 0])
        client.stop()
    finally:
        client.close()
        forger.close()
        ctx.term()
        thread.join(10)
    assert not thread.is_alive()


@pytest.mark.timeout(30)
def test_connect_names_the_servers_that_do_not_answer():
    job = _job(timeout=1.0)
    client = Client(job, 0)
    with pytest.raises(PSError, match=job.servers[0].replace(".", r"\.")):
        client.connect()


def test_bad_calls_raise_before_any_traffic():
    job = _job()
    client = Client(job, 0)
    with pytest.raises(ValueError, match="no dense table 'v'"):
        client.push_dense({"v": np.ones(3)})
    with pytest.raises(ValueError, match="shape"):
        client.push_dense({"w": np.ones((3, 2))})
    with pytest.raises(ValueError, match="no sparse table"):
        client.pull_sparse("nope", [1])
    with pytest.raises(ValueError, match="trainer id 3"):
        Client(job, 3)
    with pytest.raises(ValueError, match="mode"):
        JobSpec(servers=job.servers, trainers=1, mode="bsp", rule=job.rule).validate()


@pytest.mark.timeout(30)
def test_a_trainer_whose_job_differs_is_refused_at_connect():
    job = _job()
    server = Server(job, 0)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        other = JobSpec(servers=job.servers, trainers=2, mode="async", rule=job.rule, dense=job.dense,
                        sparse=job.sparse, secret=SECRET, timeout=5.0, dead_after=3.0)
        with pytest.raises(PSError, match=r"trainers=2 \(here 1\)"):
            Client(other, 1).connect()
        with Client(job, 0) as client:
            client.stop()
    finally:
        thread.join(10)
    assert not thread.is_alive()


@pytest.mark.timeout(30)
def test_save_reaches_every_server_and_a_refused_request_names_its_server(tmp_path):
    ports = W.free_ports(2)
    job = JobSpec(servers=tuple(f"127.0.0.1:{p}" for p in ports), trainers=1, mode="async", rule=Rule("sgd", 0.5),
                  dense=(DenseSpec("w", (4, 2)),), min_block_size=4, secret=SECRET, timeout=10.0, dead_after=3.0)
    servers = [Server(job, i, initial={"w": np.arange(8, dtype=np.float32).reshape(4, 2)}) for i in range(2)]
    threads = [threading.Thread(target=s.serve, daemon=True) for s in servers]
    for th in threads:
        th.start()
    ctx = zmq.Context()
    raw = ctx.socket(zmq.DEALER)
    raw.setsockopt(zmq.LINGER, 0)
    raw.connect(f"tcp://{job.servers[1]}")
    try:
        with Client(job, 0) as client:
            client.save(str(tmp_path / "ckpt"))
            saved = os.listdir(tmp_path / "ckpt")
            assert all(any(f.startswith(f"server_{i}") for f in saved) for i in range(2)), saved
            bad = {"op": "push_dense", "trainer": 0, "step": 0, "req": 7, "names": ["w"]}
            wire.send(raw, SECRET, bad, [np.ones((3, 3), np.float32)])
            assert raw.poll(5000)
            _, header, _ = wire.recv(raw, SECRET)
            assert header["op"] == "error" and header["req"] == 7
            assert f"parameter server {job.servers[1]} (server 1) refused 'push_dense'" in header["error"]
            assert "shape" in header["error"]
            np.testing.assert_array_equal(client.pull_dense()["w"], np.arange(8, dtype=np.float32).reshape(4, 2))
            client.stop()
    finally:
        raw.close()
        ctx.term()
        for th in threads:
            th.join(10)
    assert not any(th.is_alive() for th in threads)


def test_sparse_pushes_are_chunked_converted_and_never_alias_the_callers_arrays(monkeypatch):
    from globaltensor.ps import _messages
    monkeypatch.setattr(_messages, "CHUNK_ROWS", 4)
    client = Client(_job(), 0)
    ids = np.arange(10, dtype=np.int32)[::-1]  # int32, unsorted: converted and summed; repeats below
    ids = np.concatenate([ids, ids[:2]])
    grads = np.ones((12, 3))  # float64: converted to the table's float32
    messages = client._sparse_messages("push_sparse", "emb", *client._sparse_checked("push_sparse", "emb", ids, grads),
                                       1.0, owned=False)
    assert [len(a[0]) for _, _, a in messages] == [4, 4, 2]
    got_ids = np.concatenate([a[0] for _, _, a in messages])
    got_rows = np.concatenate([a[1] for _, _, a in messages])
    np.testing.assert_array_equal(got_ids, np.arange(10))
    np.testing.assert_array_equal(got_rows[:, 0], [1] * 8 + [2, 2])
    assert got_rows.dtype == np.float32 and got_ids.dtype == np.int64
    sorted_ids, rows = np.arange(6, dtype=np.int64), np.ones((6, 3), np.float32)  # the fast path: as they are
    for _, _, arrays in client._sparse_messages("push_sparse", "emb", sorted_ids, rows, 1.0, owned=False):
        assert not np.shares_memory(arrays[0], sorted_ids) and not np.shares_memory(arrays[1], rows)
