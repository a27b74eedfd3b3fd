"""Issue 30 (s6): sync mode's overlapped step (dense values taken by the next run, that run's sparse rows asked
for from its feed first) and async mode's dense refresh every REFRESH_EVERY pushes, with real Client / Server
objects in threads of this process, checked against torch."""
import socket
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_static_ps import STEPS, _batch, _build, _check, _torch_reference, _touched  # noqa: E402
from test_static_ps import paddle  # noqa: E402,F401  (the fixture: static mode, layer names kept)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job_in_threads(paddle, mode, trainers, feeds_of, after=None):
    """One real server and `trainers` real clients, each in a thread of this process; returns (server, programs,
    clients) once every trainer has closed its executor (async: a barrier, then the servers' values)."""
    from globaltensor.ps import Client, Server
    from globaltensor.paddle.static import ps
    built = [_build(paddle) for _ in range(trainers)]
    job = ps.job_spec(built[0][0], built[0][0].minimized[0][1], mode, servers=(f"127.0.0.1:{_free_port()}",),
                      trainers=trainers, timeout=20.0, dead_after=10.0)
    server = Server(job, 0, initial=ps.initial_values(built[0][0]))
    clients = [Client(job, t) for t in range(trainers)]
    errors = []

    def serve():
        try:
            server.serve()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def train(t):
        main, loss, exe = built[t]
        try:
            ps.attach(main, clients[t].connect())
            for feed in feeds_of(t):
                exe.run(main, feed=feed, fetch_list=[loss])
                if after is not None:
                    after(t, main)
            exe.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            clients[t].close()
    threads = [threading.Thread(target=serve)] + [threading.Thread(target=train, args=(t,)) for t in range(trainers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not any(th.is_alive() for th in threads)
    assert not errors, errors
    return server, [b[0] for b in built], clients


@pytest.mark.timeout(90)
def test_sync_overlapped_step_equals_one_process_and_pulls_rows_before_the_run(paddle, monkeypatch):
    from globaltensor.paddle.static.sparse import SparseLookup
    lookup_pulls = []
    real_pull = SparseLookup._pull
    monkeypatch.setattr(SparseLookup, "_pull", lambda self, *a: lookup_pulls.append(1) or real_pull(self, *a))
    stale = []

    def after(t, main):  # between runs the parameters are the ones the last run used, until the next run
        stale.append(main.ps[0].dense_due)
    batches = [_batch(s) for s in range(STEPS)]
    ref_dense, ref_table = _torch_reference(_build(paddle)[0], batches)  # a program of the same initial values
    server, programs, _ = _job_in_threads(
        paddle, "sync", 2, lambda t: [{k: v[t * 4:(t + 1) * 4] for k, v in b.items()} for b in batches], after)
    touched = _touched(batches)
    _check({n: b.value for n, b in server.dense.items()}, lambda ids: server.sparse["emb"].pull(ids, is_test=True),
           ref_dense, ref_table, touched)
    for main in programs:  # Executor.close took the last step's values
        assert main.ps[0] is not None and not main.ps[0].dense_due
        _check({p.name: np.asarray(p._local) for p in main.parameters}, lambda ids: ref_table[ids], ref_dense,
               ref_table, touched)
    assert all(stale)
    assert len(lookup_pulls) == 2  # each trainer's first run only: every later run's rows were asked for before it


@pytest.mark.timeout(90)
def test_async_refreshes_every_other_push_and_trainers_end_with_the_servers_values(paddle):
    from globaltensor.ps import communicator
    steps = 8
    feeds = [[_batch(10 * t + s) for s in range(steps)] for t in range(2)]
    refreshes = []
    real_close = communicator.AsyncCommunicator.close

    def close(self):
        refreshes.append(self.refreshes)
        return real_close(self)
    communicator.AsyncCommunicator.close = close
    try:
        server, programs, _ = _job_in_threads(paddle, "async", 2, lambda t: feeds[t])
    finally:
        communicator.AsyncCommunicator.close = real_close
    assert len(refreshes) == 2 and all(r <= steps // communicator.REFRESH_EVERY + 1 for r in refreshes), refreshes
    for main in programs:  # stop's barrier, then the servers' final values
        for p in main.parameters:
            np.testing.assert_array_equal(np.asarray(p._local), server.dense[p.name].value.reshape(p._local.shape))


def test_the_ps_launcher_sets_glibc_malloc_thresholds_unless_the_user_set_one():
    """A trainer's per-step arrays would otherwise be handed back to the system after each step and faulted in
    again (measured: ~3,000 page faults and +13 ms of system time a step in sync mode)."""
    from globaltensor.paddle.distributed.ps_launch import Plan, Process, environment
    proc = Process("trainer", 0, "127.0.0.1:6001")
    plan = Plan(("127.0.0.1:6000",), ("127.0.0.1:6001",), (proc,))
    env = environment(plan, proc, "ab", "job", base={})
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(16 << 20) and env["MALLOC_TRIM_THRESHOLD_"] == str(64 << 20)
    env = environment(plan, proc, "ab", "job", base={"MALLOC_TRIM_THRESHOLD_": "0"})
    assert env["MALLOC_TRIM_THRESHOLD_"] == "0" and "MALLOC_MMAP_THRESHOLD_" not in env  # the user's own choice


@pytest.mark.timeout(90)
def test_sync_runs_of_a_clone_between_steps_ask_for_no_rows_before_the_run(paddle, monkeypatch):
    """A clone (an eval program) shares the attachment: its run takes the step's values but asks for nothing
    from its feed (its lookups may be is_test, which create no rows)."""
    from globaltensor.paddle.static import ps
    asked, real = [], ps.ask_fed_rows
    monkeypatch.setattr(ps, "ask_fed_rows", lambda state, feed: asked.append(1) or real(state, feed))
    clones = {}

    def after(t, main):
        clone = clones.setdefault(t, main.clone(for_test=True))
        paddle.static.Executor().run(clone, feed=_batch(50 + t), fetch_list=[])
        assert not main.ps[0].dense_due  # the clone's run took the step's values
    batches = [_batch(s) for s in range(3)]
    _job_in_threads(paddle, "sync", 1, lambda t: batches, after)
    assert asked == []  # every training run followed a clone's run: nothing was due any more
