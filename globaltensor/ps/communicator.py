"""AsyncCommunicator: async mode's thread that signs and sends a trainer's pushes and keeps the dense values fresh."""
from __future__ import annotations

import queue
import threading
import time

import zmq

from . import wire
from .errors import PSError

MAX_PENDING = 4  # pushes handed over and not yet sent: beyond this the trainer waits (memory stays bounded:
SEND_HWM = 8  # each holds a copy of a full gradient; and at most this many messages wait in each socket)
REFRESH_EVERY = 2  # dense pushes per refresh of the dense values (a 2 MB reply, copied and authenticated each side)


class AsyncCommunicator:
    """Own sockets, one per server (zmq sockets stay in one thread). The trainer hands over its pushes and returns
    at once; the thread builds, signs (hashlib releases the GIL) and sends them, asks the dense-holding servers for
    their blocks after every REFRESH_EVERY-th dense push (and after any push while it holds none), and keeps the
    newest blocks it received (verified) for pull_dense: the values a step reads miss at most the pushes of the
    last REFRESH_EVERY steps and those still in flight (Paddle's async communicator never pulls them back)."""

    def __init__(self, ctx: zmq.Context, job, trainer_id: int, dense_servers: list, check):
        self.job, self.trainer_id, self.dense_servers = job, trainer_id, list(dense_servers)
        self.error: PSError | None = None
        self._check = check                    # raises when a server is dead (the trainer's liveness view)
        self._jobs: queue.Queue = queue.Queue(MAX_PENDING)
        self._lock = threading.Condition()
        self._parts: dict[int, tuple] = {}     # server -> (names, arrays) of its newest dense reply
        self._asked: dict[int, int] = {}       # server -> req of the dense pull in flight
        self._again: set[int] = set()          # servers to ask again once their pull in flight returns
        self._flushes: dict[int, tuple] = {}   # req -> (server, threading.Event)
        self._req = 0
        self._dense_pushes = 0
        self.refreshes = 0                     # dense replies taken (tests read it)
        self._stop = False
        self._stop_asked = threading.Event()
        self._wake_addr = f"inproc://ps-comm-{id(self)}"
        self._wake_recv = ctx.socket(zmq.PAIR)
        self._wake_recv.bind(self._wake_addr)
        self._wake = ctx.socket(zmq.PAIR)
        self._wake.connect(self._wake_addr)
        self._socks = []
        for ep in job.servers:
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 1000)
            s.setsockopt(zmq.SNDHWM, SEND_HWM)  # zmq's own queue bounded too
            s.connect(f"tcp://{ep}")
            self._socks.append(s)
        self._thread = threading.Thread(target=self._run, name=f"ps-communicator-{trainer_id}", daemon=True)
        self._thread.start()

    # ---- the trainer's side ----------------------------------------------------------------------------

    def submit(self, build, then_pull_dense: bool = False) -> None:
        """build() -> [(server, header, arrays)] runs on the thread; the trainer does not wait."""
        while True:
            self._raise()
            self._check()
            try:
                self._jobs.put((build, then_pull_dense), timeout=0.1)
                break
            except queue.Full:  # the servers take pushes slower than the trainer makes them
                continue
        self._wake.send(b"")

    def latest(self, timeout: float) -> dict | None:
        """{server: (names, arrays)} of the newest dense values, once every dense server has answered once."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._parts) < len(self.dense_servers):
                self._raise()
                self._check()
                if time.monotonic() > deadline:
                    return None
                self._lock.wait(0.1)
            return dict(self._parts)

    def flush(self, timeout: float) -> None:
        """Return once every server has taken every push handed over so far (a ping behind them answered)."""
        events = [threading.Event() for _ in self._socks]
        self.submit(lambda: [(i, {"op": "ping", "flush": True}, (), ev) for i, ev in enumerate(events)])
        deadline = time.monotonic() + timeout
        for ev in events:
            while not ev.wait(0.1):
                self._raise()
                self._check()
                if time.monotonic() > deadline:
                    raise PSError(f"trainer {self.trainer_id}: the servers took no pushes for {timeout} s")

    def forget_dense(self) -> None:
        with self._lock:
            self._parts.clear()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    # ---- the thread ------------------------------------------------------------------------------------

    def _run(self) -> None:
        poller = zmq.Poller()
        for s in [self._wake_recv, *self._socks]:
            poller.register(s, zmq.POLLIN)
        try:
            while not self._stop and not self._stop_asked.is_set():
                for sock, _ in poller.poll(200):
                    if sock is self._wake_recv:
                        while self._wake_recv.poll(0):
                            self._wake_recv.recv()
                        self._drain_jobs()
                    else:
                        while sock.poll(0):
                            self._take(sock)
        except PSError as e:
            self.error = e
        except Exception as e:  # a bug here must reach the trainer, not vanish with the thread
            self.error = PSError(f"trainer {self.trainer_id}: the async communicator failed: {type(e).__name__}: {e}")
        finally:
            with self._lock:
                self._lock.notify_all()
            for s in [self._wake_recv, *self._socks]:
                s.close()

    def _drain_jobs(self) -> None:
        while True:
            try:
                build, then_pull = self._jobs.get_nowait()
            except queue.Empty:
                return
            if build is None:
                self._stop = True
                return
            for msg in build():
                server, header, arrays = msg[:3]
                req = self._send(server, header, arrays)
                if len(msg) > 3:
                    self._flushes[req] = msg[3]
            if then_pull:
                self._dense_pushes += 1
                with self._lock:
                    holds = len(self._parts) == len(self.dense_servers)
                if holds and self._dense_pushes % REFRESH_EVERY:
                    continue
                for i in self.dense_servers:
                    if i in self._asked:
                        self._again.add(i)
                    else:
                        self._asked[i] = self._send(i, {"op": "pull_dense"})

    def _send(self, server: int, header: dict, arrays=()) -> int:
        self._req += 1
        header = {**header, "trainer": self.trainer_id, "req": self._req}
        sock = self._socks[server]
        while True:
            try:
                wire.send(sock, self.job.secret, header, arrays, flags=zmq.NOBLOCK)
                return self._req
            except zmq.Again:  # the server's queue is full: wait, but stay stoppable
                if self._stop_asked.is_set():
                    raise PSError(f"trainer {self.trainer_id}: closed while parameter server "
                                  f"{self.job.servers[server]} (server {server}) took no messages") from None
                sock.poll(100, zmq.POLLOUT)

    def _take(self, sock) -> None:
        msg = wire.recv_reply(sock, self.job.secret)
        if msg is None:
            return
        header, arrays = msg
        req, server = header.get("req"), header.get("server")
        if req in self._flushes:
            self._flushes.pop(req).set()
        elif server in self._asked and self._asked[server] == req:
            del self._asked[server]
            with self._lock:
                self._parts[server] = (header["names"], arrays)
                self.refreshes += 1
                self._lock.notify_all()
            if server in self._again:
                self._again.discard(server)
                self._asked[server] = self._send(server, {"op": "pull_dense"})

    def close(self) -> bool:
        """Stop the thread; True once it has closed its sockets."""
        self._stop_asked.set()
        if self._thread.is_alive():
            try:
                self._jobs.put((None, False), timeout=1.0)
                self._wake.send(b"", flags=zmq.NOBLOCK)
            except (queue.Full, zmq.Again):
                pass
            self._thread.join(5)
        self._wake.close()
        return not self._thread.is_alive()
