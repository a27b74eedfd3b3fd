"""Rendezvous key-value store over TCP, open only to peers that prove they hold the job secret.

Wire format: after a mutual HMAC-SHA256 challenge-response, each request is one frame
``u32 length | u8 command | fields`` and each answer ``u32 length | u8 status | payload``.
Values are raw bytes; nothing received is ever unpickled.
"""
import hashlib
import hmac
import os
import secrets
import socket
import struct
import threading
import time

_MAGIC = b"GTS1"
_NONCE = 32
_MAX_FRAME = 1 << 30
_SET, _GET, _ADD, _CHECK, _DELETE = range(1, 6)
_OK, _TIMEOUT, _BAD = range(3)


class StoreError(RuntimeError):
    """The store could not be reached, refused us, or a wait on it timed out."""


class PeersLeft(StoreError):
    """A wait on the store ended early: ranks it waited for have ended ({rank: how})."""

    def __init__(self, message, left):
        super().__init__(message)
        self.left = left


def left_key(rank):
    """The key a rank's end is published under (by the rank at exit, or by its launcher)."""
    return f"job/left/{rank}"


_WATCH_SLICE = 0.25  # seconds between looks at the ranks a wait depends on


def _recv_exact(sock, n):
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionError("store connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _send_frame(sock, body):
    sock.sendall(struct.pack("!I", len(body)) + body)


def _recv_frame(sock):
    (n,) = struct.unpack("!I", _recv_exact(sock, 4))
    if n > _MAX_FRAME:
        raise ConnectionError(f"store frame of {n} bytes is too large")
    return _recv_exact(sock, n)


def _pack(*fields):
    return b"".join(struct.pack("!I", len(f)) + f for f in fields)


def _unpack(body, count):
    fields, pos = [], 0
    for _ in range(count):
        (n,) = struct.unpack_from("!I", body, pos)
        fields.append(body[pos + 4:pos + 4 + n])
        pos += 4 + n
    return fields


def _mac(secret, role, nonce):
    return hmac.new(secret, role + nonce, hashlib.sha256).digest()


class StoreServer:
    """Hosts the store on (host, port) in daemon threads; port 0 picks a free port."""

    def __init__(self, host, port, secret, start=True):
        self.secret = secret
        self.rejected = 0
        self._data = {}
        self._cond = threading.Condition()
        self._sock = socket.create_server((host, port), reuse_port=False, backlog=256)
        self.port = self._sock.getsockname()[1]
        self._closed = False
        if start:
            self.start()

    def start(self):
        """Serve connections (they queue in the listen backlog until then)."""
        threading.Thread(target=self._accept_loop, name="gt-store-accept", daemon=True).start()

    def close(self):
        self._closed = True
        try:
            self._sock.close()
        except OSError:
            pass

    def _accept_loop(self):
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="gt-store-conn", daemon=True).start()

    def _authenticate(self, conn):
        nonce = secrets.token_bytes(_NONCE)
        conn.sendall(_MAGIC + nonce)
        conn.settimeout(10.0)
        answer = _recv_exact(conn, 2 * _NONCE)
        if not hmac.compare_digest(answer[:_NONCE], _mac(self.secret, b"client", nonce)):
            self.rejected += 1
            return False
        conn.sendall(_mac(self.secret, b"server", answer[_NONCE:]))
        conn.settimeout(None)
        return True

    def _serve(self, conn):
        with conn:
            try:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if not self._authenticate(conn):
                    return
                while True:
                    body = _recv_frame(conn)
                    _send_frame(conn, self._handle(body[0], body[1:]))
            except (ConnectionError, OSError, struct.error):
                return

    def set_if_absent(self, key, value):
        """Set key here, in the hosting process, unless a client set it first."""
        key = key.encode()
        with self._cond:
            if key not in self._data:
                self._data[key] = bytes(value)
                self._cond.notify_all()

    def _handle(self, cmd, body):
        if cmd == _SET:
            key, value = _unpack(body, 2)
            with self._cond:
                self._data[key] = value
                self._cond.notify_all()
            return bytes([_OK])
        if cmd == _GET:
            key, timeout = _unpack(body, 2)
            deadline = time.monotonic() + float(timeout)
            with self._cond:
                while key not in self._data:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return bytes([_TIMEOUT])
                    self._cond.wait(left)
                return bytes([_OK]) + self._data[key]
        if cmd == _ADD:
            key, delta = _unpack(body, 2)
            with self._cond:
                value = int(self._data.get(key, b"0")) + int(delta)
                self._data[key] = str(value).encode()
                self._cond.notify_all()
            return bytes([_OK]) + str(value).encode()
        if cmd == _CHECK:
            (count,) = struct.unpack_from("!I", body)
            keys = _unpack(body[4:], count)
            with self._cond:
                return bytes([_OK]) + bytes(int(k in self._data) for k in keys)
        if cmd == _DELETE:
            (key,) = _unpack(body, 1)
            with self._cond:
                self._data.pop(key, None)
            return bytes([_OK])
        return bytes([_BAD])


class StoreClient:
    """A connection to the store; thread-safe; every blocking call has a timeout."""

    def __init__(self, host, port, secret, timeout=300.0, timeout_setting=None):
        """timeout_setting: where the default timeout comes from (an environment variable), named
        in the errors of waits that run out."""
        self.host, self.port, self.timeout = host, port, timeout
        self._setting = f"; the timeout is set by {timeout_setting}" if timeout_setting else ""
        self._lock = threading.Lock()
        self._sock = self._connect(secret)

    def _connect(self, secret):
        deadline = time.monotonic() + self.timeout
        delay, last = 0.01, None
        while time.monotonic() < deadline:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=10.0)
            except OSError as exc:
                last = exc
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
                continue
            try:
                return self._handshake(sock, secret)
            except (ConnectionError, OSError) as exc:
                sock.close()
                raise StoreError(f"the store at {self.host}:{self.port} refused this process: "
                                 f"GLOBALTENSOR_SECRET differs from the job's ({exc})") from None
        raise StoreError(f"could not reach the rendezvous store at {self.host}:{self.port} within "
                         f"{self.timeout:.0f} s ({last}); is rank 0 or the launcher running?")

    def _handshake(self, sock, secret):
        hello = _recv_exact(sock, len(_MAGIC) + _NONCE)
        if hello[:len(_MAGIC)] != _MAGIC:
            raise ConnectionError("not a globaltensor store")
        mine = secrets.token_bytes(_NONCE)
        sock.sendall(_mac(secret, b"client", hello[len(_MAGIC):]) + mine)
        proof = _recv_exact(sock, _NONCE)
        if not hmac.compare_digest(proof, _mac(secret, b"server", mine)):
            raise ConnectionError("the store could not prove it holds the job secret")
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _call(self, cmd, body, timeout=None):
        """One request and its answer; with a timeout (seconds) a silent store raises OSError."""
        with self._lock:
            self._sock.settimeout(timeout)
            try:
                _send_frame(self._sock, bytes([cmd]) + body)
                answer = _recv_frame(self._sock)
            finally:
                if timeout is not None:
                    self._sock.settimeout(None)
        return answer[0], answer[1:]

    def set(self, key, value, timeout=None):
        """Set key; with a timeout (seconds) the call gives up on a store that does not answer."""
        self._call(_SET, _pack(key.encode(), bytes(value)), timeout)

    def get(self, key, timeout=None, watch=(), waiting_for=None):
        """The value of key, waiting for it to be set; StoreError after the timeout, PeersLeft as
        soon as a rank of `watch` (those expected to set it) has ended. `waiting_for` says in the
        error what the key stands for ("rank 1 to join the job")."""
        what = f"store key {key!r}" if waiting_for is None else f"{waiting_for} (store key {key!r})"
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, deadline - time.monotonic())
            wait = min(left, _WATCH_SLICE) if watch else left
            status, value = self._call(_GET, _pack(key.encode(), str(wait).encode()))
            if status == _OK:
                return value
            if watch:
                self.raise_if_left(watch, f"waiting for {what}")
            if time.monotonic() >= deadline:
                raise StoreError(f"timed out after {timeout:.1f} s waiting for {what}{self._setting}")

    def raise_if_left(self, ranks, what):
        """PeersLeft when some of `ranks` have ended."""
        ranks = list(ranks)
        gone = [r for r, ok in zip(ranks, self.check([left_key(r) for r in ranks])) if ok]
        if gone:
            how = {r: self.get(left_key(r), 1.0).decode(errors="replace") for r in gone}
            detail = "; ".join(f"rank {r} {h}" for r, h in how.items())
            raise PeersLeft(f"rank(s) {gone} ended while this rank was {what}: {detail}", how)

    def add(self, key, delta=1):
        return int(self._call(_ADD, _pack(key.encode(), str(int(delta)).encode()))[1])

    def check(self, keys):
        """Which of keys are set, without waiting."""
        body = struct.pack("!I", len(keys)) + _pack(*(k.encode() for k in keys))
        return [bool(b) for b in self._call(_CHECK, body)[1]]

    def delete(self, key):
        self._call(_DELETE, _pack(key.encode()))

    def barrier(self, name, rank, world_size, timeout=None):
        """Wait until every rank of [0, world_size) reached barrier `name`; name the late ones."""
        timeout = self.timeout if timeout is None else timeout
        self.set(f"{name}/rank{rank}", b"1")
        if self.add(f"{name}/count") == world_size:
            self.set(f"{name}/done", b"1")
        deadline = time.monotonic() + timeout
        while True:  # in slices: a rank that ended before arriving ends the wait at once
            try:
                self.get(f"{name}/done", min(_WATCH_SLICE, max(0.0, deadline - time.monotonic())))
                return
            except PeersLeft:
                raise
            except StoreError:
                present = self.check([f"{name}/rank{r}" for r in range(world_size)])
                missing = [r for r, ok in enumerate(present) if not ok]
                self.raise_if_left(missing, f"in barrier {name!r}")
                if time.monotonic() >= deadline:
                    raise StoreError(f"barrier {name!r} timed out after {timeout:.1f} s; rank(s) {missing} did "
                                     f"not arrive{self._setting}") from None

    def close(self):
        try:
            self._sock.close()
        except OSError:
            pass


def new_secret():
    """A fresh per-job secret, hex-encoded for the environment."""
    return secrets.token_hex(32)


def secret_from_env():
    value = os.environ.get("GLOBALTENSOR_SECRET")
    return bytes.fromhex(value) if value else None
