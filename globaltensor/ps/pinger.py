"""Pinger: a trainer's liveness thread; it pings every server each second and notes the last answer of each."""
from __future__ import annotations

import threading
import time

import zmq

from . import wire

PERIOD = 1.0


class Pinger:
    """Own sockets (zmq sockets are not shared across threads); silent() names a server past dead_after."""

    def __init__(self, ctx: zmq.Context, job, trainer_id: int):
        self.job, self.trainer_id = job, trainer_id
        now = time.monotonic()
        self.last = [now] * len(job.servers)
        self.error: str | None = None
        self._stop = threading.Event()
        self._socks = []
        for ep in job.servers:
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(f"tcp://{ep}")
            self._socks.append(s)
        self._thread = threading.Thread(target=self._run, name=f"ps-pinger-{trainer_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        poller = zmq.Poller()
        for s in self._socks:
            poller.register(s, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                for s in self._socks:
                    try:
                        wire.send(s, self.job.secret, {"op": "ping", "trainer": self.trainer_id}, flags=zmq.NOBLOCK)
                    except zmq.Again:
                        pass
                deadline = time.monotonic() + PERIOD
                while not self._stop.is_set() and (left := deadline - time.monotonic()) > 0:
                    for s, _ in poller.poll(left * 1000):
                        self._note(s)
        finally:
            for s in self._socks:
                s.close()

    def _note(self, sock) -> None:
        msg = wire.recv(sock, self.job.secret)
        if msg is None:
            return
        _, header, _ = msg
        index = header.get("server")
        if isinstance(index, int) and 0 <= index < len(self.last):
            self.last[index] = time.monotonic()
        if header.get("error") and self.error is None:
            self.error = header["error"]

    def silent(self) -> str | None:
        """A message naming the first server silent for longer than dead_after, or None."""
        now = time.monotonic()
        for i, seen in enumerate(self.last):
            if now - seen > self.job.dead_after:
                return (f"parameter server {self.job.servers[i]} (server {i}) stopped answering: no reply to "
                        f"pings for {now - seen:.1f} s (dead_after={self.job.dead_after} s); "
                        f"trainer {self.trainer_id} gives up")
        return None

    def close(self) -> bool:
        """Stop the thread; True once it has closed its sockets."""
        self._stop.set()
        self._thread.join(timeout=2 * PERIOD + 1)
        return not self._thread.is_alive()
