"""Client(job, trainer_id): what a trainer calls to pull and push dense blocks and sparse rows on the servers."""
from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np
import zmq
from numpy.typing import ArrayLike

from . import wire
from .communicator import AsyncCommunicator
from .errors import PSError
from ._messages import dense_messages, route, sparse_messages
from .partition import job_blocks
from .pinger import Pinger
from .server import job_summary, param_of
from .spec import JobSpec

POLL_MS = 100


class Client:
    """One trainer's connections: a DEALER per server, a liveness thread, the step counter of sync mode.

    Pushes never wait for an answer (a server's error comes back with a later call). Sync mode: the first
    pull after a push starts the next step and asks the servers for the dense values once the step is applied
    (one round trip per server per step). Async mode: pushes go to the communicator thread, which sends them and
    refreshes the dense values, so the next pull_dense finds them there (communication overlaps compute).
    One thread calls a Client."""

    def __init__(self, job: JobSpec, trainer_id: int):
        job.validate()
        if not isinstance(trainer_id, int) or not 0 <= trainer_id < job.trainers:
            raise ValueError(f"trainer id {trainer_id!r} outside the job's {job.trainers} trainers")
        self.job, self.trainer_id = job, trainer_id
        self.dense_specs = {d.name: d for d in job.dense}
        self.sparse_specs = {s.name: s for s in job.sparse}
        self.blocks: dict[str, list] = {n: [] for n in self.dense_specs}
        for b in job_blocks(job):
            self.blocks[param_of(b.name, self.dense_specs)].append(b)
        self.dense_servers = sorted({b.server for bs in self.blocks.values() for b in bs})
        self.step, self._pushed, self._req, self._barriers = 0, False, 0, 0
        self._replies: dict[int, tuple] = {}
        self._prefetch: dict[int, int] = {}      # server -> req of a dense pull already asked for
        self._discard: set[int] = set()          # reqs whose answers nobody waits for any more
        self._socks: list = []
        self._pinger: Pinger | None = None
        self._comm: AsyncCommunicator | None = None
        self._fresh = True                       # async: the next pull_dense asks the servers itself
        self._last_dense = None                  # async: (names, the parts) of the last pull_dense
        self._fatal: PSError | None = None
        self._ctx: zmq.Context | None = None

    # ---- connections -----------------------------------------------------------------------------------

    def connect(self) -> "Client":
        """Reach every server within job.timeout (naming those that did not answer), then start the pings."""
        if self._socks:
            return self
        self._ctx = zmq.Context()
        for ep in self.job.servers:
            s = self._ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 1000)
            s.setsockopt(zmq.RECONNECT_IVL, 10)  # a server still starting: retry after 10 ms (zmq's default 100),
            s.setsockopt(zmq.RECONNECT_IVL_MAX, 100)  # doubling up to 100 ms
            s.connect(f"tcp://{ep}")
            self._socks.append(s)
        hello = {"op": "hello", "job": job_summary(self.job)}
        reqs = {i: self._send(i, hello) for i in range(len(self._socks))}
        try:
            self._wait(reqs, self.job.timeout, waiting_for="connect")
        except PSError:
            self.close()
            raise
        self._pinger = Pinger(self._ctx, self.job, self.trainer_id)
        if self.job.mode == "async":
            self._comm = AsyncCommunicator(self._ctx, self.job, self.trainer_id, self.dense_servers, self._check)
        return self

    def _next_req(self) -> int:
        self._req += 1
        return self._req

    def _send(self, server: int, header: dict, arrays=()) -> int:
        if not self._socks:
            raise PSError(f"trainer {self.trainer_id}: call connect() before talking to the servers")
        req = self._next_req()
        header = {**header, "trainer": self.trainer_id, "step": self.step, "req": req}
        frames = wire.pack(self.job.secret, header, arrays)
        sock = self._socks[server]
        while True:
            self._check()
            try:
                sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
                return req
            except zmq.Again:
                sock.poll(POLL_MS, zmq.POLLOUT)

    def _check(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._comm is not None and self._comm.error is not None:
            self._fatal = self._comm.error
            raise self._fatal
        if self._pinger is not None:
            why = self._pinger.error or self._pinger.silent()
            if why is not None:
                self._fatal = PSError(why)
                raise self._fatal

    def _wait(self, reqs: dict[int, int], limit: float | None = None, waiting_for: str = "a reply") -> dict:
        """{server: (header, arrays)} for each server's request; raises on an error, a dead server, or limit."""
        limit = self.job.timeout if limit is None else limit
        start = time.monotonic()
        poller = zmq.Poller()
        for i in set(reqs):
            poller.register(self._socks[i], zmq.POLLIN)
        while any(r not in self._replies for r in reqs.values()):
            self._check()
            if time.monotonic() - start > limit:
                missing = [f"{self.job.servers[i]} (server {i})" for i, r in reqs.items() if r not in self._replies]
                raise PSError(f"trainer {self.trainer_id}: no answer to {waiting_for} from parameter server(s) "
                              f"{', '.join(missing)} within {limit} s (JobSpec.timeout)")
            for sock, _ in poller.poll(POLL_MS):
                while sock.poll(0):
                    self._take(sock)
        return {i: self._replies.pop(r) for i, r in reqs.items()}

    def _take(self, sock) -> None:
        try:
            msg = wire.recv_reply(sock, self.job.secret)
        except PSError as e:
            self._fatal = e
            raise
        if msg is None:
            return
        header, arrays = msg
        req = header.get("req")
        if req in self._discard:
            self._discard.discard(req)
        elif isinstance(req, int):
            self._replies[req] = (header, arrays)

    def _prefetch_dense(self, server: int, req: int) -> None:
        old = self._prefetch.get(server)
        if old is not None:
            self._discard.add(old)
        self._prefetch[server] = req

    def _drop_prefetches(self) -> None:
        for req in self._prefetch.values():
            if self._replies.pop(req, None) is None:
                self._discard.add(req)
        self._prefetch.clear()

    def _flush(self) -> None:
        """Async: every push handed to the communicator has reached its server; the next pull_dense is fresh."""
        if self._comm is not None:
            self._comm.flush(self.job.timeout)
            self._comm.forget_dense()
            self._fresh = True

    def _advance(self) -> None:
        """Sync mode: the first pull after a push closes this trainer's step on every server."""
        self._check()
        if not self._pushed:
            return
        self.step += 1
        self._pushed = False
        if self.job.mode != "sync":
            return
        for i in range(len(self._socks)):
            want = i in self.dense_servers
            req = self._send(i, {"op": "next", "dense": want})
            if want:
                self._prefetch_dense(i, req)

    # ---- dense -----------------------------------------------------------------------------------------

    def pull_dense(self, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """{name: full array} of the named dense tables (all by default), assembled from their blocks."""
        return self.pull_dense_if_new(names, always=True)

    def pull_dense_if_new(self, names: Iterable[str] | None = None, always: bool = False) -> dict | None:
        """pull_dense, or None (async) where the communicator has received no dense values since the last call
        (the caller keeps what it has: no 2 MB assembled again)."""
        names = self._dense_names(names)
        self._advance()
        got = None
        if self._comm is not None and not self._fresh:
            got = self._comm.latest(self.job.timeout)
            last = self._last_dense
            if not always and got is not None and last is not None and last[0] == names and \
                    all(got[i] is last[1].get(i) for i in got):
                return None
        if got is None:
            servers = sorted({b.server for n in names for b in self.blocks[n]})
            reqs = {i: self._prefetch.pop(i, None) or self._send(i, {"op": "pull_dense"}) for i in servers}
            got = {i: (h["names"], arrays) for i, (h, arrays) in self._wait(reqs, waiting_for="pull_dense").items()}
        parts = {}
        for i, (got_names, arrays) in got.items():
            parts.update({(n, i): a for n, a in zip(got_names, arrays)})
        out = {}
        for n in names:
            spec = self.dense_specs[n]
            full = np.empty(tuple(spec.shape), dtype=spec.dtype)
            for b in self.blocks[n]:
                full[b.row_start:b.row_end] = parts[(n, b.server)].reshape((b.row_end - b.row_start,) +
                                                                            tuple(spec.shape[1:]))
            out[n] = full
        self._last_dense = (names, got) if self._comm is not None else None
        return out

    def push_dense(self, grads: dict[str, np.ndarray]) -> None:
        """Send gradients {name: full array}; sync: summed over trainers / trainers; async: applied on arrival."""
        self._pushed = True
        if self._comm is None:
            self._send_dense("push_dense", grads, 1.0)
            return
        messages = self._dense_messages("push_dense", grads, 1.0)  # checked and copied here, signed there
        self._comm.submit(lambda: [(i, h, a) for i, (h, a) in messages.items()], then_pull_dense=True)
        self._fresh = False

    def push_dense_delta(self, deltas: dict[str, np.ndarray]) -> None:
        """GEO: send local - last pulled; the servers add delta / trainers (Paddle's GeoCommunicator)."""
        self._send_dense("add_dense", deltas, 1.0 / self.job.trainers)
        self._drop_prefetches()

    def init_dense(self, values: dict[str, np.ndarray]) -> None:
        """Set the servers' dense values (trainer 0 after its startup program, as Paddle's init_worker)."""
        reqs = self._send_dense("set_dense", values, None)
        self._wait(reqs, waiting_for="init_dense")
        self._drop_prefetches()

    def _send_dense(self, op: str, arrays: dict, scale) -> dict:
        return {i: self._send(i, h, a) for i, (h, a) in self._dense_messages(op, arrays, scale).items()}

    def _dense_messages(self, op: str, arrays: dict, scale) -> dict:
        return dense_messages(self.blocks, self._dense_spec, op, arrays, scale)

    def _dense_spec(self, name: str):
        if name not in self.dense_specs:
            raise ValueError(f"no dense table {name!r}; the job has {sorted(self.dense_specs)}")
        return self.dense_specs[name]

    def _dense_names(self, names) -> list:
        names = sorted(self.dense_specs) if names is None else list(names)
        for n in names:
            self._dense_spec(n)
        return names

    # ---- sparse ----------------------------------------------------------------------------------------

    def _sparse_spec(self, table: str):
        if table not in self.sparse_specs:
            raise ValueError(f"no sparse table {table!r}; the job has {sorted(self.sparse_specs)}")
        return self.sparse_specs[table]

    def _route(self, ids: np.ndarray) -> list[tuple[int, np.ndarray]]:
        return route(ids, len(self.job.servers))

    def pull_sparse(self, table: str, ids: ArrayLike, is_test: bool = False) -> np.ndarray:
        """Rows of ids (any shape; result ids.shape + (dim,)): each unique id asked once, of the server holding it."""
        return self.pull_sparse_wait(self.pull_sparse_ask(table, ids, is_test))

    def pull_sparse_ask(self, table: str, ids: ArrayLike, is_test: bool = False) -> tuple:
        """pull_sparse's requests, sent; pull_sparse_wait(what this returns) waits for the rows (in between the
        caller may wait for other replies: sync mode's dense values of the same step, say)."""
        spec = self._sparse_spec(table)
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise ValueError(f"pull_sparse({table!r}): ids must be integers, got {ids.dtype}")
        flat = ids.reshape(-1).astype(np.int64, copy=False)
        if len(flat) < 2 or bool(np.all(flat[1:] > flat[:-1])):  # already sorted and distinct: as they are
            uniq, inverse = flat, None
        else:
            uniq, inverse = np.unique(flat, return_inverse=True)
        self._advance()
        routes = self._route(uniq)
        header = {"op": "pull_sparse", "table": table, "is_test": bool(is_test)}
        reqs = {i: self._send(i, header, [uniq if m is None else uniq[m]]) for i, m in routes}
        return table, spec, ids.shape, len(uniq), inverse, routes, reqs

    def pull_sparse_wait(self, asked: tuple) -> np.ndarray:
        """The rows of a pull_sparse_ask (once; ids.shape + (dim,))."""
        table, spec, shape, n, inverse, routes, reqs = asked
        got = self._wait(reqs, waiting_for=f"pull_sparse({table!r})")
        rows = np.empty((n, spec.dim), dtype=spec.dtype)
        for i, m in routes:
            if m is None:
                rows[...] = got[i][1][0]
            else:
                rows[m] = got[i][1][0]
        return (rows if inverse is None else rows[inverse]).reshape(shape + (spec.dim,))

    def end_step(self) -> None:
        """Sync: this trainer's step is over (after its pushes): tell the servers now and ask for the dense values
        of the next step, which the next pull_dense takes (the wait for the other trainers overlaps the caller's
        work in between). Elsewhere, and without a push since the last pull, nothing."""
        self._advance()

    def push_sparse(self, table: str, ids: ArrayLike, grads: ArrayLike) -> None:
        """Gradients of ids' rows: repeated ids summed here, each server sent its unique ids once."""
        self._pushed = True
        if self._comm is None:
            self._send_sparse("push_sparse", table, ids, grads, 1.0)
            return
        flat, rows = self._sparse_checked("push_sparse", table, ids, grads, copy=True)
        self._comm.submit(lambda: self._sparse_messages("push_sparse", table, flat, rows, 1.0))

    def push_sparse_delta(self, table: str, ids: ArrayLike, deltas: ArrayLike) -> None:
        """GEO: rows' local - last pulled; the servers add delta / trainers."""
        self._send_sparse("add_sparse", table, ids, deltas, 1.0 / self.job.trainers)

    def _send_sparse(self, op: str, table: str, ids, rows, scale: float) -> None:
        flat, rows = self._sparse_checked(op, table, ids, rows)
        for i, header, arrays in self._sparse_messages(op, table, flat, rows, scale, owned=False):
            self._send(i, header, arrays)

    def _sparse_checked(self, op: str, table: str, ids, rows, copy: bool = False) -> tuple:
        spec = self._sparse_spec(table)
        make = np.array if copy else np.asarray  # asarray: a copy only where the dtype differs
        flat = make(ids, dtype=np.int64).reshape(-1)
        rows = make(rows, dtype=spec.dtype).reshape(-1, spec.dim) if np.size(rows) else \
            np.zeros((0, spec.dim), spec.dtype)
        if len(rows) != len(flat):
            raise ValueError(f"{op}({table!r}): {len(flat)} ids but {len(rows)} rows of dim {spec.dim}")
        return flat, rows

    def _sparse_messages(self, op: str, table: str, flat, rows, scale: float, owned: bool = True) -> list:
        return sparse_messages(len(self.job.servers), op, table, flat, rows, scale, owned)

    # ---- control ---------------------------------------------------------------------------------------

    def barrier(self) -> None:
        """Wait until every trainer that has not stopped reaches its barrier of the same number."""
        self._advance()
        self._barriers += 1
        if self.job.mode != "sync":
            self._drop_prefetches()  # values asked for before the barrier miss the other trainers' pushes
            self._flush()
        header = {"op": "barrier", "n": self._barriers}  # on every server: it follows our pushes there
        self._wait({i: self._send(i, header) for i in range(len(self._socks))}, waiting_for="barrier")

    def save(self, dirname: str) -> None:
        """Each server saves its blocks and rows under dirname (once the current step is applied)."""
        self._advance()
        self._wait({i: self._send(i, {"op": "save", "dirname": str(dirname)}) for i in range(len(self._socks))},
                   waiting_for="save")

    def stop(self) -> None:
        """This trainer is done; the servers return from serve() once every trainer has stopped."""
        if self._pushed:
            self.step += 1
            self._pushed = False
        self._flush()
        self._wait({i: self._send(i, {"op": "stop"}) for i in range(len(self._socks))}, waiting_for="stop")

    def __enter__(self) -> "Client":
        return self.connect() if not self._socks else self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the sockets and the ping thread (without stop(), the servers see this trainer die)."""
        clean = True
        if self._comm is not None:
            clean = self._comm.close() and clean
            self._comm = None
        if self._pinger is not None:
            clean = self._pinger.close() and clean
            self._pinger = None
        for s in self._socks:
            s.close()
        self._socks = []
        if self._ctx is not None and clean:  # term() would wait for a thread's sockets forever: never hang here
            self._ctx.term()
        self._ctx = None

